package session

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kaimon/kaimon/internal/verbs"
)

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
