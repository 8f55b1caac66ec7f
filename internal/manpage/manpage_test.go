package manpage

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/kaimon/kaimon/internal/config"
	"github.com/kaimon/kaimon/internal/event"
)

// kaimonVars finds the KAIMON_ variables named in the repository's non-test
// Go files and its scripts (scripts/*.sh but the test harness's and the
// benchmarks', whose knobs are for tests and measurements as _test.go
// files' are), by file, skipping dir (this
// package, whose table names them all).
func kaimonVars(t *testing.T, skip string) map[string][]string {
	t.Helper()
	re := regexp.MustCompile(`KAIMON_[A-Z][A-Z0-9_]*[A-Z0-9]`)
	root := filepath.Join("..", "..")
	found := map[string][]string{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "node_modules" || strings.HasPrefix(d.Name(), ".") && path != root) {
			return filepath.SkipDir
		}
		if d.IsDir() && filepath.Clean(path) == filepath.Clean(skip) {
			return filepath.SkipDir
		}
		if d.IsDir() || !isGoSource(path) && !isScript(root, path) {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, name := range re.FindAllString(string(b), -1) {
			found[name] = append(found[name], path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return found
}

func isGoSource(path string) bool {
	return strings.HasSuffix(path, ".go") && !strings.HasSuffix(path, "_test.go")
}

func isScript(root, path string) bool {
	return filepath.Dir(path) == filepath.Join(root, "scripts") && strings.HasSuffix(path, ".sh") &&
		!strings.Contains(filepath.Base(path), "test") && !strings.HasPrefix(filepath.Base(path), "bench")
}

// Every KAIMON_ variable the code names is in the table, and every one the
// table lists is named by the code.
func TestEnvTableListsEveryKaimonVariable(t *testing.T) {
	found := kaimonVars(t, filepath.Join("..", "..", "internal", "manpage"))
	if len(found) == 0 {
		t.Fatal("found no KAIMON_ variable in the code: the walk is broken")
	}
	if files := found["KAIMON_HOME"]; !slices.ContainsFunc(files, func(f string) bool { return strings.HasSuffix(f, ".sh") }) {
		t.Fatalf("KAIMON_HOME found only in %v, not in scripts/demo.sh: the walk misses the scripts", files)
	}
	listed := map[string]bool{}
	for _, e := range Env {
		listed[e.Name] = true
	}
	for name, files := range found {
		if !listed[name] {
			t.Errorf("%s (in %s) is not in manpage.Env: document it there", name, strings.Join(files, ", "))
		}
	}
	for _, e := range Env {
		if strings.HasPrefix(e.Name, "KAIMON_") && found[e.Name] == nil {
			t.Errorf("manpage.Env lists %s, which no code names", e.Name)
		}
		if e.Doc == "" || e.ReadBy == "" {
			t.Errorf("manpage.Env: %s has no Doc or ReadBy", e.Name)
		}
	}
}

// The FILES section's paths are those the code computes.
func TestFilesAreWhereTheCodePutsThem(t *testing.T) {
	for _, v := range []string{"KAIMON_HOME", "KAIMON_CACHE_DIR", "KAIMON_CONFIG", "KAIMON_SOCK_DIR"} {
		t.Setenv(v, "")
	}
	home := t.TempDir()
	t.Setenv("HOME", home)
	p, err := config.Resolve()
	if err != nil {
		t.Fatal(err)
	}
	for got, want := range map[string]string{p.CacheDir: DefaultCacheDir, p.ConfigFile: DefaultConfig} {
		if got != home+strings.TrimPrefix(want, "~") {
			t.Errorf("config.Resolve says %s where the man page says %s", got, want)
		}
	}
	// Every kind of agent file is in FILES, with what removes it.
	page := Agentd()
	for _, k := range config.AgentFileKinds {
		path := config.Paths{CacheDir: DefaultCacheDir}.Agent("<id>").Path(k)
		if !strings.Contains(page, esc(path)) || !strings.Contains(page, esc(removedBy[k.Lifetime])) {
			t.Errorf("FILES lacks %s, or what removes it", path)
		}
	}
	keys := configKeys()
	if !slices.Contains(keys, "permission_timeout") || !slices.Contains(keys, "dead_kept") {
		t.Errorf("configKeys() = %v lacks keys of config.Config", keys)
	}
}

// Every event kind is documented, and kaimon-events(7) says so.
func TestEveryKindIsDocumented(t *testing.T) {
	page := Events()
	for _, k := range event.Kinds {
		d, ok := event.Docs[k]
		if !ok || d.Meaning == "" || d.Data == "" {
			t.Errorf("event kind %s has no (complete) entry in event.Docs", k)
		}
		if !strings.Contains(page, ".TP\n\\fB"+esc(string(k))+"\\fR\n") {
			t.Errorf("kaimon-events.7 has no paragraph for %s", k)
		}
	}
	if len(event.Docs) != len(event.Kinds) {
		t.Errorf("event.Docs has %d entries for %d kinds", len(event.Docs), len(event.Kinds))
	}
}

func TestEscape(t *testing.T) {
	for in, want := range map[string]string{
		`--json`:     `\-\-json`,
		`a\b`:        `a\eb`,
		"x … y — z":  `x ... y \(em z`,
		"ünï":        `\[u00FC]n\[u00EF]`,
		"plain text": "plain text",
	} {
		if got := esc(in); got != want {
			t.Errorf("esc(%q) = %q, want %q", in, got, want)
		}
	}
	var r roff
	r.prose(".hidden request\n'another")
	if got := r.String(); got != "\\&.hidden request\n\\&'another\n" {
		t.Errorf("a leading . or ' is not guarded: %q", got)
	}
}

// Every spelling kaimon-agentd accepts is in its --help and its man page,
// and parses to its option's action.
func TestAgentdOptionsDocumented(t *testing.T) {
	// The names of the man page's option items (`\fB-h, --help, help\fR`).
	inMan := map[string]bool{}
	for _, l := range strings.Split(strings.ReplaceAll(Agentd(), `\-`, "-"), "\n") {
		if names, ok := strings.CutPrefix(l, `\fB`); ok {
			for _, n := range strings.Split(strings.TrimSuffix(names, `\fR`), ", ") {
				inMan[n] = true
			}
		}
	}
	usage := AgentdUsage()
	for _, o := range AgentdOptions {
		for _, arg := range o.Args {
			if !inMan[arg] || !regexp.MustCompile(`(?m)^ .*[ ,]`+regexp.QuoteMeta(arg)+`[, ]`).MatchString(usage) {
				t.Errorf("kaimon-agentd %s is not an option in --help and kaimon-agentd(8)", arg)
			}
			if a, ok := AgentdArg(arg); !ok || a != o.Action {
				t.Errorf("AgentdArg(%q) = %d, %v; want %d", arg, a, ok, o.Action)
			}
		}
	}
	if _, ok := AgentdArg("--bogus"); ok {
		t.Error("AgentdArg accepts --bogus")
	}
}

func TestMarkdownEscape(t *testing.T) {
	for in, want := range map[string]string{
		"agent_id and <id>":      `agent_id and \<id>`,
		"_meta, agent_* and `x`": "\\_meta, agent\\_\\* and \\`x\\`",
		"[a](b) and [c]":         `[a\](b) and [c]`,
		"- not a list":           `\- not a list`,
		"1. not a list":          `1\. not a list`,
		"> no quote":             `\> no quote`,
	} {
		if got := mdLine(in); got != want {
			t.Errorf("mdLine(%q) = %q, want %q", in, got, want)
		}
	}
}

// The reference says what the man pages say: each section of a man page
// is a section of its Markdown page, in the same order.
func TestReferenceHasTheManPagesSections(t *testing.T) {
	app := App{Name: "kaimon", Summary: "s", Description: "d", Commands: []Command{{Path: "kaimon x", Synopsis: "kaimon x [options]", Summary: "X"}},
		ExitCodes: []ExitCode{{Code: 0, Meaning: "ok"}}}
	ref := Reference(app)
	for name, man := range map[string]string{"kaimon": Kaimon(app), "kaimon-agentd": Agentd(), "kaimon-events": Events()} {
		md, ok := ref[MarkdownFile(name)]
		if !ok {
			t.Fatalf("no reference page for %s", name)
		}
		var want, got []string
		for _, l := range strings.Split(man, "\n") {
			if s, ok := strings.CutPrefix(l, `.SH "`); ok {
				want = append(want, sentenceCase(strings.TrimSuffix(strings.ReplaceAll(s, `\-`, "-"), `"`)))
			}
		}
		for _, l := range strings.Split(md, "\n") {
			if s, ok := strings.CutPrefix(l, "## "); ok {
				got = append(got, s)
			}
		}
		if !slices.Equal(got, want) || len(want) == 0 {
			t.Errorf("%s: the reference's sections %q, the man page's %q", name, got, want)
		}
	}
}
