// Package agentbin is the one catalogue of the agent programs kaimon runs,
// in the ACP registry's own terms: each agent's id, name, the command with
// its args and env, and the npm package users install it from; beside
// them kaimon's own facts (its acp:<Name>, the variable and the config key
// that name the program instead, the version kaimon's tests drive, how the
// agent logs in). The backends find their programs by it, config maps the
// file's keys onto the variables by it, `kaimon doctor` and `kaimon agents`
// print it; it is a leaf so that the kaimon binary reads the table without
// linking the backends (and with them the ACP SDK).
package agentbin

import "path/filepath"

// Program is one agent program.
type Program struct {
	// Name is what kaimon calls the agent: "claude" for the claude CLI, an
	// ACP agent's name (acp:<Name>) for the others.
	Name string
	// ID is the agent's id in the ACP registry (agentclientprotocol/registry),
	// "" for one the registry does not list.
	ID string
	// Title is the registry's display name.
	Title string
	// Aliases are other names acp:<alias> accepts for this agent (registry
	// ids that differ from Name).
	Aliases []string
	// Bin is the program's name on PATH.
	Bin string
	// Args are the arguments that make the program speak ACP on stdio.
	Args []string
	// ProgEnv is the environment the registry's command sets, NAME=value.
	ProgEnv []string
	// Env is the variable that names the program instead (it wins over
	// ConfigKey and PATH).
	Env string
	// ConfigKey is the config file's key that names it; the daemon exports
	// the key's value as Env.
	ConfigKey string
	// Package is the npm package the program installs from.
	Package string
	// Tested is the version of Package kaimon's end-to-end tests drive
	// (package.json pins the same; a test holds them equal).
	Tested string
	// Login is the command that logs the agent in, for an agent that
	// answers "Authentication required"; "" when it has none.
	Login string
	// NoVersionFlag: the program knows no --version (codex-acp exits 2
	// on it), so kaimon agents and doctor read its npm package's version.
	NoVersionFlag bool
	// Install is how to get the program, for errors and doctor's hints:
	// for a built-in program, npm's install of the version Tested.
	Install string
	// Configured: the row is the config file's (acp_agents.<Name>), its
	// program named by ConfigKey alone.
	Configured bool
}

// pinned is p with its Install: npm's install of the version kaimon tests
// (Tested), never the latest, which kaimon may not drive yet.
func pinned(p Program) Program {
	p.Install = "npm install -g " + p.Package + "@" + p.Tested
	return p
}

// Claude is the claude CLI, the backend of every model without a prefix.
var Claude = pinned(Program{Name: "claude", Title: "Claude Code", Bin: "claude", Env: "KAIMON_CLAUDE_BIN", ConfigKey: "claude_bin",
	Package: "@anthropic-ai/claude-code", Tested: "2.1.328", Login: "claude /login"})

// Codex is OpenAI's Codex CLI, which the codex backend (codex:<model>)
// drives over its own protocol, `codex app-server`: JSON-RPC on stdio. (Its
// ACP adapter is acp:codex, another program.)
var Codex = pinned(Program{Name: "codex", Title: "Codex", Bin: "codex", Args: []string{"app-server"}, Env: "KAIMON_CODEX_BIN", ConfigKey: "codex_bin",
	Package: "@openai/codex", Tested: "0.169.0", Login: "codex login"})

// ACPNames are the built-in ACP agents acp:<agent> names: the spec's three,
// then the others in the order users asked for them.
var ACPNames = []string{"opencode", "claude", "gemini", "codex", "qwen", "copilot", "kilo", "auggie"}

// ACP are the built-in ACP agents' programs, by agent name.
var ACP = map[string]Program{
	"opencode": pinned(Program{Name: "opencode", ID: "opencode", Title: "OpenCode", Bin: "opencode", Args: []string{"acp"},
		Env: "KAIMON_OPENCODE_BIN", ConfigKey: "opencode_bin",
		Package: "opencode-ai", Tested: "1.18.33", Login: "opencode auth login"}),
	"claude": pinned(Program{Name: "claude", ID: "claude-code-acp", Title: "Claude Code", Aliases: []string{"claude-code-acp", "claude-agent-acp"},
		Bin: "claude-agent-acp", Env: "KAIMON_CLAUDE_ACP_BIN", ConfigKey: "claude_acp_bin",
		Package: "@zed-industries/claude-agent-acp", Tested: "0.23.1", Login: "claude /login"}),
	"gemini": pinned(Program{Name: "gemini", ID: "gemini", Title: "Gemini CLI", Bin: "gemini", Args: []string{"--acp"},
		Env: "KAIMON_GEMINI_BIN", ConfigKey: "gemini_bin",
		Package: "@google/gemini-cli", Tested: "0.61.0", Login: "gemini"}),
	"codex": pinned(Program{Name: "codex", ID: "codex-acp", Title: "Codex", Aliases: []string{"codex-acp"},
		Bin: "codex-acp", Env: "KAIMON_CODEX_ACP_BIN", ConfigKey: "codex_acp_bin",
		Package: "@zed-industries/codex-acp", Tested: "0.16.0", Login: "codex login", NoVersionFlag: true}),
	"qwen": pinned(Program{Name: "qwen", ID: "qwen-code", Title: "Qwen Code", Aliases: []string{"qwen-code"}, Bin: "qwen", Args: []string{"--acp"},
		Env: "KAIMON_QWEN_BIN", ConfigKey: "qwen_bin",
		Package: "@qwen-code/qwen-code", Tested: "0.24.4", Login: "qwen"}),
	"copilot": pinned(Program{Name: "copilot", ID: "github-copilot", Title: "GitHub Copilot", Aliases: []string{"github-copilot"}, Bin: "copilot", Args: []string{"--acp"},
		Env: "KAIMON_COPILOT_BIN", ConfigKey: "copilot_bin",
		Package: "@github/copilot", Tested: "1.0.102", Login: "copilot login"}),
	"kilo": pinned(Program{Name: "kilo", ID: "kilo", Title: "Kilo Code", Bin: "kilo", Args: []string{"acp"},
		Env: "KAIMON_KILO_BIN", ConfigKey: "kilo_bin",
		Package: "@kilocode/cli", Tested: "7.7.7", Login: "kilo auth login"}),
	"auggie": pinned(Program{Name: "auggie", ID: "auggie", Title: "Auggie CLI", Bin: "auggie", Args: []string{"--acp"},
		Env: "KAIMON_AUGGIE_BIN", ConfigKey: "auggie_bin",
		Package: "@augmentcode/auggie", Tested: "0.36.0", Login: "auggie login"}),
}

// InCheckout is where `npm ci` in the kaimon checkout at root (as
// scripts/demo.sh and scripts/playground.sh run it) puts the program: the
// pinned version, which no PATH names.
func (p Program) InCheckout(root string) string {
	return filepath.Join(root, "node_modules", ".bin", p.Bin)
}

// All lists every program: the claude CLI, the Codex CLI, then the ACP
// agents in the spec's order.
func All() []Program {
	out := []Program{Claude, Codex}
	for _, n := range ACPNames {
		out = append(out, ACP[n])
	}
	return out
}

// LookupACP finds a built-in ACP agent by its name or one of its aliases.
func LookupACP(name string) (Program, bool) {
	if p, ok := ACP[name]; ok {
		return p, true
	}
	for _, n := range ACPNames {
		for _, a := range ACP[n].Aliases {
			if a == name {
				return ACP[n], true
			}
		}
	}
	return Program{}, false
}
