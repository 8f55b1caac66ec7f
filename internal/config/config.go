// Package config resolves kaimon's paths (cache, config file, socket dir) and
// reads the config file. Every path can be overridden by environment, so
// tests and several users never collide: tests set only KAIMON_HOME.
package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/kaimon/kaimon/internal/agentbin"
)

// Paths are the places kaimon reads and writes.
type Paths struct {
	CacheDir   string // event logs, stderr logs, pid file, generated configs
	ConfigFile string
	SockDir    string // mode 0700: agentd.sock (control) and kaimon-events.sock (bus)
	// WorktreeDir holds the agents' git worktrees, <dir>/<id>. Not in the
	// cache dir: a worktree holds work not yet committed, which clearing
	// a cache must not lose. Not in the repository either: the main
	// checkout's git status, its build and its file watchers would see
	// every agent's copy.
	WorktreeDir string
}

// Socket is the control socket's path.
func (p Paths) Socket() string { return filepath.Join(p.SockDir, "agentd.sock") }

// EventsSocket is the bus socket's path.
func (p Paths) EventsSocket() string { return filepath.Join(p.SockDir, "kaimon-events.sock") }

// LockFile is the file one daemon per socket dir holds locked (flock).
func (p Paths) LockFile() string { return filepath.Join(p.SockDir, "agentd.lock") }

// PidFile is the file recording live agent children.
func (p Paths) PidFile() string { return filepath.Join(p.CacheDir, "pids.json") }

// RecordSuffix ends the name of an agent's record in the cache dir,
// <id>.agent.json: the daemon keeps it, and completion reads it while no
// daemon runs.
const RecordSuffix = ".agent.json"

// Worktree is where agent id's git worktree is made.
func (p Paths) Worktree(id string) string { return filepath.Join(p.WorktreeDir, id) }

// DaemonLog is where an auto-started daemon writes its own log.
func (p Paths) DaemonLog() string { return filepath.Join(p.CacheDir, "agentd.log") }

// Resolve computes the paths from the environment:
//
//	KAIMON_HOME        root for all of the below when set
//	KAIMON_CACHE_DIR   default ~/.cache/kaimon/agents
//	KAIMON_CONFIG      default ~/.config/kaimon/config.json
//	KAIMON_SOCK_DIR    default /run/user/<uid>/kaimon when /run/user/<uid>
//	                   is a directory we own, else ~/.cache/kaimon/sock
//	KAIMON_WORKTREE_DIR default ~/.local/share/kaimon/worktrees
//
// The socket dir's default depends on the uid, never on XDG_RUNTIME_DIR or
// other inherited variables: MCP clients start `kaimon mcp` with a minimal
// environment, and it must reach the daemon the user's shell started rather
// than start a second one elsewhere. Without HOME, the passwd entry names
// the home directory.
func Resolve() (Paths, error) { return ResolveEnv(os.Getenv) }

// ResolveEnv is Resolve from the environment getenv reads: a daemon's
// (daemon.LoadConfig), which need not be this process's.
func ResolveEnv(getenv func(string) string) (Paths, error) {
	var p Paths
	if h := getenv(homeVar); h != "" {
		h, err := absDir(homeVar, h)
		if err != nil {
			return p, err
		}
		p = Paths{
			CacheDir:    filepath.Join(h, "cache", "agents"),
			ConfigFile:  filepath.Join(h, "config.json"),
			SockDir:     filepath.Join(h, "sock"),
			WorktreeDir: filepath.Join(h, "worktrees"),
		}
	} else {
		home, err := homeDir(getenv)
		if err != nil {
			return p, err
		}
		p = Paths{
			CacheDir:    filepath.Join(home, ".cache", "kaimon", "agents"),
			ConfigFile:  filepath.Join(home, ".config", "kaimon", "config.json"),
			SockDir:     defaultSockDir(runUserDir, os.Getuid(), home),
			WorktreeDir: filepath.Join(home, ".local", "share", "kaimon", "worktrees"),
		}
	}
	// Each absolute, whatever it came from (a relative HOME too): see
	// abspath.go.
	for _, set := range p.overrides() {
		if v := getenv(set.env); v != "" {
			*set.field = v
		}
		abs, err := absDir(set.env, *set.field)
		if err != nil {
			return p, err
		}
		*set.field = abs
	}
	if getenv(homeVar) == "" && getenv("KAIMON_SOCK_DIR") == "" && len(p.EventsSocket()) > maxSocketPath {
		return p, fmt.Errorf("the socket path %s is longer than a unix socket allows (%d bytes): set KAIMON_SOCK_DIR to a shorter directory", p.EventsSocket(), maxSocketPath)
	}
	return p, nil
}

