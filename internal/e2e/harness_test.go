// Package e2e drives the real kaimon and kaimon-agentd binaries, with the
// real claude CLI talking to the fake model API on 127.0.0.1.
package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/kaimon/kaimon/internal/config"
	"github.com/kaimon/kaimon/internal/procstat"
	"github.com/kaimon/kaimon/internal/testutil/agents"
	"github.com/kaimon/kaimon/internal/testutil/fakeapi"
)

var (
	binDir    string // kaimon and kaimon-agentd, built once
	claudeBin string
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	dir, err := os.MkdirTemp("", "kaimon-e2e-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	binDir = dir
	args := []string{"build", "-o", dir}
	if os.Getenv("KAIMON_E2E_RACE") != "" {
		args = append(args, "-race") // the daemon under the race detector
		// Every process started from here (newEnv passes it on, as the
		// fleet's sshd does) exits without the race runtime's default
		// one-second sleep, which it takes at every exit to let other
		// threads finish their reports: the e2e tests run the race-built
		// kaimon thousands of times (TestCompletionInRealShells alone
		// took 241 s, mostly asleep). 50 ms still lets a report end.
		if os.Getenv("GORACE") == "" {
			os.Setenv("GORACE", raceOptions)
		}
	}
	build := exec.Command("go", append(args, "./cmd/kaimon", "./cmd/kaimon-agentd")...)
	build.Dir = agents.RepoRoot()
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building binaries:", err)
		return 1
	}
	code := m.Run()
	if err := teardownFleet(); err != nil {
		fmt.Fprintln(os.Stderr, "the fleet test hosts:", err)
		code = 1
	}
	return code
}

// raceOptions are the race runtime's options for the binaries the tests
// run (see run).
const raceOptions = "atexit_sleep_ms=50"

// parallelized holds the tests that parallel has let go.
var parallelized sync.Map

// parallel runs test t beside the other tests that have an installation
// of their own (go test's -parallel, GOMAXPROCS by default). Each has its
// own KAIMON_HOME, HOME, sockets, fake model API and daemon, and every
// check of processes is scoped by the installation's environment, so
// they share nothing; most of their time is spent waiting on agent
// programs, which is what running two at once on two cores wins back.
// A test with a second installation is let go once.
func parallel(t testing.TB) {
	tt, ok := t.(*testing.T)
	if !ok {
		return // a benchmark: measured alone
	}
	if _, done := parallelized.LoadOrStore(tt, true); !done {
		tt.Parallel()
	}
}

// needClaude skips without the real CLI, except in CI, where .ci/run
// installs it and its absence is a failure.
// Tests run in parallel: claudeBin is set once, under claudeMu, and read
// only after a needClaude of the reader's own.
func needClaude(t testing.TB) {
	t.Helper()
	claudeMu.Lock()
	defer claudeMu.Unlock()
	if claudeBin == "" {
		claudeBin = agents.Claude(t)
	}
}

var claudeMu sync.Mutex

// kenv is one isolated kaimon installation: its own KAIMON_HOME (so its own
// socket, cache and logs), a HOME for claude, and a fake model API.
type kenv struct {
	t     testing.TB
	home  string // KAIMON_HOME
	work  string // a project directory for agents
	api   *fakeapi.Server
	env   []string
	extra map[string]string
}

