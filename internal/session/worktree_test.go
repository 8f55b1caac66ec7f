package session

import (
	"bytes"
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

// gitRepo makes a repository with one commit, apart from the machine's
// git config.
func gitRepo(t *testing.T) string {
	t.Helper()
	t.Setenv("GIT_CONFIG_GLOBAL", os.DevNull)
	t.Setenv("GIT_CONFIG_NOSYSTEM", "1")
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "README"), []byte("hello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"init", "--quiet", "-b", "main"}, {"add", "."},
		{"-c", "user.name=kaimon test", "-c", "user.email=test@kaimon.invalid", "commit", "--quiet", "-m", "first"}} {
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	return dir
}

// agent_diff returns the first verbs.DiffMax of a diff, cut at a line's
// end and marked, saying how to have the whole; the stream (WriteDiff)
// has the whole. A diff within the bound comes whole and unmarked.
func TestDiffCutAtItsBound(t *testing.T) {
	r := newRig(t, 0)
	res, err := r.m.Open(bg, decoded(&verbs.OpenArgs{Cwd: gitRepo(t), ID: "w1", Worktree: true}))
	if err != nil {
		t.Fatal(err)
	}
	st, err := r.m.Status(bg, &verbs.StatusArgs{AgentID: res.AgentID})
	if err != nil || st.Worktree == "" {
		t.Fatalf("status of a worktree agent: %+v, %v", st, err)
	}
	write := func(name string, size int) {
		t.Helper()
		line := "a line of the agent's long file, some 64 bytes long, as code is\n"
		text := strings.Repeat(line, size/len(line)) + "the last line\n"
		if err := os.WriteFile(filepath.Join(st.Worktree, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}

	write("small.txt", 1000)
	d, err := r.m.Diff(bg, &verbs.DiffArgs{AgentID: "w1"})
	if err != nil || d.Truncated || !strings.HasSuffix(d.Diff, "+the last line\n") || d.Branch != "kaimon/w1" || d.BaseCommit != st.BaseCommit {
		t.Fatalf("a small diff: %+v, %v", d, err)
	}

	write("long.txt", 4*verbs.DiffMax)
	d, err = r.m.Diff(bg, &verbs.DiffArgs{AgentID: "w1"})
	if err != nil {
		t.Fatal(err)
	}
	note := verbs.DiffCutNote("w1")
	kept, marked := strings.CutSuffix(d.Diff, note)
	if !d.Truncated || !marked || !strings.Contains(note, "kaimon diff w1") || len(kept) > verbs.DiffMax || len(kept) < verbs.DiffMax-100 ||
		!strings.HasSuffix(kept, "is\n") || !strings.Contains(kept, "+++ b/long.txt") {
		t.Fatalf("a diff of %d KiB: truncated %v, %d bytes kept, ending %q", 4*verbs.DiffMax>>10, d.Truncated, len(kept), d.Diff[max(0, len(d.Diff)-200):])
	}

	var whole bytes.Buffer
	w, err := r.m.WriteDiff(bg, &verbs.DiffArgs{AgentID: "w1"}, &whole)
	if err != nil || w.Truncated || w.Diff != "" || w.Branch != "kaimon/w1" {
		t.Fatalf("WriteDiff: %+v, %v", w, err)
	}
	if whole.Len() < 4*verbs.DiffMax || !strings.HasSuffix(whole.String(), "+the last line\n") || !strings.HasPrefix(whole.String(), kept[:1000]) {
		t.Fatalf("WriteDiff wrote %d bytes, ending %q", whole.Len(), whole.String()[max(0, whole.Len()-200):])
	}

	if _, err := r.m.Diff(bg, &verbs.DiffArgs{AgentID: r.open(t, "plain")}); err == nil || !strings.Contains(err.Error(), "has no worktree") {
		t.Fatalf("Diff of an agent without a worktree: %v", err)
	}
	if _, err := r.m.WriteDiff(bg, &verbs.DiffArgs{AgentID: "plain"}, &whole); err == nil || !strings.Contains(err.Error(), "has no worktree") {
		t.Fatalf("WriteDiff of an agent without a worktree: %v", err)
	}
}
