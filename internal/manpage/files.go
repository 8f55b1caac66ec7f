package manpage

import (
	"reflect"
	"strings"

	"github.com/kaimon/kaimon/internal/config"
	"github.com/kaimon/kaimon/internal/verbs"
)

// The default directories, as config.Resolve computes them for a home
// directory of ~ (a test holds them to it).
const (
	DefaultCacheDir    = "~/.cache/kaimon/agents"
	DefaultConfig      = "~/.config/kaimon/config.json"
	DefaultSockDir     = "/run/user/<uid>/kaimon" // else ~/.cache/kaimon/sock
	DefaultWorktreeDir = "~/.local/share/kaimon/worktrees"
)

type file struct{ path, doc string }

// files lists the places kaimon reads and writes, with paths from the code
// that computes them.
func files() []file {
	p := config.Paths{CacheDir: DefaultCacheDir, ConfigFile: DefaultConfig, SockDir: DefaultSockDir, WorktreeDir: DefaultWorktreeDir}
	id := "<id>"
	out := []file{
		{p.ConfigFile, "The config file (JSON; $KAIMON_CONFIG). A missing file means the defaults; one that does not parse is an error. Keys: " +
			strings.Join(configKeys(), ", ") + "."},
		{p.SockDir, "The socket dir, mode 0700 ($KAIMON_SOCK_DIR). When /run/user/<uid> is not a directory the user owns: ~/.cache/kaimon/sock."},
		{p.Socket(), "The control socket (mode 0600): HTTP/1.1 with JSON, one route /v1/<verb> per verb. Only its owner may connect (checked by SO_PEERCRED)."},
		{p.EventsSocket(), "The event bus: a ZeroMQ PUB socket, ipc://" + p.EventsSocket() + "; see kaimon-events(7)."},
		{p.LockFile(), "Held locked (flock) by the one daemon of this socket dir."},
		{p.DoorFile(), "The address of the daemon's MCP door, the loopback HTTP endpoint owned agents call back into."},
		{p.CacheDir, "The cache dir ($KAIMON_CACHE_DIR), mode 0700: the files below."},
	}
	agent := p.Agent(id)
	for _, k := range config.AgentFileKinds {
		path := agent.Path(k)
		if k.Dir {
			path += "/"
		}
		out = append(out, file{path, k.Doc + " " + removedBy[k.Lifetime]})
	}
	return append(out,
		file{p.PidFile(), "The live agent processes (pid and start time), so that a restarted daemon stops its predecessor's leftovers and never a stranger with a reused pid."},
		file{p.DaemonLog(), "The log of a daemon kaimon started."},
		file{p.MCPStateKey(), "The key (mode 0600, made once) with which kaimon mcp seals the requestState of a permission it asks a 2026-07-28 MCP client about, so that the client's retry reaches a kaimon mcp started since. Removed, the next kaimon mcp makes another, and retries of earlier rounds are refused."},
		file{p.MCPStateUsed(), "The requestStates of those rounds already answered, until they lapse: one replayed is refused."},
		file{p.Worktree(id) + "/", "The git worktree of an agent opened with --worktree ($KAIMON_WORKTREE_DIR), on its branch " + verbs.BranchPrefix + id + " unless named. " +
			"kaimon close keeps it; kaimon forget removes it when it is clean (with --force also when not), and its branch when merged into its base (or with --delete-branch)."},
	)
}

// removedBy says what removes an agent's file of each lifetime.
var removedBy = map[config.Lifetime]string{
	config.UntilForget:     "kaimon forget removes it.",
	config.UntilForgetLogs: "kaimon forget keeps it; kaimon forget --logs removes it.",
	config.WhileLive:       "Removed when the agent exits; one a lost daemon left, when the next daemon starts or by kaimon forget.",
	config.WhileOpening:    "Removed once the open is done; one a killed daemon left, when the next daemon starts, which removes the worktree and branch it names (the branch only while it is where the open made it); kaimon forget removes any still there.",
}

// configKeys lists the config file's keys, from config.Config.
func configKeys() []string {
	var keys []string
	t := reflect.TypeOf(config.Config{})
	for i := 0; i < t.NumField(); i++ {
		if k := strings.Split(t.Field(i).Tag.Get("json"), ",")[0]; k != "" && k != "-" {
			keys = append(keys, k)
		}
	}
	return keys
}

func writeFiles(r page) {
	r.sh("FILES")
	for _, f := range files() {
		r.item(f.path, f.doc)
	}
}

func writeEnv(r page, readers ...string) {
	r.sh("ENVIRONMENT")
	r.prose("A relative path in a variable is taken from the directory of the program that reads it: " +
		"kaimon-agentd makes its own absolute against the directory it is started in, then works in /. " +
		"A program named without a / is looked up on PATH.")
	for _, e := range Env {
		keep := len(readers) == 0
		for _, who := range readers {
			keep = keep || strings.Contains(e.ReadBy, who)
		}
		if !keep {
			continue
		}
		text := e.Doc
		if e.Default != "" {
			text += " Default: " + e.Default + "."
		}
		if e.ReadBy == ByAgents {
			text += " (For the agents.)"
		} else {
			text += " (Read by " + e.ReadBy + ".)"
		}
		r.item(e.Name, text)
	}
}
