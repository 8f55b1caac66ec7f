package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/kaimon/kaimon/internal/testutil/agents"
	"github.com/kaimon/kaimon/internal/verbs"
)

// buildWithRunUser builds kaimon and kaimon-agentd into dir with runUser as
// their runtime root in place of /run/user. Only a link-time seam lets a
// test derive the default socket dir the way a user's programs do without
// touching the machine's /run/user (shared with every other process of
// this uid), and without an environment variable that real users would
// then depend on too.
func buildWithRunUser(t *testing.T, dir, runUser string) {
	t.Helper()
	args := []string{"build", "-o", dir, "-ldflags", "-X github.com/kaimon/kaimon/internal/config.runUserDir=" + runUser}
	if os.Getenv("KAIMON_E2E_RACE") != "" {
		args = append(args, "-race")
	}
	build := exec.Command("go", append(args, "./cmd/kaimon", "./cmd/kaimon-agentd")...)
	build.Dir = agents.RepoRoot()
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building binaries: %v\n%s", err, out)
	}
}

// userEnv is a user's shell without any of kaimon's path variables: kaimon
// derives its paths from HOME and the uid. It runs its own build of kaimon
// (see buildWithRunUser).
type userEnv struct {
	t    *testing.T
	e    *kenv
	bin  string
	home string
	env  []string
}

// newUserEnv wraps an installation of newEnv as a user's shell whose HOME
// is the installation's root. The shell has an XDG_RUNTIME_DIR, as a login
// shell does, which a client started by an MCP client would lack.
func newUserEnv(t *testing.T) *userEnv {
	e := newEnv(t)
	u := &userEnv{t: t, e: e, bin: filepath.Join(e.home, "bin"), home: e.home}
	xdg := filepath.Join(e.home, "xdg")
	for _, d := range []string{u.bin, xdg} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	buildWithRunUser(t, u.bin, u.runUser())
	for _, kv := range e.env {
		switch name, _, _ := strings.Cut(kv, "="); name {
		case "KAIMON_HOME", "KAIMON_AGENTD_BIN", "HOME", "PATH":
		default:
			u.env = append(u.env, kv)
		}
	}
	u.env = append(u.env, "HOME="+u.home, "PATH="+u.path(), "XDG_RUNTIME_DIR="+xdg)
	// Before the harness's cleanup, which knows processes by KAIMON_HOME:
	// these have none.
	t.Cleanup(u.cleanup)
	return u
}

func (u *userEnv) runUser() string { return filepath.Join(u.home, "run-user") }

// path has this build first, so that a client finds the kaimon-agentd
// beside it either way.
func (u *userEnv) path() string { return u.bin + string(os.PathListSeparator) + os.Getenv("PATH") }

func (u *userEnv) kaimon(args ...string) result {
	u.t.Helper()
	return runKaimon(u.t, filepath.Join(u.bin, "kaimon"), u.e.work, u.env, nil, 3*time.Minute, args...)
}

func (u *userEnv) ok(args ...string) string {
	u.t.Helper()
	r := u.kaimon(args...)
	if r.code != 0 {
		u.t.Fatalf("kaimon %s: %s", strings.Join(args, " "), r)
	}
	return strings.TrimRight(r.stdout, "\n")
}

// processes lists live processes whose HOME is this user's: every kaimon,
// daemon and agent of the test.
func (u *userEnv) processes() []int { return processesWithEnv("HOME=" + u.home) }

// daemons are the user's kaimon-agentd processes.
func (u *userEnv) daemons() []int {
	var out []int
	for _, pid := range u.processes() {
		b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
		if argv0, _, _ := bytes.Cut(b, []byte{0}); filepath.Base(string(argv0)) == "kaimon-agentd" {
			out = append(out, pid)
		}
	}
	return out
}

