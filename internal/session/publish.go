package session

import (
	"encoding/json"
	"log"
	"time"

	"github.com/kaimon/kaimon/internal/apitype"
	"github.com/kaimon/kaimon/internal/event"
	"github.com/kaimon/kaimon/internal/imaging"
)

// publishOne stamps ev with agent_id, seq and ts, updates the agent's
// state from it, logs it when authoritative, and fans it out; it reports
// whether the record is to be saved before the event's publish returns (a
// turn's end is saved in the background). The log is written before anyone
// sees the event: its envelopes are appended to f, which drain fans out
// after the batch (queue.go). A result that ends the last pending turn moves the FSM
// to idle in the same step. Called only by the drain's holder (drain, or
// a caller of hold: queue.go), one event at a time.
func (ag *Agent) publishOne(ev event.Event, f *fanBuf) (persist bool) {
	// Bound tool-result PNGs before anyone sees or logs them.
	ev = imaging.ShrinkEvent(ev, ag.m.cfg.AgentImageMaxLongEdge)
	ag.pubMu.Lock()
	defer ag.pubMu.Unlock()
	ag.mu.Lock()
	if ag.logErr != nil && ev.Kind == event.Result {
		ev = failedResult(ev, ag.logErr)
	}
	env := ag.stampLocked(ev)
	// The log takes the event before anyone sees it, agent_run reading the
	// book included: a turn whose result could not be logged did not
	// succeed.
	logged, err := ag.logLocked(&env)
	if logged && ev.Kind == event.Result {
		// Flushed to disk once per turn (see the eventlog package), with
		// mu let go: a slow disk must not hold up agent_status, which
		// meanwhile sees the turn still working (syncLog). pubMu and the
		// drain stay held, so nothing is logged or published between
		// the result and its sync: the log's order is the same.
		ag.mu.Unlock()
		serr := ag.syncLog()
		ag.mu.Lock()
		if serr != nil {
			err = ag.logFailedLocked(serr)
		}
	}
	if err != nil && ev.Kind == event.Result {
		ev = failedResult(ev, err)
		env.Data = ev.Data
	}
	if ag.book != nil {
		ag.book.add(ev.Kind, ev.Turn, ev.Data)
	}
	var idle *event.Envelope
	later := false
	switch ev.Kind {
	case event.Result:
		// A turn's end (its usage, the turn count, idle) is saved in
		// the background: the record's save (two fsyncs) is not on the
		// way of agent_run's answer, which needs only the log's (issue
		// 12). The log has the turn's result already; the next save
		// (a status change, a close) waits for this one (saveMu).
		later = true
		if r := ag.book.get(ev.Turn); r != nil {
			ag.usage = ag.usage.Add(r.usage)
		}
		if ag.pending > 0 {
			ag.pending--
			if ag.pending == 0 && ag.status == apitype.Working && allowed(apitype.Working, apitype.Idle) {
				ag.status = apitype.Idle
				e := ag.stampLocked(event.New(event.Status, ev.Turn, event.StatusData{Status: apitype.Idle}))
				_, _ = ag.logLocked(&e)
				idle = &e
			}
		}
	case event.Status:
		// Not for working: the turn's result saves what it changes, and
		// a record that says idle mid-turn is read on load as live, the
		// same as working.
		persist = ag.status != apitype.Working
	default:
		// The claude CLI names its session only once the first turn
		// began: keep it as soon as it is known, so that a crash in that
		// turn still leaves it resumable. (Info is a field read under the
		// backend's lock: cheap enough for every delta.)
		if ag.be != nil && ag.status != apitype.Dead {
			persist = ag.be.Info().SessionID != ag.saved
		}
	}
	if later {
		// Started before the waiters are woken, not after: the
		// goroutine readied last is the one this P runs next, and
		// that should be agent_run's, not the save's. The save reads
		// the state once it has mu: all of it, as of this event.
		ag.saveInBackground()
	}
	if ev.Kind == event.Result || ev.Kind == event.Status {
		// What a waiter (agent_run) waits for: a turn's end, a death.
		// Not every event: a streamed turn would wake it per delta.
		ag.broadcastLocked()
	}
	newCeil := ag.newCeil
	ag.newCeil = false
	over := ag.seq > ag.diskCeil
	ag.mu.Unlock()

	switch {
	case over:
		// No seq goes out over the ceiling on disk: this one waits for
		// the record (at an agent's first event, or when the disk fell
		// behind the background save below).
		ag.save()
	case newCeil:
		// The ceiling was raised ahead of need (stampLocked): saved in
		// the background, off the agent's path, while the seqs under
		// the old one go out.
		ag.saveInBackground()
	}
	f.envs = append(f.envs, env)
	if idle != nil {
		f.envs = append(f.envs, *idle)
	}
	return persist
}

