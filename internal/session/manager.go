// Package session is kaimon's session manager: it owns the agents, runs each
// one's status FSM, numbers turns, stamps and logs every event before it fans
// out, sums token usage, and keeps closed agents as dead for review.
package session

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
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
	Publish(env *event.Envelope)
}

// Manager owns every agent. It implements verbs.Service.
type Manager struct {
	paths   config.Paths
	cfg     config.Config
	env     []string
	factory Factory
	pids    *pidFile

	mu        sync.Mutex
	agents    map[string]*Agent
	deadOrder []string
	pubs      []Publisher
	closing   bool

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
// left behind (those the pid file names with a matching start time).
func New(paths config.Paths, cfg config.Config, env []string, factory Factory) (*Manager, error) {
	if err := os.MkdirAll(paths.CacheDir, 0o700); err != nil {
		return nil, fmt.Errorf("creating cache dir: %w", err)
	}
	reap(paths.PidFile())
	m := &Manager{
		paths: paths, cfg: cfg, env: env, factory: factory,
		pids:          &pidFile{path: paths.PidFile(), live: map[string]proc.Identity{}},
		agents:        map[string]*Agent{},
		StartTimeout:  90 * time.Second,
		permits:       permit.New(),
		PermitTimeout: cfg.PermissionWait(),
	}
	m.pids.writeLocked()
	return m, nil
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

	// pubMu orders stamping, logging and fan-out, so seq order is fan-out
	// order.
	pubMu sync.Mutex
	log   *eventlog.Writer

	mu        sync.Mutex
	status    string
	opts      backend.Options
	model     string
	created   time.Time
	activity  time.Time
	turn      int // last turn assigned
	seq       uint64
	usage     event.UsageFigures
	pending   int // turns sent whose result has not come
	be        backend.Backend
	info      backend.Info
	book      *book
	changed   chan struct{} // closed and replaced on every change
	exitErr   error
	closedReq bool
}

var idRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

func newID() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// Open implements agent_open.
func (m *Manager) Open(ctx context.Context, a *verbs.OpenArgs) (*verbs.OpenResult, error) {
	if a.Cwd == "" {
		return nil, verbs.BadArg("agent_open: cwd is required")
	}
	cwd, err := filepath.Abs(a.Cwd)
	if err != nil {
		return nil, verbs.BadArg("agent_open: cwd %q: %v", a.Cwd, err)
	}
	if st, err := os.Stat(cwd); err != nil || !st.IsDir() {
		return nil, verbs.BadArg("agent_open: cwd %s does not exist or is not a directory", cwd)
	}
	model := a.Model
	if model == "" {
		model = verbs.DefaultModel
	}
	id := a.ID
	if id == "" {
		id = newID()
	} else if !idRE.MatchString(id) {
		return nil, verbs.BadArg("agent_open: id %q must be 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit", id)
	}
	opts := backend.Options{
		ID: id, Cwd: cwd, Model: model, Effort: a.Effort,
		Permission: a.Permission, PermissionMode: a.PermissionMode,
		AllowedTools: a.AllowedTools, Only: a.Only,
		MCPConfig: a.MCPConfig, SystemPrompt: a.SystemPrompt,
		CacheDir: m.paths.CacheDir,
		Env:      append(append([]string{}, m.env...), "KAIMON_AGENT_SESSION="+id),
	}
	if opts.Permission == "" {
		opts.Permission = verbs.DefaultPermission
	}
	if a.DisallowedTools != nil {
		opts.DisallowedTools = append([]string{}, (*a.DisallowedTools)...)
	}
	if _, err := backend.Resolve(&opts); err != nil {
		return nil, verbs.BadArg("agent_open: %v", err)
	}

	m.mu.Lock()
	if m.closing {
		m.mu.Unlock()
		return nil, verbs.WrongState("kaimon-agentd is shutting down")
	}
	ag := m.agents[id]
	if ag != nil {
		ag.mu.Lock()
		st := ag.status
		ag.mu.Unlock()
		if st != Dead {
			m.mu.Unlock()
			return nil, verbs.WrongState("agent %s is already open (%s); close it first or pick another id", id, st)
		}
		m.forgetDeadLocked(id)
	} else {
		ag = &Agent{m: m, id: id}
		m.agents[id] = ag
	}
	// Claim the slot before spawning so a second open of the same id fails.
	ag.mu.Lock()
	ag.status = ""
	ag.opts = opts
	ag.model = model
	ag.created = time.Now()
	ag.activity = ag.created
	ag.usage = event.UsageFigures{}
	ag.pending = 0
	ag.info = backend.Info{}
	ag.exitErr = nil
	ag.closedReq = false
	ag.changed = make(chan struct{})
	ag.mu.Unlock()
	m.mu.Unlock()

	m.attach(ag)
	if err := ag.start(ctx); err != nil {
		return nil, err
	}
	return &verbs.OpenResult{AgentID: id}, nil
}

func (ag *Agent) start(ctx context.Context) error {
	m := ag.m
	w, tail, err := eventlog.Open(eventlog.Path(m.paths.CacheDir, ag.id))
	if err != nil {
		ag.markDeadNoLog()
		return verbs.Errorf(verbs.CodeInternal, "agent_open: event log: %v", err)
	}
	ag.pubMu.Lock()
	ag.log = w
	ag.pubMu.Unlock()
	ag.mu.Lock()
	// Continue numbering from the log: seq is never reused, turns stay
	// unique per id, across reopen and daemon restarts.
	ag.seq = tail.LastSeq
	ag.turn = tail.LastTurn
	ag.book = newBook()
	ag.mu.Unlock()
	ag.transition(Starting, 0)

	be, err := m.factory(ag.opts, ag)
	if err == nil {
		ag.mu.Lock()
		ag.be = be
		ag.mu.Unlock()
		sctx, cancel := context.WithTimeout(ctx, m.StartTimeout)
		err = be.Start(sctx)
		cancel()
	}
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
		ag.die(err)
		return verbs.Errorf(code, "agent_open: %v", err)
	}
	if po, ok := be.(interface{ Process() proc.Identity }); ok {
		m.pids.set(ag.id, po.Process())
	}
	ag.mu.Lock()
	ag.info = be.Info()
	ag.mu.Unlock()
	ag.transition(Idle, 0)
	return nil
}