func (u *userEnv) cleanup() {
	u.kaimon("daemon", "stop")
	var left []int
	deadline := time.Now().Add(10 * time.Second)
	for {
		if left = u.processes(); len(left) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if len(left) > 0 {
		u.t.Errorf("leaked processes after daemon stop: %v", describe(left))
		for _, pid := range left {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// mcpMinimal starts `kaimon mcp` as MCP clients such as Claude Desktop and
// the MCP Inspector do: with nothing of the shell's environment but HOME
// and PATH.
func (u *userEnv) mcpMinimal() *client.Client {
	t := u.t
	t.Helper()
	c, err := client.NewStdioMCPClient("env", nil, "-i", "HOME="+u.home, "PATH="+u.path(), filepath.Join(u.bin, "kaimon"), "mcp")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var init mcp.InitializeRequest
	init.Params.ProtocolVersion = mcp.LATEST_PROTOCOL_VERSION
	init.Params.ClientInfo = mcp.Implementation{Name: "kaimon-e2e", Version: "1"}
	if _, err := c.Initialize(ctx, init); err != nil {
		c.Close()
		t.Fatal(err)
	}
	return c
}

// TestMCPMinimalEnvFindsShellDaemon: `kaimon mcp` started with only HOME
// and PATH reaches the daemon the user's shell started, and sees its
// agents, whether the socket dir is the per-uid runtime dir or under
// ~/.cache; it starts no second daemon.
func TestMCPMinimalEnvFindsShellDaemon(t *testing.T) {
	u := newUserEnv(t)
	for _, tc := range []struct {
		name    string
		prepare func()
		sockDir string
	}{
		{"no runtime dir", func() {}, filepath.Join(u.home, ".cache", "kaimon", "sock")},
		{"runtime dir", func() {
			if err := os.MkdirAll(filepath.Join(u.runUser(), strconv.Itoa(os.Getuid())), 0o700); err != nil {
				t.Fatal(err)
			}
		}, filepath.Join(u.runUser(), strconv.Itoa(os.Getuid()), "kaimon")},
	} {
		tc.prepare()
		id := u.ok("open", u.e.work)
		if _, err := os.Stat(filepath.Join(tc.sockDir, "agentd.sock")); err != nil {
			t.Fatalf("%s: the shell's daemon is not on %s: %v", tc.name, tc.sockDir, err)
		}
		c := u.mcpMinimal()
		var req mcp.CallToolRequest
		req.Params.Name = "agent_list"
		res, err := c.CallTool(context.Background(), req)
		if err != nil || res.IsError || len(res.Content) != 1 {
			t.Fatalf("%s: agent_list: %+v %v", tc.name, res, err)
		}
		var l verbs.ListResult
		err = json.Unmarshal([]byte(res.Content[0].(mcp.TextContent).Text), &l)
		live := map[string]bool{}
		for _, a := range l.Agents {
			// Agents of the cases before are listed too, dead.
			live[a.AgentID] = a.AgentStatus.Status != "dead"
		}
		if err != nil || len(live) != len(l.Agents) || !live[id] {
			t.Fatalf("%s: kaimon mcp with a minimal environment lists %+v (%v), not the shell's live agent %s", tc.name, l.Agents, err, id)
		}
		// The daemon's environment has ANTHROPIC_* and KAIMON_CLAUDE_BIN,
		// this one none: an error that may come from that says so, also
		// through MCP.
		req.Params.Name = "agent_open"
		req.Params.Arguments = map[string]any{"cwd": filepath.Join(u.home, "no-such-dir")}
		res, err = c.CallTool(context.Background(), req)
		if err != nil || !res.IsError {
			t.Fatalf("%s: agent_open in a missing dir: %+v %v", tc.name, res, err)
		}
		if txt := res.Content[0].(mcp.TextContent).Text; !strings.Contains(txt, "ANTHROPIC_BASE_URL") || !strings.Contains(txt, "KAIMON_CLAUDE_BIN") ||
			!strings.Contains(txt, "kaimon daemon restart") || strings.Contains(txt, u.e.api.URL()) {
			t.Fatalf("%s: agent_open's error does not explain the environment: %s", tc.name, txt)
		}
		c.Close()
		if d := u.daemons(); len(d) != 1 {
			t.Fatalf("%s: %d daemons: %s", tc.name, len(d), describe(d))
		}

		// Stop returns once the daemon has released its lock: a command
		// right after it starts the next daemon, even while the old one had
		// an agent to close.
		if out := u.ok("daemon", "stop"); !strings.HasPrefix(out, "kaimon-agentd stopped (pid ") || !strings.Contains(out, "live agents closed: 1)") {
			t.Fatalf("%s: daemon stop = %q", tc.name, out)
		}
		u.ok("list")
		u.ok("daemon", "stop")
		if left := u.processes(); len(left) != 0 {
			t.Fatalf("%s: processes outlived daemon stop: %s", tc.name, describe(left))
		}
	}
}

// TestDaemonEnvMismatchAndRestart: a daemon started with a broken
// KAIMON_CLAUDE_BIN fails an open from a shell whose KAIMON_CLAUDE_BIN is
// good; the error says the environments differ and how to fix it, and
// `kaimon daemon restart` does.
func TestDaemonEnvMismatchAndRestart(t *testing.T) {
	e := newEnv(t)
	good := e.env
	var broken []string
	for _, kv := range good {
		if !strings.HasPrefix(kv, "KAIMON_CLAUDE_BIN=") {
			broken = append(broken, kv)
		}
	}
	e.env = append(broken, "KAIMON_CLAUDE_BIN=/nonexistent/claude")
	e.ok("daemon", "start")
	var before struct{ PID int }
	e.okJSON(&before, "daemon", "status")

	e.env = good
	r := e.fails(1, "kaimon daemon restart", "open", e.work)
	if !strings.Contains(r.stderr, "different KAIMON_CLAUDE_BIN than this environment") || strings.Contains(r.stderr, claudeBin) {
		t.Fatalf("open's error does not name what differs (and only the name): %s", r)
	}
	// The difference leads: the daemon's "not an executable" is true of
	// its own environment, not of this shell's.
	if !strings.HasPrefix(r.stderr, "kaimon: kaimon-agentd (pid "+strconv.Itoa(before.PID)+") was started with a different") {
		t.Fatalf("open's error does not lead with the difference: %s", r)
	}
	out := e.ok("daemon", "restart")
	if !strings.Contains(out, "kaimon-agentd stopped (pid "+strconv.Itoa(before.PID)+",") || !strings.Contains(out, "kaimon-agentd started (pid ") {
		t.Fatalf("daemon restart = %q", out)
	}
	var after struct{ PID int }
	e.okJSON(&after, "daemon", "status")
	if after.PID == before.PID || after.PID == 0 {
		t.Fatalf("daemon pid %d before restart, %d after", before.PID, after.PID)
	}
	if e.ok("open", e.work) == "" {
		t.Fatal("open after restart printed no id")
	}
	// Errors that cannot come from the environment stay as they are.
	if r := e.fails(1, `no agent "nope"`, "status", "nope"); strings.Contains(r.stderr, "restart") {
		t.Fatalf("an unknown agent's error mentions restart: %s", r)
	}
}
