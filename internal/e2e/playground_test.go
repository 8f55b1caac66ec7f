package e2e

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kaimon/kaimon/internal/testutil/agents"
)

// TestPlayground: scripts/playground.sh builds, serves the fake model API
// and runs a command in the playground's environment (here a real claude
// agent through kaimon, kaimon found on PATH), prints the variables that
// reach the playground from another terminal and the fake's phrases (from
// its table, by fakeapi -phrases), and leaves nothing behind
// when the command ends: no daemon, agent or fake API, no directory.
func TestPlayground(t *testing.T) {
	parallel(t)
	needClaude(t)
	// Never let the script's npm ci run from a test: it replaces
	// node_modules.
	if _, err := os.Stat(filepath.Join(agents.RepoRoot(), "node_modules", ".bin", "claude")); err != nil {
		t.Skipf("no claude CLI in node_modules (playground.sh would run npm ci): %v", err)
	}
	bin := t.TempDir()
	env := append(scriptEnv(t, t.TempDir()), "PLAYGROUND_BIN="+bin)
	r := runScript(t, env, 5*time.Minute, "playground.sh", "sh", "-c",
		`echo "dir=$PLAYGROUND_DIR"; kaimon run -C . "please use a tool"`)
	if r.code != 0 {
		t.Fatalf("playground.sh: %s", r)
	}
	first, rest, _ := strings.Cut(r.stdout, "\n")
	dir, ok := strings.CutPrefix(first, "dir=")
	if !ok || dir == "" || rest != "Tool said: hi. Done.\n" {
		t.Fatalf("playground.sh's command printed %q, want its dir and the tool turn's text", r.stdout)
	}
	for _, want := range []string{"export KAIMON_HOME=" + dir + "/kaimon\n", "export ANTHROPIC_BASE_URL=http://127.0.0.1:", "export PATH=" + bin + ":"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("playground.sh does not print %q:\n%s", want, r.stderr)
		}
	}
	// The fake's phrases, as its binary prints them from its one table.
	phrases, err := exec.Command(filepath.Join(bin, "fakeapi"), "-phrases", "-indent", "   ").Output()
	if err != nil || !bytes.Contains(phrases, []byte("   please be slow ")) {
		t.Errorf("fakeapi -phrases: %v\n%s", err, phrases)
	} else if !strings.Contains(r.stderr, string(phrases)) {
		t.Errorf("playground.sh does not print the fake's phrases:\n%s", r.stderr)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("playground.sh left %s behind (%v)", dir, err)
	}
	if left := processesWithEnv("KAIMON_HOME=" + dir + "/kaimon"); len(left) > 0 {
		t.Errorf("playground.sh left processes: %s", describe(left))
	}
	fakeapi := []byte(filepath.Join(bin, "fakeapi") + "\x00")
	ents, _ := os.ReadDir("/proc")
	for _, ent := range ents {
		if b, err := os.ReadFile("/proc/" + ent.Name() + "/cmdline"); err == nil && bytes.HasPrefix(b, fakeapi) {
			t.Errorf("playground.sh left its fake API running (pid %s)", ent.Name())
		}
	}
}

