package e2e

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kaimon/kaimon/internal/proc"
	"github.com/kaimon/kaimon/internal/testutil/agents"
)

// runScript runs a script of scripts/ with env, in a process group of its
// own that is killed whole if it overstays d (go build runs below it).
func runScript(t *testing.T, env []string, d time.Duration, script string, args ...string) result {
	t.Helper()
	return runScriptIn(t, env, "", d, script, args...)
}

// runScriptIn is runScript with stdin read from the string in.
func runScriptIn(t *testing.T, env []string, in string, d time.Duration, script string, args ...string) result {
	t.Helper()
	cmd := exec.Command(filepath.Join(agents.RepoRoot(), "scripts", script), args...)
	cmd.Dir, cmd.Env = t.TempDir(), env
	cmd.Stdin = strings.NewReader(in)
	var so, se bytes.Buffer
	cmd.Stdout, cmd.Stderr = &so, &se
	child, err := proc.Start(cmd)
	if err != nil {
		t.Fatalf("%s: %v", script, err)
	}
	select {
	case <-child.Done():
	case <-time.After(d):
		child.Stop(time.Second)
		t.Fatalf("%s %v did not end within %s\nstdout: %s\nstderr: %s", script, args, d, so.String(), se.String())
	}
	return result{stdout: so.String(), stderr: se.String(), code: child.ExitCode()}
}

// scriptEnv is this test's environment with HOME in a temp dir and the go
// tool's caches kept (a cold build cache would rebuild every dependency),
// without any KAIMON_* of the developer's shell.
func scriptEnv(t *testing.T, home string) []string {
	t.Helper()
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "HOME=") && !strings.HasPrefix(kv, "KAIMON_") {
			env = append(env, kv)
		}
	}
	for _, v := range []string{"GOCACHE", "GOMODCACHE", "GOPATH"} {
		out, err := exec.Command("go", "env", v).Output()
		if err != nil {
			t.Fatalf("go env %s: %v", v, err)
		}
		env = append(env, v+"="+strings.TrimSpace(string(out)))
	}
	return append(env, "HOME="+home)
}

// installedFiles is what install.sh must put under prefix: both programs,
// every man page the repo has, the three completions.
func installedFiles(t *testing.T, prefix string) []string {
	t.Helper()
	root := agents.RepoRoot()
	want := []string{filepath.Join(prefix, "bin", "kaimon"), filepath.Join(prefix, "bin", "kaimon-agentd")}
	for _, sec := range []string{"1", "7", "8"} {
		pages, _ := filepath.Glob(filepath.Join(root, "man", "*."+sec))
		for _, p := range pages {
			want = append(want, filepath.Join(prefix, "share", "man", "man"+sec, filepath.Base(p)))
		}
	}
	return append(want,
		filepath.Join(prefix, "share", "bash-completion", "completions", "kaimon"),
		filepath.Join(prefix, "share", "zsh", "site-functions", "_kaimon"),
		filepath.Join(prefix, "share", "fish", "vendor_completions.d", "kaimon.fish"))
}

func readManifest(t *testing.T, prefix string) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(prefix, "share", "kaimon", "manifest"))
	if err != nil {
		t.Fatalf("manifest: %v", err)
	}
	return strings.Split(strings.TrimRight(string(b), "\n"), "\n") // one path a line
}