// seqBlock is how many seq numbers a record reserves at a time. The
// ceiling is raised when half of them are left, so that its save (an
// fsync) runs in the background while the other half go out, never on an
// event's way (issue 12: a save in the middle of a streamed turn held up
// every chunk behind it). A large block makes the saves rare (a record
// write is two fsyncs: at 4096, a 20000-delta turn made ten of them);
// its only price is a larger jump in seq after a crash, which readers
// take as they take any gap.
const seqBlock = 1 << 16

func (ag *Agent) stampLocked(ev event.Event) event.Envelope {
	ag.seq++
	if ag.seq+seqBlock/2 > ag.seqCeil {
		ag.seqCeil = ag.seq + seqBlock
		ag.newCeil = true
	}
	now := time.Now().UTC()
	ag.activity = now
	return ev.Stamp(ag.id, ag.seq, now)
}

// broadcastLocked wakes everyone waiting for a change of this agent's
// status or a turn's end (publishOne). A channel is made only when
// someone waits (changedLocked): not once per streamed chunk.
func (ag *Agent) broadcastLocked() {
	if ag.changed != nil {
		close(ag.changed)
		ag.changed = nil
	}
}

// changedLocked is a channel closed at the agent's next change of status
// or turn's end.
func (ag *Agent) changedLocked() chan struct{} {
	if ag.changed == nil {
		ag.changed = make(chan struct{})
	}
	return ag.changed
}

// logLocked logs env when authoritative, and says whether it did. pubMu
// and mu held, so seq order is log order is fan-out order. The first write
// that fails is a log fault (logFailedLocked), returned; after it nothing
// is logged.
func (ag *Agent) logLocked(env *event.Envelope) (logged bool, err error) {
	if ag.log == nil || ag.logErr != nil || !event.Authoritative(env.Kind, env.Data) {
		return false, nil
	}
	if err := ag.log.AppendEnvelope(env); err != nil {
		return false, ag.logFailedLocked(err)
	}
	return true, nil
}

// syncLog flushes the log to disk; pubMu held, mu not: agent_status, which
// takes mu and waits for the queue only up to a sync (flushToSync), is not
// held up by a slow disk.
func (ag *Agent) syncLog() error {
	ag.qmu.Lock()
	ag.syncing = true
	if ag.syncBegan != nil {
		close(ag.syncBegan)
		ag.syncBegan = nil
	}
	ag.qmu.Unlock()
	err := ag.log.Sync()
	ag.qmu.Lock()
	ag.syncing = false
	ag.qmu.Unlock()
	return err
}

// logFailedLocked makes err, a write or sync of the log that failed, the
// agent's log fault: nothing is logged from now on, and the agent is
// stopped. pubMu and mu held; it returns err.
func (ag *Agent) logFailedLocked(err error) error {
	ag.logErr = err
	if ag.book != nil {
		// The log no longer has every turn's end: the book keeps them
		// all from now on, rather than drop a turn the log lacks.
		ag.book.live = false
	}
	_ = ag.log.Close()
	ag.log = nil
	log.Printf("agent %s: event log: %v; stopping the agent", ag.id, err)
	ag.m.countLogFault(ag.id, err)
	// The stop cannot happen here: closing the backend waits for its
	// reader, which may be waiting for pubMu, held by our caller.
	go ag.logFault(err)
	return err
}

// logFault stops an agent whose log failed, rather than let it run
// unlogged: an error event on the bus (the log cannot have it), a failed
// result for each turn in flight, and the backend closed, which leaves
// the agent dead with the reason.
func (ag *Agent) logFault(err error) {
	ag.mu.Lock()
	turn, pending := ag.turn, ag.pending
	var open []int
	for n := turn - pending + 1; n <= turn; n++ {
		if t := ag.book.get(n); n > 0 && !ag.book.dropped(n) && (t == nil || !t.done) { // dropped: done
			open = append(open, n)
		}
	}
	ag.mu.Unlock()
	ag.publish(event.NewError(turn, "the event log cannot be written, so this event is not in it, and the agent is stopped: "+err.Error(),
		map[string]any{"reason": ReasonEventLog}))
	for _, n := range open {
		ag.publish(failedResult(event.New(event.Result, n, event.ResultData{}), err))
	}
	ag.close(ReasonEventLog + ": " + err.Error())
}

// failedResult is result ev, failed because the log lost the turn's
// events (err), with its usage kept.
func failedResult(ev event.Event, err error) event.Event {
	var d event.ResultData
	_ = json.Unmarshal(ev.Data, &d)
	d.StopReason = apitype.StopError
	d.Error = "event log: " + err.Error() + " (the turn's events are not all logged)"
	return event.New(event.Result, ev.Turn, d)
}

// fanOut hands envs to every publisher. Called only by the drain's
// holder (fanBuf.flush), after their logLocked, so seq order is log
// order is fan-out order.
func (ag *Agent) fanOut(envs []*event.Envelope) {
	ag.m.mu.Lock()
	pubs := ag.m.pubs
	ag.m.mu.Unlock()
	for _, p := range pubs {
		p.Publish(envs...)
	}
}
