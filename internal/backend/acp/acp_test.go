package acp

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/iotest"
	"time"

	"github.com/kaimon/kaimon/internal/apitype"
	"github.com/kaimon/kaimon/internal/backend"
	"github.com/kaimon/kaimon/internal/event"
	"github.com/kaimon/kaimon/internal/testutil/backendtest"
	"github.com/kaimon/kaimon/internal/verbs"
)

// sink records what a backend reports.
type sink struct {
	mu     sync.Mutex
	evs    []event.Event
	err    error
	exited chan struct{}
}

func (s *sink) Emit(ev event.Event) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.evs = append(s.evs, ev)
}

func (s *sink) Exited(err error) {
	s.err = err
	close(s.exited)
}

func (s *sink) events() []event.Event {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]event.Event(nil), s.evs...)
}

// standin starts testdata/standin-acp.py as acp:gemini, misbehaving as
// mode says on the first prompt.
func standin(t *testing.T, mode string) (*Backend, *sink) {
	t.Helper()
	bin, err := filepath.Abs(filepath.Join("testdata", "standin-acp.py"))
	if err != nil {
		t.Fatal(err)
	}
	s := &sink{exited: make(chan struct{})}
	b, err := New(backendtest.Resolved(t, backend.Options{OpenArgs: verbs.OpenArgs{ID: "s1", Cwd: t.TempDir(), Model: "acp:gemini"}, CacheDir: t.TempDir(), Env: []string{"KAIMON_GEMINI_BIN=" + bin, "KAIMON_STANDIN=" + mode, "PATH=" + os.Getenv("PATH")}}), s)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := b.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b, s
}

// An agent that closes its stdout and lives on is stopped: its turn fails
// with an error saying so, and Exited reports it.
func TestAgentClosesStdout(t *testing.T) {
	b, s := standin(t, "hangup")
	pid := b.Process()
	if err := b.Send(1, "hello"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-s.exited:
	case <-time.After(30 * time.Second):
		t.Fatal("no Exited after the agent closed its stdout")
	}
	if s.err == nil || !strings.Contains(s.err.Error(), "closed its stdout (or broke the JSON-RPC stream) but kept running") {
		t.Fatalf("Exited(%v)", s.err)
	}
	if pid.Alive() {
		t.Fatalf("the stand-in (pid %d) still runs", pid.PID)
	}
	var failed bool
	for _, ev := range s.events() {
		if ev.Kind == event.Result && ev.Turn == 1 {
			var r event.ResultData
			_ = json.Unmarshal(ev.Data, &r)
			failed = r.StopReason == apitype.StopError
		}
	}
	if !failed {
		t.Fatalf("turn 1 did not fail: %v", s.events())
	}
}

// A stdout line over the SDK's limit ends the JSON-RPC stream (the SDK
// reads with a bounded Scanner and cannot skip it): the agent is stopped
// and the error says that the line was why.
func TestAgentPrintsOverlongLine(t *testing.T) {
	b, s := standin(t, "longline")
	if err := b.Send(1, "hello"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-s.exited:
	case <-time.After(30 * time.Second):
		t.Fatal("no Exited after the agent broke the stream")
	}
	if s.err == nil || !strings.Contains(s.err.Error(), "printed a stdout line of 10485760 bytes or more, over the ACP SDK's limit") {
		t.Fatalf("Exited(%v)", s.err)
	}
}

// lineWatch notes a line over its bound, across reads, and only that.
func TestLineWatch(t *testing.T) {
	for _, c := range []struct {
		in   string
		over bool
	}{{"abc\ndefgh\n", false}, {"abcdefghijk\n", true}, {"abcd\nefghijklmnop", true}, {"abcdefghi\nabcdefghi\n", false}, {"abcdefghij\n", true}} {
		w := &lineWatch{r: iotest.OneByteReader(strings.NewReader(c.in)), max: 10}
		if _, err := io.Copy(io.Discard, w); err != nil {
			t.Fatal(err)
		}
		if w.overlong() != c.over {
			t.Errorf("%q: overlong %v", c.in, w.overlong())
		}
	}
}

// A turn that does not end after session/cancel is an interrupt error, not
// "nothing to interrupt"; with no turn in flight it is false and no error.
func TestInterruptNotEnded(t *testing.T) {
	b, _ := standin(t, "mute")
	if ok, err := b.Interrupt(context.Background()); ok || err != nil {
		t.Fatalf("interrupt with no turn: %v, %v", ok, err)
	}
	if err := b.Send(1, "hello"); err != nil {
		t.Fatal(err)
	}
	ok, err := b.Interrupt(context.Background())
	if ok || err == nil || !strings.Contains(err.Error(), "did not end the turn") {
		t.Fatalf("interrupt of a mute agent: %v, %v", ok, err)
	}
}

// An agent that refuses its arguments is started again with its fallback
// ones, and the second process works: its turns end.
func TestFallbackArgsAgentWorks(t *testing.T) {
	b, s := standin(t, "oldflags")
	if got := b.Argv(); len(got) == 0 {
		t.Fatal("no argv")
	}
	if err := b.Send(1, "hello"); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		for _, ev := range s.events() {
			if ev.Kind == event.Result && ev.Turn == 1 {
				var r event.ResultData
				_ = json.Unmarshal(ev.Data, &r)
				if r.StopReason != apitype.StopEndTurn {
					t.Fatalf("turn 1 ended %s: %s", r.StopReason, r.Error)
				}
				return
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("turn 1 never ended on the fallback process: %v", s.events())
}
