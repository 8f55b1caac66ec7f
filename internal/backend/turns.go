package backend

import (
	"github.com/kaimon/kaimon/internal/apitype"
	"github.com/kaimon/kaimon/internal/event"
)

// Turn is a user turn: its number and text.
type Turn struct {
	Number int
	Text   string
}

// Turns is a backend's FIFO of user turns sent and not yet ended. The head
// is the active turn: every event the agent emits belongs to it, and its
// result ends it and opens the next. Backends send one turn at a time to
// their agent (the claude CLI merges queued messages into one turn; ACP
// updates carry no turn id), so the rest wait here. The zero value is
// empty and ready.
type Turns struct {
	queue       []Turn
	last        int // the latest active turn, for events outside any turn
	interrupted map[int]bool
}

// Push records turn, sent with text. If no turn was in flight it opens at
// once: Push returns its user_text and turn_started, and active true, and
// the caller sends it to the agent. Otherwise it waits, and opens when the
// previous turn ends (Pop).
func (q *Turns) Push(turn int, text string) (evs []event.Event, active bool) {
	q.queue = append(q.queue, Turn{Number: turn, Text: text})
	if len(q.queue) == 1 {
		return q.activate(), true
	}
	return nil, false
}

// activate returns the opening events of the head turn.
func (q *Turns) activate() []event.Event {
	t := q.queue[0]
	q.last = t.Number
	return []event.Event{
		event.NewText(event.UserText, t.Number, false, t.Text),
		event.New(event.TurnStarted, t.Number, struct{}{}),
	}
}

// Active returns the turn the agent is working on, if any.
func (q *Turns) Active() (int, bool) {
	if len(q.queue) == 0 {
		return 0, false
	}
	return q.queue[0].Number, true
}

// Current is the turn events carry: the active one, else the last one.
func (q *Turns) Current() int {
	if len(q.queue) > 0 {
		return q.queue[0].Number
	}
	return q.last
}

// InFlight is the number of turns sent and not ended, the active one
// included.
func (q *Turns) InFlight() int { return len(q.queue) }

// MarkInterrupted records that kaimon interrupted turn, so that its end is
// read as cancelled rather than failed.
func (q *Turns) MarkInterrupted(turn int) {
	if q.interrupted == nil {
		q.interrupted = map[int]bool{}
	}
	q.interrupted[turn] = true
}

// Interrupted reports whether kaimon interrupted turn.
func (q *Turns) Interrupted(turn int) bool { return q.interrupted[turn] }

// Pop ends the active turn and opens the next queued one: its opening
// events are returned, and next says it is to be sent. ended is 0 when no
// turn was in flight.
func (q *Turns) Pop() (ended int, evs []event.Event, next *Turn) {
	if len(q.queue) == 0 {
		return 0, nil, nil
	}
	ended = q.queue[0].Number
	delete(q.interrupted, ended)
	q.queue = q.queue[1:]
	if len(q.queue) == 0 {
		return ended, nil, nil
	}
	t := q.queue[0]
	return ended, q.activate(), &t
}

// Retract forgets turn, pushed but never delivered (sending it failed): the
// caller reports that turn's failure itself. If it was active, the next
// queued turn opens as with Pop.
func (q *Turns) Retract(turn int) (evs []event.Event, next *Turn) {
	for i, t := range q.queue {
		if t.Number != turn {
			continue
		}
		q.queue = append(q.queue[:i:i], q.queue[i+1:]...)
		delete(q.interrupted, turn)
		if i == 0 && len(q.queue) > 0 {
			h := q.queue[0]
			return q.activate(), &h
		}
		return nil, nil
	}
	return nil, nil
}

// Abort ends every turn in flight with a result of stopReason (the active
// one first, then the queued ones, which never started), for when the agent
// is gone and no result will come. msg is the results' error.
func (q *Turns) Abort(stopReason apitype.StopReason, msg string) []event.Event {
	var evs []event.Event
	for _, t := range q.queue {
		evs = append(evs, event.New(event.Result, t.Number, event.ResultData{StopReason: stopReason, Error: msg}))
	}
	q.queue = nil
	q.interrupted = nil
	return evs
}
