// Package session is kaimon's session manager: it owns the agents, runs each
// one's status FSM, numbers turns, stamps and logs every event before it fans
// out, sums token usage, and keeps closed agents as dead for review.
package session

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kaimon/kaimon/internal/backend"
	"github.com/kaimon/kaimon/internal/config"
	"github.com/kaimon/kaimon/internal/event"
	"github.com/kaimon/kaimon/internal/eventlog"
	"github.com/kaimon/kaimon/internal/imaging"
	"github.com/kaimon/kaimon/internal/permit"
	"github.com/kaimon/kaimon/internal/proc"
	"github.com/kaimon/kaimon/internal/verbs"
)

// Status values of the FSM.
const (
	Starting = "starting"
	Idle     = "idle"
	Working  = "working"
	Dead     = "dead"
)

// transitions is the FSM: starting → idle ⇄ working → dead, and a dead slot
// may be reopened.
var transitions = map[string][]string{
	"":       {Starting},
	Starting: {Idle, Dead},
	Idle:     {Working, Dead},
	Working:  {Idle, Dead},
	Dead:     {Starting},
}

func allowed(from, to string) bool {
	for _, s := range transitions[from] {
		if s == to {
			return true
		}
	}
	return false
}

// Factory makes the backend for a model string.
type Factory func(o backend.Options, sink backend.Sink) (backend.Backend, error)

// Publisher receives every envelope, deltas included, in seq order per agent,
// after it has been logged. The bus plugs in here.
type Publisher interface {
	// Publish hands on envs, in order; a batch lets a publisher wake
	// its consumers once for all of them. It must not keep envs (the
	// slice nor the envelopes) after it returns.
	Publish(envs ...*event.Envelope)
}

// Manager owns every agent. It implements verbs.Service.
type Manager struct {
	paths   config.Paths
	cfg     config.Config
	env     []string
	factory Factory
	pids    *pidFile

	mu      sync.Mutex
	agents  map[string]*Agent
	pubs    []Publisher
	closing bool

	// saves counts the record saves running in the background
	// (saveInBackground); Shutdown waits for them.
	saves sync.WaitGroup

	// faults counts the event log writes that failed (LogFaults).
	faultMu sync.Mutex
	faults  logFaults

	// StartTimeout bounds how long agent_open waits for readiness.
	StartTimeout time.Duration

	// permits holds the permission requests agents wait on (permission.go);
	// PermitTimeout is how long one waits for agent_permit before it is
	// denied.
	permits       *permit.Registry
	PermitTimeout time.Duration
	door          Door
}

// New makes a manager. It first reaps agent processes a previous daemon
// left behind (those the pid file names with a matching start time) and
// removes the configs generated for them (stale.go), then
// loads every agent's record (registry.go), closing those a lost daemon
// left live.
func New(paths config.Paths, cfg config.Config, env []string, factory Factory) (*Manager, error) {
	if err := os.MkdirAll(paths.CacheDir, 0o700); err != nil {
		return nil, fmt.Errorf("creating cache dir: %w", err)
	}
	reap(paths.PidFile())
	removeStale(paths.CacheDir)
	m := &Manager{
		paths: paths, cfg: cfg, env: env, factory: factory,
		pids:          &pidFile{path: paths.PidFile(), live: map[string]proc.Identity{}},
		agents:        map[string]*Agent{},
		StartTimeout:  90 * time.Second,
		permits:       permit.New(),
		PermitTimeout: cfg.PermissionWait(),
	}
	m.pids.writeLocked()
	m.load()
	return m, nil
}

// load brings back the agents of earlier daemons from their records, as
// dead agents. One still live in its record lost its daemon without being
// closed (a clean exit closes every agent first): the daemon crashed or
// was killed, and its process has just been reaped. Its log gets the
// records that daemon could not write — an error saying what happened, a
// failed result for each turn in flight, status dead — so that no reader
// waits for them forever.
func (m *Manager) load() {
	recs, bad := readRecords(m.paths.CacheDir)
	for _, err := range bad {
		log.Printf("%v", err)
	}
	for _, r := range recs {
		ag := m.newAgent(r.ID)
		ag.fromRecord(r)
		if r.Status != Dead {
			ag.closeLost(r.Status)
		}
		m.agents[r.ID] = ag
	}
	m.retain()
}

// AddPublisher adds a fan-out target for every envelope.
func (m *Manager) AddPublisher(p Publisher) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.pubs = append(m.pubs, p)
}

// Agent is one session slot.
type Agent struct {
	m  *Manager
	id string

	// The queue of events to publish, in order, and whether drain runs
	// (queue.go); qcond wakes an Emit waiting for room.
	qmu      sync.Mutex
	qcond    *sync.Cond
	queue    []queued
	draining bool
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
	status    string
	reason    string          // why a dead agent ended
	args      verbs.OpenArgs  // the open options as applied: the record's
	opts      backend.Options // the backend's, with the door and asker
	model     string          // as opened, or as last switched
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
}

