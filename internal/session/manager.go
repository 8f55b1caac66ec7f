// Package session is kaimon's session manager: it owns the agents, runs each
// one's status FSM, numbers turns, stamps and logs every event before it fans
// out, sums token usage, and keeps closed agents as dead for review.
package session

import (
	"errors"
	"fmt"
	"github.com/kaimon/kaimon/internal/agentbin"
	"log"
	"os"
	"sort"
	"sync"
	"time"

	"github.com/kaimon/kaimon/internal/apitype"
	"github.com/kaimon/kaimon/internal/backend"
	"github.com/kaimon/kaimon/internal/config"
	"github.com/kaimon/kaimon/internal/event"
	"github.com/kaimon/kaimon/internal/permit"
	"github.com/kaimon/kaimon/internal/proc"
	"github.com/kaimon/kaimon/internal/verbs"
)

// transitions is the FSM over apitype.AgentStates: starting → idle ⇄
// working → dead, and a dead slot may be reopened. "" is an agent not yet
// started. A test checks that it names every state and only those.
var transitions = map[apitype.AgentState][]apitype.AgentState{
	"":               {apitype.Starting},
	apitype.Starting: {apitype.Idle, apitype.Dead},
	apitype.Idle:     {apitype.Working, apitype.Dead},
	apitype.Working:  {apitype.Idle, apitype.Dead},
	apitype.Dead:     {apitype.Starting},
}

func allowed(from, to apitype.AgentState) bool {
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
	// newID draws an id for an open that gives none (randomID; a test's
	// own); freshID checks what it draws.
	newID func() string
	pids  *pidFile
	// acpAgents are the config's acp_agents, resolved once (every open's
	// backend.Options.ACPAgents).
	acpAgents []agentbin.Program

	mu      sync.Mutex
	agents  map[string]*Agent
	pubs    []Publisher
	closing bool
	// forgetting holds the ids a forget is at: their slots are not
	// reopened meanwhile, so that a resume does not start in a
	// worktree the forget is removing.
	forgetting map[string]bool

	// saves counts the record saves running in the background
	// (saveInBackground); Shutdown waits for them.
	saves sync.WaitGroup

	// faults counts the event log writes that failed (LogFaults), and
	// recFaults the record writes (RecordFaults).
	faultMu   sync.Mutex
	faults    faultCount
	recFaults faultCount

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
// left live, and removes the worktrees of opens it left in the middle
// (worktree.go).
func New(paths config.Paths, cfg config.Config, env []string, factory Factory) (*Manager, error) {
	if err := os.MkdirAll(paths.CacheDir, 0o700); err != nil {
		return nil, fmt.Errorf("creating cache dir: %w", err)
	}
	reap(paths.PidFile())
	removeStale(paths)
	m := &Manager{
		paths: paths, cfg: cfg, env: env, factory: factory, newID: randomID,
		acpAgents:     cfg.ACPAgents.Programs(),
		pids:          &pidFile{path: paths.PidFile(), tmp: paths.PidFileTemp(), live: map[string]proc.Identity{}},
		agents:        map[string]*Agent{},
		StartTimeout:  90 * time.Second,
		permits:       permit.New(),
		PermitTimeout: cfg.PermissionWait(),
	}
	m.pids.writeLocked()
	m.load()
	m.sweepOpenings()
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
	recs, bad := readRecords(m.paths)
	for _, err := range bad {
		log.Printf("%v", err)
	}
	for _, r := range recs {
		ag := m.newAgent(r.ID)
		ag.fromRecord(r)
		if r.Status != apitype.Dead {
			ag.closeLost(string(r.Status))
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

// retain applies dead_kept, when the user set it: the oldest dead agents
// beyond that many are forgotten (their logs stay). Unset, dead agents are
// kept until agent_forget. An agent with a worktree is left to
// agent_forget, which looks at the work in it before removing it.
func (m *Manager) retain() {
	if m.cfg.DeadKept <= 0 {
		return
	}
	m.mu.Lock()
	var dead []*Agent
	for _, ag := range m.agents {
		if ag.state() == apitype.Dead && ag.worktree() == nil {
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

// forget removes a dead agent's slot and the files forget removes (its
// record, and anything generated for it while live), and with logs the
// files forget --logs removes too (config.AgentFileKinds), and says
// whether it did. It does nothing unless ag still holds its slot,
// dead and not the stand-in of a resume under way: the slot may have been
// reopened since ag was picked, and the files are then the new agent's.
// m.mu is held throughout, so no open can take the slot meanwhile.
func (m *Manager) forget(ag *Agent, logs bool) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.agents[ag.id] != ag || ag.state() != apitype.Dead {
		return false
	}
	ag.saveMu.Lock()
	defer ag.saveMu.Unlock()
	if ag.resuming {
		return false
	}
	delete(m.agents, ag.id)
	ag.forgotten = true
	files := ag.files()
	for _, k := range config.AgentFileKinds {
		if !k.Lifetime.RemovedByForget(logs) {
			continue
		}
		var err error
		if k.Dir {
			err = os.RemoveAll(files.Path(k))
		} else {
			err = os.Remove(files.Path(k))
		}
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			log.Printf("forgetting agent %s: %v", ag.id, err)
		}
	}
	return true
}

// get is the agent id names: its whole id, or a unique prefix of it
// (lookupLocked).
func (m *Manager) get(id string) (*Agent, error) {
	if id == "" {
		return nil, verbs.BadArg("agent_id is required")
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.lookupLocked(id)
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
		if ag.status == apitype.Dead {
			dead++
		} else {
			live++
		}
		ag.mu.Unlock()
	}
	return live, dead
}

// faultCount counts the writes of one kind that failed, and names the
// last; Manager.faultMu guards it.
type faultCount struct {
	count                  int
	lastAgent, lastErr, at string
}

func (m *Manager) countFault(f *faultCount, id string, err error) {
	m.faultMu.Lock()
	defer m.faultMu.Unlock()
	f.count++
	f.lastAgent, f.lastErr = id, err.Error()
	f.at = time.Now().UTC().Format(time.RFC3339Nano)
}

func (m *Manager) readFaults(f *faultCount) (count int, lastAgent, lastError, at string) {
	m.faultMu.Lock()
	defer m.faultMu.Unlock()
	return f.count, f.lastAgent, f.lastErr, f.at
}

// countLogFault counts an event log write that failed: each stops its
// agent.
func (m *Manager) countLogFault(id string, err error) { m.countFault(&m.faults, id, err) }

// LogFaults reports the event log writes that failed since the daemon
// started (each stopped its agent), and the last one, for daemon status.
func (m *Manager) LogFaults() (count int, lastAgent, lastError, at string) {
	return m.readFaults(&m.faults)
}

// RecordFaults reports the record writes that failed since the daemon
// started, and the last one, for daemon status. An agent whose record is
// still behind says so in its status (record_error).
func (m *Manager) RecordFaults() (count int, lastAgent, lastError, at string) {
	return m.readFaults(&m.recFaults)
}

var _ verbs.Service = (*Manager)(nil)