// homeVar is the variable that roots every path (Resolve).
const homeVar = "KAIMON_HOME"

// pathSetting is a variable that overrides one of the paths.
type pathSetting struct {
	env   string
	field *string
}

// overrides are the variables that override p's paths, each with its field.
func (p *Paths) overrides() []pathSetting {
	return []pathSetting{{"KAIMON_CACHE_DIR", &p.CacheDir}, {"KAIMON_CONFIG", &p.ConfigFile},
		{"KAIMON_SOCK_DIR", &p.SockDir}, {"KAIMON_WORKTREE_DIR", &p.WorktreeDir}}
}

// runUserDir holds the per-uid runtime directories systemd-logind makes
// (/run/user/<uid>). It is a variable only so that the end-to-end tests can
// link binaries (-ldflags -X) whose runtime root is a temporary directory:
// a test must neither depend on nor touch the machine's /run/user, and an
// environment variable here would bring back the very dependence on
// inherited environment that this default exists to avoid.
var runUserDir = "/run/user"

// maxSocketPath is the longest path a unix socket can bind (sun_path holds
// 108 bytes with its terminating NUL).
const maxSocketPath = 107

// defaultSockDir is <runUser>/<uid>/kaimon when <runUser>/<uid> is a
// directory owned by uid (so that no one else can have prepared it), else
// <home>/.cache/kaimon/sock.
func defaultSockDir(runUser string, uid int, home string) string {
	dir := filepath.Join(runUser, strconv.Itoa(uid))
	if fi, err := os.Stat(dir); err == nil && fi.IsDir() {
		if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) == uid {
			return filepath.Join(dir, "kaimon")
		}
	}
	return filepath.Join(home, ".cache", "kaimon", "sock")
}

// homeDir is $HOME, else the passwd entry's home directory: a client
// started with an empty environment still finds the user's paths.
func homeDir(getenv func(string) string) (string, error) {
	if h := getenv("HOME"); h != "" {
		return h, nil
	}
	u, err := user.Current()
	if err != nil || u.HomeDir == "" {
		return "", fmt.Errorf("cannot find the home directory: HOME is unset and the passwd entry says nothing (%v); set HOME or KAIMON_HOME", err)
	}
	return u.HomeDir, nil
}

// ProgramBin is one agent program the config file may name: the variable
// that names it too (and wins over the file), the file's key, and the
// file's value ("" when unset).
type ProgramBin struct {
	Env   string // e.g. KAIMON_CLAUDE_BIN
	Key   string // e.g. claude_bin
	Value string
}

// ProgramBins maps each program of agentbin's table to its config key's
// value: the daemon puts each value set in the file into its agents'
// environment as its variable (unless the variable is set there:
// daemon.Config.AgentEnv), which is how the backends, which read only the
// variables, see the file; `kaimon doctor` reads it to say where a
// program's path came from.
func (c Config) ProgramBins() []ProgramBin {
	values := c.binFields()
	var out []ProgramBin
	for _, p := range agentbin.All() {
		v := ""
		if f := values[p.ConfigKey]; f != nil {
			v = *f
		}
		out = append(out, ProgramBin{Env: p.Env, Key: p.ConfigKey, Value: v})
	}
	return out
}

// binFields are the file's program keys, each with its field.
func (c *Config) binFields() map[string]*string {
	return map[string]*string{"claude_bin": &c.ClaudeBin, "opencode_bin": &c.OpencodeBin,
		"claude_acp_bin": &c.ClaudeACPBin, "gemini_bin": &c.GeminiBin,
		"codex_bin": &c.CodexBin, "codex_acp_bin": &c.CodexACPBin, "qwen_bin": &c.QwenBin, "copilot_bin": &c.CopilotBin,
		"kilo_bin": &c.KiloBin, "auggie_bin": &c.AuggieBin}
}

// absPaths makes the file's path settings absolute against dir, the
// file's directory (abspath.go): the programs that are paths rather than
// names on PATH, and the bus's ipc endpoints.
func (c *Config) absPaths(dir string) {
	for _, f := range c.binFields() {
		*f = absProgram(dir, *f)
	}
	for i, ep := range c.BusEndpoints {
		if p, ok := strings.CutPrefix(ep, "ipc://"); ok && p != "" && !filepath.IsAbs(p) {
			c.BusEndpoints[i] = "ipc://" + filepath.Join(dir, p)
		}
	}
}

