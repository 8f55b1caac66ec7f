package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/kaimon/kaimon/internal/proc"
	"github.com/kaimon/kaimon/internal/testutil/agents"
)

type doctorCheck struct {
	Check, Status, Detail, Fix string
}

// doctorJSON runs `kaimon doctor --json` with env and returns its exit
// code and checks by name.
func doctorJSON(t *testing.T, env []string, dir string) (int, map[string]doctorCheck) {
	t.Helper()
	r := runKaimon(t, filepath.Join(binDir, "kaimon"), dir, env, nil, time.Minute, "doctor", "--json")
	var rep struct {
		OK     bool
		Checks []doctorCheck
	}
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("kaimon doctor --json: %v\n%s", err, r)
	}
	if rep.OK != (r.code == 0) {
		t.Fatalf("kaimon doctor --json: ok %v but exit %d", rep.OK, r.code)
	}
	out := map[string]doctorCheck{}
	for _, c := range rep.Checks {
		out[c.Check] = c
	}
	return r.code, out
}

// acpBins are the ACP agent programs the repo has (node_modules), as the
// KAIMON_*_BIN variables the backends read.
func acpBins() []string {
	var kv []string
	for _, p := range []struct{ env, name string }{
		{"KAIMON_OPENCODE_BIN", "opencode"}, {"KAIMON_CLAUDE_ACP_BIN", "claude-agent-acp"}, {"KAIMON_GEMINI_BIN", "gemini"},
	} {
		if b := agents.Find(p.env, p.name); b != "" {
			kv = append(kv, p.env, b)
		}
	}
	return kv
}

func TestDoctor(t *testing.T) {
	bins := acpBins()
	e := newEnv(t, bins...)

	// No daemon: normal before the first command, which starts it: an
	// info line with how to start it now, exit 0, and none started. With
	// autostart off, a warning.
	r := e.kaimon("doctor")
	if r.code != 0 {
		t.Fatalf("kaimon doctor with no daemon: want exit 0; got %s", r)
	}
	var daemonLine string
	for _, l := range strings.Split(r.stdout, "\n") {
		if strings.HasPrefix(l, "info") && strings.Contains(l, "daemon") {
			daemonLine = l
		}
	}
	if !strings.Contains(daemonLine, "not running") || !strings.Contains(daemonLine, "kaimon daemon start") {
		t.Fatalf("kaimon doctor with no daemon: no info line saying how to start it:\n%s", r)
	}
	if r := e.kaimon("doctor", "--no-autostart"); r.code != 0 || !strings.Contains(r.stdout, "warn  daemon") || !strings.Contains(r.stdout, "autostart is off") {
		t.Fatalf("kaimon doctor --no-autostart with no daemon: want exit 0 and a warning; got %s", r)
	}
	if left := e.processes(); len(left) > 0 {
		t.Fatalf("kaimon doctor started a daemon: %s", describe(left))
	}

	// Each agent program is found through its variable, with the version
	// it reports itself.
	code, checks := doctorJSON(t, e.env, e.work)
	if code != 0 || checks["daemon"].Status != "info" {
		t.Fatalf("doctor --json with no daemon: exit %d, %+v", code, checks["daemon"])
	}
	claudeVersion, err := exec.Command(claudeBin, "--version").Output()
	if err != nil {
		t.Fatal(err)
	}
	if c := checks["claude"]; c.Status != "ok" || !strings.Contains(c.Detail, strings.TrimSpace(string(claudeVersion))) || !strings.Contains(c.Detail, claudeBin) {
		t.Errorf("claude check: %+v, want ok with %q from %s", c, claudeVersion, claudeBin)
	}
	for i := 0; i+1 < len(bins); i += 2 {
		name := filepath.Base(bins[i+1])
		if c := checks[name]; c.Status != "ok" || !strings.Contains(c.Detail, bins[i+1]) || c.Detail == bins[i+1] {
			t.Errorf("%s check: %+v, want ok with a version and %s", name, c, bins[i+1])
		}
	}
	if len(bins) == 0 {
		t.Log("no ACP agent program in node_modules: only claude checked")
	}

	// A missing optional program is a warning, not a failure; so is
	// having none at all (replay:, ollama: and vmlx: need none).
	miss := append(withoutVar(withoutVar(e.env, "KAIMON_OPENCODE_BIN"), "PATH"), "PATH=/nonexistent")
	_, checks = doctorJSON(t, miss, e.work)
	if c := checks["opencode"]; c.Status != "warn" || c.Fix == "" {
		t.Errorf("opencode missing: %+v, want a warning with a fix", c)
	}
	none := withoutVar(miss, "KAIMON_CLAUDE_BIN")
	for i := 0; i < len(bins); i += 2 {
		none = withoutVar(none, bins[i])
	}
	code, checks = doctorJSON(t, none, e.work)
	if c := checks["agents"]; code != 0 || c.Status != "warn" || !strings.Contains(c.Detail, "replay:") {
		t.Errorf("no agent program: exit %d, %+v; want 0 and a warning", code, c)
	}

	// With the daemon: everything ok.
	e.ok("daemon", "start")
	code, checks = doctorJSON(t, e.env, e.work)
	for _, name := range []string{"config", "claude", "socket dir", "daemon", "event bus", "mcp door", "environment"} {
		if checks[name].Status != "ok" {
			t.Errorf("doctor with a daemon: %s is %+v", name, checks[name])
		}
	}
	if code != 0 {
		t.Errorf("doctor with a daemon: exit %d: %+v", code, checks)
	}
	out := e.ok("doctor")
	if !strings.Contains(out, "ok") || strings.Contains(out, "FAIL") {
		t.Errorf("kaimon doctor:\n%s", out)
	}

	// A shell with another model API than the daemon's: a warning naming it.
	other := append(withoutVar(e.env, "ANTHROPIC_BASE_URL"), "ANTHROPIC_BASE_URL=http://127.0.0.1:1")
	_, checks = doctorJSON(t, other, e.work)
	if c := checks["environment"]; c.Status != "warn" || !strings.Contains(c.Detail, "ANTHROPIC_BASE_URL") || !strings.Contains(c.Fix, "kaimon daemon restart") {
		t.Errorf("environment check with another ANTHROPIC_BASE_URL: %+v", c)
	}

	// A socket dir others can enter fails, with the chmod that fixes it.
	sock := filepath.Join(e.home, "sock")
	if err := os.Chmod(sock, 0o755); err != nil {
		t.Fatal(err)
	}
	code, checks = doctorJSON(t, e.env, e.work)
	os.Chmod(sock, 0o700)
	if c := checks["socket dir"]; code != 1 || c.Status != "FAIL" || !strings.Contains(c.Fix, "chmod 700 "+sock) {
		t.Errorf("socket dir 0755: exit %d, %+v", code, c)
	}

	// A config file that does not parse: its path and the parse error.
	bad := []byte(`{"dead_kept": 3,}`)
	cfg := filepath.Join(e.home, "config.json")
	if err := os.WriteFile(cfg, bad, 0o600); err != nil {
		t.Fatal(err)
	}
	var v any
	parseErr := json.Unmarshal(bad, &v)
	code, checks = doctorJSON(t, e.env, e.work)
	if c := checks["config"]; code != 1 || c.Status != "FAIL" || !strings.Contains(c.Detail, cfg) || !strings.Contains(c.Detail, parseErr.Error()) {
		t.Errorf("broken config: exit %d, %+v; want FAIL naming %s and %q", code, c, cfg, parseErr)
	}
}

