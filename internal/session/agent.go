package session

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kaimon/kaimon/internal/apitype"
	"github.com/kaimon/kaimon/internal/backend"
	"github.com/kaimon/kaimon/internal/config"
	"github.com/kaimon/kaimon/internal/event"
	"github.com/kaimon/kaimon/internal/eventlog"
	"github.com/kaimon/kaimon/internal/gitwt"
	"github.com/kaimon/kaimon/internal/proc"
	"github.com/kaimon/kaimon/internal/redact"
	"github.com/kaimon/kaimon/internal/verbs"
)

// Agent is one session slot.
//
// Lock order. An agent's locks, and the manager's, are taken in this
// order and never the other way round:
//
//	Manager.mu → Agent.pubMu → Agent.saveMu → Agent.mu
//
// A goroutine holding one of them may take a later one, never an earlier
// one: publishOne saves the record (saveMu) with pubMu held, when an
// agent's seq passes the ceiling on disk, so a save must never take
// pubMu. Agent.qmu (the publish queue), Manager.faultMu and pidFile.mu
// (the live children, taken by start and die with none of the others
// held) are leaves: nothing else is taken while one is held.
// TestLockOrderStress runs open, close, forget and status at once under
// -race, for the detector and a deadlock to find a break of this order. The agent's drain
// (draining, queue.go) is not a mutex but a baton: its holder publishes,
// and takes pubMu and mu per event (publishOne), and Manager.mu with
// nothing else held (fanOut). A result's fsync is made with pubMu held
// and mu not (publishOne lets mu go for it), so that a slow disk holds
// up no reader of the agent's state. Files: agent.go (the slot and its FSM),
// publish.go (stamp, log, fan out), save.go (the record), queue.go (the
// drain), service.go (the verbs), manager.go (the set of agents).
type Agent struct {
	m  *Manager
	id string

	// The queue of events to publish, in order, and whether drain runs
	// (queue.go); qcond wakes an Emit waiting for room.
	qmu      sync.Mutex
	qcond    *sync.Cond
	queue    []queued
	draining bool
	// syncing: the drain is in a result's fsync (syncLog); syncBegan,
	// when not nil, is closed when the next one begins (flushToSync).
	syncing   bool
	syncBegan chan struct{}
	// held is the batch of the backend's reader (EmitBatched), fanned out
	// at its Flush; while it is not nil the reader holds the drain. Only
	// the reader's goroutine touches it.
	held *fanBuf

	// pubMu guards the log writer: stamping and logging happen under it
	// (publishOne), and die closes the log under it. Fan-out order is
	// kept by the agent's drain (draining, queue.go): one goroutine at a
	// time publishes an agent's events, drain or a holder of it (hold).
	pubMu sync.Mutex
	log   *eventlog.Writer
	// logErr is the write that failed, when the log could not take an
	// event: from then on nothing is logged, every result is failed, and
	// the agent is being stopped (logFault). Under pubMu and mu.
	logErr error

	// saveMu orders writes of the record, each of the state at its time.
	saveMu    sync.Mutex
	forgotten bool // the record is removed: write no more
	// bgSave: a background save is started and has not yet read the
	// state (saveInBackground); bgSaves counts those running.
	bgSave  atomic.Bool
	bgSaves sync.WaitGroup
	// ended is status == Dead, readable without mu: no background save
	// starts after it (a result published after the death, of a send
	// that lost the race with a close, must not Add to bgSaves while
	// die waits on it, nor write the record of a slot reopened since).
	ended atomic.Bool
	// resuming: a resume not yet started keeps the dead agent's record
	// as it is, so that a resume that fails changes nothing.
	resuming bool

	mu        sync.Mutex
	status    apitype.AgentState
	reason    string          // why a dead agent ended
	opts      backend.Options // the backend's, with the door and asker; its OpenArgs (as applied) are the record's
	model     string          // as opened, or as last switched
	resolved  string          // what the backend said model is (sonnet → claude-sonnet-5), "" before it said: see setInfoLocked
	created   time.Time
	activity  time.Time
	turn      int // last turn assigned
	seq       uint64
	seqCeil   uint64 // the record's SeqCeiling, as the next save writes it
	diskCeil  uint64 // the SeqCeiling of the record last written
	newCeil   bool   // seqCeil was raised: save (see publishOne)
	usage     event.UsageFigures
	pending   int // turns sent whose result has not come
	be        backend.Backend
	info      backend.Info
	saved     string        // the session id the record holds
	book      *book         // nil for an agent loaded from its record: read its log
	logStart  int64         // the log's size when the book was read from it
	changed   chan struct{} // closed on the next change; nil until a waiter asks (changedLocked)
	exitErr   error
	closedReq string // the reason given to close, "" if none
	// recordErr says why the last write of the record failed; "" once
	// one succeeds (save).
	recordErr string
	// wt is the agent's git worktree, nil when it was opened without one
	// (worktree.go).
	wt *gitwt.Info

	// redact takes the credentials of the agent's environment and its
	// door token out of what kaimon repeats of its output (set by
	// attach; nil: nothing to redact). Its stream state is the drain
	// holder's (publishRedacted); its Redactor anyone's.
	redact atomic.Pointer[redact.Stream]
}