// install.sh builds stamped binaries and installs them with the man pages
// and completions; the installed kaimon compares itself with a running
// daemon built without a stamp; uninstall.sh removes exactly the manifest.
func TestInstallScript(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed: install.sh's version comes from git describe")
	}
	e := newEnv(t)
	home := t.TempDir()
	prefix := filepath.Join(t.TempDir(), "prefix dir") // a space, as in a real home
	env := scriptEnv(t, home)

	r := runScript(t, env, 5*time.Minute, "install.sh", prefix)
	if r.code != 0 {
		t.Fatalf("install.sh: %s", r)
	}
	want := installedFiles(t, prefix)
	got := readManifest(t, prefix)
	if !slices.Equal(sorted(got), sorted(want)) {
		t.Fatalf("manifest lists %v, want %v", got, want)
	}
	for _, f := range want {
		fi, err := os.Stat(f)
		if err != nil {
			t.Fatalf("install.sh did not install %s: %v\n%s", f, err, r)
		}
		if !strings.Contains(r.stdout, "installed "+f+"\n") {
			t.Errorf("install.sh did not say it installed %s:\n%s", f, r.stdout)
		}
		if strings.Contains(f, "/bin/") && fi.Mode().Perm()&0o111 == 0 {
			t.Errorf("%s is not executable (%v)", f, fi.Mode())
		}
	}
	if !strings.Contains(r.stdout, `export PATH="`+filepath.Join(prefix, "bin")+`:$PATH"`) {
		t.Errorf("install.sh into a prefix off PATH did not say how to add it:\n%s", r.stdout)
	}
	// How bash loads the completion without the bash-completion package:
	// the line it prints, run in a bash without any rc file, defines it.
	bashrc := `  . "` + filepath.Join(prefix, "share", "bash-completion", "completions", "kaimon") + `"`
	if !strings.Contains(r.stdout, "\n"+bashrc+"\n") {
		t.Errorf("install.sh did not say how bash loads the completion without bash-completion (%q):\n%s", bashrc, r.stdout)
	} else if out, err := exec.Command("bash", "--norc", "--noprofile", "-c", bashrc+"; complete -p kaimon").CombinedOutput(); err != nil ||
		!strings.Contains(string(out), "_kaimon kaimon") {
		t.Errorf("the line install.sh prints for ~/.bashrc does not load the completion: %v\n%s", err, out)
	}

	// The stamp is what git says of this tree, not "dev".
	desc, err := exec.Command("git", "-C", agents.RepoRoot(), "describe", "--tags", "--always", "--dirty").Output()
	if err != nil {
		t.Fatal(err)
	}
	stamp := strings.TrimSpace(string(desc))
	// The commit is HEAD's, -dirty as git status says (scripts/build.sh).
	head, err := exec.Command("git", "-C", agents.RepoRoot(), "rev-parse", "HEAD").Output()
	if err != nil {
		t.Fatal(err)
	}
	commit := strings.TrimSpace(string(head))
	if st, err := exec.Command("git", "-C", agents.RepoRoot(), "status", "--porcelain").Output(); err != nil {
		t.Fatal(err)
	} else if len(st) > 0 {
		commit += "-dirty"
	}
	full := stamp + " (commit " + commit + ")"
	kaimon := filepath.Join(prefix, "bin", "kaimon")
	v := runKaimon(t, kaimon, e.work, e.env, nil, time.Minute, "--version")
	if v.code != 0 || strings.TrimSpace(v.stdout) != "kaimon version "+full {
		t.Fatalf("installed kaimon --version: want %q; got %s", "kaimon version "+full, v)
	}
	agentd, err := exec.Command(filepath.Join(prefix, "bin", "kaimon-agentd"), "--version").Output()
	if err != nil || strings.TrimSpace(string(agentd)) != "kaimon-agentd "+full {
		t.Fatalf("installed kaimon-agentd --version: want %q; got %q (%v)", "kaimon-agentd "+full, agentd, err)
	}

	// kaimon version never starts a daemon: with none, it says so.
	v = runKaimon(t, kaimon, e.work, e.env, nil, time.Minute, "version")
	if v.code != 0 || !strings.Contains(v.stdout, stamp) || !strings.Contains(v.stdout, "not running") || v.stderr != "" {
		t.Fatalf("kaimon version with no daemon: %s", v)
	}
	if left := e.processes(); len(left) > 0 {
		t.Fatalf("kaimon version started a daemon: %s", describe(left))
	}

	// The harness's daemon is built by a plain go build, unstamped: its
	// version is another (dev-<rev12>, or dev). Where the go tool records
	// the commit (no -buildvcs=false) it is this tree's, the same code, and
	// there must be no warning; else the versions decide: a mismatch, warned
	// about.
	e.ok("daemon", "start")
	var st struct {
		PID     int    `json:"pid"`
		Version string `json:"version"`
		Commit  string `json:"commit"`
	}
	e.okJSON(&st, "daemon", "status")
	sameCode := st.Commit != ""
	if sameCode && st.Commit != commit {
		t.Fatalf("the harness's daemon reports commit %q, the installed kaimon %q: one tree, two commits", st.Commit, commit)
	}
	v = runKaimon(t, kaimon, e.work, e.env, nil, time.Minute, "version")
	if v.code != 0 || !strings.Contains(v.stdout, stamp) || !strings.Contains(v.stdout, st.Version) {
		t.Fatalf("kaimon version: want both %q and the daemon's %q; got %s", stamp, st.Version, v)
	}
	warned := strings.Contains(v.stderr, "warning") && strings.Contains(v.stderr, "kaimon daemon restart")
	if !sameCode && !warned {
		t.Fatalf("kaimon version with another daemon version: no warning naming `kaimon daemon restart`: %s", v)
	}
	if sameCode && v.stderr != "" {
		t.Fatalf("kaimon version with a daemon of the same commit, another version string: warned: %s", v)
	}
	v = runKaimon(t, kaimon, e.work, e.env, nil, time.Minute, "version", "--json")
	var info struct {
		CLI    struct{ Version, Commit string }
		Daemon *struct {
			Version string
			PID     int
		}
		Mismatch bool
	}
	if err := json.Unmarshal([]byte(v.stdout), &info); err != nil || info.Daemon == nil {
		t.Fatalf("kaimon version --json: %v: %s", err, v)
	}
	if info.CLI.Version != stamp || info.CLI.Commit == "" || info.Daemon.Version != st.Version || info.Daemon.PID != st.PID || info.Mismatch == sameCode {
		t.Fatalf("kaimon version --json: %+v (daemon %+v)", info, *info.Daemon)
	}
	// The same build on both ends: no warning.
	same := e.kaimon("version")
	if same.code != 0 || same.stderr != "" || strings.Count(same.stdout, st.Version) < 2 {
		t.Fatalf("kaimon version against a daemon of its own build: %s", same)
	}

	// The installed pair agree, commit included, which the daemon reports
	// in its status.
	e.ok("daemon", "stop")
	installed := append(withoutVar(e.env, "KAIMON_AGENTD_BIN"), "KAIMON_AGENTD_BIN="+filepath.Join(prefix, "bin", "kaimon-agentd"))
	if r := runKaimon(t, kaimon, e.work, installed, nil, time.Minute, "daemon", "start"); r.code != 0 {
		t.Fatalf("installed kaimon daemon start: %s", r)
	}
	v = runKaimon(t, kaimon, e.work, installed, nil, time.Minute, "version", "--json")
	info.Daemon = nil
	if err := json.Unmarshal([]byte(v.stdout), &info); err != nil || info.Daemon == nil || v.stderr != "" {
		t.Fatalf("installed kaimon version --json against the installed daemon: %v: %s", err, v)
	}
	if info.Mismatch || info.Daemon.Version != stamp || info.CLI.Commit == "" {
		t.Fatalf("installed kaimon version against the installed daemon: %s", v.stdout)
	}
	if !strings.Contains(v.stdout, `"commit":"`+info.CLI.Commit+`"`) || strings.Count(v.stdout, info.CLI.Commit) != 2 {
		t.Fatalf("the installed daemon does not report the commit %s: %s", info.CLI.Commit, v.stdout)
	}
	e.ok("daemon", "stop")

	// Again: the same files, nothing else.
	r = runScript(t, env, 5*time.Minute, "install.sh", prefix)
	if r.code != 0 {
		t.Fatalf("install.sh a second time: %s", r)
	}
	if again := readManifest(t, prefix); !slices.Equal(sorted(again), sorted(want)) {
		t.Fatalf("manifest after a second install: %v", again)
	}

	// Uninstall removes the manifest's files and no other.
	other := filepath.Join(prefix, "bin", "someone-elses")
	if err := os.WriteFile(other, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	r = runScript(t, env, time.Minute, "uninstall.sh", prefix)
	if r.code != 0 {
		t.Fatalf("uninstall.sh: %s", r)
	}
	for _, f := range append(want, filepath.Join(prefix, "share", "kaimon", "manifest")) {
		if _, err := os.Lstat(f); err == nil {
			t.Errorf("uninstall.sh left %s", f)
		}
		if !strings.Contains(r.stdout, "removed "+f+"\n") {
			t.Errorf("uninstall.sh did not say it removed %s:\n%s", f, r.stdout)
		}
	}
	if _, err := os.Stat(other); err != nil {
		t.Errorf("uninstall.sh removed a file it did not install: %v", err)
	}
	if r = runScript(t, env, time.Minute, "uninstall.sh", prefix); r.code != 0 || !strings.Contains(r.stdout, "nothing to remove") {
		t.Fatalf("uninstall.sh a second time: %s", r)
	}
}

