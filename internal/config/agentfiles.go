package config

import (
	"path/filepath"
	"strings"
)

// AgentFiles are the paths of one agent's files in the cache dir, a field
// per kind of file in AgentFileKinds; Paths.Agent fills every one. Code
// that reads, writes or removes an agent's file takes its path from here,
// so that forget, stale cleanup, the id checks, the man page and the tests
// cannot drift from what the backends write.
type AgentFiles struct {
	Events    string // the event log
	Record    string // the registry record
	Log       string // the agent program's stderr
	History   string // a local model's conversation
	MCPConfig string // claude's generated --mcp-config
	Opencode  string // opencode's generated config home (a directory)
	Opening   string // the worktree an open is making, until its record holds it
}

// Lifetime says what removes a kind of agent file.
type Lifetime int

const (
	// UntilForget: kaimon forget removes it.
	UntilForget Lifetime = iota + 1
	// UntilForgetLogs: plain forget keeps it, so that what the agent did
	// can still be read; kaimon forget --logs removes it.
	UntilForgetLogs
	// WhileLive: generated for a live agent, holding its door token, and
	// removed when it exits; the daemon removes any a lost predecessor
	// left when it starts, and forget any still there.
	WhileLive
	// WhileOpening: written by an open before it makes the agent's
	// worktree, and removed once the agent's record holds the worktree
	// or the open took it away again; one a killed daemon left names a
	// worktree and branch no record knows, which the next daemon removes
	// when it starts. forget removes any still there.
	WhileOpening
)

// RemovedByForget says whether forget (with logs: forget --logs) removes
// a file of this lifetime.
func (l Lifetime) RemovedByForget(logs bool) bool {
	return l == UntilForget || l == WhileLive || l == WhileOpening || (logs && l == UntilForgetLogs)
}

// AgentFile is one kind of agent file: its name is <id><Suffix> in the
// cache dir.
type AgentFile struct {
	Suffix   string
	Dir      bool // a directory, removed with what it holds
	Lifetime Lifetime
	// Doc says what the file is, for the man page's FILES section (which
	// adds what removes it, from Lifetime).
	Doc   string
	field func(*AgentFiles) *string
}

// AgentFileKinds are every kind of file kaimon keeps for an agent. No
// suffix ends another, so a name in the cache dir is of one kind at most
// (AgentFileOf).
var AgentFileKinds = []AgentFile{
	{Suffix: ".events.jsonl", Lifetime: UntilForgetLogs, field: func(f *AgentFiles) *string { return &f.Events },
		Doc: "The agent's event log, one authoritative event a line; see kaimon-events(7)."},
	{Suffix: RecordSuffix, Lifetime: UntilForget, field: func(f *AgentFiles) *string { return &f.Record },
		Doc: "The agent's record: what kaimon open was given, its status and usage. It keeps a dead agent listed and resumable."},
	{Suffix: ".log", Lifetime: UntilForgetLogs, field: func(f *AgentFiles) *string { return &f.Log },
		Doc: "The agent program's stderr."},
	{Suffix: ".history.jsonl", Lifetime: UntilForgetLogs, field: func(f *AgentFiles) *string { return &f.History },
		Doc: "The conversation of an ollama: or vmlx: agent, which kaimon holds: one message a line. A resume continues it."},
	{Suffix: "-mcp.json", Lifetime: WhileLive, field: func(f *AgentFiles) *string { return &f.MCPConfig },
		Doc: "The MCP config generated for a claude agent, pointing it at the door with the agent's token."},
	{Suffix: "-opencode", Dir: true, Lifetime: WhileLive, field: func(f *AgentFiles) *string { return &f.Opencode },
		Doc: "The config home generated for an acp:opencode agent (its XDG_CONFIG_HOME): the preset's permissions, the model, " +
			"and the plugin that asks kaimon before each tool call."},
	{Suffix: ".opening.json", Lifetime: WhileOpening, field: func(f *AgentFiles) *string { return &f.Opening },
		Doc: "The worktree and branch an open with --worktree is making (repository, path, branch, base), until the agent's record holds them."},
}

// Agent returns the paths of agent id's files.
func (p Paths) Agent(id string) AgentFiles {
	var f AgentFiles
	for _, k := range AgentFileKinds {
		*k.field(&f) = filepath.Join(p.CacheDir, id+k.Suffix)
	}
	return f
}

// Path is f's path of kind k.
func (f AgentFiles) Path(k AgentFile) string { return *k.field(&f) }

// AgentFileOf says which agent and kind of file a name in the cache dir
// belongs to, by its suffix alone: the caller checks that id is an id.
func AgentFileOf(name string) (id string, k AgentFile, ok bool) {
	for _, k := range AgentFileKinds {
		if id, ok := strings.CutSuffix(name, k.Suffix); ok && id != "" {
			return id, k, true
		}
	}
	return "", AgentFile{}, false
}

// DaemonFiles are the daemon's own files in the cache dir (not an
// agent's): no agent id may name one of them (see session's reserved ids).
func (p Paths) DaemonFiles() []string {
	return []string{p.DaemonLog(), p.PidFile(), p.PidFileTemp(), p.MCPStateKey(), p.MCPStateUsed()}
}

// MCPStateKey is the key (mode 0600, made once) with which `kaimon mcp`
// seals the requestState of a permission asked as an MCP multi round-trip
// request, so that a retry reaches a `kaimon mcp` started after the
// round's.
func (p Paths) MCPStateKey() string { return filepath.Join(p.CacheDir, "mcp-state.key") }

// MCPStateUsed records the requestStates used (until they lapse), so that
// one replayed is refused.
func (p Paths) MCPStateUsed() string { return filepath.Join(p.CacheDir, "mcp-state.used") }

// PidFileTemp is where the pid file is written before it is renamed into
// place.
func (p Paths) PidFileTemp() string { return p.PidFile() + ".tmp" }