// markDeadNoLog marks a slot dead when even its log could not be opened.
func (ag *Agent) markDeadNoLog() {
	ag.mu.Lock()
	ag.status = Dead
	ag.mu.Unlock()
	ag.m.detach(ag)
	ag.m.noteDead(ag.id)
}

// Emit implements backend.Sink.
func (ag *Agent) Emit(ev event.Event) { ag.publish(ev) }

// Exited implements backend.Sink.
func (ag *Agent) Exited(err error) {
	ag.mu.Lock()
	if ag.be != nil {
		ag.info = ag.be.Info()
	}
	requested := ag.closedReq
	ag.mu.Unlock()
	if err != nil && !requested {
		log.Printf("agent %s exited: %v", ag.id, err)
	}
	ag.die(err)
}

func (ag *Agent) die(err error) {
	ag.mu.Lock()
	ag.exitErr = err
	ag.pending = 0
	already := ag.status == Dead
	ag.mu.Unlock()
	if already {
		return
	}
	ag.transition(Dead, 0)
	ag.pubMu.Lock()
	if ag.log != nil {
		_ = ag.log.Close()
		ag.log = nil
	}
	ag.pubMu.Unlock()
	ag.m.pids.remove(ag.id)
	ag.m.detach(ag)
	ag.m.noteDead(ag.id)
}

// transition moves the FSM and publishes the status event. A transition
// the table does not allow is refused (and logged): it would be a bug.
func (ag *Agent) transition(to string, turn int) bool {
	ag.mu.Lock()
	from := ag.status
	if !allowed(from, to) {
		ag.mu.Unlock()
		if from != to {
			log.Printf("agent %s: refused transition %q → %q", ag.id, from, to)
		}
		return false
	}
	ag.status = to
	if turn == 0 {
		turn = ag.turn
	}
	ag.mu.Unlock()
	ag.publish(event.New(event.Status, turn, event.StatusData{Status: to}))
	return true
}

// publish stamps ev with agent_id, seq and ts, updates the agent's state
// from it, logs it when authoritative, and fans it out. The log is written
// before anyone sees the event. A result that ends the last pending turn
// moves the FSM to idle in the same step, so no send can slip in between.
func (ag *Agent) publish(ev event.Event) {
	// Bound tool-result PNGs before anyone sees or logs them.
	ev = imaging.ShrinkEvent(ev, ag.m.cfg.AgentImageMaxLongEdge)
	ag.pubMu.Lock()
	defer ag.pubMu.Unlock()
	ag.mu.Lock()
	env := ag.stampLocked(ev)
	if ag.book != nil {
		ag.book.add(ev.Kind, ev.Turn, ev.Data)
	}
	var idle *event.Envelope
	if ev.Kind == event.Result {
		if r := ag.book.turns[ev.Turn]; r != nil {
			ag.usage = ag.usage.Add(r.usage)
		}
		if ag.pending > 0 {
			ag.pending--
		}
		if ag.pending == 0 && ag.status == Working && allowed(Working, Idle) {
			ag.status = Idle
			e := ag.stampLocked(event.New(event.Status, ev.Turn, event.StatusData{Status: Idle}))
			idle = &e
		}
	}
	ag.broadcastLocked()
	ag.mu.Unlock()

	ag.fanOut(&env)
	if idle != nil {
		ag.fanOut(idle)
	}
}

