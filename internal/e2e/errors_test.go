package e2e

import (
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kaimon/kaimon/internal/proc"
	"github.com/kaimon/kaimon/internal/verbs"
)

// Bad input gets a clear error, a stable exit code, and no crash: the
// daemon answers the next request as before.
func TestBadInput(t *testing.T) {
	e := newEnv(t)

	e.fails(2, "open takes at most one DIR", "open", "a", "b")
	e.fails(2, "send takes ID TEXT", "send", "onlyid")
	e.fails(2, "flag provided but not defined", "status", "--bogus", "x")
	e.fails(2, "unknown command", "frobnicate")

	e.fails(1, "does not exist", "open", filepath.Join(e.work, "nope"))
	e.fails(1, `permission "yolo" is not one of default, notebook, specialist, lab, auto, bypass`, "open", "--permission", "yolo", e.work)
	e.fails(1, `permission_mode "sometimes" is not one of`, "open", "--permission-mode", "sometimes", e.work)
	e.fails(1, "effort", "open", "--model", "sonnet/extreme", e.work)
	e.fails(1, `effort "huge" is not one of low, medium, high, xhigh, max`, "open", "--id", "fixed", "--effort", "huge", e.work)
	e.fails(1, `unknown ACP agent "nobody"`, "open", "--id", "fixed", "--model", "acp:nobody", e.work)
	e.fails(1, "effort is a claude CLI option", "open", "--model", "acp:opencode", "--effort", "low", e.work)
	e.fails(1, "pass the path of an existing MCP config", "open", "--id", "fixed", "--mcp-config", filepath.Join(e.work, "none.json"), e.work)
	e.fails(1, "names no tag", "open", "--model", "ollama:", e.work)
	e.fails(1, "effort is a claude CLI option", "open", "--model", "vmlx:m", "--effort", "low", e.work)
	e.fails(1, `no agent "ghost"`, "status", "ghost")
	e.fails(1, `no agent "ghost"`, "send", "ghost", "hi")
	e.fails(1, "must be 1-64", "open", "--id", "../escape", e.work)
	// Every refused open left nothing behind: no agent, no file.
	e.noAgents()

	// --json errors are the API's JSON error object on stderr.
	r := e.kaimon("status", "ghost", "--json")
	var je verbs.Error
	if r.code != 1 || json.Unmarshal([]byte(r.stderr), &je) != nil || je.Code != verbs.CodeNotFound {
		t.Fatalf("status ghost --json: %s", r)
	}
	r = e.kaimon("open", "--effort", "huge", e.work, "--json")
	if r.code != 1 || json.Unmarshal([]byte(r.stderr), &je) != nil || je.Code != verbs.CodeBadArgument {
		t.Fatalf("open --effort huge --json: %s", r)
	}

	// A turn the model API fails: exit 3, the API's message, agent alive.
	id := e.ok("open", e.work)
	r = e.fails(3, "failed", "run", id, "please fail")
	if !strings.Contains(r.stderr+r.stdout, "API Error") {
		t.Fatalf("failed turn does not say why: %s", r)
	}
	var st verbs.AgentStatus
	e.okJSON(&st, "status", id)
	if st.Status != "idle" {
		t.Fatalf("status after a failed turn = %q", st.Status)
	}
	// A timeout: exit 4, the partial text printed, the agent keeps working.
	r = e.fails(4, "did not end within 1s", "run", id, "please be slow", "--timeout", "1s")
	e.okJSON(&st, "status", id)
	if st.Status != "working" {
		t.Fatalf("status after a timed-out run = %q, want working", st.Status)
	}
	e.ok("interrupt", id)
	e.ok("close", id)
	if got := e.ok("close", id); got != "already closed" {
		t.Fatalf("second close = %q", got)
	}
}

// noAgents fails the test unless the daemon lists no agent and the cache
// dir holds no agent's file (only the daemon's own: config.Paths.DaemonFiles).
func (e *kenv) noAgents() {
	e.t.Helper()
	var l verbs.ListResult
	e.okJSON(&l, "list")
	if len(l.Agents) != 0 {
		e.t.Fatalf("agents listed: %+v", l.Agents)
	}
	paths := e.paths()
	ents, err := os.ReadDir(paths.CacheDir)
	if err != nil {
		e.t.Fatal(err)
	}
	own := paths.DaemonFiles()
	for _, ent := range ents {
		if !slices.Contains(own, filepath.Join(paths.CacheDir, ent.Name())) {
			e.t.Errorf("the cache dir holds %s", ent.Name())
		}
	}
}

// The model API down: the CLI fails the turn at once (no retries), and
// kaimon reports it as a failed turn rather than hanging.
func TestModelAPIDown(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + ln.Addr().String()
	ln.Close()
	e := newEnv(t, "ANTHROPIC_BASE_URL", dead)
	id := e.ok("open", e.work)
	r := e.fails(3, "failed", "run", id, "hello")
	if !strings.Contains(r.stderr, "Unable to connect") && !strings.Contains(r.stderr, "API Error") {
		t.Fatalf("API-down error does not say so: %s", r)
	}
}

