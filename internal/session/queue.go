package session

import "github.com/kaimon/kaimon/internal/event"

// The agent's path: a backend's reader hands each event to Emit, which
// only queues it; one goroutine per agent (drain) takes the queue in
// order and does the rest (stamp, book, log, fan-out, record), so the
// reader is never held up by a disk write, an fsync or the fan-out, and
// the backend's own lock, held through Emit, is never held across I/O.
// Every other publish (status transitions, a failed send, a log fault,
// the end of a lost agent) goes through the same queue and waits for its
// turn to be done (but a turn's working status, which send queues ahead
// of the turn's line to the agent without waiting), so an agent's events
// keep one order: seq order is queue order is log order is fan-out order.
//
// agent_run waits for none of it but its turn's result in the book, put
// there once the result is logged and fsynced; the fan-out and the
// record's save follow (issue 12: they were on every turn's way).
//
// The queue is bounded (maxQueued). When it is full, Emit waits: the
// backend's reader stops reading, and the agent blocks on its stdout.
// Authoritative events are never dropped on the agent's side; only the
// bus drops, per slow subscriber, and counts it (package bus).
//
// drain runs only while there is something queued, so an idle agent has
// no goroutine.

// maxQueued bounds an agent's queue of events not yet published.
const maxQueued = 4096

type queued struct {
	ev event.Event
	// done, when not nil, is closed once ev is published and its record
	// saved, or its save started for a turn's end (a waiting publish);
	// barrier items have no event.
	done    chan struct{}
	barrier bool
}

// Emit implements backend.Sink: it queues ev, waiting only while the
// queue is full.
func (ag *Agent) Emit(ev event.Event) { ag.enqueue(queued{ev: ev}) }

// publish stamps ev with agent_id, seq and ts, updates the agent's state
// from it, logs it when authoritative, and fans it out (publishOne), after
// every event queued before it, and returns when that is done.
func (ag *Agent) publish(ev event.Event) {
	done := make(chan struct{})
	ag.enqueue(queued{ev: ev, done: done})
	<-done
}

// flush returns once everything queued so far is published.
func (ag *Agent) flush() {
	done := make(chan struct{})
	ag.enqueue(queued{done: done, barrier: true})
	<-done
}

func (ag *Agent) enqueue(q queued) {
	ag.qmu.Lock()
	for len(ag.queue) >= maxQueued {
		ag.qcond.Wait()
	}
	ag.queue = append(ag.queue, q)
	start := !ag.draining
	ag.draining = true
	ag.qmu.Unlock()
	if start {
		go ag.drain()
	}
}

// drain publishes the queue in order until it is empty.
func (ag *Agent) drain() {
	for {
		ag.qmu.Lock()
		if len(ag.queue) == 0 {
			ag.draining = false
			ag.queue = ag.queue[:0:0] // let a burst's array go
			ag.qmu.Unlock()
			return
		}
		q := ag.queue[0]
		ag.queue[0] = queued{}
		ag.queue = ag.queue[1:]
		ag.qcond.Broadcast()
		ag.qmu.Unlock()
		if !q.barrier && ag.publishOne(q.ev) {
			// A status change or a new vendor session is saved in
			// the agent's record (a turn's end too, in the
			// background: publishOne).
			ag.save()
		}
		if q.done != nil {
			close(q.done)
		}
	}
}
