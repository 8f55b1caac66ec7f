package gitwt

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// setup isolates git from the user's config and gives commits an author.
func setup(t *testing.T) {
	t.Setenv("GIT_CONFIG_GLOBAL", os.DevNull)
	t.Setenv("GIT_CONFIG_NOSYSTEM", "1")
	for _, k := range []string{"GIT_AUTHOR_NAME", "GIT_COMMITTER_NAME"} {
		t.Setenv(k, "kaimon test")
	}
	for _, k := range []string{"GIT_AUTHOR_EMAIL", "GIT_COMMITTER_EMAIL"} {
		t.Setenv(k, "test@kaimon.invalid")
	}
}

func git(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// newRepo makes a repository with one commit holding README and sub/a.txt.
func newRepo(t *testing.T) string {
	t.Helper()
	setup(t)
	dir := filepath.Join(t.TempDir(), "repo")
	git(t, filepath.Dir(dir), "init", "--quiet", "-b", "main", dir)
	write(t, filepath.Join(dir, "README"), "hello\n")
	write(t, filepath.Join(dir, "sub", "a.txt"), "a\n")
	git(t, dir, "add", ".")
	git(t, dir, "commit", "--quiet", "-m", "first")
	return dir
}

func write(t *testing.T, path, text string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

// diff is Diff gathered into a string, with no file left out.
func diff(ctx context.Context, wt, base string, stat bool) (string, error) {
	var b strings.Builder
	err := Diff(ctx, wt, base, stat, 0, &b)
	return b.String(), err
}

func TestFindRefusesWhatIsNoCheckout(t *testing.T) {
	ctx := context.Background()
	repo := newRepo(t)
	r, err := Find(ctx, filepath.Join(repo, "sub"))
	if err != nil {
		t.Fatal(err)
	}
	if r.Top != repo || r.Prefix != "sub" || r.CommonDir != filepath.Join(repo, ".git") {
		t.Fatalf("Find(sub) = %+v; want top %s, prefix sub, common dir %s/.git", r, repo, repo)
	}
	bare := filepath.Join(t.TempDir(), "bare.git")
	git(t, filepath.Dir(bare), "init", "--quiet", "--bare", bare)
	for dir, want := range map[string]string{
		t.TempDir():                 "not inside a git repository",
		bare:                        "bare repository",
		filepath.Join(repo, ".git"): "not inside a git repository's work tree",
	} {
		if _, err := Find(ctx, dir); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Find(%s) = %v; want an error saying %q", dir, err, want)
		}
	}
}

func TestAddDiffDirtyRemove(t *testing.T) {
	ctx := context.Background()
	repo := newRepo(t)
	r, err := Find(ctx, repo)
	if err != nil {
		t.Fatal(err)
	}
	base, err := r.ResolveCommit(ctx, "HEAD")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.ResolveCommit(ctx, "no-such-ref"); err == nil {
		t.Fatal("ResolveCommit(no-such-ref) succeeded")
	}
	if err := r.CheckNewBranch(ctx, "main"); err == nil || !strings.Contains(err.Error(), "already exists") {
		t.Fatalf("CheckNewBranch(main) = %v; want already exists", err)
	}
	if err := r.CheckNewBranch(ctx, "bad..name"); err == nil {
		t.Fatal("CheckNewBranch(bad..name) succeeded")
	}
	wt := filepath.Join(t.TempDir(), "wt", "a1")
	if err := r.Add(ctx, wt, "kaimon/a1", base); err != nil {
		t.Fatal(err)
	}
	if got := git(t, wt, "rev-parse", "--abbrev-ref", "HEAD"); got != "kaimon/a1" {
		t.Fatalf("worktree on %s; want kaimon/a1", got)
	}
	if d, err := Dirty(ctx, wt); err != nil || d {
		t.Fatalf("fresh worktree: Dirty = %v, %v; want clean", d, err)
	}
	if out, err := diff(ctx, wt, base, false); err != nil || out != "" {
		t.Fatalf("fresh worktree: Diff = %q, %v; want empty", out, err)
	}

	// A commit, an uncommitted change and an untracked file all show.
	write(t, filepath.Join(wt, "committed.txt"), "c\n")
	git(t, wt, "add", "committed.txt")
	git(t, wt, "commit", "--quiet", "-m", "agent's commit")
	write(t, filepath.Join(wt, "README"), "changed\n")
	write(t, filepath.Join(wt, "sub", "new.txt"), "untracked\n")
	idx := git(t, wt, "rev-parse", "--path-format=absolute", "--git-path", "index")
	before, _ := os.ReadFile(idx)
	if d, err := Dirty(ctx, wt); err != nil || !d {
		t.Fatalf("changed worktree: Dirty = %v, %v; want dirty", d, err)
	}
	out, err := diff(ctx, wt, base, false)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"+++ b/committed.txt", "+changed", "-hello", "+++ b/sub/new.txt", "+untracked"} {
		if !strings.Contains(out, want) {
			t.Errorf("Diff lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "a.txt") {
		t.Errorf("Diff shows the unchanged sub/a.txt:\n%s", out)
	}
	stat, err := diff(ctx, wt, base, true)
	if err != nil || !strings.Contains(stat, "3 files changed") {
		t.Fatalf("Diff --stat = %q, %v; want 3 files changed", stat, err)
	}
	after, _ := os.ReadFile(idx)
	if string(before) != string(after) {
		t.Fatal("Diff changed the worktree's real index")
	}
	if st := git(t, wt, "status", "--porcelain"); !strings.Contains(st, "?? sub/new.txt") {
		t.Fatalf("after Diff, git status = %q; want sub/new.txt still untracked", st)
	}
	if staged := git(t, wt, "diff", "--cached", "--name-only"); staged != "" {
		t.Fatalf("after Diff, staged in the real index: %q", staged)
	}
	if st := git(t, repo, "status", "--porcelain"); st != "" {
		t.Fatalf("the main checkout is not clean: %q", st)
	}

	// The branch holds a commit main lacks: not merged.
	if r.Merged(ctx, "kaimon/a1", "main") {
		t.Fatal("Merged(kaimon/a1, main) with a commit main lacks")
	}
	if err := r.Remove(ctx, wt, "", false); err == nil {
		t.Fatal("Remove of a dirty worktree without force succeeded")
	}
	if err := r.Remove(ctx, wt, "kaimon/a1", true); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(wt); !os.IsNotExist(err) {
		t.Fatalf("worktree still there: %v", err)
	}
	if branchExists(ctx, repo, "kaimon/a1") {
		t.Fatal("branch kaimon/a1 still there")
	}
	if l := git(t, repo, "worktree", "list", "--porcelain"); strings.Contains(l, wt) {
		t.Fatalf("git still lists the worktree:\n%s", l)
	}
}

func TestReaddAfterPrune(t *testing.T) {
	ctx := context.Background()
	repo := newRepo(t)
	r, _ := Find(ctx, repo)
	wt := filepath.Join(t.TempDir(), "a2")
	if err := r.Add(ctx, wt, "kaimon/a2", "HEAD"); err != nil {
		t.Fatal(err)
	}
	if !r.Merged(ctx, "kaimon/a2", "main") {
		t.Fatal("a branch with no commit of its own is not merged")
	}
	if err := os.RemoveAll(wt); err != nil {
		t.Fatal(err)
	}
	git(t, repo, "worktree", "prune")
	if err := r.Readd(ctx, wt, "kaimon/a2"); err != nil {
		t.Fatal(err)
	}
	if got := git(t, wt, "rev-parse", "--abbrev-ref", "HEAD"); got != "kaimon/a2" {
		t.Fatalf("readded worktree on %s", got)
	}
	if err := r.Remove(ctx, wt, "kaimon/a2", false); err != nil {
		t.Fatal(err)
	}
	if err := r.Readd(ctx, wt, "kaimon/a2"); err == nil || !strings.Contains(err.Error(), "its branch") {
		t.Fatalf("Readd with the branch gone = %v; want an error naming the branch", err)
	}
}

// TestAddManyAtOnce: worktrees added at the same moment under Lock all
// succeed, each on its own branch.
func TestAddManyAtOnce(t *testing.T) {
	ctx := context.Background()
	repo := newRepo(t)
	r, _ := Find(ctx, repo)
	dir := t.TempDir()
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			unlock := Lock(r.CommonDir)
			defer unlock()
			errs[i] = r.Add(ctx, filepath.Join(dir, fmt.Sprint(i)), fmt.Sprintf("kaimon/%d", i), "HEAD")
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("worktree %d: %v", i, err)
		}
	}
	if n := strings.Count(git(t, repo, "worktree", "list"), "\n") + 1; n != 9 {
		t.Fatalf("git worktree list has %d entries; want 9 (the checkout and 8)", n)
	}
}

func TestAddFailureLeavesNothing(t *testing.T) {
	ctx := context.Background()
	repo := newRepo(t)
	r, _ := Find(ctx, repo)
	wt := filepath.Join(t.TempDir(), "a3")
	if err := r.Add(ctx, wt, "kaimon/a3", "0000000000000000000000000000000000000000"); err == nil {
		t.Fatal("Add from a commit that does not exist succeeded")
	}
	if _, err := os.Stat(wt); !os.IsNotExist(err) {
		t.Fatalf("a failed Add left %s: %v", wt, err)
	}
	if branchExists(ctx, repo, "kaimon/a3") {
		t.Fatal("a failed Add left its branch")
	}
}
