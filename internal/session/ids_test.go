package session

import (
	"errors"
	"os"
	"strings"
	"sync"
	"testing"

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
