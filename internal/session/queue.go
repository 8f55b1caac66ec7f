package session

import (
	"sync"

	"github.com/kaimon/kaimon/internal/event"
)

// The agent's path: a backend's reader hands each event to Emit, which
// queues it; one goroutine per agent (drain) takes the queue in order and
// does the rest (stamp, book, log, fan-out, record), so the reader is
// never held up by a disk write, an fsync or a subscriber, and the
// backend's own lock, held through Emit, is never held across I/O. (A
// delta, which needs no disk, is published by the reader itself when
// nothing is queued, and the reader's deltas are fanned out a read of
// the agent's stdout at a time: EmitBatched.)
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

// maxQueued bounds an agent's queue of events not yet published. What
// waits here waits for the relay, so the bound is also the worst delay an
// agent that outruns the relay adds to its own events: 512 is about 2 ms
// at the relay's rate, and eight batches (maxBatch), enough to keep drain
// fed while the reader refills it; beyond it the agent waits on its
// stdout instead, which costs nothing.
const maxQueued = 512

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
//
// An event with nothing to log (a streamed delta), emitted while nothing
// is queued or draining, is published by the caller itself: it needs no
// disk, and handing it to a drain goroutine was a wake of the other core
// per delta (issue 12: at a paced rate every delta travels alone).
func (ag *Agent) Emit(ev event.Event) {
	if !event.Authoritative(ev.Kind, ev.Data) {
		if f := ag.hold(); f != nil {
			ag.publishHeld(ev, f)
			ag.unhold(f)
			return
		}
	}
	ag.enqueue(queued{ev: ev})
}

// EmitBatched implements backend.BatchSink: Emit for the backend's stdout
// reader, whose deltas are published by the reader itself as Emit's are,
// but fanned out together at its Flush (up to maxBatch at a time): a
// subscriber's writer is woken once per read of the agent's stdout, not
// once per line. An event to log goes to the queue, after the batch.
func (ag *Agent) EmitBatched(ev event.Event) {
	if event.Authoritative(ev.Kind, ev.Data) {
		ag.Flush()
		ag.enqueue(queued{ev: ev})
		return
	}
	if ag.held == nil {
		if ag.held = ag.hold(); ag.held == nil {
			ag.enqueue(queued{ev: ev})
			return
		}
	}
	ag.publishHeld(ev, ag.held)
	if len(ag.held.envs) >= maxBatch {
		ag.Flush()
	}
}

// Flush implements backend.BatchSink: it fans out the reader's batch and
// gives the drain back.
func (ag *Agent) Flush() {
	if f := ag.held; f != nil {
		ag.held = nil
		ag.unhold(f)
	}
}

// hold takes the agent's drain for its caller when nothing is queued or
// draining, and returns a batch to publish into; nil, having done
// nothing, otherwise. While it is held, whatever is queued meanwhile
// waits and follows the batch in order; unhold fans the batch out and
// gives the drain back, starting it for what was queued.
func (ag *Agent) hold() *fanBuf {
	ag.qmu.Lock()
	defer ag.qmu.Unlock()
	if ag.draining || len(ag.queue) > 0 {
		return nil
	}
	ag.draining = true
	return fanBufs.Get().(*fanBuf)
}

func (ag *Agent) unhold(f *fanBuf) {
	f.flush(ag)
	fanBufs.Put(f)
	ag.qmu.Lock()
	start := len(ag.queue) > 0
	ag.draining = start
	ag.qmu.Unlock()
	if start {
		go ag.drain()
	}
}

// publishHeld publishes ev, which must need no disk, into held batch f: a
// record save it calls for (a new vendor session) is made in the
// background, and the one save it may wait for is the seq ceiling's at an
// agent's first events, once.
func (ag *Agent) publishHeld(ev event.Event, f *fanBuf) {
	if ag.publishRedacted(ev, f) {
		ag.saveInBackground()
	}
}

