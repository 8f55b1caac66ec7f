package session

import (
	"context"
	"time"

	"github.com/kaimon/kaimon/internal/backend"
	"github.com/kaimon/kaimon/internal/event"
	"github.com/kaimon/kaimon/internal/gitwt"
	"github.com/kaimon/kaimon/internal/verbs"
)

// An open is planned, then committed, as containerd prepares a snapshot
// and creates a container: planOpen decides from the arguments alone what
// kind of open it is and for which slot; each step after it that makes
// something (the slot taken, the worktree, the door's token, the agent's
// files) pushes its own undo; a failure runs them all, last first, and a
// success drops them. What a failure at start keeps is the one table
// onStartFailure.

// openKind is what an open does with its slot.
type openKind int

const (
	openFresh  openKind = iota // a new id, or one no agent held
	openReopen                 // a dead agent's id, for a new conversation
	openResume                 // a dead agent's id, to continue its conversation
	openFork                   // a new id, starting from a live or dead agent's conversation
)

func (k openKind) String() string {
	return [...]string{"fresh", "reopen", "resume", "fork"}[k]
}

// startFailed is what an open whose agent program failed to start (the
// backend was made, its Start failed) leaves behind.
type startFailed int

const (
	// keepDead: the new agent stays, dead, in its slot, with its record,
	// its log and any worktree the open made, so that `kaimon status`
	// says why it failed and `kaimon open --id` may try again.
	keepDead startFailed = iota
	// restoreOld: the slot goes back to the dead agent it was, whose
	// record is as it was (the attempt writes none) and whose session a
	// later resume may still find; its log says what the attempt met.
	restoreOld
	// leaveNothing: no slot, no record, no log, and no worktree or branch.
	leaveNothing
)

// onStartFailure is, per kind, what a failure at start keeps: docs/sessions.md's
// table under "Dead agents are kept until you let them go". A failure
// before start, in the options or in making the backend, leaves nothing
// of an open's making, whatever its kind. A fork has no conversation of
// its own yet to keep: the forked agent still has it.
var onStartFailure = map[openKind]startFailed{
	openFresh:  keepDead,
	openReopen: keepDead,
	openResume: restoreOld,
	openFork:   leaveNothing,
}

// openPlan is an open decided from its arguments, before anything is
// written.
type openPlan struct {
	kind   openKind
	id     string
	args   *verbs.OpenArgs // with Host stripped and the id set
	parent *Agent          // what a fork starts from
	// undo is what the steps so far made, to be unmade in reverse.
	undo []func(context.Context)
}

func (p *openPlan) push(f func(context.Context)) { p.undo = append(p.undo, f) }

// rollback unmakes, last first, what the open made. It runs without the
// caller's cancellation: an open given up by its caller still unmakes
// what it made.
func (p *openPlan) rollback(ctx context.Context) {
	ctx = context.WithoutCancel(ctx)
	for i := len(p.undo) - 1; i >= 0; i-- {
		p.undo[i](ctx)
	}
	p.undo = nil
}

// Open implements agent_open. Everything that can be checked is checked
// before anything is written: a refused open leaves no slot, no record and
// no log. The slot is reserved first (so that two opens of one id cannot
// both win), and given back if the options do not hold.
func (m *Manager) Open(ctx context.Context, a *verbs.OpenArgs) (res *verbs.OpenResult, err error) {
	p, err := m.planOpen(a)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			p.rollback(ctx)
		}
	}()
	ag, old, err := m.claim(p)
	if err != nil {
		return nil, err
	}
	be, wt, err := m.prepare(ctx, p, ag, old)
	if err != nil {
		return nil, err
	}
	var warnings []string
	if p.parent != nil {
		warnings = forkWarnings(ctx, p.parent, wt)
	}
	if err := m.startOpened(ctx, p, ag, old, be, wt); err != nil {
		return nil, err
	}
	return &verbs.OpenResult{AgentID: p.id, Warnings: warnings}, nil
}

// planOpen decides what an open is: its id (drawn if none is given) and
// its kind, and for a fork the agent it starts from. It writes nothing.
// Whether a given id is a dead agent's (reopen or fresh) is known only
// once its slot is claimed.
func (m *Manager) planOpen(a *verbs.OpenArgs) (*openPlan, error) {
	// Other hosts are reached by the clients that know them (kaimon
	// --host, kaimon mcp), which strip host before asking a daemon.
	if a.Host != "" && a.Host != verbs.HostLocal {
		return nil, verbs.BadArg("agent_open: host %q: this daemon opens agents on its own machine only; "+
			"other hosts are reached through kaimon (`kaimon --host NAME open`, or kaimon mcp with hosts configured)", a.Host)
	}
	if a.Host != "" {
		b := *a
		b.Host = "" // this machine: not part of the agent's record
		a = &b
	}
	p := &openPlan{kind: openFresh, id: a.ID, args: a}
	if a.Resume {
		p.kind = openResume
	}
	if p.id == "" {
		if a.Resume {
			return nil, verbs.BadArg("agent_open: resume needs the id of the dead agent to resume (kaimon open --id ID --resume)")
		}
		var err error
		if p.id, err = m.freshID(); err != nil {
			return nil, err
		}
	} else if err := m.checkID(p.id); err != nil {
		return nil, err
	}
	if a.Fork != "" {
		var err error
		if p.parent, err = m.forkable(a, p.id); err != nil {
			return nil, err
		}
		p.kind = openFork
	}
	return p, nil
}