func (m *Manager) newAgent(id string) *Agent {
	ag := &Agent{m: m, id: id}
	ag.qcond = sync.NewCond(&ag.qmu)
	return ag
}

var idRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

func newID() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// Open implements agent_open. Everything that can be checked is checked
// before anything is written: a refused open leaves no slot, no record and
// no log. The slot is reserved first (so that two opens of one id cannot
// both win), and given back if the options do not hold.
func (m *Manager) Open(ctx context.Context, a *verbs.OpenArgs) (*verbs.OpenResult, error) {
	id := a.ID
	if id == "" {
		if a.Resume {
			return nil, verbs.BadArg("agent_open: resume needs the id of the dead agent to resume (kaimon open --id ID --resume)")
		}
		id = newID()
	} else if err := m.checkID(id); err != nil {
		return nil, err
	}

	ag := m.newAgent(id)
	old, err := m.reserve(ag)
	if err != nil {
		return nil, err
	}
	args, opts, err := m.openOptions(id, *a, old)
	var be backend.Backend
	if err == nil {
		ag.mu.Lock()
		ag.args, ag.opts, ag.model = args, opts, args.Model
		ag.mu.Unlock()
		m.attach(ag)
		ag.mu.Lock()
		opts = ag.opts
		ag.mu.Unlock()
		be, err = m.factory(opts, ag)
		if err != nil {
			m.detach(ag)
			err = openError(err)
		}
	}
	if err != nil {
		m.unreserve(ag, old)
		return nil, err
	}
	// A reopened slot numbers on from its earlier life (seq from its
	// ceiling, turns from the log, in start); a resumed one also keeps
	// its created_at and usage.
	now := time.Now()
	created, usage, seq := now, event.UsageFigures{}, uint64(0)
	if old != nil {
		old.mu.Lock()
		seq = old.seqCeil
		if a.Resume {
			created, usage = old.created, old.usage
		}
		old.mu.Unlock()
	}
	ag.mu.Lock()
	ag.created, ag.usage, ag.seq, ag.activity = created, usage, seq, now
	ag.mu.Unlock()
	ag.saveMu.Lock()
	ag.resuming = a.Resume
	ag.saveMu.Unlock()
	if err := ag.start(ctx, be); err != nil {
		if a.Resume {
			// The agent is as it was: dead, with its record and the
			// session a later resume may still find. Its log says what
			// this attempt met.
			m.unreserve(ag, old)
		}
		return nil, err
	}
	return &verbs.OpenResult{AgentID: id}, nil
}

// reserve puts ag in its id's slot, which must be free or dead, and
// returns the dead agent it displaces.
func (m *Manager) reserve(ag *Agent) (old *Agent, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closing {
		return nil, verbs.WrongState("kaimon-agentd is shutting down")
	}
	old = m.agents[ag.id]
	if old != nil {
		if st := old.state(); st != Dead {
			if st == "" {
				st = "being opened"
			}
			return nil, verbs.WrongState("agent %s is already open (%s); close it first or pick another id", ag.id, st)
		}
	}
	m.agents[ag.id] = ag
	return old, nil
}

// unreserve gives the slot back to the agent that held it.
func (m *Manager) unreserve(ag, old *Agent) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.agents[ag.id] != ag {
		return
	}
	if old != nil {
		m.agents[ag.id] = old
	} else {
		delete(m.agents, ag.id)
	}
}

// openOptions validates agent_open's arguments a into the options as
// applied (kept in the record) and the backend's. To resume, the dead
// agent old's record supplies what a left out, and its vendor session is
// what the backend continues.
func (m *Manager) openOptions(id string, a verbs.OpenArgs, old *Agent) (verbs.OpenArgs, backend.Options, error) {
	a.ID = id
	session := ""
	if a.Resume {
		var err error
		if session, err = inherit(&a, old); err != nil {
			return a, backend.Options{}, err
		}
		a.Resume = false // a record says what is, not how it came to be
	}
	verbs.ByName("agent_open").ApplyDefaults(&a) // for callers in this process, and after inherit
	if a.Cwd == "" {
		return a, backend.Options{}, verbs.BadArg("agent_open: cwd is required")
	}
	cwd, err := filepath.Abs(a.Cwd)
	if err != nil {
		return a, backend.Options{}, verbs.BadArg("agent_open: cwd %q: %v", a.Cwd, err)
	}
	if st, err := os.Stat(cwd); err != nil || !st.IsDir() {
		return a, backend.Options{}, verbs.BadArg("agent_open: cwd %s does not exist or is not a directory", cwd)
	}
	a.Cwd = cwd
	opts := m.backendOptions(&a)
	opts.Resume = session
	// The one place the policy is resolved: the agent carries it.
	if _, err := opts.ResolvePolicy(); err != nil {
		return a, backend.Options{}, verbs.BadArg("agent_open: %v", err)
	}
	return a, opts, nil
}