// publishRedacted is publishOne of what ev is once the agent's secrets are
// redacted from it (redact.Stream: a delta may be held back, or preceded
// by what an earlier one held): the one place the agent's events become
// kaimon's, so that its log, book, bus and every reader of them see them
// redacted. Called only by the drain's holder, as publishOne.
func (ag *Agent) publishRedacted(ev event.Event, f *fanBuf) (persist bool) {
	s := ag.redact.Load()
	if s == nil {
		return ag.publishOne(ev, f)
	}
	for _, e := range s.Events(ev) {
		if ag.publishOne(e, f) {
			persist = true
		}
	}
	return persist
}

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

// flushToSync is flush for a reader of the agent's state (agent_status),
// which must not wait for a slow disk: it returns early when the drain
// is in a result's fsync (syncLog), since that result and everything after
// it are not published until the sync is done.
func (ag *Agent) flushToSync() {
	done := make(chan struct{})
	ag.enqueue(queued{done: done, barrier: true})
	ag.qmu.Lock()
	if ag.syncing {
		ag.qmu.Unlock()
		return
	}
	if ag.syncBegan == nil {
		ag.syncBegan = make(chan struct{})
	}
	began := ag.syncBegan
	ag.qmu.Unlock()
	select {
	case <-done:
	case <-began:
	}
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

// maxBatch bounds how many queued events drain takes at once. Their
// envelopes are stamped and logged one by one, in order, and then handed
// to the publishers together (fanOut), so that a subscriber's writer is
// woken once per batch rather than once per event: at full speed, where
// the queue fills faster than one event at a time, that is one socket
// write per batch (issue 12: a write and a goroutine wake per delta were
// much of the relay's cost). It is small so that the first event of a
// batch waits little for the last: at ~1-2 µs an event, under 0.2 ms.
const maxBatch = 64

// fanBuf holds a batch's envelopes until they are fanned out; pooled,
// since drain runs only while something is queued and an idle agent
// should hold none.
type fanBuf struct {
	envs []event.Envelope
	ptrs []*event.Envelope
}

var fanBufs = sync.Pool{New: func() any {
	return &fanBuf{envs: make([]event.Envelope, 0, 2*maxBatch), ptrs: make([]*event.Envelope, 0, 2*maxBatch)}
}}

// flush fans out the envelopes held, in order, and empties f.
func (f *fanBuf) flush(ag *Agent) {
	if len(f.envs) == 0 {
		return
	}
	f.ptrs = f.ptrs[:0]
	for i := range f.envs {
		f.ptrs = append(f.ptrs, &f.envs[i])
	}
	ag.fanOut(f.ptrs)
	clear(f.envs) // let the events' data go
	f.envs = f.envs[:0]
	clear(f.ptrs)
}

// drain publishes the queue in order until it is empty, a batch at a
// time (maxBatch). An item someone waits for (done) is answered only once
// it and everything before it is fanned out.
func (ag *Agent) drain() {
	f := fanBufs.Get().(*fanBuf)
	defer fanBufs.Put(f)
	var batch [maxBatch]queued
	for {
		ag.qmu.Lock()
		if len(ag.queue) == 0 {
			ag.draining = false
			ag.queue = ag.queue[:0:0] // let a burst's array go
			ag.qmu.Unlock()
			return
		}
		n := copy(batch[:], ag.queue)
		clear(ag.queue[:n])
		ag.queue = ag.queue[n:]
		ag.qcond.Broadcast()
		ag.qmu.Unlock()
		for i := range batch[:n] {
			q := &batch[i]
			if !q.barrier && ag.publishRedacted(q.ev, f) {
				// A status change or a new vendor session is saved in
				// the agent's record (a turn's end too, in the
				// background: publishOne).
				ag.save()
			}
			if q.done != nil {
				f.flush(ag)
				close(q.done)
			}
		}
		f.flush(ag)
		clear(batch[:n])
	}
}