func withoutVar(env []string, name string) []string {
	var out []string
	for _, kv := range env {
		if !strings.HasPrefix(kv, name+"=") {
			out = append(out, kv)
		}
	}
	return out
}

// syncBuffer is a bytes.Buffer a child's output goroutine writes while
// the test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestDaemonLogs(t *testing.T) {
	e := newEnv(t)

	// No log yet: a clear error, and no daemon started for it.
	e.fails(1, "no daemon log yet", "daemon", "logs")
	if left := e.processes(); len(left) > 0 {
		t.Fatalf("daemon logs started a daemon: %s", describe(left))
	}

	e.ok("daemon", "start")
	var st struct {
		PID int `json:"pid"`
	}
	e.okJSON(&st, "daemon", "status")
	out := e.ok("daemon", "logs")
	if !strings.Contains(out, "listening on") || !strings.Contains(out, "kaimon-agentd") {
		t.Fatalf("daemon logs does not show the daemon's start:\n%s", out)
	}
	if lines := strings.Split(e.ok("daemon", "logs", "-n", "1"), "\n"); len(lines) != 1 || lines[0] == "" {
		t.Fatalf("daemon logs -n 1: %q", lines)
	}
	e.fails(2, "--lines", "daemon", "logs", "-n", "-1")

	// -f prints what the daemon writes next (its shutdown), until Ctrl-C.
	cmd := exec.Command(filepath.Join(binDir, "kaimon"), "daemon", "logs", "-f", "-n", "0")
	cmd.Dir, cmd.Env = e.work, e.env
	buf := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = buf, buf
	child, err := proc.Start(cmd)
	if err != nil {
		t.Fatal(err)
	}
	defer child.Stop(time.Second)
	// Stop the daemon only once -f has the log open: it starts from the
	// end it finds then (-n 0), and a start slower than the stop would
	// find "stopped" already behind it.
	waitFor(t, "daemon logs -f to open the log", 30*time.Second, func() bool {
		fds, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", child.ID.PID))
		for _, fd := range fds {
			if target, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", child.ID.PID, fd.Name())); err == nil && strings.HasSuffix(target, "agentd.log") {
				return true
			}
		}
		return false
	})
	e.ok("daemon", "stop")
	waitFor(t, "daemon logs -f to show the daemon stopping", 30*time.Second, func() bool {
		return strings.Contains(buf.String(), "stopped")
	})
	if strings.Contains(buf.String(), "listening on") {
		t.Errorf("daemon logs -f -n 0 printed old lines:\n%s", buf.String())
	}
	_ = syscall.Kill(child.ID.PID, syscall.SIGINT)
	select {
	case <-child.Done():
	case <-time.After(30 * time.Second):
		t.Fatal("daemon logs -f did not end on Ctrl-C")
	}
	if code := child.ExitCode(); code != 0 {
		t.Errorf("daemon logs -f ended by Ctrl-C: exit %d\n%s", code, buf.String())
	}
	if left := e.processes(); len(left) > 0 {
		t.Fatalf("daemon logs -f started a daemon: %s", describe(left))
	}
}
