package manpage

import (
	"reflect"
	"strings"

	"github.com/kaimon/kaimon/internal/config"
	"github.com/kaimon/kaimon/internal/eventlog"
)

// The default directories, as config.Resolve computes them for a home
// directory of ~ (a test holds them to it).
const (
	DefaultCacheDir = "~/.cache/kaimon/agents"
	DefaultConfig   = "~/.config/kaimon/config.json"
	DefaultSockDir  = "/run/user/<uid>/kaimon" // else ~/.cache/kaimon/sock
)

// Names of files whose paths this package cannot compute by calling the
// code that does: session.RecordPath is held to RecordSuffix by a test
// (importing session here would pull the daemon into the CLI); the
// backends join the other two inline, in claude.go, acp.go and door.go.
const (
	RecordSuffix    = ".agent.json"    // session.RecordPath
	StderrLogSuffix = ".log"           // the backends' stderr log
	MCPConfigSuffix = "-mcp.json"      // claude's generated --mcp-config
	HistorySuffix   = ".history.jsonl" // local.HistorySuffix
)

type file struct{ path, doc string }

// files lists the places kaimon reads and writes, with paths from the code
// that computes them.
func files() []file {
	p := config.Paths{CacheDir: DefaultCacheDir, ConfigFile: DefaultConfig, SockDir: DefaultSockDir}
	id := "<id>"
	return []file{
		{p.ConfigFile, "The config file (JSON; $KAIMON_CONFIG). A missing file means the defaults; one that does not parse is an error. Keys: " +
			strings.Join(configKeys(), ", ") + "."},
		{p.SockDir, "The socket dir, mode 0700 ($KAIMON_SOCK_DIR). When /run/user/<uid> is not a directory the user owns: ~/.cache/kaimon/sock."},
		{p.Socket(), "The control socket (mode 0600): HTTP/1.1 with JSON, one route /v1/<verb> per verb. Only its owner may connect (checked by SO_PEERCRED)."},
		{p.EventsSocket(), "The event bus: a ZeroMQ PUB socket, ipc://" + p.EventsSocket() + "; see kaimon-events(7)."},
		{p.LockFile(), "Held locked (flock) by the one daemon of this socket dir."},
		{p.DoorFile(), "The address of the daemon's MCP door, the loopback HTTP endpoint owned agents call back into."},
		{p.CacheDir, "The cache dir ($KAIMON_CACHE_DIR), mode 0700: the files below."},
		{eventlog.Path(p.CacheDir, id), "The agent's event log, one authoritative event a line; see kaimon-events(7)."},
		{p.CacheDir + "/" + id + RecordSuffix, "The agent's record: what kaimon open was given, its status and usage. It keeps a dead agent listed and resumable until kaimon forget."},
		{p.CacheDir + "/" + id + StderrLogSuffix, "The agent program's stderr."},
		{p.CacheDir + "/" + id + HistorySuffix, "The conversation of an ollama: or vmlx: agent, which kaimon holds: one message a line. A resume continues it; kaimon forget --logs removes it."},
		{p.CacheDir + "/" + id + MCPConfigSuffix, "The MCP config generated for a claude agent, pointing it at the door."},
		{p.PidFile(), "The live agent processes (pid and start time), so that a restarted daemon stops its predecessor's leftovers and never a stranger with a reused pid."},
		{p.DaemonLog(), "The log of a daemon kaimon started."},
	}
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

func writeFiles(r *roff) {
	r.sh("FILES")
	for _, f := range files() {
		r.item(f.path, f.doc)
	}
}

func writeEnv(r *roff, readers ...string) {
	r.sh("ENVIRONMENT")
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