// ProgramBin returns the table's row for the variable env.
func (c Config) ProgramBin(env string) (ProgramBin, bool) {
	for _, b := range c.ProgramBins() {
		if b.Env == env {
			return b, true
		}
	}
	return ProgramBin{}, false
}

// Config is the config file's content. Unknown keys are ignored so that a
// newer file works with an older kaimon.
type Config struct {
	// AgentImageMaxLongEdge bounds tool-result PNGs (pixels, long edge).
	AgentImageMaxLongEdge int `json:"agent_image_max_long_edge"`
	// ClaudeBin is the claude CLI to run (KAIMON_CLAUDE_BIN wins).
	ClaudeBin string `json:"claude_bin"`
	// OpencodeBin, ClaudeACPBin and GeminiBin are the ACP agents' programs
	// (acp:opencode, acp:claude, acp:gemini); KAIMON_OPENCODE_BIN,
	// KAIMON_CLAUDE_ACP_BIN and KAIMON_GEMINI_BIN win.
	OpencodeBin  string `json:"opencode_bin"`
	ClaudeACPBin string `json:"claude_acp_bin"`
	GeminiBin    string `json:"gemini_bin"`
	// CodexBin is the Codex CLI the codex: backend runs (KAIMON_CODEX_BIN
	// wins).
	CodexBin string `json:"codex_bin"`
	// CodexACPBin, QwenBin, CopilotBin, KiloBin and AuggieBin are the
	// other built-in ACP agents' programs (acp:codex, acp:qwen,
	// acp:copilot, acp:kilo, acp:auggie); agentbin's variables win.
	CodexACPBin string `json:"codex_acp_bin"`
	QwenBin     string `json:"qwen_bin"`
	CopilotBin  string `json:"copilot_bin"`
	KiloBin     string `json:"kilo_bin"`
	AuggieBin   string `json:"auggie_bin"`
	// DeadKept, when set, is how many dead agents are kept: the oldest
	// beyond it are forgotten (agent_forget, logs kept). Unset (0), dead
	// agents are kept until the user forgets them.
	DeadKept int `json:"dead_kept"`
	// BusEndpoints are extra endpoints the event bus binds besides its ipc
	// socket, e.g. "tcp://127.0.0.1:5556" for subscribers in containers.
	BusEndpoints []string `json:"bus_endpoints"`
	// BusQueueBytes bounds each event bus subscriber's queue, in bytes
	// (0: the bus's default, 32 MiB): what a subscriber that falls behind
	// may cost the daemon before the bus drops its oldest envelopes.
	BusQueueBytes int `json:"bus_queue_bytes"`
	// PermissionTimeout is how many seconds an agent's permission request
	// waits for agent_permit before it is denied (KAIMON_PERMISSION_TIMEOUT
	// wins).
	PermissionTimeout float64 `json:"permission_timeout"`
	// OllamaURL is the Ollama server of ollama:<tag> agents
	// (KAIMON_OLLAMA_URL wins; without either, OLLAMA_HOST by Ollama's own
	// rules, else DefaultOllamaURL).
	OllamaURL string `json:"ollama_url"`
	// OllamaThink is Ollama's "think" request field, passed as written:
	// true, false, or a level ("low", "medium", "high") for the models that
	// take one. Unset, the model's own default.
	OllamaThink json.RawMessage `json:"ollama_think"`
	// OllamaKeepAlive is Ollama's "keep_alive": how long the model stays
	// loaded after a request, a duration ("10m") or seconds (-1: forever).
	// Unset, the server's default.
	OllamaKeepAlive json.RawMessage `json:"ollama_keep_alive"`
	// VMLXURL is the OpenAI-compatible base URL of vmlx:<tag> agents, up to
	// and including /v1 (KAIMON_VMLX_URL wins; default DefaultVMLXURL).
	VMLXURL string `json:"vmlx_url"`
	// VMLXAPIKey, when set, is sent as "Authorization: Bearer KEY" to the
	// vmlx server.
	VMLXAPIKey string `json:"vmlx_api_key"`
	// LocalMaxRounds bounds the model requests of one turn of an ollama: or
	// vmlx: agent (each tool call round is one); a turn that needs more
	// fails with an error event.
	LocalMaxRounds int `json:"local_max_rounds"`
	// Hosts are the other machines the CLI drives agents on, by name
	// (`kaimon host add`): read and written by internal/fleet (fleet.Host,
	// LoadHosts), which alone gives them a shape; the daemon has no use
	// for them. Here so that the file's keys are listed in one place.
	Hosts json.RawMessage `json:"hosts"`
	// ACPAgents are other ACP agents (acp:NAME), or other commands for
	// built-in ones: acpagents.go.
	ACPAgents ACPAgents `json:"acp_agents"`
}

