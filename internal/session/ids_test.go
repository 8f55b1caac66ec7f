package session

import (
	"errors"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/kaimon/kaimon/internal/apitype"
	"github.com/kaimon/kaimon/internal/config"
	"github.com/kaimon/kaimon/internal/verbs"
)

// seqIDs is an id source that hands out ids in order, then "" (which no
// id matches), and records how many were drawn.
type seqIDs struct {
	mu    sync.Mutex
	ids   []string
	drawn int
}

func (s *seqIDs) next() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.drawn++
	if len(s.ids) == 0 {
		return ""
	}
	id := s.ids[0]
	s.ids = s.ids[1:]
	return id
}

// An open that names no id never lands on one in use: not a dead agent's
// slot (which it would reopen), nor an id that only a file of in the cache
// dir is of, of any kind (a forgotten agent's kept log, which it would
// continue); it draws again.
func TestFreshIDSkipsUsedIDs(t *testing.T) {
	r := newRig(t, 10)
	dead := r.open(t, "deadbeef")
	if _, err := r.m.Close(bg, &verbs.CloseArgs{AgentID: dead}); err != nil {
		t.Fatal(err)
	}
	// One id per kind of file, with that file alone.
	var fileOnly []string
	for i, k := range config.AgentFileKinds {
		id := "0000000" + string(rune('a'+i))
		p := r.paths.Agent(id).Path(k)
		var err error
		if k.Dir {
			err = os.Mkdir(p, 0o700)
		} else {
			err = os.WriteFile(p, []byte("{}\n"), 0o600)
		}
		if err != nil {
			t.Fatal(err)
		}
		fileOnly = append(fileOnly, id)
	}
	src := &seqIDs{ids: append(append([]string{dead}, fileOnly...), "cafef00d")}
	r.m.newID = src.next
	got := r.open(t, "")
	if got != "cafef00d" {
		t.Fatalf("opened %s, want the first unused id drawn, cafef00d", got)
	}
	if want := 2 + len(fileOnly); src.drawn != want {
		t.Errorf("drew %d ids, want %d", src.drawn, want)
	}
	st, err := r.m.Status(bg, &verbs.StatusArgs{AgentID: dead})
	if err != nil || st.Status != "dead" {
		t.Errorf("the dead agent: %+v %v", st, err)
	}
	for _, id := range fileOnly {
		if _, err := r.m.Status(bg, &verbs.StatusArgs{AgentID: id}); err == nil {
			t.Errorf("%s, of a file only, was opened", id)
		}
	}
}

// A source that only collides runs out, with an error that says to give
// an id, and opens nothing.
func TestFreshIDGivesUp(t *testing.T) {
	r := newRig(t, 10)
	used := r.open(t, "abad1dea")
	r.m.newID = func() string { return used }
	_, err := r.m.Open(bg, &verbs.OpenArgs{Cwd: t.TempDir()})
	if err == nil {
		t.Fatal("an open with only used ids drawn succeeded")
	}
	var ve *verbs.Error
	if !errors.As(err, &ve) || ve.Code != verbs.CodeInternal || !strings.Contains(ve.Message, "--id") {
		t.Errorf("err = %v, want internal, saying to give an id", err)
	}
	l, _ := r.m.List(bg, &verbs.ListArgs{})
	if len(l.Agents) != 1 {
		t.Errorf("agents after the refused open: %+v", l.Agents)
	}
}