func newEnv(t testing.TB, extra ...string) *kenv {
	t.Helper()
	parallel(t)
	needClaude(t)
	// Unix socket paths are limited to 108 bytes: keep the root short.
	home, err := os.MkdirTemp("", "km")
	if err != nil {
		t.Fatal(err)
	}
	e := &kenv{t: t, home: home, work: filepath.Join(home, "project"), api: fakeapi.New(t)}
	for _, d := range []string{e.work, filepath.Join(home, "claude-home"), filepath.Join(home, "tmp")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	vars := map[string]string{
		"KAIMON_HOME":         home,
		"KAIMON_AGENTD_BIN":   filepath.Join(binDir, "kaimon-agentd"),
		"KAIMON_CLAUDE_BIN":   claudeBin,
		"HOME":                filepath.Join(home, "claude-home"),
		"NO_COLOR":            "1",
		"PATH":                os.Getenv("PATH"),
		"XDG_RUNTIME_DIR":     "",
		"KAIMON_NO_AUTOSTART": "",
		"GORACE":              os.Getenv("GORACE"),
	}
	// The CLI leaves /tmp/claude-<uid>/… behind: its TMPDIR is our dir.
	for _, kv := range agents.ClaudeOffline(e.api.URL(), filepath.Join(home, "tmp")) {
		k, v, _ := strings.Cut(kv, "=")
		vars[k] = v
	}
	for i := 0; i+1 < len(extra); i += 2 {
		vars[extra[i]] = extra[i+1]
	}
	for k, v := range vars {
		if v != "" {
			e.env = append(e.env, k+"="+v)
		}
	}
	t.Cleanup(e.cleanup)
	return e
}

// cleanup stops the daemon and fails the test if any process that belongs
// to this installation outlived it; then removes the directory.
func (e *kenv) cleanup() {
	t := e.t
	e.kaimon("daemon", "stop")
	deadline := time.Now().Add(10 * time.Second)
	var left []int
	for {
		left = e.processes()
		if len(left) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if len(left) > 0 {
		t.Errorf("leaked processes after daemon stop: %v", describe(left))
		for _, pid := range left {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	e.checkCacheFiles()
	// The daemon's own log must show no panic and, under KAIMON_E2E_RACE,
	// no data race.
	if b, err := os.ReadFile(filepath.Join(e.home, "cache", "agents", "agentd.log")); err == nil {
		for _, bad := range []string{"DATA RACE", "panic:"} {
			if bytes.Contains(b, []byte(bad)) {
				t.Errorf("kaimon-agentd log shows %q:\n%s", bad, b)
			}
		}
	}
	_ = os.RemoveAll(e.home)
}

// checkCacheFiles fails the test if the cache dir holds a file that is
// neither the daemon's own nor of a kind in config.AgentFileKinds: a file
// a backend wrote that forget, stale cleanup and the man page do not know;
// or an event log with a line that is not a record of the events schema.
func (e *kenv) checkCacheFiles() {
	paths := e.paths()
	for _, kv := range e.env {
		if dir, ok := strings.CutPrefix(kv, "KAIMON_CACHE_DIR="); ok {
			paths.CacheDir = dir
		}
	}
	checkEventLogs(e.t, paths.CacheDir)
	ents, _ := os.ReadDir(paths.CacheDir)
	own := paths.DaemonFiles()
	for _, ent := range ents {
		if slices.Contains(own, filepath.Join(paths.CacheDir, ent.Name())) {
			continue
		}
		if _, _, ok := config.AgentFileOf(ent.Name()); !ok {
			e.t.Errorf("the cache dir %s holds %s, a file of no kind in config.AgentFileKinds", paths.CacheDir, ent.Name())
		}
	}
}

// processes lists live processes whose environment names this KAIMON_HOME:
// the daemon and every agent it spawned inherit it.
func (e *kenv) processes() []int { return processesWithEnv("KAIMON_HOME=" + e.home) }

// processesWithEnv lists live processes, zombies aside and this test
// process aside, whose environment holds kv (NAME=value) exactly.
func processesWithEnv(kv string) []int {
	needle := []byte(kv + "\x00")
	ents, _ := os.ReadDir("/proc")
	var out []int
	for _, ent := range ents {
		pid, err := strconv.Atoi(ent.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		b, err := os.ReadFile("/proc/" + ent.Name() + "/environ")
		if err != nil || !bytes.HasPrefix(b, needle) && !bytes.Contains(b, append([]byte{0}, needle...)) {
			continue
		}
		if procstat.Running(pid) {
			out = append(out, pid)
		}
	}
	return out
}

func describe(pids []int) string {
	var parts []string
	for _, p := range pids {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", p))
		parts = append(parts, fmt.Sprintf("%d %s", p, strings.ReplaceAll(string(b), "\x00", " ")))
	}
	return strings.Join(parts, "; ")
}

type result struct {
	stdout, stderr string
	code           int
}

func (r result) String() string {
	return fmt.Sprintf("exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
}

// kaimon runs the kaimon binary in the project directory.
func (e *kenv) kaimon(args ...string) result {
	return e.kaimonIn(e.work, nil, args...)
}

func (e *kenv) kaimonIn(dir string, stdin []byte, args ...string) result {
	e.t.Helper()
	return runKaimon(e.t, filepath.Join(binDir, "kaimon"), dir, e.env, stdin, 3*time.Minute, args...)
}

// kaimonWithin runs kaimon and fails the test if it has not exited within d:
// for commands that must end by themselves rather than wait.
func (e *kenv) kaimonWithin(d time.Duration, args ...string) result {
	e.t.Helper()
	return runKaimon(e.t, filepath.Join(binDir, "kaimon"), e.work, e.env, nil, d, args...)
}

// runKaimon runs the kaimon binary bin in dir with env, and fails the test
// if it is still running after d.
func runKaimon(t testing.TB, bin, dir string, env []string, stdin []byte, d time.Duration, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir, cmd.Env = dir, env
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var so, se bytes.Buffer
	cmd.Stdout, cmd.Stderr = &so, &se
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("kaimon %s did not exit within %s", strings.Join(args, " "), d)
	}
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("kaimon %v: %v", args, err)
	}
	return result{stdout: so.String(), stderr: se.String(), code: code}
}

// ok runs kaimon and fails the test unless it exits 0; returns stdout
// without its trailing newline.
func (e *kenv) ok(args ...string) string {
	e.t.Helper()
	r := e.kaimon(args...)
	if r.code != 0 {
		e.t.Fatalf("kaimon %s: %s", strings.Join(args, " "), r)
	}
	return strings.TrimRight(r.stdout, "\n")
}

// okJSON runs kaimon with --json and decodes stdout into out.
func (e *kenv) okJSON(out any, args ...string) {
	e.t.Helper()
	s := e.ok(append(args, "--json")...)
	if err := json.Unmarshal([]byte(s), out); err != nil {
		e.t.Fatalf("kaimon %v --json: %v\n%s", args, err, s)
	}
}

// fails runs kaimon, wants exit code code and stderr containing want.
func (e *kenv) fails(code int, want string, args ...string) result {
	e.t.Helper()
	r := e.kaimon(args...)
	if r.code != code || !strings.Contains(r.stderr, want) {
		e.t.Fatalf("kaimon %s: want exit %d and stderr containing %q; got %s", strings.Join(args, " "), code, want, r)
	}
	return r
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t testing.TB, what string, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
