package session

import (
	"fmt"
	"log"

	"github.com/kaimon/kaimon/internal/apitype"
	"github.com/kaimon/kaimon/internal/backend"
	"github.com/kaimon/kaimon/internal/event"
	"github.com/kaimon/kaimon/internal/eventlog"
)

// fromRecord fills a dead slot from its record.
func (ag *Agent) fromRecord(r *Record) {
	ag.mu.Lock()
	defer ag.mu.Unlock()
	ag.opts.OpenArgs, ag.model, ag.resolved = r.OpenArgs, r.Model, r.ResolvedModel
	ag.created, ag.activity = r.CreatedAt, r.LastActivity
	ag.turn, ag.usage = r.Turn, r.Usage
	ag.seqCeil, ag.diskCeil = r.SeqCeiling, r.SeqCeiling
	ag.info = backend.Info{SessionID: r.SessionID, Transcript: r.Transcript, Model: r.Model, QueuesPrompts: r.QueuesPrompts}
	ag.saved = r.SessionID
	ag.status, ag.reason = r.Status, r.Reason
	ag.wt = r.Git
}

// recordLocked is the agent's record as of now; ag.mu held.
func (ag *Agent) recordLocked() *Record {
	if ag.be != nil && ag.status != apitype.Dead {
		ag.setInfoLocked(ag.be.Info())
	}
	r := &Record{
		OpenArgs:  ag.opts.OpenArgs,
		SessionID: ag.info.SessionID, Transcript: ag.info.Transcript, QueuesPrompts: ag.info.QueuesPrompts,
		CreatedAt: ag.created.UTC(), LastActivity: ag.activity.UTC(),
		Turn: ag.turn, Usage: ag.usage, Status: ag.status, Reason: ag.reason,
		SeqCeiling: ag.seqCeil, Git: ag.wt,
	}
	r.Model, r.ResolvedModel = ag.model, ag.resolved
	if ag.status == apitype.Dead {
		r.SeqCeiling = ag.seq // no more envelopes: the exact last one
	}
	return r
}

// save writes the agent's record as it is now. Records are small and
// written when something a reader of the record needs changes (status,
// a turn's end, the model, the vendor's session), never per event.
func (ag *Agent) save() {
	ag.saveMu.Lock()
	defer ag.saveMu.Unlock()
	if ag.forgotten || ag.resuming {
		return
	}
	ag.mu.Lock()
	if ag.status == "" {
		ag.mu.Unlock()
		return // reserved, not opened: nothing to keep
	}
	r := ag.recordLocked()
	ag.saved = r.SessionID
	ag.mu.Unlock()
	err := writeRecord(ag.files().Record, r)
	if err != nil {
		log.Printf("agent %s: writing its record: %v", ag.id, err)
		ag.m.countFault(&ag.m.recFaults, ag.id, err)
	}
	// Tried, even if it failed: as before, one attempt per ceiling
	// raised, not one per event. A failure stays in the agent's status
	// (and doctor's) until a later save succeeds.
	ag.mu.Lock()
	ag.diskCeil = r.SeqCeiling
	ag.recordErr = ""
	if err != nil {
		ag.recordErr = "the agent's record could not be written: " + err.Error()
	}
	ag.mu.Unlock()
}

// closeLost writes the ending a lost daemon could not write for an agent
// that was live (was) in its record; see load.
func (ag *Agent) closeLost(was string) {
	w, tail, err := eventlog.Open(ag.files().Events)
	if err != nil {
		log.Printf("agent %s: event log: %v", ag.id, err)
	}
	ag.mu.Lock()
	if err == nil {
		ag.log = w
		ag.turn = max(ag.turn, tail.LastTurn)
	}
	// Past every seq the lost daemon may have published (see Record).
	ag.seq = max(ag.seqCeil, tail.LastSeq)
	if !allowed(ag.status, apitype.Dead) {
		ag.status = apitype.Working
	}
	turn := ag.turn
	ag.mu.Unlock()
	if n := len(tail.Unfinished); n > 0 {
		// The record is not saved at each turn's start: the log knows.
		was = fmt.Sprintf("working on turn %d", tail.Unfinished[n-1])
	}
	msg := fmt.Sprintf("kaimon-agentd was lost while this agent was %s (the daemon crashed or was killed), so the agent was stopped; "+
		"resume its conversation with `kaimon open --id %s --resume`", was, ag.id)
	// The first envelope numbered past the ceiling: marked, so that a
	// reader does not take the jump for envelopes lost.
	ag.publish(event.NewError(turn, msg, map[string]any{"reason": ReasonDaemonCrashed, event.RenumberedKey: true}))
	for _, n := range tail.Unfinished {
		ag.publish(event.New(event.Result, n, event.ResultData{StopReason: apitype.StopError,
			Error: "kaimon-agentd was lost during the turn (the daemon crashed or was killed)"}))
	}
	ag.die(ReasonDaemonCrashed, nil)
}

// saveInBackground saves the record in a goroutine of its own, which
// Shutdown waits for. One waiting to start is enough: it reads the state
// as of when it runs, so a change made before then is in its save.
func (ag *Agent) saveInBackground() {
	if ag.ended.Load() || !ag.bgSave.CompareAndSwap(false, true) {
		return // dead: die saved the record, and the slot may be another's
	}
	ag.m.saves.Add(1)
	ag.bgSaves.Add(1)
	go func() {
		defer ag.m.saves.Done()
		defer ag.bgSaves.Done()
		ag.bgSave.Store(false) // before save reads the state
		ag.save()
	}()
}
