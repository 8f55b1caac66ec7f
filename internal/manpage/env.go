package manpage

import (
	"fmt"
	"slices"

	"github.com/kaimon/kaimon/internal/agentbin"
	"github.com/kaimon/kaimon/internal/config"
	"github.com/kaimon/kaimon/internal/verbs"
)

// Who reads an environment variable.
const (
	ByCLI    = "kaimon"
	ByDaemon = "kaimon-agentd"
	ByBoth   = "kaimon, kaimon-agentd"
	ByAgents = "the agents"
	ByBuild  = "scripts/build.sh (install.sh, demo.sh)"
)

// EnvVar is one environment variable kaimon reads, sets or passes on.
type EnvVar struct {
	Name    string
	Default string // "" when unset has no value worth stating
	ReadBy  string
	Doc     string
}

// Env is the one table of the environment variables kaimon honours: both
// man pages' ENVIRONMENT sections are written from it, and a test fails
// when the code names a KAIMON_ variable it does not list.
var Env = slices.Concat([]EnvVar{
	{Name: "KAIMON_HOME", ReadBy: ByBoth,
		Doc: "Root of everything below when set: the cache is $KAIMON_HOME/cache/agents, the config file " +
			"$KAIMON_HOME/config.json, the socket dir $KAIMON_HOME/sock, the worktrees $KAIMON_HOME/worktrees. Tests and second installations set only this. " +
			"The variables below still override their own path."},
	{Name: "KAIMON_CACHE_DIR", Default: "~/.cache/kaimon/agents", ReadBy: ByBoth,
		Doc: "The cache dir: event logs, agent records, agents' stderr logs, the pid file, the daemon's log and generated configs."},
	{Name: "KAIMON_CONFIG", Default: "~/.config/kaimon/config.json", ReadBy: ByBoth, Doc: "The config file."},
	{Name: "KAIMON_SOCK_DIR", Default: "/run/user/<uid>/kaimon, else ~/.cache/kaimon/sock", ReadBy: ByBoth,
		Doc: "The socket dir (mode 0700): the control socket, the bus socket, the daemon's lock and door.json. " +
			"Its default depends on the uid only, never on XDG_RUNTIME_DIR, so that an MCP client starting kaimon mcp " +
			"with a bare environment reaches the daemon the user's shell started. Set it when the default path is " +
			"too long for a unix socket."},
	{Name: "KAIMON_WORKTREE_DIR", Default: "~/.local/share/kaimon/worktrees", ReadBy: ByDaemon,
		Doc: "Where the agents opened with --worktree get their git worktrees, one <id> directory each: outside the repository, " +
			"so that the main checkout stays as it is, and outside the cache, since a worktree holds work not yet committed."},
	{Name: "KAIMON_NO_AUTOSTART", ReadBy: ByCLI,
		Doc: "1: fail instead of starting kaimon-agentd when it is not running (as --no-autostart)."},
	{Name: "KAIMON_HOST", Default: verbs.HostLocal, ReadBy: ByCLI,
		Doc: "The host a command drives when --host is not given: a name of kaimon host ls, local (this machine) or " +
			"a URL of kaimon host add. An id qualified as NAME/ID names its own host, over this."},
	{Name: "KAIMON_SSH_COMMAND", Default: "ssh", ReadBy: ByCLI,
		Doc: "The command that reaches another host, run as git runs GIT_SSH_COMMAND (by sh -c, the ssh arguments after it), " +
			"e.g. \"ssh -F ~/.ssh/kaimon_config\" or \"ssh -i ~/.ssh/ci_key\": kaimon keeps no credential of its own."},
	{Name: "KAIMON_KUBECTL_COMMAND", Default: "kubectl", ReadBy: ByCLI,
		Doc: "The command that reaches a kube:// host's pod, run as KAIMON_SSH_COMMAND is, with kubectl's exec arguments " +
			"after it, e.g. \"kubectl --kubeconfig ~/.kube/ci\"."},
	{Name: "KAIMON_AGENTD_BIN", Default: "kaimon-agentd beside kaimon, else on PATH", ReadBy: ByCLI,
		Doc: "The kaimon-agentd program kaimon starts."},
	{Name: "KAIMON_AGENTD_CPUPROFILE", ReadBy: ByDaemon,
		Doc: "A file to write a CPU profile of kaimon-agentd to, from its start to its exit, for go tool pprof: " +
			"what the daemon itself spends, for performance work (BENCHMARKS.md)."},
}, programVars(), []EnvVar{
	{Name: "KAIMON_OLLAMA_URL", Default: "ollama_url in the config file, else from OLLAMA_HOST, else " + config.DefaultOllamaURL, ReadBy: ByDaemon,
		Doc: "The Ollama server of ollama:<tag> agents, a URL such as " + config.DefaultOllamaURL + "."},
	{Name: "OLLAMA_HOST", ReadBy: ByDaemon,
		Doc: "Ollama's own variable, read by Ollama's rules (a bare host, host:port, or a URL) when neither KAIMON_OLLAMA_URL nor ollama_url is set."},
	{Name: "KAIMON_VMLX_URL", Default: "vmlx_url in the config file, else " + config.DefaultVMLXURL, ReadBy: ByDaemon,
		Doc: "The OpenAI-compatible base URL (up to /v1) of vmlx:<tag> agents: an MLX server, llama.cpp's server, vLLM or LM Studio."},
	{Name: "KAIMON_PERMISSION_TIMEOUT", Default: fmt.Sprintf("permission_timeout in the config file, else %d", config.DefaultPermissionTimeout), ReadBy: ByDaemon,
		Doc: "Seconds an agent's permission request waits for kaimon permit before it is denied."},
	{Name: "KAIMON_VERSION", Default: "git describe --tags --always --dirty, else 0.0.0-unknown", ReadBy: ByBuild,
		Doc: "The version stamped into kaimon and kaimon-agentd when they are built from source; set, it overrides " +
			"what git says (the commit is still git's). Not read by the programs, which print the stamp."},
	{Name: "KAIMON_AGENT_SESSION", ReadBy: ByAgents,
		Doc: "Set by kaimon-agentd in each agent's environment to the agent's id, so that programs the agent runs " +
			"(and the MCP door) know which agent they serve. Not read from the user's environment."},
	{Name: "KAIMON_DOOR_TOKEN", ReadBy: ByAgents,
		Doc: "Set by kaimon-agentd in the environment of a codex: agent's app-server to the agent's secret for the MCP " +
			"door, which Codex sends as the bearer token of server kaimon (its bearer_token_env_var): the secret is in no " +
			"protocol message or rollout file, and Codex's default shell policy keeps it from the model's commands. " +
			"Not read from the user's environment."},
	{Name: "KAIMON_PROC_TAG", ReadBy: ByAgents,
		Doc: "Set by kaimon-agentd in the environment of each process it starts, to a tag of that process's own; " +
			"every descendant inherits it, so that what an agent leaves running when it dies (a tool re-parented " +
			"to the daemon) is found, stopped and reaped. Not read from the user's environment."},
	{Name: "ANTHROPIC_*", ReadBy: ByAgents,
		Doc: "Passed on to the claude CLI (ANTHROPIC_BASE_URL, ANTHROPIC_API_KEY, ...). The daemon's agents get the " +
			"environment the daemon was started with; kaimon names the KAIMON_*_BIN and ANTHROPIC_* variables that " +
			"differ from the shell's (never their values): kaimon daemon restart then restarts it with this one."},
	{Name: "PATH", ReadBy: ByBoth, Doc: "Where kaimon-agentd and the agent programs are looked up."},
	{Name: "HOME", ReadBy: ByBoth, Doc: "The base of the default paths when KAIMON_HOME is unset; without it, the passwd entry's home."},
	{Name: "NO_COLOR", ReadBy: ByCLI, Doc: "Set and not empty: kaimon prints no colour."},
	{Name: "TERM", ReadBy: ByCLI, Doc: "dumb: kaimon prints no colour, and a live kaimon run no spinner."},
})

// programVars are the variables that name an agent program, one per row
// of agentbin's catalogue, so that a new agent is documented by adding it
// there.
func programVars() []EnvVar {
	var out []EnvVar
	for _, p := range agentbin.All() {
		doc := fmt.Sprintf("The program of acp:%s agents (%s, from the npm package %s); wins over %s in the config file.",
			p.Name, p.Title, p.Package, p.ConfigKey)
		switch p.Env {
		case agentbin.Claude.Env:
			doc = fmt.Sprintf("The claude CLI the claude backend runs (from the npm package %s); wins over %s in the config file.",
				p.Package, p.ConfigKey)
		case agentbin.Codex.Env:
			doc = fmt.Sprintf("The Codex CLI codex: agents run as `codex app-server` (from the npm package %s); wins over %s in the config file.",
				p.Package, p.ConfigKey)
		}
		out = append(out, EnvVar{Name: p.Env, Default: p.Bin + " on PATH", ReadBy: ByDaemon, Doc: doc})
	}
	return out
}