// An agent is named by its whole id or by a unique prefix of it, as git
// and docker take one: a prefix of several is an error naming them, one
// of none is the "no agent" error, and a whole id wins over its being the
// start of a longer one.
func TestPrefixNamesAnAgent(t *testing.T) {
	r := newRig(t, 10)
	for _, id := range []string{"f98a0c1d", "f9b2e310", "ab", "abcd1234"} {
		r.open(t, id)
	}
	for _, c := range []struct {
		given, want string
		code        string
		says        []string
	}{
		{given: "f98", want: "f98a0c1d"},
		{given: "f9b2e310", want: "f9b2e310"},
		{given: "abc", want: "abcd1234"},
		{given: "ab", want: "ab"}, // whole, though also the start of abcd1234
		{given: "f9", code: verbs.CodeBadArgument, says: []string{`agent id "f9" is ambiguous`, "f98a0c1d, f9b2e310", "type more"}},
		{given: "a", code: verbs.CodeBadArgument, says: []string{"ab, abcd1234"}},
		{given: "0f9", code: verbs.CodeNotFound, says: []string{`no agent "0f9"`, "kaimon list"}},
		{given: "f98a0c1d0", code: verbs.CodeNotFound},
	} {
		got, err := r.m.ResolveAgentID(c.given)
		if c.code == "" {
			if err != nil || got != c.want {
				t.Errorf("ResolveAgentID(%q) = %q, %v; want %q", c.given, got, err, c.want)
			}
			st, err := r.m.Status(bg, &verbs.StatusArgs{AgentID: c.given})
			if err != nil || st.Status != apitype.Idle {
				t.Errorf("status %s = %+v, %v", c.given, st, err)
			}
			continue
		}
		var ve *verbs.Error
		if !errors.As(err, &ve) || ve.Code != c.code {
			t.Errorf("ResolveAgentID(%q) = %q, %v; want a %s error", c.given, got, err, c.code)
			continue
		}
		for _, s := range c.says {
			if !strings.Contains(ve.Message, s) {
				t.Errorf("ResolveAgentID(%q): %q does not say %q", c.given, ve.Message, s)
			}
		}
		// Every verb about an agent resolves the same way.
		if _, err := r.m.Close(bg, &verbs.CloseArgs{AgentID: c.given}); !errors.As(err, &ve) || ve.Code != c.code {
			t.Errorf("close %s: %v; want a %s error", c.given, err, c.code)
		}
	}
}

// A verb given a prefix answers with the whole id wherever it returns
// one; an open's id is an id to create, taken as it is, never resolved.
func TestPrefixResultsNameTheWholeID(t *testing.T) {
	r := newRig(t, 10)
	id := r.open(t, "c0ffee42")
	if _, err := r.m.Run(bg, decoded(&verbs.RunArgs{AgentID: "c0f", Text: "one"})); err != nil {
		t.Fatal(err)
	}
	out, err := r.m.Output(bg, decoded(&verbs.OutputArgs{AgentID: "c0f"}))
	if err != nil || out.AgentID != id || out.Text != "re: one" {
		t.Fatalf("output c0f = %+v, %v; want agent %s's", out, err, id)
	}
	// An open --id of a prefix makes that agent; the prefix then names it.
	if got := r.open(t, "c0f"); got != "c0f" {
		t.Fatalf("open --id c0f opened %q", got)
	}
	if got, err := r.m.ResolveAgentID("c0f"); err != nil || got != "c0f" {
		t.Fatalf("c0f after opening it names %q, %v", got, err)
	}
	if _, err := r.m.Close(bg, &verbs.CloseArgs{AgentID: "c0ff"}); err != nil {
		t.Fatal(err)
	}
	// Forgetting cannot be undone: it takes whole ids, not a guess.
	if _, err := r.m.Forget(bg, &verbs.ForgetArgs{AgentIDs: []string{"c0ff"}}); errCode(err) != verbs.CodeBadArgument ||
		!strings.Contains(err.Error(), "forget takes whole ids") || !strings.Contains(err.Error(), "kaimon forget "+id) {
		t.Fatalf("forget c0ff: %v; want it refused, naming %s", err, id)
	}
	f, err := r.m.Forget(bg, &verbs.ForgetArgs{AgentIDs: []string{id}}) // its log kept
	if err != nil || len(f.Forgotten) != 1 || f.Forgotten[0] != id {
		t.Fatalf("forget %s = %+v, %v; want [%s]", id, f, err, id)
	}
	// Its kept log names it still: a live agent whose id starts with the
	// forgotten one's is not what that id names.
	if got := r.open(t, id+"-2"); got != id+"-2" {
		t.Fatalf("open --id %s-2 opened %q", id, got)
	}
	if got, err := r.m.ResolveAgentID(id); errCode(err) != verbs.CodeNotFound {
		t.Fatalf("%s, forgotten with its log kept, names %q, %v; want none of the live agents", id, got, err)
	}
}
