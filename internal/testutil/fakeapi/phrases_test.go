package fakeapi

import (
	"bytes"
	"go/ast"
	"go/parser"
	"go/token"
	"strconv"
	"strings"
	"testing"
)

// TestPhrasesCoverTheTriggers: every Trigger constant of the package has
// its row in Phrases (script matches only the table's, so a trigger
// without a row would never fire), and each row's phrase, typed with its
// placeholders filled in, selects that row's script.
func TestPhrasesCoverTheTriggers(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "fakeapi.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]bool{}
	for _, p := range Phrases {
		rows[p.trigger] = true
	}
	consts := 0
	ast.Inspect(f, func(n ast.Node) bool {
		vs, ok := n.(*ast.ValueSpec)
		if !ok {
			return true
		}
		for i, name := range vs.Names {
			if !strings.HasPrefix(name.Name, "Trigger") || i >= len(vs.Values) {
				continue
			}
			lit, ok := vs.Values[i].(*ast.BasicLit)
			if !ok {
				t.Errorf("%s is not a string literal", name.Name)
				continue
			}
			v, _ := strconv.Unquote(lit.Value)
			consts++
			if !rows[v] {
				t.Errorf("%s (%q) has no row in Phrases", name.Name, v)
			}
		}
		return true
	})
	if consts == 0 {
		t.Fatal("found no Trigger constants in fakeapi.go")
	}

	fill := strings.NewReplacer("CMD", "echo a", "A ;; B ;; …", "echo a ;; echo b", "PATH", "/tmp/x", "TEXT", "hi",
		"NAME JSON", "mcp__kaimon__agent_list {}", "N", "3")
	for _, p := range Phrases {
		typed := "well, " + fill.Replace(p.Phrase) + "\nthanks"
		want := p.trigger
		if want == "" {
			want = "stream"
		}
		if got, _, _ := trigger(typed); got != want {
			t.Errorf("%q selects %q, want its row's %q", typed, got, want)
		}
		if p.Does == "" {
			t.Errorf("%q: says nothing of what it does", p.Phrase)
		}
	}
	if got, _, _ := trigger("hello there"); got != "" {
		t.Errorf("a message without a phrase selects %q", got)
	}
}

// TestWritePhrases: what the playgrounds print names every phrase, the
// slow reply's length in all, and what any other message gets.
func TestWritePhrases(t *testing.T) {
	var b bytes.Buffer
	if err := WritePhrases(&b, "   "); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, p := range Phrases {
		if !strings.Contains(out, "   "+p.Phrase+" ") {
			t.Errorf("no line for %q in\n%s", p.Phrase, out)
		}
	}
	for _, w := range []string{(SlowChunks * SlowChunkDelay).String() + " in all", "Hello from fakeapi (request #N)."} {
		if !strings.Contains(out, w) {
			t.Errorf("no %q in\n%s", w, out)
		}
	}
	if n := strings.Count(out, "\n"); n != len(Phrases)+1 {
		t.Errorf("%d lines, want %d", n, len(Phrases)+1)
	}
}
