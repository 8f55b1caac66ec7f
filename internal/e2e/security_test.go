package e2e

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kaimon/kaimon/internal/verbs"
)

// nobody is the uid and gid the other-user tests run as.
const nobody = "65534"

// asNobody runs argv as the user nobody, with env, for at most d.
func asNobody(t *testing.T, d time.Duration, env []string, argv ...string) (stdout, stderr string, err error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	cmd := exec.CommandContext(ctx, "setpriv", append([]string{"--reuid=" + nobody, "--regid=" + nobody, "--clear-groups", "--"}, argv...)...)
	cmd.Env = env
	var so, se bytes.Buffer
	cmd.Stdout, cmd.Stderr = &so, &se
	err = cmd.Run()
	return so.String(), se.String(), err
}

// TestSecurity: another user is refused by the peer-credential check on the
// control socket and on the bus even with every file mode opened up; what
// kaimon writes is its owner's alone; and values that look like flags or
// hold shell metacharacters reach the agent program as data, or are refused
// where they cannot be valid.
func TestSecurity(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("switching to the user nobody needs root") // CI runs as root
	}
	e := newEnv(t)
	marker := filepath.Join(e.home, "pwned")
	prompt := "--help $(touch " + marker + ") `touch " + marker + "`; touch " + marker
	id := e.ok("open", e.work, "--system-prompt", prompt)
	e.ok("run", id, "hello there")

	// The system prompt arrived whole, as text; no shell ran it.
	reqs := e.api.Requests()
	if sys := reqs[len(reqs)-1].System; !strings.Contains(sys, prompt) {
		t.Errorf("the system prompt did not reach the model as sent: %q", sys)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Error("a shell ran the system prompt")
	}
	// What cannot be valid is refused up front, before any agent starts.
	e.fails(1, `model "--help" is not a claude model`, "open", e.work, "--model=--help")
	e.fails(1, `tool name "--help" in allowed_tools or disallowed_tools looks like a flag`, "open", e.work, "--allow=--help")
	e.fails(1, `tool name "-x" in allowed_tools or disallowed_tools looks like a flag`, "open", e.work, "--disallow=-x")
	e.fails(1, `bad model "--version"`, "open", e.work, "--model=acp:opencode:--version")

	// Nothing kaimon wrote can be read or written by group or others.
	for _, root := range []string{filepath.Join(e.home, "cache"), filepath.Join(e.home, "sock")} {
		filepath.Walk(root, func(path string, fi os.FileInfo, err error) error {
			if err != nil {
				t.Errorf("%s: %v", path, err)
				return nil
			}
			if fi.Mode().Perm()&0o077 != 0 {
				t.Errorf("%s has mode %v: open to other users", path, fi.Mode().Perm())
			}
			return nil
		})
	}

	// Another user, with every mode on the way opened up so that only the
	// peer-credential check stands, gets nothing from the control socket
	// or the bus.
	sock := filepath.Join(e.home, "sock")
	open := filepath.Join(e.home, "nobody")
	if err := os.MkdirAll(open, 0o777); err != nil {
		t.Fatal(err)
	}
	sub, err := os.ReadFile(filepath.Join("testdata", "sub.py"))
	if err != nil {
		t.Fatal(err)
	}
	kaimon, err := os.ReadFile(filepath.Join(binDir, "kaimon"))
	if err != nil {
		t.Fatal(err)
	}
	for name, b := range map[string][]byte{"sub.py": sub, "kaimon": kaimon} {
		if err := os.WriteFile(filepath.Join(open, name), b, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range []string{e.home, sock} {
		if err := os.Chmod(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range []string{filepath.Join(sock, "agentd.sock"), filepath.Join(sock, "kaimon-events.sock")} {
		if err := os.Chmod(p, 0o777); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { os.Chmod(e.home, 0o700); os.Chmod(sock, 0o700) })
	env := []string{"HOME=" + open, "PATH=" + os.Getenv("PATH"), "KAIMON_SOCK_DIR=" + sock, "KAIMON_CACHE_DIR=" + open, "KAIMON_NO_AUTOSTART=1"}
	out, errOut, err := asNobody(t, 30*time.Second, env, filepath.Join(open, "kaimon"), "list", "--json")
	if err == nil || strings.Contains(out, id) {
		t.Errorf("another user listed the agents: err %v, stdout %q, stderr %q", err, out, errOut)
	}
	// The bus: a libzmq subscriber as nobody, while the owner runs a turn,
	// receives nothing.
	subOut := make(chan string, 1)
	go func() {
		out, _, _ := asNobody(t, 8*time.Second, env, "/usr/bin/python3", filepath.Join(open, "sub.py"), "ipc://"+filepath.Join(sock, "kaimon-events.sock"), "agent:")
		subOut <- out
	}()
	time.Sleep(time.Second)
	e.ok("run", id, "hello again")
	if got := <-subOut; strings.Contains(got, `"envelope"`) {
		t.Errorf("another user's subscriber received envelopes: %s", got)
	}
	// The owner is still served, and the daemon said whom it refused.
	var st verbs.AgentStatus
	e.okJSON(&st, "status", id)
	if st.Status != "idle" || st.Turn != 2 {
		t.Errorf("the owner's agent after the refusals: %+v", st)
	}
	log, _ := os.ReadFile(filepath.Join(e.home, "cache", "agents", "agentd.log"))
	for _, what := range []string{"control socket: refused a connection from uid 65534", "event bus: refused a connection from uid 65534"} {
		if !strings.Contains(string(log), what) {
			t.Errorf("the daemon's log does not mention the refused peer (%s):\n%s", what, log)
		}
	}
}