// backendOptions are the options a backend is made with for an agent
// opened with a.
func (m *Manager) backendOptions(a *verbs.OpenArgs) backend.Options {
	o := backend.Options{
		ID: a.ID, Cwd: a.Cwd, Model: a.Model, Effort: a.Effort,
		Permission: a.Permission, PermissionMode: a.PermissionMode,
		AllowedTools: a.AllowedTools, Only: a.Only,
		MCPConfig: a.MCPConfig, SystemPrompt: a.SystemPrompt,
		CacheDir: m.paths.CacheDir,
		Env:      append(append([]string{}, m.env...), "KAIMON_AGENT_SESSION="+a.ID),
	}
	if a.DisallowedTools != nil {
		o.DisallowedTools = append([]string{}, (*a.DisallowedTools)...)
	}
	return o
}

// inherit fills the options a resuming open left out from the dead
// agent's record, refuses what cannot be resumed, and returns the vendor's
// session to continue.
func inherit(a *verbs.OpenArgs, old *Agent) (session string, err error) {
	if old == nil {
		return "", verbs.NotFound("agent_open: no agent %q to resume: see `kaimon list` for the agents kaimon knows", a.ID)
	}
	old.mu.Lock()
	defer old.mu.Unlock()
	if old.info.SessionID == "" {
		return "", verbs.WrongState("agent_open: agent %s has no conversation to resume (it never began one); open it without --resume for a fresh one", a.ID)
	}
	rec := old.args
	rec.Model = old.model
	if a.Cwd != "" {
		if cwd, err := filepath.Abs(a.Cwd); err != nil || cwd != rec.Cwd {
			return "", verbs.BadArg("agent_open: agent %s worked in %s, and its conversation belongs there: resume it without a cwd (or with that one)", a.ID, rec.Cwd)
		}
	}
	verbs.ByName("agent_open").Inherit(a, &rec, "id", "resume")
	return old.info.SessionID, nil
}

// openError is a backend's refusal to be made, as the verb reports it: an
// option it cannot take, or its program missing, is the caller's to fix
// (a bad argument), unless the backend said otherwise.
func openError(err error) error {
	var ve *verbs.Error
	if errors.As(err, &ve) {
		return verbs.Errorf(ve.Code, "agent_open: %s", ve.Message)
	}
	return verbs.BadArg("agent_open: %v", err)
}

// start opens the reserved slot's log and record and starts its backend.
func (ag *Agent) start(ctx context.Context, be backend.Backend) error {
	m := ag.m
	// The book begins with the slot's last turn; agent_output reads the
	// earlier ones from the log (newLiveBook).
	b := newLiveBook()
	w, tail, err := eventlog.OpenEach(eventlog.Path(m.paths.CacheDir, ag.id), func(r *event.Record) { b.add(r.Kind, r.Turn, r.Data) })
	if err != nil {
		_ = be.Close() // never started: this frees what New took
		ag.mu.Lock()
		ag.status, ag.reason = Dead, ReasonStartFailed+": event log: "+err.Error()
		ag.ended.Store(true)
		ag.mu.Unlock()
		m.detach(ag)
		ag.save()
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
	ag.transition(Starting, 0)

	sctx, cancel := context.WithTimeout(ctx, m.StartTimeout)
	err = be.Start(sctx)
	cancel()
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
		return verbs.Errorf(code, "agent_open: %v", err)
	}
	if po, ok := be.(interface{ Process() proc.Identity }); ok {
		m.pids.set(ag.id, po.Process())
	}
	ag.mu.Lock()
	ag.info = be.Info()
	ag.mu.Unlock()
	ag.saveMu.Lock()
	ag.resuming = false
	ag.saveMu.Unlock()
	ag.transition(Idle, 0)
	return nil
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return s
}

// state is the agent's status.
func (ag *Agent) state() string {
	ag.mu.Lock()
	defer ag.mu.Unlock()
	return ag.status
}