// Without Go, install.sh says so and installs nothing.
func TestInstallScriptWithoutGo(t *testing.T) {
	bin := t.TempDir()
	for _, tool := range []string{"dirname", "mkdir", "sed"} {
		p, err := exec.LookPath(tool)
		if err != nil {
			t.Skipf("%s: %v", tool, err)
		}
		if err := os.Symlink(p, filepath.Join(bin, tool)); err != nil {
			t.Fatal(err)
		}
	}
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash")
	}
	if err := os.Symlink(bash, filepath.Join(bin, "bash")); err != nil {
		t.Fatal(err)
	}
	prefix := t.TempDir()
	r := runScript(t, []string{"PATH=" + bin, "HOME=" + t.TempDir()}, time.Minute, "install.sh", prefix)
	if r.code == 0 || !strings.Contains(r.stderr, "Go is not installed") {
		t.Fatalf("install.sh without go: want a failure saying Go is not installed; got %s", r)
	}
	if ents, _ := os.ReadDir(prefix); len(ents) != 0 {
		t.Fatalf("install.sh without go left files in the prefix: %v", ents)
	}
}

// install-unit writes a unit that runs the kaimon-agentd beside kaimon,
// with the shell's environment in a private file, and runs no systemctl.
func TestDaemonInstallUnit(t *testing.T) {
	e := newEnv(t, "ANTHROPIC_MODEL", "it's \"quoted\" $HOME")
	out := e.ok("daemon", "install-unit")
	home := filepath.Join(e.home, "claude-home") // the harness's HOME
	unit := filepath.Join(home, ".config", "systemd", "user", "kaimon-agentd.service")
	b, err := os.ReadFile(unit)
	if err != nil {
		t.Fatalf("no unit at %s: %v\n%s", unit, err, out)
	}
	if !strings.Contains(out, "systemctl --user daemon-reload && systemctl --user enable --now kaimon-agentd") {
		t.Errorf("install-unit did not print the systemctl command:\n%s", out)
	}
	var execStart, envFile string
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "ExecStart="); ok {
			execStart = v
		}
		if v, ok := strings.CutPrefix(l, "EnvironmentFile=-"); ok {
			envFile = v
		}
	}
	fi, err := os.Stat(execStart)
	if err != nil || fi.Mode().Perm()&0o111 == 0 || !filepath.IsAbs(execStart) {
		t.Fatalf("ExecStart=%q is not an absolute executable (%v):\n%s", execStart, err, b)
	}
	if want := filepath.Join(binDir, "kaimon-agentd"); execStart != want {
		t.Errorf("ExecStart=%s, want the kaimon-agentd beside kaimon, %s", execStart, want)
	}
	if !strings.Contains(string(b), "Type=exec\n") {
		t.Errorf("the unit is not Type=exec (kaimon-agentd runs in the foreground):\n%s", b)
	}
	fi, err = os.Stat(envFile)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("EnvironmentFile %q: want mode 0600 (it may hold API keys): %v %v", envFile, fi, err)
	}
	envText, _ := os.ReadFile(envFile)
	for _, kv := range e.env {
		name, val, _ := strings.Cut(kv, "=")
		kept := name == "PATH" || strings.HasPrefix(name, "KAIMON_") || strings.HasPrefix(name, "ANTHROPIC_")
		if kept != strings.Contains(string(envText), "\n"+name+"=") {
			t.Errorf("environment file: %s kept=%v wrong:\n%s", name, !kept, envText)
		}
		// Plain values are single-quoted: systemd takes them literally.
		if kept && !strings.ContainsAny(val, `'"$\`) && !strings.Contains(string(envText), name+"='"+val+"'\n") {
			t.Errorf("environment file: %s not written as '%s':\n%s", name, val, envText)
		}
	}
	if !strings.Contains(string(envText), `ANTHROPIC_MODEL="it's \"quoted\" \$HOME"`+"\n") {
		t.Errorf("a value with quotes and $ is not escaped for systemd:\n%s", envText)
	}
	// systemd's own verdict, where systemd is installed (system mode: a
	// user manager needs a session this test does not have).
	if sa, err := exec.LookPath("systemd-analyze"); err == nil {
		cmd := exec.Command(sa, "verify", "--man=no", unit)
		proc.Setpgid(cmd)
		out, err := cmd.CombinedOutput()
		if err != nil || len(bytes.TrimSpace(out)) > 0 {
			t.Errorf("systemd-analyze verify %s: %v\n%s\n%s", unit, err, out, b)
		}
	}
	if left := e.processes(); len(left) > 0 {
		t.Errorf("install-unit started something: %s", describe(left))
	}
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}