// claim takes the plan's slot for a new agent, and returns it and the
// dead agent it displaces. Its undo gives the slot back.
func (m *Manager) claim(p *openPlan) (*Agent, *Agent, error) {
	ag := m.newAgent(p.id)
	old, err := m.reserve(ag)
	if err != nil {
		return nil, nil, err
	}
	p.push(func(context.Context) { m.unreserve(ag, old) })
	switch {
	case old == nil && exists(ag.files().Record):
		// A record this daemon did not load (unreadable, or of a
		// newer format: its log says which): an open would
		// overwrite it.
		return nil, nil, verbs.WrongState("agent_open: %s is the record of an agent %s that this daemon could not load (its log, %s, says why): "+
			"give another id, or move the record away", ag.files().Record, p.id, m.paths.DaemonLog())
	case p.args.ID == "" && old != nil:
		// A drawn id that a dead agent took between freshID and here:
		// its slot is not this open's to take over.
		return nil, nil, verbs.WrongState("agent_open: the id drawn, %s, was taken meanwhile: open again", p.id)
	case p.kind == openFork && old != nil:
		// A fork leaves nothing behind when it fails, which a slot of
		// an earlier agent's files would make impossible.
		return nil, nil, verbs.WrongState("agent_open: a fork needs an id of its own, and %s is a dead agent's: give another id, or none (or forget %s first)", p.id, p.id)
	case p.kind == openFresh && old != nil:
		p.kind = openReopen
	}
	return ag, old, nil
}

// prepare checks the options (making the worktree last of them), admits
// the agent at the door and makes its backend, each with its undo.
func (m *Manager) prepare(ctx context.Context, p *openPlan, ag, old *Agent) (backend.Backend, *gitwt.Info, error) {
	opts, wt, err := m.openOptions(ctx, p.id, *p.args, old, p.parent)
	if err != nil {
		return nil, nil, err
	}
	if wt != nil && p.kind != openResume {
		// A resume continues in the dead agent's worktree; any other
		// open made this one, and it goes, with its branch, as
		// everything else the open made.
		p.push(func(ctx context.Context) { m.removeWorktree(ctx, p.id, wt) })
	}
	opts = m.attach(ag, opts)
	ag.mu.Lock()
	ag.opts, ag.model, ag.wt = opts, opts.Model, wt
	ag.mu.Unlock()
	p.push(func(context.Context) { m.detach(ag) })
	be, err := m.factory(opts, ag)
	if err != nil {
		return nil, nil, openError(err)
	}
	return be, wt, nil
}

// startOpened starts the agent. Its failure keeps what onStartFailure
// says; its success, or a failure that keeps the new agent, commits the
// open.
func (m *Manager) startOpened(ctx context.Context, p *openPlan, ag, old *Agent, be backend.Backend, wt *gitwt.Info) error {
	// A reopened slot numbers on from its earlier life (seq from its
	// ceiling, turns from the log, in start), and its usage sums the
	// turns it numbers; a resumed one also keeps its created_at, and the
	// model its model resolved to (a resumed claude CLI says only the
	// alias until its first turn).
	now := time.Now()
	created, usage, seq, model, resolved := now, event.UsageFigures{}, uint64(0), "", ""
	if old != nil {
		old.mu.Lock()
		seq, usage = old.seqCeil, old.usage
		if p.kind == openResume {
			created, model, resolved = old.created, old.model, old.resolved
		}
		old.mu.Unlock()
	}
	ag.mu.Lock()
	ag.created, ag.usage, ag.seq, ag.activity = created, usage, seq, now
	if model == ag.model {
		ag.resolved = resolved
	}
	ag.mu.Unlock()
	ag.saveMu.Lock()
	ag.resuming = p.kind == openResume
	ag.saveMu.Unlock()
	err := ag.start(ctx, be)
	keep := err == nil
	if err != nil {
		switch onStartFailure[p.kind] {
		case keepDead:
			keep = true
		case restoreOld:
			// Dead, its door already shut by die: the slot's undo
			// (claim's) is what remains to run.
		case leaveNothing:
			p.push(func(context.Context) { m.forget(ag, true) })
		}
	}
	if keep {
		p.undo = nil
		if wt != nil && p.kind != openResume {
			// Started, or dead at its start: either way its record,
			// saved at its first event, holds the worktree this open
			// made.
			m.doneOpening(p.id)
		}
	}
	return err
}
