package backend

import (
	"testing"

	"github.com/kaimon/kaimon/internal/apitype"
	"github.com/kaimon/kaimon/internal/event"
)

func kinds(evs []event.Event) string {
	s := ""
	for _, e := range evs {
		s += string(e.Kind) + "/" + string(rune('0'+e.Turn)) + " "
	}
	return s
}

func TestTurns(t *testing.T) {
	var q Turns
	if evs, active := q.Push(1, "one"); !active || kinds(evs) != "user_text/1 turn_started/1 " {
		t.Fatalf("first push: %v %s", active, kinds(evs))
	}
	if evs, active := q.Push(2, "two"); active || evs != nil {
		t.Fatal("second push opened at once")
	}
	q.Push(3, "three")
	q.MarkInterrupted(1)
	if n, _ := q.Active(); n != 1 || !q.Interrupted(1) || q.InFlight() != 3 {
		t.Fatalf("active %d interrupted %v in flight %d", n, q.Interrupted(1), q.InFlight())
	}
	ended, evs, next := q.Pop()
	if ended != 1 || next == nil || next.Number != 2 || kinds(evs) != "user_text/2 turn_started/2 " || q.Interrupted(1) {
		t.Fatalf("pop: %d %v %s", ended, next, kinds(evs))
	}
	// Retracting a queued turn opens nothing; retracting the active one
	// opens the next.
	q.Push(4, "four")
	if evs, next := q.Retract(3); evs != nil || next != nil {
		t.Fatal("retracting a queued turn opened one")
	}
	if evs, next := q.Retract(2); next == nil || next.Number != 4 || kinds(evs) != "user_text/4 turn_started/4 " {
		t.Fatalf("retract active: %v %s", next, kinds(evs))
	}
	q.Push(5, "five")
	if got := kinds(q.Abort(apitype.StopError, "gone")); got != "result/4 result/5 " {
		t.Fatalf("abort: %s", got)
	}
	if q.InFlight() != 0 || q.Current() != 4 {
		t.Fatalf("after abort: in flight %d, current %d (the last active turn)", q.InFlight(), q.Current())
	}
	if ended, _, _ := q.Pop(); ended != 0 {
		t.Fatal("pop of an empty queue ended a turn")
	}
}
