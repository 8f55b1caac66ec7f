package session

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/kaimon/kaimon/internal/apitype"
	"github.com/kaimon/kaimon/internal/backend"
	"github.com/kaimon/kaimon/internal/proc"
	"github.com/kaimon/kaimon/internal/verbs"
)

// withProcess is a scripted backend with a child process, so that its
// start and death take pidFile.mu as a real one's do. Its identity names
// no process (pid 0), so that nothing could ever reap one.
type withProcess struct{ *scripted }

func (withProcess) Process() proc.Identity { return proc.Identity{} }

// TestLockOrderStress runs open, close, forget, status, list and run at
// once on a few ids, so that every lock in the order of agent.go's
// comment (Manager.mu, pubMu, saveMu, mu, and the leaves qmu, faultMu and
// pidFile.mu) is taken by goroutines racing each other. Run with -race: a
// break of the order deadlocks it (the test binary's timeout reports it,
// with every goroutine's stack) and a lock missed is a race reported.
// After it, the slots and the pid file agree: no live child is left
// recorded for an agent that is dead or gone.
func TestLockOrderStress(t *testing.T) {
	r := newRig(t, 2) // a small dead_kept: retain's forgets race too
	made := r.m.factory
	r.m.factory = func(o backend.Options, sink backend.Sink) (backend.Backend, error) {
		be, err := made(o, sink)
		if s, ok := be.(*scripted); ok {
			return withProcess{s}, nil
		}
		return be, err
	}
	ids := []string{"s0", "s1", "s2", "s3"}
	const workers, rounds = 6, 150
	var wg sync.WaitGroup
	errs := make(chan error, workers*rounds)
	var okMu sync.Mutex
	ok := map[int]int{} // successes per kind of call, for the log
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range rounds {
				// Each worker walks an id through its life, open to
				// forget, then the next id; the workers start at
				// different ids and steps, so that they meet.
				id, op := ids[(i/6+w)%len(ids)], (i+w)%6
				var err error
				switch op {
				case 0:
					_, err = r.m.Open(bg, &verbs.OpenArgs{Cwd: r.paths.CacheDir, ID: id})
				case 1:
					_, err = r.m.Status(bg, &verbs.StatusArgs{AgentID: id})
				case 2:
					// A run: its wait races the close, reopen and
					// forget of its id.
					_, err = r.m.Run(bg, decoded(&verbs.RunArgs{AgentID: id, Text: "go"}))
				case 3:
					_, err = r.m.List(bg, &verbs.ListArgs{})
				case 4:
					_, err = r.m.Close(bg, &verbs.CloseArgs{AgentID: id})
				case 5:
					_, err = r.m.Forget(bg, &verbs.ForgetArgs{AgentIDs: []string{id}})
				}
				if err == nil {
					okMu.Lock()
					ok[op]++
					okMu.Unlock()
				}
				// Refusals of a slot in the wrong state are the point
				// of racing; anything else is not.
				var ve *verbs.Error
				if err != nil && !(errors.As(err, &ve) && (ve.Code == verbs.CodeWrongState || ve.Code == verbs.CodeNotFound ||
					ve.Code == verbs.CodeTurnFailed || ve.Code == verbs.CodeBadArgument)) {
					errs <- fmt.Errorf("worker %d round %d on %s: %w", w, i, id, err)
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	t.Logf("calls that succeeded, open status run list close forget: %d %d %d %d %d %d", ok[0], ok[1], ok[2], ok[3], ok[4], ok[5])
	for err := range errs {
		t.Error(err)
	}
	for _, id := range ids {
		r.m.Close(bg, &verbs.CloseArgs{AgentID: id})
	}
	l, err := r.m.List(bg, &verbs.ListArgs{})
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range l.Agents {
		if a.Status != apitype.Dead {
			t.Errorf("agent %s is %s after every one was closed", a.AgentID, a.Status)
		}
	}
	r.m.pids.mu.Lock()
	live := len(r.m.pids.live)
	r.m.pids.mu.Unlock()
	if live != 0 {
		t.Errorf("the pid file holds %d live children with every agent dead", live)
	}
}