// redactor is what redacts the agent's secrets from a string or an error
// (nil redacts nothing).
func (ag *Agent) redactor() *redact.Redactor { return ag.redact.Load().Redactor() }

// files are the paths of the agent's files.
func (ag *Agent) files() config.AgentFiles { return ag.m.paths.Agent(ag.id) }

func (m *Manager) newAgent(id string) *Agent {
	ag := &Agent{m: m, id: id}
	ag.qcond = sync.NewCond(&ag.qmu)
	return ag
}

var idRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// randomID draws an agent id: 8 hex digits, short enough for a person to
// read and type. It is not unique by itself (4 bytes: a collision is
// likely among some 77,000 ids); freshID checks each one drawn.
func randomID() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// start opens the reserved slot's log and record and starts its backend.
func (ag *Agent) start(ctx context.Context, be backend.Backend) error {
	m := ag.m
	// The book begins with the slot's last turn; agent_output reads the
	// earlier ones from the log (newLiveBook).
	b := newLiveBook()
	w, tail, err := eventlog.OpenEach(ag.files().Events, func(r *event.Record) { b.add(r.Kind, r.Turn, r.Data) })
	if err != nil {
		_ = be.Close() // never started: this frees what New took
		ag.mu.Lock()
		ag.status, ag.reason = apitype.Dead, ReasonStartFailed+": event log: "+err.Error()
		ag.ended.Store(true)
		ag.mu.Unlock()
		m.detach(ag)
		ag.save()
		if d := diskFault("agent_open: event log", err); d != nil {
			return d
		}
		return verbs.Errorf(verbs.CodeInternal, "agent_open: event log: %v", err)
	}
	ag.pubMu.Lock()
	ag.log = w
	ag.pubMu.Unlock()
	for _, bad := range tail.Bad {
		log.Printf("agent %s: event log %s %v", ag.id, w.Path(), bad)
		b.bad = append(b.bad, fmt.Sprintf("event log %s %v", w.Path(), bad))
	}
	ag.mu.Lock()
	// Continue numbering from the log (and from the ceiling of the slot's
	// earlier life, set by Open): seq is never reused, turns stay unique
	// per id, across reopen and daemon restarts.
	ag.seq = max(ag.seq, tail.LastSeq)
	ag.seqCeil = ag.seq
	ag.diskCeil = ag.seq
	ag.turn = tail.LastTurn
	ag.book = b
	ag.logStart = w.Size()
	ag.be = be
	ag.mu.Unlock()
	ag.transition(apitype.Starting, 0)

	sctx, cancel := context.WithTimeout(ctx, m.StartTimeout)
	err = be.Start(sctx)
	cancel()
	// The agent's stderr tail is in it: what the caller, the record's
	// reason and the error event say of it is redacted once, here.
	err = ag.redactor().Error(err)
	if err != nil {
		code := verbs.CodeUnavailable
		var ve *verbs.Error
		if errors.As(err, &ve) {
			code = ve.Code
		}
		ag.publish(event.NewError(0, "agent failed to start: "+err.Error(), nil))
		ag.mu.Lock()
		ag.be = nil
		ag.mu.Unlock()
		ag.die(ReasonStartFailed+": "+firstLine(err.Error()), err)
		if d := diskFault("agent_open", err); d != nil && ve == nil {
			// Writing its files (the generated MCP config, the stderr
			// log) failed: the program is not why.
			return d
		}
		return verbs.Errorf(code, "agent_open: %v", err)
	}
	if po, ok := be.(interface{ Process() proc.Identity }); ok {
		m.pids.set(ag.id, po.Process())
	}
	ag.mu.Lock()
	ag.setInfoLocked(be.Info())
	ag.mu.Unlock()
	ag.saveMu.Lock()
	ag.resuming = false
	ag.saveMu.Unlock()
	ag.transition(apitype.Idle, 0)
	return nil
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return s
}

