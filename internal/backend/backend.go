// Package backend defines the one interface every agent backend implements
// (claude CLI, ACP, local models), so that the session manager, the event
// log, the bus and the MCP tools know nothing of vendors.
package backend

import (
	"context"
	"errors"

	"github.com/kaimon/kaimon/internal/config"
	"github.com/kaimon/kaimon/internal/event"
	"github.com/kaimon/kaimon/internal/policy"
	"github.com/kaimon/kaimon/internal/verbs"
)

// Options are agent_open's options as a backend sees them, validated and
// with defaults applied by the session manager.
type Options struct {
	ID             string
	Cwd            string
	Model          string // as given, e.g. "sonnet/high" or "claude-sonnet-5"
	Effort         string
	Permission     string // preset name
	PermissionMode string
	AllowedTools   []string
	Only           bool
	// DisallowedTools nil means "the default recursion guard"; an empty,
	// non-nil slice means "no guard" (nested agents allowed).
	DisallowedTools []string
	// Policy is the permission policy resolved from the options above,
	// once, when the agent is opened (see ResolvePolicy). Backends and the
	// door ask it and never resolve presets themselves.
	Policy       *policy.Policy
	MCPConfig    string
	SystemPrompt string
	// Resume is the vendor's session id to continue (agent_open with
	// resume): the conversation is restored instead of begun. "" starts a
	// fresh one.
	Resume string

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
}

// Files are the paths of the agent's files in CacheDir (config.AgentFiles):
// a backend writes no other per-agent file there. Check CacheDir first:
// without one, they are not paths to write.
func (o *Options) Files() config.AgentFiles {
	return config.Paths{CacheDir: o.CacheDir}.Agent(o.ID)
}

// PolicyOptions are o's permission options as agent_open gave them.
func (o *Options) PolicyOptions() policy.Options {
	return policy.Options{Preset: o.Permission, PermissionMode: o.PermissionMode,
		AllowedTools: o.AllowedTools, Only: o.Only, DisallowedTools: o.DisallowedTools}
}

// ResolvePolicy returns o.Policy, resolving it from o's permission options
// first if it is not yet: the session manager does so once at open, and
// options built by hand (tests, tools) get theirs on first use.
func (o *Options) ResolvePolicy() (*policy.Policy, error) {
	if o.Policy != nil {
		return o.Policy, nil
	}
	p, err := policy.Resolve(o.PolicyOptions())
	if err != nil {
		return nil, err
	}
	o.Policy = p
	return p, nil
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

// ErrNotFound is wrapped by Start when the agent program cannot be found.
var ErrNotFound = errors.New("agent program not found")