// Exited implements backend.Sink. It comes after the backend's last Emit,
// and ends the agent once that is published.
func (ag *Agent) Exited(err error) {
	ag.flush()
	ag.mu.Lock()
	if ag.be != nil {
		ag.info = ag.be.Info()
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
	already := ag.status == Dead
	if !already {
		ag.reason = reason
	}
	ag.mu.Unlock()
	if already {
		return
	}
	ag.transition(Dead, 0)
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

// fromRecord fills a dead slot from its record.
func (ag *Agent) fromRecord(r *Record) {
	ag.mu.Lock()
	defer ag.mu.Unlock()
	ag.args, ag.model = r.OpenArgs, r.Model
	ag.created, ag.activity = r.CreatedAt, r.LastActivity
	ag.turn, ag.usage = r.Turn, r.Usage
	ag.seqCeil, ag.diskCeil = r.SeqCeiling, r.SeqCeiling
	ag.info = backend.Info{SessionID: r.SessionID, Transcript: r.Transcript, Model: r.Model, QueuesPrompts: r.QueuesPrompts}
	ag.saved = r.SessionID
	ag.status, ag.reason = r.Status, r.Reason
}

// recordLocked is the agent's record as of now; ag.mu held.
func (ag *Agent) recordLocked() *Record {
	if ag.be != nil && ag.status != Dead {
		ag.info = ag.be.Info()
	}
	r := &Record{
		OpenArgs:  ag.args,
		SessionID: ag.info.SessionID, Transcript: ag.info.Transcript, QueuesPrompts: ag.info.QueuesPrompts,
		CreatedAt: ag.created.UTC(), LastActivity: ag.activity.UTC(),
		Turn: ag.turn, Usage: ag.usage, Status: ag.status, Reason: ag.reason,
		SeqCeiling: ag.seqCeil,
	}
	r.Model = ag.model
	if ag.status == Dead {
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
	err := writeRecord(RecordPath(ag.m.paths.CacheDir, ag.id), r)
	if err != nil {
		log.Printf("agent %s: writing its record: %v", ag.id, err)
	}
	// Tried, even if it failed (logged): as before, one attempt per
	// ceiling raised, not one per event.
	ag.mu.Lock()
	ag.diskCeil = r.SeqCeiling
	ag.mu.Unlock()
}

// closeLost writes the ending a lost daemon could not write for an agent
// that was live (was) in its record; see load.
func (ag *Agent) closeLost(was string) {
	w, tail, err := eventlog.Open(eventlog.Path(ag.m.paths.CacheDir, ag.id))
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
	if !allowed(ag.status, Dead) {
		ag.status = Working
	}
	turn := ag.turn
	ag.mu.Unlock()
	if n := len(tail.Unfinished); n > 0 {
		// The record is not saved at each turn's start: the log knows.
		was = fmt.Sprintf("working on turn %d", tail.Unfinished[n-1])
	}
	msg := fmt.Sprintf("kaimon-agentd was lost while this agent was %s (the daemon crashed or was killed), so the agent was stopped; "+
		"resume its conversation with `kaimon open --id %s --resume`", was, ag.id)
	ag.publish(event.NewError(turn, msg, map[string]any{"reason": ReasonDaemonCrashed}))
	for _, n := range tail.Unfinished {
		ag.publish(event.New(event.Result, n, event.ResultData{StopReason: event.StopError,
			Error: "kaimon-agentd was lost during the turn (the daemon crashed or was killed)"}))
	}
	ag.die(ReasonDaemonCrashed, nil)
}

// transition moves the FSM and publishes the status event. A transition
// the table does not allow is refused (and logged): it would be a bug.
func (ag *Agent) transition(to string, turn int) bool {
	ev, ok := ag.move(to, turn)
	if ok {
		ag.publish(ev)
	}
	return ok
}

// move moves the FSM and returns the status event to publish; see
// transition.
func (ag *Agent) move(to string, turn int) (event.Event, bool) {
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
	ag.ended.Store(to == Dead)
	if turn == 0 {
		turn = ag.turn
	}
	ag.mu.Unlock()
	return event.New(event.Status, turn, event.StatusData{Status: to}), true
}

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
	if err := ag.logLocked(&env); err != nil && ev.Kind == event.Result {
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
			if ag.pending == 0 && ag.status == Working && allowed(Working, Idle) {
				ag.status = Idle
				e := ag.stampLocked(event.New(event.Status, ev.Turn, event.StatusData{Status: Idle}))
				_ = ag.logLocked(&e)
				idle = &e
			}
		}
	case event.Status:
		// Not for working: the turn's result saves what it changes, and
		// a record that says idle mid-turn is read on load as live, the
		// same as working.
		persist = ag.status != Working
	default:
		// The claude CLI names its session only once the first turn
		// began: keep it as soon as it is known, so that a crash in that
		// turn still leaves it resumable. (Info is a field read under the
		// backend's lock: cheap enough for every delta.)
		if ag.be != nil && ag.status != Dead {
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

// logLocked logs env when authoritative, and flushes the log to disk after
// a result (once per turn: see the eventlog package). pubMu and mu held,
// so seq order is log order is fan-out order. The first write that fails
// is a log fault (logFault), returned; after it nothing is logged.
func (ag *Agent) logLocked(env *event.Envelope) error {
	if ag.log == nil || ag.logErr != nil || !event.Authoritative(env.Kind, env.Data) {
		return nil
	}
	err := ag.log.AppendEnvelope(env)
	if err == nil && env.Kind == event.Result {
		err = ag.log.Sync()
	}
	if err == nil {
		return nil
	}
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
	d.StopReason = event.StopError
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

// retain applies dead_kept, when the user set it: the oldest dead agents
// beyond that many are forgotten (their logs stay). Unset, dead agents are
// kept until agent_forget.
func (m *Manager) retain() {
	if m.cfg.DeadKept <= 0 {
		return
	}
	m.mu.Lock()
	var dead []*Agent
	for _, ag := range m.agents {
		if ag.state() == Dead {
			dead = append(dead, ag)
		}
	}
	m.mu.Unlock()
	if len(dead) <= m.cfg.DeadKept {
		return
	}
	sort.Slice(dead, func(i, j int) bool { return dead[i].lastActivity().Before(dead[j].lastActivity()) })
	for _, ag := range dead[:len(dead)-m.cfg.DeadKept] {
		m.forget(ag, false)
	}
}

func (ag *Agent) lastActivity() time.Time {
	ag.mu.Lock()
	defer ag.mu.Unlock()
	return ag.activity
}

// forget removes a dead agent's slot and record, and with logs its logs,
// and says whether it did. It does nothing unless ag still holds its slot,
// dead and not the stand-in of a resume under way: the slot may have been
// reopened since ag was picked, and the files are then the new agent's.
// m.mu is held throughout, so no open can take the slot meanwhile.
func (m *Manager) forget(ag *Agent, logs bool) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.agents[ag.id] != ag || ag.state() != Dead {
		return false
	}
	ag.saveMu.Lock()
	defer ag.saveMu.Unlock()
	if ag.resuming {
		return false
	}
	delete(m.agents, ag.id)
	ag.forgotten = true
	dir := m.paths.CacheDir
	paths := []string{RecordPath(dir, ag.id)}
	if logs {
		// <id>.history.jsonl: a local model agent's conversation
		// (backend/local), which kaimon holds as a vendor would.
		paths = append(paths, eventlog.Path(dir, ag.id), filepath.Join(dir, ag.id+".log"), filepath.Join(dir, ag.id+"-mcp.json"),
			filepath.Join(dir, ag.id+".history.jsonl"))
	}
	for _, p := range paths {
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			log.Printf("forgetting agent %s: %v", ag.id, err)
		}
	}
	return true
}

// Forget implements agent_forget. The whole selection is checked first: a
// live or unknown id named forgets nothing.
func (m *Manager) Forget(ctx context.Context, a *verbs.ForgetArgs) (*verbs.ForgetResult, error) {
	var age time.Duration
	if a.OlderThan != "" {
		d, err := ParseAge(a.OlderThan)
		if err != nil {
			return nil, verbs.BadArg("agent_forget: %v", err)
		}
		age = d
	}
	if len(a.AgentIDs) == 0 && !a.AllDead && age == 0 {
		return nil, verbs.BadArg("agent_forget: name the dead agents to forget, or select them with all_dead or older_than")
	}
	m.mu.Lock()
	var picked []*Agent
	seen := map[string]bool{}
	for _, id := range a.AgentIDs {
		ag := m.agents[id]
		switch {
		case ag == nil:
			m.mu.Unlock()
			return nil, verbs.NotFound("agent_forget: no agent %q: see `kaimon list`; nothing was forgotten", id)
		case ag.state() != Dead:
			m.mu.Unlock()
			st := ag.state()
			if st == "" {
				st = "being opened"
			}
			return nil, verbs.WrongState("agent_forget: agent %s is %s: close it first (kaimon close %s); nothing was forgotten", id, st, id)
		}
		if !seen[id] {
			seen[id] = true
			picked = append(picked, ag)
		}
	}
	if len(a.AgentIDs) == 0 {
		for id, ag := range m.agents {
			if ag.state() == Dead {
				seen[id] = true
				picked = append(picked, ag)
			}
		}
	}
	m.mu.Unlock()
	cutoff := time.Now().Add(-age)
	res := &verbs.ForgetResult{Forgotten: []string{}}
	for _, ag := range picked {
		if age > 0 && !ag.lastActivity().Before(cutoff) {
			continue
		}
		if m.forget(ag, a.Logs) {
			res.Forgotten = append(res.Forgotten, ag.id)
		}
	}
	sort.Strings(res.Forgotten)
	return res, nil
}

func (m *Manager) get(id string) (*Agent, error) {
	if id == "" {
		return nil, verbs.BadArg("agent_id is required")
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	ag := m.agents[id]
	if ag == nil {
		return nil, verbs.NotFound("no agent %q: see `kaimon list` for the agents kaimon knows", id)
	}
	return ag, nil
}

// Send implements agent_send.
func (m *Manager) Send(ctx context.Context, a *verbs.SendArgs) (*verbs.SendResult, error) {
	ag, err := m.get(a.AgentID)
	if err != nil {
		return nil, err
	}
	n, err := ag.send(a.Text, true)
	if err != nil {
		return nil, err
	}
	return &verbs.SendResult{Turn: n}, nil
}

// send sends a turn; with wait, it returns once the turn's first events
// (status, user_text, turn_started) are published.
func (ag *Agent) send(text string, wait bool) (int, error) {
	if strings.TrimSpace(text) == "" {
		return 0, verbs.BadArg("agent_send: text is empty")
	}
	ag.mu.Lock()
	switch ag.status {
	case Dead:
		ag.mu.Unlock()
		return 0, verbs.WrongState("agent %s is dead; reopen it with `kaimon open --id %s DIR`", ag.id, ag.id)
	case Starting, "":
		ag.mu.Unlock()
		return 0, verbs.WrongState("agent %s is still starting; try again in a moment", ag.id)
	}
	ag.turn++
	n := ag.turn
	ag.pending++
	be := ag.be
	wasIdle := ag.status == Idle
	ag.mu.Unlock()
	if wasIdle {
		// Queued, not waited for: the turn's line goes to the agent
		// without waiting for the log write and fan-out of its status
		// (issue 12: they were on every turn's way). The queue keeps
		// the order: status, then what Send emits (user_text,
		// turn_started), then the turn's events, each logged before it
		// fans out.
		if ev, ok := ag.move(Working, n); ok {
			ag.enqueue(queued{ev: ev})
		}
	}
	if err := be.Send(n, text); err != nil {
		ag.publish(event.NewError(n, "sending turn: "+err.Error(), nil))
		ag.publish(event.New(event.Result, n, event.ResultData{StopReason: event.StopError, Error: err.Error()}))
		return 0, verbs.WrongState("agent %s: sending turn %d: %v", ag.id, n, err)
	}
	if wait {
		// What the backend emitted for the turn (its user_text) is
		// published when agent_send returns.
		ag.flush()
	}
	return n, nil
}

// Run implements agent_run.
func (m *Manager) Run(ctx context.Context, a *verbs.RunArgs) (*verbs.RunResult, error) {
	ag, err := m.get(a.AgentID)
	if err != nil {
		return nil, err
	}
	timeout := a.Timeout // in verbs.TimeoutRange: Decode checked it
	// Not waiting for the turn's first events to be published: its
	// result comes after them in the agent's queue (queue.go).
	n, err := ag.send(a.Text, false)
	if err != nil {
		return nil, err
	}
	timer := time.NewTimer(time.Duration(timeout * float64(time.Second)))
	defer timer.Stop()
	for {
		ag.mu.Lock()
		t := ag.book.get(n)
		dropped := ag.book.dropped(n)
		status := ag.status
		ch := ag.changedLocked()
		logStart := ag.logStart
		var done bool
		var text, stop, msg string
		if t != nil {
			done, text, stop, msg = t.done, t.lastMessage(), t.stopReason, t.errMsg
		}
		ag.mu.Unlock()
		if dropped {
			// Done, and dropped from the book for a later turn that
			// ended before this call looked: the log has it.
			lb, _, lerr := ag.readLog(logStart, func(k int) bool { return k == n })
			if t = lb.get(n); t == nil || !t.done {
				return nil, verbs.Errorf(verbs.CodeInternal, "agent %s turn %d ended, and its end is not in the event log: %v", ag.id, n, lerr)
			}
			done, text, stop, msg = t.done, t.lastMessage(), t.stopReason, t.errMsg
		}
		// done is set once the result is in the log and fsynced
		// (publishOne): the answer may go. Its fan-out and the record's
		// save follow in the agent's queue and the background, not on
		// the caller's way (issue 12).
		switch {
		case done && event.Failed(stop):
			if msg == "" {
				msg = "stop reason " + stop
			}
			return nil, &verbs.Error{Code: verbs.CodeTurnFailed, Message: fmt.Sprintf("agent %s turn %d failed: %s", ag.id, n, msg), Text: text}
		case done:
			return &verbs.RunResult{Text: text}, nil
		case status == Dead:
			return nil, &verbs.Error{Code: verbs.CodeTurnFailed, Message: fmt.Sprintf("agent %s died during turn %d", ag.id, n), Text: text}
		}
		select {
		case <-ch:
		case <-timer.C:
			return nil, &verbs.Error{Code: verbs.CodeTimeout, Text: ag.replySoFar(n),
				Message: fmt.Sprintf("agent %s turn %d did not end within %gs; it is still running (kaimon output %s, or kaimon interrupt %s)", ag.id, n, timeout, ag.id, ag.id)}
		case <-ctx.Done():
			return nil, &verbs.Error{Code: verbs.CodeTimeout, Text: ag.replySoFar(n), Message: fmt.Sprintf("agent_run: the caller went away: %v", ctx.Err())}
		}
	}
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

// Output implements agent_output.
func (m *Manager) Output(ctx context.Context, a *verbs.OutputArgs) (*verbs.OutputResult, error) {
	which, maxChars := a.Which, a.MaxChars // in their ranges: Decode checked them
	var (
		text   string
		t      *turnRec
		n      int
		status = Dead
		bad    []string
		read   bool
	)
	ag, err := m.get(a.AgentID)
	if err == nil {
		ag.flush() // what the agent emitted before the call is reflected
		text, t, n, bad, status, read = ag.output(a.Turn, which, a.IncludeTools)
	}
	if !read {
		// An agent of an earlier daemon (or a forgotten one whose log was
		// kept) is read from its log.
		var ve *verbs.Error
		if err != nil && (!errors.As(err, &ve) || ve.Code != verbs.CodeNotFound || !idRE.MatchString(a.AgentID)) {
			return nil, err
		}
		b, lbad, serr := logBook(eventlog.Path(m.paths.CacheDir, a.AgentID), -1, 0, nil)
		if serr != nil {
			if err == nil {
				err = verbs.NotFound("agent %s has no event log: %v", a.AgentID, serr)
			}
			return nil, err
		}
		text, t, n = b.text(a.Turn, which, a.IncludeTools)
		bad = lbad
	}
	if a.Turn > 0 && t == nil {
		return nil, verbs.NotFound("agent %s has no turn %d", a.AgentID, a.Turn)
	}
	res := &verbs.OutputResult{AgentID: a.AgentID, Turn: n, Which: which, Status: status}
	if t != nil {
		res.Done = t.done
		res.Usage = t.usage
	}
	if len(bad) > 0 {
		res.LogErrors = append([]string(nil), bad...)
	}
	if r := []rune(text); len(r) > maxChars {
		res.Truncated = true
		res.DroppedChars = len(r) - maxChars
		text = string(r[:maxChars])
	}
	res.Text = text
	return res, nil
}

// output renders which of turn n (0: the latest) as agent_output reads
// it: from the book for the turns it keeps, from the log for those it
// dropped (and for which "all", every turn). bad names the lines of the
// log that are not records. read is false when the agent has no book
// (loaded from its record: the caller reads its log).
func (ag *Agent) output(n int, which string, tools bool) (text string, t *turnRec, tn int, bad []string, status string, read bool) {
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
		lbad = append(lbad, fmt.Sprintf("event log %s: %v", eventlog.Path(ag.m.paths.CacheDir, ag.id), err))
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
	return logBook(eventlog.Path(ag.m.paths.CacheDir, ag.id), end, logStart, keep)
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

// Status implements agent_status.
func (m *Manager) Status(ctx context.Context, a *verbs.StatusArgs) (*verbs.Status, error) {
	ag, err := m.get(a.AgentID)
	if err != nil {
		return nil, err
	}
	ag.flush() // what the agent emitted before the call is reflected
	s := ag.statusObj()
	return &s, nil
}

// statusObj is the agent's agent_status object, with its pending
// permission requests.
func (ag *Agent) statusObj() verbs.Status {
	s := ag.lifeStatus()
	if s.Status != Dead {
		s.PendingPermissions = ag.m.permits.Pending(ag.id)
	}
	return s
}

// lifeStatus is agent_status as the agent itself knows it.
func (ag *Agent) lifeStatus() verbs.Status {
	ag.mu.Lock()
	defer ag.mu.Unlock()
	info := ag.info
	if ag.be != nil && ag.status != Dead {
		info = ag.be.Info()
		ag.info = info
	}
	model := ag.model
	if info.Model != "" {
		model = info.Model
	}
	return verbs.Status{
		Status: ag.status, Model: model, Cwd: ag.args.Cwd, Turn: ag.turn,
		CreatedAt:    ag.created.UTC().Format(time.RFC3339Nano),
		LastActivity: ag.activity.UTC().Format(time.RFC3339Nano),
		SessionID:    info.SessionID, Transcript: info.Transcript,
		EventLog: eventlog.Path(ag.m.paths.CacheDir, ag.id),
		Usage:    ag.usage, QueuesPrompts: info.QueuesPrompts,
		Reason: ag.reason,
	}
}

// SetModel implements agent_set_model.
func (m *Manager) SetModel(ctx context.Context, a *verbs.SetModelArgs) (*verbs.SetModelResult, error) {
	ag, err := m.get(a.AgentID)
	if err != nil {
		return nil, err
	}
	if strings.TrimSpace(a.Model) == "" {
		return nil, verbs.BadArg("agent_set_model: model is required")
	}
	be, err := ag.live()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	ok, err := be.SetModel(ctx, a.Model)
	if err != nil {
		ag.publish(event.NewError(0, "set_model: "+err.Error(), nil))
	}
	if ok {
		// The record keeps the model in the backend's own full form
		// (acp:<agent>:<model> for an ACP agent, whatever the caller
		// wrote), which is what a resume passes back to it.
		model := a.Model
		if full := be.Info().Model; full != "" {
			model = full
		}
		ag.mu.Lock()
		ag.model = model
		ag.mu.Unlock()
		ag.save()
	}
	return &verbs.SetModelResult{Switched: ok}, nil
}

func (ag *Agent) live() (backend.Backend, error) {
	ag.mu.Lock()
	defer ag.mu.Unlock()
	if ag.status == Dead || ag.be == nil {
		return nil, verbs.WrongState("agent %s is %s", ag.id, orDead(ag.status))
	}
	if ag.status == Starting {
		return nil, verbs.WrongState("agent %s is still starting; try again in a moment", ag.id)
	}
	return ag.be, nil
}

func orDead(s string) string {
	if s == "" {
		return Dead
	}
	return s
}

// List implements agent_list, oldest first.
func (m *Manager) List(ctx context.Context, a *verbs.ListArgs) (*verbs.ListResult, error) {
	m.mu.Lock()
	ags := make([]*Agent, 0, len(m.agents))
	for _, ag := range m.agents {
		ags = append(ags, ag)
	}
	m.mu.Unlock()
	res := &verbs.ListResult{Agents: make([]verbs.ListEntry, 0, len(ags))}
	for _, ag := range ags {
		if ag.state() == "" {
			continue // reserved by an open still being checked
		}
		res.Agents = append(res.Agents, verbs.ListEntry{AgentID: ag.id, Status: ag.statusObj()})
	}
	sort.Slice(res.Agents, func(i, j int) bool {
		if res.Agents[i].CreatedAt != res.Agents[j].CreatedAt {
			return res.Agents[i].CreatedAt < res.Agents[j].CreatedAt
		}
		return res.Agents[i].AgentID < res.Agents[j].AgentID
	})
	return res, nil
}

// Interrupt implements agent_interrupt.
func (m *Manager) Interrupt(ctx context.Context, a *verbs.InterruptArgs) (*verbs.InterruptResult, error) {
	ag, err := m.get(a.AgentID)
	if err != nil {
		return nil, err
	}
	be, err := ag.live()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	ok, err := be.Interrupt(ctx)
	if err != nil {
		// Not "nothing to interrupt": the turn may still be running, and
		// the caller (and the log's reader) must know it.
		ag.publish(event.NewError(0, "interrupt failed: "+err.Error(), nil))
		return nil, &verbs.Error{Code: verbs.CodeUnavailable, Message: fmt.Sprintf(
			"agent %s: interrupt failed: %v; its turn may still be running: wait for it, or stop the agent with `kaimon close %s`",
			a.AgentID, err, a.AgentID)}
	}
	return &verbs.InterruptResult{Interrupted: ok}, nil
}

// Close implements agent_close: the slot is kept as dead.
func (m *Manager) Close(ctx context.Context, a *verbs.CloseArgs) (*verbs.CloseResult, error) {
	ag, err := m.get(a.AgentID)
	if err != nil {
		return nil, err
	}
	return &verbs.CloseResult{Closed: ag.close(ReasonClosed)}, nil
}

// close stops a live agent; reason is what its record will say.
func (ag *Agent) close(reason string) bool {
	ag.mu.Lock()
	if ag.status == Dead || ag.be == nil {
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

// Shutdown closes every live agent, in parallel, and refuses new ones.
func (m *Manager) Shutdown() {
	m.mu.Lock()
	m.closing = true
	ags := make([]*Agent, 0, len(m.agents))
	for _, ag := range m.agents {
		ags = append(ags, ag)
	}
	m.mu.Unlock()
	var wg sync.WaitGroup
	for _, ag := range ags {
		wg.Add(1)
		go func() { defer wg.Done(); ag.close(ReasonDaemonExited) }()
	}
	wg.Wait()
	m.saves.Wait()
}

// Counts reports live and dead agents, for daemon status.
func (m *Manager) Counts() (live, dead int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, ag := range m.agents {
		ag.mu.Lock()
		if ag.status == Dead {
			dead++
		} else {
			live++
		}
		ag.mu.Unlock()
	}
	return live, dead
}

// logFaults counts the event log writes that failed: each stopped its
// agent.
type logFaults struct {
	count                  int
	lastAgent, lastErr, at string
}

func (m *Manager) countLogFault(id string, err error) {
	m.faultMu.Lock()
	defer m.faultMu.Unlock()
	m.faults.count++
	m.faults.lastAgent, m.faults.lastErr = id, err.Error()
	m.faults.at = time.Now().UTC().Format(time.RFC3339Nano)
}

// LogFaults reports the event log writes that failed since the daemon
// started (each stopped its agent), and the last one, for daemon status.
func (m *Manager) LogFaults() (count int, lastAgent, lastError, at string) {
	m.faultMu.Lock()
	defer m.faultMu.Unlock()
	f := m.faults
	return f.count, f.lastAgent, f.lastErr, f.at
}

var _ verbs.Service = (*Manager)(nil)