// state is the agent's status.
func (ag *Agent) state() apitype.AgentState {
	ag.mu.Lock()
	defer ag.mu.Unlock()
	return ag.status
}

// Exited implements backend.Sink. It comes after the backend's last Emit,
// and ends the agent once that is published.
func (ag *Agent) Exited(err error) {
	err = ag.redactor().Error(err) // the agent's stderr tail: as in start
	ag.flush()
	ag.mu.Lock()
	if ag.be != nil {
		ag.setInfoLocked(ag.be.Info())
	}
	reason := ag.closedReq
	ag.mu.Unlock()
	if reason == "" {
		reason = ReasonExited
		if err != nil {
			log.Printf("agent %s exited: %v", ag.id, err)
			reason += ": " + firstLine(err.Error())
		}
	}
	ag.die(reason, err)
}

// die ends the agent: status dead with reason, its log closed, its record
// saved, its door shut.
func (ag *Agent) die(reason string, err error) {
	ag.mu.Lock()
	ag.exitErr = err
	ag.pending = 0
	already := ag.status == apitype.Dead
	if !already {
		ag.reason = reason
	}
	ag.mu.Unlock()
	if already {
		return
	}
	ag.transition(apitype.Dead, 0)
	// No save of this agent's is still to land once it is dead: a reopen
	// of the slot is another Agent, with a record of its own to write.
	ag.bgSaves.Wait()
	ag.mu.Lock()
	ag.seqCeil = ag.seq // the last one: a reopen numbers on from here
	ag.mu.Unlock()
	ag.pubMu.Lock()
	if ag.log != nil {
		_ = ag.log.Close()
		ag.log = nil
	}
	ag.pubMu.Unlock()
	ag.m.pids.remove(ag.id)
	ag.m.detach(ag)
	ag.m.retain()
}

// transition moves the FSM and publishes the status event. A transition
// the table does not allow is refused (and logged): it would be a bug.
func (ag *Agent) transition(to apitype.AgentState, turn int) bool {
	ev, ok := ag.move(to, turn)
	if ok {
		ag.publish(ev)
	}
	return ok
}

// move moves the FSM and returns the status event to publish; see
// transition.
func (ag *Agent) move(to apitype.AgentState, turn int) (event.Event, bool) {
	ag.mu.Lock()
	from := ag.status
	if !allowed(from, to) {
		ag.mu.Unlock()
		if from != to {
			log.Printf("agent %s: refused transition %q → %q", ag.id, from, to)
		}
		return event.Event{}, false
	}
	ag.status = to
	ag.ended.Store(to == apitype.Dead)
	if turn == 0 {
		turn = ag.turn
	}
	ag.mu.Unlock()
	return event.New(event.Status, turn, event.StatusData{Status: to}), true
}

func (ag *Agent) lastActivity() time.Time {
	ag.mu.Lock()
	defer ag.mu.Unlock()
	return ag.activity
}