func (ag *Agent) stampLocked(ev event.Event) event.Envelope {
	ag.seq++
	now := time.Now().UTC()
	ag.activity = now
	return event.Envelope{Kind: ev.Kind, Turn: ev.Turn, Data: ev.Data, AgentID: ag.id, Seq: ag.seq, TS: now}
}

// broadcastLocked wakes everyone waiting for a change of this agent.
func (ag *Agent) broadcastLocked() {
	close(ag.changed)
	ag.changed = make(chan struct{})
}

// fanOut logs env when authoritative, then hands it to every publisher.
// Called with pubMu held, so seq order is log order is fan-out order.
func (ag *Agent) fanOut(env *event.Envelope) {
	if ag.log != nil && event.Authoritative(env.Kind, env.Data) {
		rec := env.Record()
		if err := ag.log.Append(&rec); err != nil {
			log.Printf("agent %s: event log: %v", ag.id, err)
		}
	}
	ag.m.mu.Lock()
	pubs := ag.m.pubs
	ag.m.mu.Unlock()
	for _, p := range pubs {
		p.Publish(env)
	}
}

func (m *Manager) noteDead(id string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.forgetDeadLocked(id)
	m.deadOrder = append(m.deadOrder, id)
	for len(m.deadOrder) > m.cfg.DeadKept {
		old := m.deadOrder[0]
		m.deadOrder = m.deadOrder[1:]
		if ag := m.agents[old]; ag != nil {
			ag.mu.Lock()
			dead := ag.status == Dead
			ag.mu.Unlock()
			if dead {
				delete(m.agents, old)
			}
		}
	}
}

func (m *Manager) forgetDeadLocked(id string) {
	for i, d := range m.deadOrder {
		if d == id {
			m.deadOrder = append(m.deadOrder[:i], m.deadOrder[i+1:]...)
			return
		}
	}
}

func (m *Manager) get(id string) (*Agent, error) {
	if id == "" {
		return nil, verbs.BadArg("agent_id is required")
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	ag := m.agents[id]
	if ag == nil {
		return nil, verbs.NotFound("no agent %q: see `kaimon list` for the agents this daemon holds", id)
	}
	return ag, nil
}

// Send implements agent_send.
func (m *Manager) Send(ctx context.Context, a *verbs.SendArgs) (*verbs.SendResult, error) {
	ag, err := m.get(a.AgentID)
	if err != nil {
		return nil, err
	}
	n, err := ag.send(a.Text)
	if err != nil {
		return nil, err
	}
	return &verbs.SendResult{Turn: n}, nil
}

func (ag *Agent) send(text string) (int, error) {
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
		ag.transition(Working, n)
	}
	if err := be.Send(n, text); err != nil {
		ag.publish(event.NewError(n, "sending turn: "+err.Error(), nil))
		ag.publish(event.New(event.Result, n, event.ResultData{StopReason: event.StopError, Error: err.Error()}))
		return 0, verbs.WrongState("agent %s: sending turn %d: %v", ag.id, n, err)
	}
	return n, nil
}

// Run implements agent_run.
func (m *Manager) Run(ctx context.Context, a *verbs.RunArgs) (*verbs.RunResult, error) {
	ag, err := m.get(a.AgentID)
	if err != nil {
		return nil, err
	}
	timeout := a.Timeout
	if timeout == 0 {
		timeout = verbs.DefaultTimeout
	}
	if timeout < 0 {
		return nil, verbs.BadArg("agent_run: timeout must be a positive number of seconds")
	}
	n, err := ag.send(a.Text)
	if err != nil {
		return nil, err
	}
	timer := time.NewTimer(time.Duration(timeout * float64(time.Second)))
	defer timer.Stop()
	for {
		ag.mu.Lock()
		t := ag.book.turns[n]
		status := ag.status
		ch := ag.changed
		var done bool
		var text, stop, msg string
		if t != nil {
			done, text, stop, msg = t.done, t.lastMessage(), t.stopReason, t.errMsg
		}
		ag.mu.Unlock()
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
			return nil, &verbs.Error{Code: verbs.CodeTimeout, Text: text,
				Message: fmt.Sprintf("agent %s turn %d did not end within %gs; it is still running (kaimon output %s, or kaimon interrupt %s)", ag.id, n, timeout, ag.id, ag.id)}
		case <-ctx.Done():
			return nil, &verbs.Error{Code: verbs.CodeTimeout, Text: text, Message: fmt.Sprintf("agent_run: the caller went away: %v", ctx.Err())}
		}
	}
}