func TestClaudeMissing(t *testing.T) {
	e := newEnv(t, "KAIMON_CLAUDE_BIN", "/nonexistent/claude")
	e.fails(1, "KAIMON_CLAUDE_BIN", "open", e.work)
	e.fails(1, "KAIMON_CLAUDE_BIN", "open", "--id", "named", e.work)
	e.noAgents()
}

func TestNoAutostart(t *testing.T) {
	e := newEnv(t)
	e.fails(1, "kaimon daemon start", "--no-autostart", "list")
	e.env = append(e.env, "KAIMON_NO_AUTOSTART=1")
	e.fails(1, "kaimon daemon start", "list")
	if got := e.ok("daemon", "start"); !strings.Contains(got, "started") {
		t.Fatalf("daemon start = %q", got)
	}
	e.ok("list")
}

// SIGTERM closes every live agent's process group, then the daemon exits.
// SIGKILL leaves the agent behind; the next daemon reaps it from the pid
// file, and only it.
func TestDaemonShutdownAndReap(t *testing.T) {
	e := newEnv(t)
	e.ok("daemon", "start")
	var ds struct {
		PID int `json:"pid"`
	}
	e.okJSON(&ds, "daemon", "status")
	id := e.ok("open", e.work)
	agentPIDs := e.agentPIDs(t)
	if len(agentPIDs) == 0 {
		t.Fatal("no agent process recorded in pids.json")
	}

	// Socket and dir permissions.
	if fi, err := os.Stat(filepath.Join(e.home, "sock")); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("socket dir mode: %v %v", fi.Mode(), err)
	}
	if fi, err := os.Stat(filepath.Join(e.home, "sock", "agentd.sock")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("socket mode: %v %v", fi.Mode(), err)
	}

	if err := syscall.Kill(ds.PID, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "daemon and agents to exit after SIGTERM", 15*time.Second, func() bool { return len(e.processes()) == 0 })

	// Now SIGKILL the daemon under a live agent, mid-turn.
	e.ok("daemon", "start")
	e.okJSON(&ds, "daemon", "status")
	id2 := e.ok("open", e.work)
	// Mid-turn, so that the orphaned CLI does not exit on its stdin closing.
	e.ok("send", id2, "please be slow")
	orphans := e.agentPIDs(t)
	if err := syscall.Kill(ds.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	// The agent does not work on unsupervised: it is told its daemon died.
	waitFor(t, "the orphaned agent to exit", 15*time.Second, func() bool {
		for _, id := range orphans {
			if id.Alive() {
				return false
			}
		}
		return true
	})
	// What outlives its daemon all the same (a process of the agent's
	// group, say) is reaped by the next daemon, by identity: a leftover
	// recorded with its start time is stopped, and a stranger recorded
	// with a mismatched start time survives.
	left := exec.Command("sleep", "300")
	left.Env = e.env
	lchild, err := proc.Start(left)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lchild.Stop(0) })
	stranger := proc.Identity{PID: os.Getpid(), StartTime: 1}
	writePids(t, e, []proc.Identity{lchild.ID, stranger})
	// The stale socket of the killed daemon is replaced.
	e.ok("daemon", "start")
	select {
	case <-lchild.Done():
	case <-time.After(15 * time.Second):
		t.Fatal("the leftover recorded in pids.json was not reaped")
	}
	// Both agents are accounted for: one closed by the daemon's clean
	// exit, one lost with its daemon.
	var l verbs.ListResult
	e.okJSON(&l, "list")
	reasons := map[string]string{}
	for _, a := range l.Agents {
		if a.AgentStatus.Status != "dead" {
			t.Errorf("agent %s is %s after the restart", a.AgentID, a.AgentStatus.Status)
		}
		reasons[a.AgentID] = a.Reason
	}
	if len(l.Agents) != 2 || reasons[id] != "daemon exited" || reasons[id2] != "daemon crashed" {
		t.Fatalf("new daemon lists %+v", l.Agents)
	}
}

func (e *kenv) agentPIDs(t *testing.T) []proc.Identity {
	t.Helper()
	var entries []struct {
		AgentID string `json:"agent_id"`
		proc.Identity
	}
	b, err := os.ReadFile(filepath.Join(e.home, "cache", "agents", "pids.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &entries); err != nil {
		t.Fatal(err)
	}
	var out []proc.Identity
	for _, en := range entries {
		out = append(out, en.Identity)
	}
	return out
}

func writePids(t *testing.T, e *kenv, ids []proc.Identity) {
	t.Helper()
	type entry struct {
		AgentID string `json:"agent_id"`
		proc.Identity
	}
	var entries []entry
	for i, id := range ids {
		entries = append(entries, entry{AgentID: "x" + string(rune('a'+i)), Identity: id})
	}
	b, _ := json.Marshal(entries)
	if err := os.WriteFile(filepath.Join(e.home, "cache", "agents", "pids.json"), b, 0o600); err != nil {
		t.Fatal(err)
	}
}