// send sends a turn; with wait, it returns once the turn's first events
// (status, user_text, turn_started) are published.
func (ag *Agent) send(text string, wait bool) (int, error) {
	if strings.TrimSpace(text) == "" {
		return 0, verbs.BadArg("agent_send: text is empty")
	}
	ag.mu.Lock()
	switch ag.status {
	case apitype.Dead:
		ag.mu.Unlock()
		// --resume first: the conversation is what a reader wants back.
		return 0, verbs.WrongState("agent %s is dead; reopen it with its conversation: `kaimon open --id %s --resume` "+
			"(or afresh: `kaimon open --id %s DIR`)", ag.id, ag.id, ag.id)
	case apitype.Starting, "":
		ag.mu.Unlock()
		return 0, verbs.WrongState("agent %s is still starting; try again in a moment", ag.id)
	}
	ag.turn++
	n := ag.turn
	ag.pending++
	be := ag.be
	wasIdle := ag.status == apitype.Idle
	ag.mu.Unlock()
	if wasIdle {
		// Queued, not waited for: the turn's line goes to the agent
		// without waiting for the log write and fan-out of its status
		// (issue 12: they were on every turn's way). The queue keeps
		// the order: status, then what Send emits (user_text,
		// turn_started), then the turn's events, each logged before it
		// fans out.
		if ev, ok := ag.move(apitype.Working, n); ok {
			ag.enqueue(queued{ev: ev})
		}
	}
	if err := be.Send(n, text); err != nil {
		ag.publish(event.NewError(n, "sending turn: "+err.Error(), nil))
		ag.publish(event.New(event.Result, n, event.ResultData{StopReason: apitype.StopError, Error: err.Error()}))
		return 0, verbs.WrongState("agent %s: sending turn %d: %v", ag.id, n, err)
	}
	if wait {
		// What the backend emitted for the turn (its user_text) is
		// published when agent_send returns.
		ag.flush()
	}
	return n, nil
}

// replySoFar is turn n's reply as the book has it now: agent_run is not
// woken by each delta (broadcastLocked), so what it read when it last
// woke is not what has streamed since.
func (ag *Agent) replySoFar(n int) string {
	ag.mu.Lock()
	defer ag.mu.Unlock()
	if t := ag.book.get(n); t != nil {
		return t.lastMessage()
	}
	return ""
}

// output renders which of turn n (0: the latest) as agent_output reads
// it: from the book for the turns it keeps, from the log for those it
// dropped (and for which "all", every turn). bad names the lines of the
// log that are not records. read is false when the agent has no book
// (loaded from its record: the caller reads its log).
func (ag *Agent) output(n int, which string, tools bool) (text string, t *turnRec, tn int, bad []string, status apitype.AgentState, read bool) {
	ag.mu.Lock()
	b := ag.book
	status = ag.status
	if b == nil {
		ag.mu.Unlock()
		return "", nil, 0, nil, status, false
	}
	bad = slices.Clone(b.bad)
	if which != "all" && !b.dropped(n) {
		text, t, tn = b.text(n, which, tools)
		if t != nil {
			// What the caller reads of the turn, taken under the lock:
			// the live record goes on changing after it.
			t = &turnRec{done: t.done, usage: t.usage}
		}
		ag.mu.Unlock()
		return text, t, tn, bad, status, true
	}
	// The turns the book keeps, as they are now; the log has the others,
	// done before now, so read to its size after this.
	var kept map[int]*turnRec
	if which == "all" {
		kept = make(map[int]*turnRec, len(b.turns))
		for k, kt := range b.turns {
			kept[k] = kt.clone()
		}
	}
	last, logStart := b.last, ag.logStart
	ag.mu.Unlock()
	lb, lbad, err := ag.readLog(logStart, func(k int) bool { return which == "all" || k == n })
	if err != nil {
		lbad = append(lbad, fmt.Sprintf("event log %s: %v", ag.files().Events, err))
	}
	for k, kt := range kept {
		lb.turns[k] = kt
	}
	lb.last = last
	text, t, tn = lb.text(n, which, tools)
	return text, t, tn, append(bad, lbad...), status, true
}