// TestPlaygroundKeepsOutsideWorktrees: a worktree agent opened in the
// playground on a repository outside it has its worktree under the
// playground's KAIMON_HOME; leaving the playground keeps that worktree,
// with the work in it, out of the removed directory, names it with how
// to remove it, and leaves the repository with no prunable worktree. A
// worktree of a repository inside the playground goes with it. The
// caller's KAIMON_WORKTREE_DIR and KAIMON_SOCK_DIR do not reach it.
func TestPlaygroundKeepsOutsideWorktrees(t *testing.T) {
	parallel(t)
	needClaude(t)
	if _, err := os.Stat(filepath.Join(agents.RepoRoot(), "node_modules", ".bin", "claude")); err != nil {
		t.Skipf("no claude CLI in node_modules (playground.sh would run npm ci): %v", err)
	}
	home := t.TempDir()
	repo := filepath.Join(t.TempDir(), "mine")
	gitEnv := []string{"GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=" + os.DevNull,
		"GIT_AUTHOR_NAME=kaimon test", "GIT_AUTHOR_EMAIL=test@kaimon.invalid", "GIT_COMMITTER_NAME=kaimon test", "GIT_COMMITTER_EMAIL=test@kaimon.invalid"}
	env := append(scriptEnv(t, home), gitEnv...)
	git := func(dir string, args ...string) string {
		t.Helper()
		cmd := exec.Command("git", args...)
		cmd.Dir, cmd.Env = dir, env
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	if err := os.MkdirAll(repo, 0o755); err != nil {
		t.Fatal(err)
	}
	git(repo, "init", "--quiet", "-b", "main")
	git(repo, "commit", "--quiet", "--allow-empty", "-m", "first")

	data := filepath.Join(home, "data") // XDG_DATA_HOME, where the playground keeps them
	// The caller's own kaimon settings, which the playground ignores.
	mine := t.TempDir()
	env = append(env, "PLAYGROUND_BIN="+t.TempDir(), "REPO="+repo, "XDG_DATA_HOME="+data,
		"KAIMON_WORKTREE_DIR="+filepath.Join(mine, "worktrees"), "KAIMON_SOCK_DIR="+filepath.Join(mine, "sock"))
	r := runScript(t, env, 5*time.Minute, "playground.sh", "sh", "-c", `set -e
		id=$(kaimon open --worktree "$REPO")
		wt=$(git -C "$REPO" worktree list --porcelain | sed -n 's/^worktree //p' | tail -n 1)
		echo "work not yet committed" > "$wt/new.txt"
		git init --quiet -b main inside && git -C inside commit --quiet --allow-empty -m first
		kaimon open --worktree inside >/dev/null
		echo "dir=$PLAYGROUND_DIR"; echo "id=$id"; echo "wt=$wt"`)
	if r.code != 0 {
		t.Fatalf("playground.sh: %s", r)
	}
	var dir, id, wt string
	for _, l := range strings.Split(r.stdout, "\n") {
		for p, v := range map[string]*string{"dir=": &dir, "id=": &id, "wt=": &wt} {
			if s, ok := strings.CutPrefix(l, p); ok {
				*v = s
			}
		}
	}
	if dir == "" || id == "" || !strings.HasPrefix(wt, dir+"/") {
		t.Fatalf("the worktree %q of agent %q is not in the playground %q:\n%s", wt, id, dir, r)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("playground.sh left %s behind (%v)", dir, err)
	}
	if ents, _ := os.ReadDir(mine); len(ents) > 0 {
		t.Errorf("the playground used the caller's KAIMON_WORKTREE_DIR or KAIMON_SOCK_DIR: %s holds %v", mine, ents)
	}
	// Where git now has it, and the work in it.
	var kept []string
	for _, l := range strings.Split(git(repo, "worktree", "list", "--porcelain"), "\n") {
		if p, ok := strings.CutPrefix(l, "worktree "); ok && p != repo {
			kept = append(kept, p)
		}
		if strings.HasPrefix(l, "prunable") {
			t.Errorf("the repository is left with a prunable worktree: %s", l)
		}
	}
	if len(kept) != 1 {
		t.Fatalf("the repository's worktrees besides its own: %q\n%s", kept, r.stderr)
	}
	if b, err := os.ReadFile(filepath.Join(kept[0], "new.txt")); err != nil || string(b) != "work not yet committed\n" {
		t.Fatalf("the uncommitted file in the kept worktree %s: %q %v", kept[0], b, err)
	}
	if !strings.HasPrefix(kept[0], data+"/") {
		t.Errorf("the worktree is kept at %s, not under XDG_DATA_HOME %s", kept[0], data)
	}
	for _, want := range []string{kept[0], repo, "kaimon/" + id, "git -C " + repo + " worktree remove"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("the exit message does not name %q:\n%s", want, r.stderr)
		}
	}
	if n := strings.Count(r.stderr, "playground: kept the worktree"); n != 1 {
		t.Errorf("the exit message names %d kept worktrees, want 1 (the playground's own repository's goes with it):\n%s", n, r.stderr)
	}
	if out := git(repo, "worktree", "prune", "--dry-run", "--verbose"); out != "" {
		t.Errorf("git would prune: %s", out)
	}
}
