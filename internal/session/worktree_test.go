package session

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kaimon/kaimon/internal/backend"
	"github.com/kaimon/kaimon/internal/config"
	"github.com/kaimon/kaimon/internal/gitwt"
	"github.com/kaimon/kaimon/internal/verbs"
)

// TestSweepInterruptedOpens: a daemon starting after one that was killed
// in the middle of opens with worktree (each one's note written, its
// worktree made, and no record of it saved) removes each such worktree,
// and its branch while that is where the open made it, so that an open
// of the id works again; a worktree an agent's record holds stays, and
// only its note goes. Real git.
func TestSweepInterruptedOpens(t *testing.T) {
	t.Setenv("GIT_CONFIG_GLOBAL", os.DevNull)
	t.Setenv("GIT_CONFIG_NOSYSTEM", "1")
	dir := t.TempDir()
	repo := filepath.Join(dir, "repo")
	git := func(dir string, args ...string) string {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@kaimon.invalid"}, args...)...)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	if err := os.MkdirAll(repo, 0o755); err != nil {
		t.Fatal(err)
	}
	git(repo, "init", "--quiet", "-b", "main")
	if err := os.WriteFile(filepath.Join(repo, "README"), []byte("hi\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	git(repo, "add", ".")
	git(repo, "commit", "--quiet", "-m", "first")

	paths := config.Paths{CacheDir: dir + "/cache", SockDir: dir + "/sock", ConfigFile: dir + "/c.json", WorktreeDir: dir + "/worktrees"}
	start := func() *Manager {
		t.Helper()
		m, err := New(paths, config.Defaults(), nil, func(o backend.Options, sink backend.Sink) (backend.Backend, error) {
			return &scripted{sink: sink}, nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	m := start()
	// kept: opened for real; its record holds its worktree. A note of
	// it as if the daemon died between the record and the note's removal.
	if _, err := m.Open(bg, decoded(&verbs.OpenArgs{ID: "kept", Cwd: repo, Worktree: true})); err != nil {
		t.Fatal(err)
	}
	kept := m.recordedWorktree("kept")
	if err := m.noteOpening("kept", kept); err != nil {
		t.Fatal(err)
	}
	// w1 and w2: made and noted, never recorded. w2's branch then got a
	// commit, which is not the open's to delete.
	r, err := gitwt.Find(bg, repo)
	if err != nil {
		t.Fatal(err)
	}
	base, err := r.ResolveCommit(bg, "HEAD")
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"w1", "w2"} {
		info := &gitwt.Info{Repository: r.Top, CommonDir: r.CommonDir, Worktree: paths.Worktree(id), Branch: "kaimon/" + id, BaseRef: "main", BaseCommit: base}
		if err := m.noteOpening(id, info); err != nil {
			t.Fatal(err)
		}
		if err := r.Add(bg, info.Worktree, info.Branch, base); err != nil {
			t.Fatal(err)
		}
	}
	git(paths.Worktree("w2"), "commit", "--quiet", "--allow-empty", "-m", "work")
	m.Shutdown()

	m = start()
	defer m.Shutdown()
	for _, id := range []string{"w1", "w2", "kept"} {
		if _, err := os.Stat(paths.Agent(id).Opening); !os.IsNotExist(err) {
			t.Errorf("agent %s's note is still there: %v", id, err)
		}
	}
	if _, err := os.Stat(kept.Worktree); err != nil {
		t.Fatalf("the worktree the record of kept holds was removed: %v", err)
	}
	for _, id := range []string{"w1", "w2"} {
		if _, err := os.Stat(paths.Worktree(id)); !os.IsNotExist(err) {
			t.Errorf("the interrupted open's worktree %s is still there: %v", paths.Worktree(id), err)
		}
	}
	if b := git(repo, "for-each-ref", "--format=%(refname:short)", "refs/heads/"); b != "kaimon/kept\nkaimon/w2\nmain" {
		t.Fatalf("branches:\n%s\nwant kaimon/kept, kaimon/w2 (it has a commit) and main", b)
	}
	if _, err := m.Open(bg, decoded(&verbs.OpenArgs{ID: "w1", Cwd: repo, Worktree: true})); err != nil {
		t.Fatalf("open of w1 after the sweep: %v", err)
	}
}