// readLog reads the agent's log into a book of the turns keep takes, up to
// what is written when it is called. bad names the lines that are not
// records past logStart (those before it are in the live book's bad).
func (ag *Agent) readLog(logStart int64, keep func(turn int) bool) (b *book, bad []string, err error) {
	end := int64(-1) // the log is closed: all of it
	ag.pubMu.Lock()
	if ag.log != nil {
		end = ag.log.Size()
	}
	ag.pubMu.Unlock()
	return logBook(ag.files().Events, end, logStart, keep)
}

// logBook reads the event log at path, its first end bytes (all of it when
// end is negative), into a book of the turns keep takes (all when keep is
// nil). bad names the lines at or past from that are not records.
func logBook(path string, end, from int64, keep func(turn int) bool) (b *book, bad []string, err error) {
	b = newBook()
	err = eventlog.ScanBadTo(path, end, 0, func(r *event.Record) bool {
		if keep == nil || keep(r.Turn) {
			b.add(r.Kind, r.Turn, r.Data)
		}
		return true
	}, func(bl eventlog.Bad) {
		if bl.Offset >= from {
			bad = append(bad, fmt.Sprintf("event log %s %v", path, bl))
		}
	})
	return b, bad, err
}

// statusObj is the agent's agent_status object, with its pending
// permission requests.
func (ag *Agent) statusObj() verbs.AgentStatus {
	s := ag.lifeStatus()
	s.AgentID = ag.id
	if s.Status != apitype.Dead {
		s.PendingPermissions = ag.m.permits.Pending(ag.id)
	}
	return s
}

// setInfoLocked keeps what the backend says of its session, and the
// model it says the agent's model is when that is news: a backend that
// says only the model it was given (a resumed claude CLI before its first
// turn) leaves the resolved one as it was, which status and list show and
// the record keeps. ag.mu held.
func (ag *Agent) setInfoLocked(info backend.Info) {
	ag.info = info
	if info.Model != "" && info.Model != ag.model {
		ag.resolved = info.Model
	}
}

// lifeStatus is agent_status as the agent itself knows it.
func (ag *Agent) lifeStatus() verbs.AgentStatus {
	ag.mu.Lock()
	defer ag.mu.Unlock()
	if ag.be != nil && ag.status != apitype.Dead {
		ag.setInfoLocked(ag.be.Info())
	}
	info := ag.info
	model := ag.model
	if ag.resolved != "" {
		model = ag.resolved
	}
	return verbs.AgentStatus{
		Status: ag.status, Model: model, Cwd: ag.opts.Cwd, Turn: ag.turn,
		CreatedAt:    ag.created.UTC().Format(time.RFC3339Nano),
		LastActivity: ag.activity.UTC().Format(time.RFC3339Nano),
		SessionID:    info.SessionID, Transcript: info.Transcript,
		EventLog: ag.files().Events,
		Usage:    ag.usage, UsageNote: info.UsageNote, QueuesPrompts: info.QueuesPrompts,
		Reason: ag.reason, RecordError: ag.recordErr,
	}
}

func (ag *Agent) live() (backend.Backend, error) {
	ag.mu.Lock()
	defer ag.mu.Unlock()
	if ag.status == apitype.Dead || ag.be == nil {
		return nil, verbs.WrongState("agent %s is %s", ag.id, orDead(ag.status))
	}
	if ag.status == apitype.Starting {
		return nil, verbs.WrongState("agent %s is still starting; try again in a moment", ag.id)
	}
	return ag.be, nil
}

func orDead(s apitype.AgentState) apitype.AgentState {
	if s == "" {
		return apitype.Dead
	}
	return s
}

// close stops a live agent; reason is what its record will say.
func (ag *Agent) close(reason string) bool {
	ag.mu.Lock()
	if ag.status == apitype.Dead || ag.be == nil {
		ag.mu.Unlock()
		return false
	}
	ag.closedReq = reason
	be := ag.be
	ag.mu.Unlock()
	_ = be.Close()
	// The backend reports Exited; make sure the slot is dead even if it
	// did not.
	ag.die(reason, nil)
	return true
}