// Defaults returns the configuration used when the file is absent.
func Defaults() Config {
	return Config{AgentImageMaxLongEdge: DefaultAgentImageMaxLongEdge, PermissionTimeout: DefaultPermissionTimeout, LocalMaxRounds: DefaultLocalMaxRounds}
}

// DefaultLocalMaxRounds is local_max_rounds' default.
const DefaultLocalMaxRounds = 24

// DefaultPermissionTimeout is permission_timeout's default, in seconds.
const DefaultPermissionTimeout = 300

// DefaultAgentImageMaxLongEdge is agent_image_max_long_edge's default, in
// pixels.
const DefaultAgentImageMaxLongEdge = 1568

// The model servers of local agents unless told otherwise: Ollama's own
// address, and the OpenAI-compatible base URL of vmlx: agents. Here rather
// than in internal/backend/local, which uses them, so that the man pages
// (which the CLI links, and must not link a backend) state the defaults the
// daemon applies.
const (
	DefaultOllamaURL = "http://127.0.0.1:11434"
	DefaultVMLXURL   = "http://127.0.0.1:8000/v1"
)

// ApplyEnv applies to c the variables of the environment getenv reads
// that override a key of the file and that the daemon reads itself, rather
// than handing them on to its agents in their environment:
// KAIMON_PERMISSION_TIMEOUT (seconds), when set to a positive number,
// over permission_timeout. The daemon does it
// once, where its Config is built (daemon.LoadConfig), so that nothing it
// runs reads the process's environment later.
func (c *Config) ApplyEnv(getenv func(string) string) {
	if v, err := strconv.ParseFloat(getenv("KAIMON_PERMISSION_TIMEOUT"), 64); err == nil && v > 0 {
		c.PermissionTimeout = v
	}
}

// PermissionWait is how long a permission request waits for an answer:
// permission_timeout (with ApplyEnv's override), else the default.
func (c Config) PermissionWait() time.Duration {
	secs := c.PermissionTimeout
	if secs <= 0 {
		secs = DefaultPermissionTimeout
	}
	return time.Duration(secs * float64(time.Second))
}

// DoorFile records the port of the daemon's MCP door.
func (p Paths) DoorFile() string { return filepath.Join(p.SockDir, "door.json") }

// Load reads the config file; a missing file yields the defaults. A file
// that does not parse is an error naming the file, never silently ignored.
func Load(path string) (Config, error) {
	c := Defaults()
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return c, nil
	}
	if err != nil {
		return c, err
	}
	if err := json.Unmarshal(b, &c); err != nil {
		return c, fmt.Errorf("config file %s: %w (fix or remove it)", path, err)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return c, fmt.Errorf("config file %s: %w", path, err)
	}
	c.absPaths(filepath.Dir(abs))
	c.ACPAgents.absPaths(filepath.Dir(abs))
	if c.DeadKept < 0 {
		c.DeadKept = 0
	}
	if c.AgentImageMaxLongEdge <= 0 {
		c.AgentImageMaxLongEdge = 1568
	}
	if c.LocalMaxRounds <= 0 {
		c.LocalMaxRounds = DefaultLocalMaxRounds
	}
	if err := checkThink(c.OllamaThink); err != nil {
		return c, fmt.Errorf("config file %s: ollama_think: %w", path, err)
	}
	if err := checkKeepAlive(c.OllamaKeepAlive); err != nil {
		return c, fmt.Errorf("config file %s: ollama_keep_alive: %w", path, err)
	}
	return c, nil
}

// checkThink accepts what Ollama's "think" takes: a boolean or a level.
func checkThink(raw json.RawMessage) error {
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	var b bool
	if json.Unmarshal(raw, &b) == nil {
		return nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil && (s == "low" || s == "medium" || s == "high") {
		return nil
	}
	return fmt.Errorf("%s is neither true, false nor a level (\"low\", \"medium\", \"high\")", raw)
}

// checkKeepAlive accepts what Ollama's "keep_alive" takes: a duration
// string ("10m", "1h") or a number of seconds.
func checkKeepAlive(raw json.RawMessage) error {
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	var n float64
	if json.Unmarshal(raw, &n) == nil {
		return nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		if _, err := time.ParseDuration(s); err == nil {
			return nil
		}
	}
	return fmt.Errorf("%s is neither a duration (\"10m\") nor a number of seconds", raw)
}
