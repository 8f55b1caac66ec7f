// Package agentbin is the one table of the agent programs kaimon runs: each
// program's name on PATH, the variable and the config key that name it
// instead, and how to install it. The backends find their programs by it,
// config maps the file's keys onto the variables by it, and `kaimon doctor`
// checks it; it is a leaf so that the kaimon binary reads the table without
// linking the backends (and with them the ACP SDK).
package agentbin

// Program is one agent program.
type Program struct {
	// Name is what kaimon calls the agent: "claude" for the claude CLI, an
	// ACP agent's name (acp:<Name>) for the others.
	Name string
	// Bin is the program's name on PATH.
	Bin string
	// Env is the variable that names the program instead (it wins over
	// ConfigKey and PATH).
	Env string
	// ConfigKey is the config file's key that names it; the daemon exports
	// the key's value as Env.
	ConfigKey string
	// Install is how to get the program, for errors and doctor's hints.
	Install string
}

// Claude is the claude CLI, the backend of every model without a prefix.
var Claude = Program{Name: "claude", Bin: "claude", Env: "KAIMON_CLAUDE_BIN", ConfigKey: "claude_bin",
	Install: "npm install -g @anthropic-ai/claude-code"}

// ACPNames are the ACP agents acp:<agent> names, in the spec's order.
var ACPNames = []string{"opencode", "claude", "gemini"}

// ACP are the ACP agents' programs, by agent name.
var ACP = map[string]Program{
	"opencode": {Name: "opencode", Bin: "opencode", Env: "KAIMON_OPENCODE_BIN", ConfigKey: "opencode_bin",
		Install: "npm install -g opencode-ai"},
	"claude": {Name: "claude", Bin: "claude-agent-acp", Env: "KAIMON_CLAUDE_ACP_BIN", ConfigKey: "claude_acp_bin",
		Install: "npm install -g @zed-industries/claude-agent-acp"},
	"gemini": {Name: "gemini", Bin: "gemini", Env: "KAIMON_GEMINI_BIN", ConfigKey: "gemini_bin",
		Install: "npm install -g @google/gemini-cli"},
}

// All lists every program: the claude CLI, then the ACP agents in the
// spec's order.
func All() []Program {
	out := []Program{Claude}
	for _, n := range ACPNames {
		out = append(out, ACP[n])
	}
	return out
}
