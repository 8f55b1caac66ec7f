package session

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kaimon/kaimon/internal/event"
	"github.com/kaimon/kaimon/internal/eventlog"
)

// An agent's events keep one order whichever way they go: deltas its
// reader publishes itself (Emit, or EmitBatched and fanned out at its
// Flush), authoritative events through the queue and drain, and
// publishes from other goroutines at the same time. Every envelope is
// fanned out once, in seq order; the reader's events in the order it
// emitted them; the log holds the authoritative ones in seq order.
func TestOneOrderInlineAndQueued(t *testing.T) {
	t.Run("emit", func(t *testing.T) { oneOrder(t, 0) })
	t.Run("batched", func(t *testing.T) { oneOrder(t, 7) })
}

// oneOrder is TestOneOrderInlineAndQueued; the reader uses EmitBatched and
// flushes after every flushEvery events when that is not 0.
func oneOrder(t *testing.T, flushEvery int) {
	r := newRig(t, 10)
	pub := &envRec{}
	r.m.AddPublisher(pub)
	id := r.open(t, "a1")
	ag, _ := r.m.get(id)
	const n = 5000
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // another goroutine's publishes, as agent_send's
		defer wg.Done()
		for i := range 50 {
			ag.publish(event.NewError(1, fmt.Sprintf("side %d", i), nil))
		}
	}()
	for i := range n { // the reader
		ev := event.NewText(event.AssistantText, 1, i%100 != 99, fmt.Sprintf("t%d ", i))
		if flushEvery == 0 {
			ag.Emit(ev)
			continue
		}
		ag.EmitBatched(ev)
		if i%flushEvery == 0 {
			ag.Flush()
		}
	}
	if flushEvery != 0 {
		ag.Flush() // as the reader does at its end
	}
	wg.Wait()
	ag.flush()

	pub.mu.Lock()
	evs := append([]event.Envelope(nil), pub.evs...)
	pub.mu.Unlock()
	var last uint64
	next, side := 0, 0
	for _, e := range evs {
		if e.Seq <= last {
			t.Fatalf("seq %d after %d", e.Seq, last)
		}
		last = e.Seq
		switch e.Kind {
		case event.AssistantText:
			if want := fmt.Sprintf("t%d ", next); event.TextOf(e.Data) != want {
				t.Fatalf("text %q, want %q", event.TextOf(e.Data), want)
			}
			next++
		case event.Error:
			side++
		}
	}
	if next != n || side != 50 {
		t.Fatalf("%d texts and %d side events fanned out, want %d and 50", next, side, n)
	}
	var logged []uint64
	if err := eventlog.Scan(r.paths.Agent(id).Events, 0, func(rec *event.Record) bool {
		logged = append(logged, rec.Seq)
		return true
	}); err != nil {
		t.Fatal(err)
	}
	for i := 1; i < len(logged); i++ {
		if logged[i] <= logged[i-1] {
			t.Fatalf("log: seq %d after %d", logged[i], logged[i-1])
		}
	}
	if b, _ := os.ReadFile(r.paths.Agent(id).Events); strings.Count(string(b), `"delta":true`) != 0 {
		t.Fatal("a delta in the log")
	}
}

// The reader never waits for room in the queue while its batch holds the
// drain, which alone makes room: an event to log flushes the batch first,
// even with the queue filled meanwhile by another goroutine.
func TestBatchedReaderNeverWaitsOnItsOwnHold(t *testing.T) {
	r := newRig(t, 10)
	pub := &envRec{}
	r.m.AddPublisher(pub)
	id := r.open(t, "a1")
	ag, _ := r.m.get(id)
	// The drain of open's own events may still be running: until it
	// stops, EmitBatched cannot take the hold, and the queue below would
	// be drained as it fills.
	for idle := false; !idle; runtime.Gosched() {
		ag.qmu.Lock()
		idle = !ag.draining && len(ag.queue) == 0
		ag.qmu.Unlock()
	}
	ag.EmitBatched(event.NewText(event.AssistantText, 1, true, "held "))
	if ag.held == nil {
		t.Fatal("the reader's first delta did not take the hold")
	}
	filled := make(chan struct{})
	go func() { // another goroutine fills the queue, and more
		defer close(filled)
		for i := range maxQueued + 10 {
			ag.Emit(event.NewError(1, fmt.Sprintf("side %d", i), nil))
		}
	}()
	fillBy := time.Now().Add(time.Minute)
	for { // until the queue is full
		ag.qmu.Lock()
		n := len(ag.queue)
		ag.qmu.Unlock()
		if n >= maxQueued {
			break
		}
		if time.Now().After(fillBy) {
			t.Fatalf("the queue holds %d of %d: something drains it while the reader holds the drain", n, maxQueued)
		}
		runtime.Gosched()
	}
	done := make(chan struct{})
	go func() { // the reader's next events: one to log, then a delta
		ag.EmitBatched(event.NewError(1, "reader", nil))
		ag.EmitBatched(event.NewText(event.AssistantText, 1, true, "after "))
		ag.Flush()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the reader waits for room that only its own hold can make")
	}
	<-filled
	ag.flush()
	pub.mu.Lock()
	defer pub.mu.Unlock()
	var texts []string
	var last uint64
	readerAt := -1 // deltas fanned out before the reader's error
	for _, e := range pub.evs {
		if e.Seq <= last {
			t.Fatalf("seq %d after %d", e.Seq, last)
		}
		last = e.Seq
		if e.Kind == event.AssistantText {
			texts = append(texts, event.TextOf(e.Data))
		}
		if e.Kind == event.Error && strings.Contains(string(e.Data), `"reader"`) {
			readerAt = len(texts)
		}
	}
	if strings.Join(texts, "") != "held after " || readerAt != 1 {
		t.Fatalf("deltas %q, the reader's error after %d of them; want \"held \", the error, \"after \"", texts, readerAt)
	}
}
