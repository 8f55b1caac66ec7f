// Package backend defines the one interface every agent backend implements
// (claude CLI, ACP, local models), so that the session manager, the event
// log, the bus and the MCP tools know nothing of vendors.
package backend

import (
	"context"
	"errors"
	"fmt"
	"github.com/kaimon/kaimon/internal/agentbin"

	"github.com/kaimon/kaimon/internal/config"
	"github.com/kaimon/kaimon/internal/event"
	"github.com/kaimon/kaimon/internal/policy"
	"github.com/kaimon/kaimon/internal/redact"
	"github.com/kaimon/kaimon/internal/verbs"
)

// Options are what a backend is made with: agent_open's arguments as the
// session manager applied them (validated, defaults set, cwd absolute,
// resume's inherited options filled in), the permission policy resolved
// from them, and the daemon's part.
type Options struct {
	verbs.OpenArgs
	// Policy is the permission policy resolved from OpenArgs once, when
	// the agent is opened (policy.ForOpen). It is required: backends and
	// the door ask it and never resolve presets themselves, and Check
	// refuses options without one.
	Policy *policy.Policy
	// ResumeSession is the vendor's session id to continue (agent_open
	// with resume): the conversation is restored instead of begun. ""
	// starts a fresh one. (OpenArgs.Resume is false once applied: the
	// record says what is, not how it came to be.)
	ResumeSession string
	// Fork is the conversation of another agent that this one continues
	// a copy of (agent_open with fork), nil for none. The backend begins
	// a new session from it and leaves the original as it was. (The
	// record keeps no fork: it says what is, not how it came to be.)
	Fork *Fork

	// ACPAgents are the config file's acp_agents (config.ACPAgents.Programs),
	// resolved once when the daemon read it: acp:<name> finds them here
	// before the built-in agents.
	ACPAgents []agentbin.Program

	// CacheDir is where the backend keeps per-agent files (stderr log,
	// generated configs).
	CacheDir string
	// Env is the environment the agent process starts with (the daemon's,
	// plus KAIMON_AGENT_SESSION).
	Env []string

	// Door is kaimon's MCP door for this agent: where it calls back into
	// kaimon, and the secret that says it is this agent. Nil when the
	// daemon has no door (its port is not known).
	Door *Door
	// Ask raises a permission request of the agent and blocks until it is
	// decided (see permission.go). Nil: nobody answers, and the backend
	// lets the agent program apply its own default.
	Ask Asker
	// Redact takes the credentials of Env and the door's token out of
	// text of the agent's that the backend itself repeats outside its
	// events and errors (which the session manager redacts): a line of
	// its output the daemon's log quotes. Nil redacts nothing. Never
	// applied to what is sent to the agent.
	Redact *redact.Redactor
}

// Fork names the conversation a forked agent continues a copy of.
type Fork struct {
	// AgentID is the agent forked: a backend that keeps the
	// conversation itself (local models) reads its files.
	AgentID string
	// Session is that agent's vendor session id.
	Session string
	// Cwd is that agent's cwd, where its conversation belongs (the
	// claude CLI keeps transcripts per cwd).
	Cwd string
}

// Files are the paths of the agent's files in CacheDir (config.AgentFiles):
// a backend writes no other per-agent file there. Check CacheDir first:
// without one, they are not paths to write.
func (o *Options) Files() config.AgentFiles {
	return config.Paths{CacheDir: o.CacheDir}.Agent(o.ID)
}

// Check refuses options without a policy: a kaimon bug (the session
// resolves one at open), reported rather than run as some default policy.
// Every backend's New calls it first.
func (o *Options) Check() error {
	if o.Policy == nil {
		return fmt.Errorf("agent %q: options without a resolved permission policy (a kaimon bug: the session resolves it at open)", o.ID)
	}
	return nil
}

// Disallowed is the caller's own disallowed_tools: nil when it gave none
// (the recursion guard applies).
func (o *Options) Disallowed() []string {
	if o.DisallowedTools == nil {
		return nil
	}
	return *o.DisallowedTools
}

// Efforts are the effort levels accepted by effort and a model's suffix.
var Efforts = verbs.Efforts

// Sink receives what a backend observes. Emit may be called from any one
// goroutine of the backend at a time; Exited is called once, last.
type Sink interface {
	Emit(ev event.Event)
	// Exited says the agent process is gone; err describes how (nil for a
	// clean exit requested by Close).
	Exited(err error)
}

// A BatchSink is a Sink that can publish what a backend's stdout reader
// emits a read at a time rather than an event at a time (issue 12: a
// handoff to each subscriber per event was most of the relay's cost): the
// reader hands its events to EmitBatched and calls Flush before it waits
// for the agent's output again, and at its end; nothing it emits is held
// past that. Events from any other goroutine go to Emit, as always.
type BatchSink interface {
	Sink
	EmitBatched(ev event.Event)
	Flush()
}

// Info is what a backend knows about its live session.
type Info struct {
	SessionID     string
	Transcript    string
	Model         string
	QueuesPrompts bool
	// UsageNote says what the agent does not report of usage ("usage not
	// reported by this agent; context size only: …"), "" when its token
	// counts are real.
	UsageNote string
}

// Backend is one live agent process.
type Backend interface {
	// Start spawns the agent and returns once it is ready for a turn, or
	// with an error; then the process is already gone and the backend calls
	// neither Emit nor Exited: the error is the whole report.
	Start(ctx context.Context) error
	// Send writes a user turn numbered turn. The backend emits the turn's
	// events, all carrying that number, user_text and turn_started first,
	// result last.
	Send(turn int, text string) error
	// Interrupt cancels the turn in flight; false, and no error, if none
	// was; an error if the agent refused, did not acknowledge in time, or
	// went away first.
	Interrupt(ctx context.Context) (bool, error)
	// SetModel repoints the live agent at another model, keeping its
	// conversation; false if the agent refused or cannot.
	SetModel(ctx context.Context, model string) (bool, error)
	// Close stops the agent: gently, then hard, the whole process group.
	Close() error
	Info() Info
}

// Settler is a Backend whose agent program records a turn in files of its
// own a moment after it reports the turn's end (the claude CLI writes its
// transcript in batches), files a fork begins from. Settle returns once
// they hold everything the program reported, or, past a bound of the
// backend's, an error that says what to do. The session asks it of a
// live agent before forking it; a dead agent's program has exited, and
// what it wrote is all there will be.
type Settler interface {
	Settle(ctx context.Context) error
}

// ErrNotFound is wrapped by Start when the agent program cannot be found.
var ErrNotFound = errors.New("agent program not found")