// Output implements agent_output.
func (m *Manager) Output(ctx context.Context, a *verbs.OutputArgs) (*verbs.OutputResult, error) {
	which := a.Which
	if which == "" {
		which = verbs.DefaultWhich
	}
	switch which {
	case "last_message", "full_turn", "all":
	default:
		return nil, verbs.BadArg("agent_output: which must be last_message, full_turn or all, not %q", which)
	}
	if a.Turn < 0 || a.MaxChars < 0 {
		return nil, verbs.BadArg("agent_output: turn and max_chars must not be negative")
	}
	maxChars := a.MaxChars
	if maxChars == 0 {
		maxChars = verbs.DefaultMaxChars
	}
	var (
		text   string
		t      *turnRec
		n      int
		status string
	)
	ag, err := m.get(a.AgentID)
	if err != nil {
		// An agent this daemon no longer holds (dropped, or before a
		// restart) is read from its log.
		var ve *verbs.Error
		path := eventlog.Path(m.paths.CacheDir, a.AgentID)
		if !errors.As(err, &ve) || ve.Code != verbs.CodeNotFound || !idRE.MatchString(a.AgentID) {
			return nil, err
		}
		b := newBook()
		if serr := eventlog.Scan(path, 0, func(r *event.Record) bool { b.add(r.Kind, r.Turn, r.Data); return true }); serr != nil {
			return nil, err
		}
		text, t, n = b.text(a.Turn, which, a.IncludeTools)
		status = Dead
	} else {
		ag.mu.Lock()
		text, t, n = ag.book.text(a.Turn, which, a.IncludeTools)
		status = ag.status
		ag.mu.Unlock()
	}
	if a.Turn > 0 && t == nil {
		return nil, verbs.NotFound("agent %s has no turn %d", a.AgentID, a.Turn)
	}
	res := &verbs.OutputResult{AgentID: a.AgentID, Turn: n, Which: which, Status: status}
	if t != nil {
		res.Done = t.done
		res.Usage = t.usage
	}
	if r := []rune(text); len(r) > maxChars {
		res.Truncated = true
		res.DroppedChars = len(r) - maxChars
		text = string(r[:maxChars])
	}
	res.Text = text
	return res, nil
}

// Status implements agent_status.
func (m *Manager) Status(ctx context.Context, a *verbs.StatusArgs) (*verbs.Status, error) {
	ag, err := m.get(a.AgentID)
	if err != nil {
		return nil, err
	}
	s := ag.statusObj()
	return &s, nil
}

func (ag *Agent) statusObj() verbs.Status {
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
		Status: ag.status, Model: model, Cwd: ag.opts.Cwd, Turn: ag.turn,
		CreatedAt:    ag.created.UTC().Format(time.RFC3339Nano),
		LastActivity: ag.activity.UTC().Format(time.RFC3339Nano),
		SessionID:    info.SessionID, Transcript: info.Transcript,
		EventLog: eventlog.Path(ag.m.paths.CacheDir, ag.id),
		Usage:    ag.usage, QueuesPrompts: info.QueuesPrompts,
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
		ag.mu.Lock()
		ag.model = a.Model
		ag.mu.Unlock()
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
	return &verbs.CloseResult{Closed: ag.close()}, nil
}

func (ag *Agent) close() bool {
	ag.mu.Lock()
	if ag.status == Dead || ag.be == nil {
		ag.mu.Unlock()
		return false
	}
	ag.closedReq = true
	be := ag.be
	ag.mu.Unlock()
	_ = be.Close()
	// The backend reports Exited; make sure the slot is dead even if it
	// did not.
	ag.die(nil)
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
		go func() { defer wg.Done(); ag.close() }()
	}
	wg.Wait()
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

var _ verbs.Service = (*Manager)(nil)
