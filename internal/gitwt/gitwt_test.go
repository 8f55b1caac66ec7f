package gitwt

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
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

// TestFindNewlineInName: a directory whose name holds a newline is found
// as itself, not as the neighbouring repository its name begins with.
func TestFindNewlineInName(t *testing.T) {
	ctx := context.Background()
	setup(t)
	parent := t.TempDir()
	neighbour := filepath.Join(parent, "x")
	odd := filepath.Join(parent, "x\ny")
	for _, dir := range []string{neighbour, odd} {
		git(t, parent, "init", "--quiet", "-b", "main", dir)
		write(t, filepath.Join(dir, "sub", "a.txt"), "a\n")
	}
	r, err := Find(ctx, filepath.Join(odd, "sub"))
	if err != nil {
		t.Fatal(err)
	}
	if r.Top != odd || r.CommonDir != filepath.Join(odd, ".git") || r.Prefix != "sub" {
		t.Fatalf("Find(%q) = %+v; want top %q, common dir %q, prefix sub", filepath.Join(odd, "sub"), r, odd, filepath.Join(odd, ".git"))
	}
	// A name that ends in a newline, at the top.
	end := filepath.Join(parent, "z\n")
	git(t, parent, "init", "--quiet", "-b", "main", end)
	if r, err := Find(ctx, end); err != nil || r.Top != end || r.Prefix != "" {
		t.Fatalf("Find(%q) = %+v, %v; want top %q", end, r, err, end)
	}
}

// TestWorktreeRootIsPrivate: a worktree's directory is 0700, whatever the
// umask lets git make, as added and as added again; its parents that Add
// makes are 0700 too.
func TestWorktreeRootIsPrivate(t *testing.T) {
	ctx := context.Background()
	repo := newRepo(t)
	old := syscall.Umask(0o022) // the usual one, under which git makes 0755
	defer syscall.Umask(old)
	r, _ := Find(ctx, repo)
	dir := filepath.Join(t.TempDir(), "worktrees")
	wt := filepath.Join(dir, "p1")
	mode := func(p string) os.FileMode {
		t.Helper()
		st, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		return st.Mode().Perm()
	}
	if err := r.Add(ctx, wt, "kaimon/p1", "HEAD"); err != nil {
		t.Fatal(err)
	}
	if m, d := mode(wt), mode(dir); m != 0o700 || d != 0o700 {
		t.Fatalf("worktree %s is %o and its dir %o; want 0700 both", wt, m, d)
	}
	if err := os.RemoveAll(wt); err != nil {
		t.Fatal(err)
	}
	if err := r.Readd(ctx, wt, "kaimon/p1"); err != nil {
		t.Fatal(err)
	}
	if m := mode(wt); m != 0o700 {
		t.Fatalf("worktree %s added again is %o; want 0700", wt, m)
	}
}

// newTrap makes a program that creates a file of its first argument's
// name in the returned dir when run, and returns the dir and the program.
// trap NAME [FILE] marks NAME, then passes FILE (a textconv's) or stdin
// (a filter's) through; as a file monitor it fails, which makes git look
// at every file itself.
func newTrap(t *testing.T) (markers, trap string) {
	t.Helper()
	base := t.TempDir()
	markers = filepath.Join(base, "markers")
	if err := os.Mkdir(markers, 0o755); err != nil {
		t.Fatal(err)
	}
	trap = filepath.Join(base, "trap")
	script := "#!/bin/sh\nname=$1; shift\ntouch \"" + markers + "/$name\"\n" +
		"case $name in *fsmonitor*) exit 1;; esac\n" +
		"if [ $# -gt 0 ]; then exec cat \"$1\"; fi\nexec cat\n"
	if err := os.WriteFile(trap, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return markers, trap
}

// trapRepo arms the repository at repo with config that would run a
// program (newTrap): core.fsmonitor, a clean and a smudge filter and a
// textconv for *.txt (by .gitattributes, committed), and post-checkout
// and reference-transaction hooks.
func trapRepo(t *testing.T, repo string) (markers, trap string) {
	t.Helper()
	markers, trap = newTrap(t)
	write(t, filepath.Join(repo, ".gitattributes"), "*.txt filter=trap diff=trap\n")
	git(t, repo, "add", ".gitattributes")
	git(t, repo, "commit", "--quiet", "-m", "attributes")
	for k, v := range map[string]string{
		"core.fsmonitor":     trap + " fsmonitor",
		"filter.trap.clean":  trap + " clean",
		"filter.trap.smudge": trap + " smudge",
		"diff.trap.textconv": trap + " textconv",
	} {
		git(t, repo, "config", k, v)
	}
	for _, hook := range []string{"post-checkout", "reference-transaction"} {
		p := filepath.Join(repo, ".git", "hooks", hook)
		if err := os.WriteFile(p, []byte("#!/bin/sh\ntouch \""+markers+"/"+hook+"\"\ncat >/dev/null\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return markers, trap
}

// marked lists the traps that ran, and clears them.
func marked(t *testing.T, markers string) []string {
	t.Helper()
	ents, err := os.ReadDir(markers)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
		_ = os.Remove(filepath.Join(markers, e.Name()))
	}
	return names
}

// TestGitRunsNoRepositoryCode: every git run of gitwt's, in a repository
// whose config names programs (trapRepo) and in a worktree whose .git was
// replaced by one pointing at a planted gitdir with a file monitor and a
// filter of its own, runs none of them; the same git runs without the
// guard run each (so the traps are armed).
func TestGitRunsNoRepositoryCode(t *testing.T) {
	ctx := context.Background()
	repo := newRepo(t)
	markers, trap := trapRepo(t, repo)
	r, err := Find(ctx, filepath.Join(repo, "sub"))
	if err != nil {
		t.Fatal(err)
	}
	base, err := r.ResolveCommit(ctx, r.CurrentBranch(ctx))
	if err != nil {
		t.Fatal(err)
	}
	if err := r.CheckNewBranch(ctx, "kaimon/t1"); err != nil {
		t.Fatal(err)
	}
	wt := filepath.Join(t.TempDir(), "t1")
	if err := r.Add(ctx, wt, "kaimon/t1", base); err != nil {
		t.Fatal(err)
	}
	if got := marked(t, markers); len(got) > 0 {
		t.Fatalf("Find and Add ran %v", got)
	}
	// Changed, so that status and diff read the file's content.
	write(t, filepath.Join(wt, "sub", "a.txt"), "changed\n")
	write(t, filepath.Join(wt, "new.txt"), "new\n")
	if d, err := Dirty(ctx, wt); err != nil || !d {
		t.Fatalf("Dirty = %v, %v; want dirty", d, err)
	}
	for _, stat := range []bool{false, true} {
		// fileMax 1: every untracked file is left out, so the runs that
		// find them (ls-files, update-index) run too.
		var b strings.Builder
		if err := Diff(ctx, wt, base, stat, 1, &b); err != nil || !strings.Contains(b.String(), "a.txt") {
			out := b.String()
			t.Fatalf("Diff(stat %v) = %q, %v", stat, out, err)
		}
	}
	r.Merged(ctx, "kaimon/t1", "main")
	if got := marked(t, markers); len(got) > 0 {
		t.Fatalf("Dirty, Diff and Merged ran %v", got)
	}

	// The worktree's .git pointed at a planted gitdir, as an agent's
	// file write could.
	planted := filepath.Join(t.TempDir(), "planted")
	git(t, filepath.Dir(planted), "init", "--quiet", planted)
	write(t, filepath.Join(planted, ".gitattributes"), "*.txt filter=trap\n")
	write(t, filepath.Join(planted, "new.txt"), "planted\n")
	git(t, planted, "add", ".")
	git(t, planted, "commit", "--quiet", "-m", "planted")
	git(t, planted, "config", "core.fsmonitor", trap+" planted-fsmonitor")
	git(t, planted, "config", "filter.trap.clean", trap+" planted-clean")
	dotGit := filepath.Join(wt, ".git")
	real, err := os.ReadFile(dotGit)
	if err != nil {
		t.Fatal(err)
	}
	write(t, dotGit, "gitdir: "+filepath.Join(planted, ".git")+"\n")
	if _, err := Dirty(ctx, wt); err != nil {
		t.Fatal(err)
	}
	if _, err := diff(ctx, wt, "HEAD", false); err != nil {
		t.Fatal(err)
	}
	if got := marked(t, markers); len(got) > 0 {
		t.Fatalf("with a planted gitdir, Dirty and Diff ran %v", got)
	}
	// The same runs without the guard: the planted gitdir's monitor...
	git(t, wt, "diff", "HEAD")
	if got := marked(t, markers); !slices.Contains(got, "planted-fsmonitor") || !slices.Contains(got, "planted-clean") {
		t.Fatalf("git status with the planted gitdir ran %v; the trap is not armed", got)
	}
	write(t, dotGit, string(real))
	// ... and the repository's own monitor, filters, textconv and hooks.
	git(t, wt, "diff", base)
	other := filepath.Join(t.TempDir(), "t2")
	git(t, repo, "worktree", "add", "--quiet", "-b", "kaimon/t2", other, base)
	got := marked(t, markers)
	for _, want := range []string{"fsmonitor", "clean", "smudge", "textconv", "post-checkout", "reference-transaction"} {
		if !slices.Contains(got, want) {
			t.Errorf("git without the guard did not run %s (ran %v): the trap is not armed", want, got)
		}
	}

	// Removing runs none of them either (git worktree remove looks at
	// the worktree with a git status of its own).
	if err := r.Remove(ctx, wt, "", false); err == nil {
		t.Fatal("Remove of a dirty worktree without force succeeded")
	}
	if err := r.Remove(ctx, wt, "kaimon/t1", true); err != nil {
		t.Fatal(err)
	}
	if err := r.Discard(ctx, other, "kaimon/t2", base); err != nil {
		t.Fatal(err)
	}
	if got := marked(t, markers); len(got) > 0 {
		t.Fatalf("Remove and Discard ran %v", got)
	}
}

// TestGitRunsNoSubmoduleCode: a repository nested in a worktree, with a
// filter in its own config, as a gitlink the worktree committed: Dirty
// starts no git in it, whose filter would run; a plain git status does
// (the trap is armed). (Diff's add -N does; see the package's notes.)
func TestGitRunsNoSubmoduleCode(t *testing.T) {
	ctx := context.Background()
	repo := newRepo(t)
	markers, trap := newTrap(t)
	r, _ := Find(ctx, repo)
	wt := filepath.Join(t.TempDir(), "s1")
	if err := r.Add(ctx, wt, "kaimon/s1", "HEAD"); err != nil {
		t.Fatal(err)
	}
	nested := filepath.Join(wt, "nested")
	git(t, wt, "init", "--quiet", nested)
	write(t, filepath.Join(nested, ".gitattributes"), "* filter=sub\n")
	write(t, filepath.Join(nested, "f"), "f\n")
	git(t, nested, "add", ".")
	git(t, nested, "commit", "--quiet", "-m", "nested")
	git(t, nested, "config", "filter.sub.clean", trap+" submodule-clean")
	git(t, wt, "add", "nested") // a gitlink
	git(t, wt, "commit", "--quiet", "-m", "a nested repository")
	// The same size and a later mtime: git can tell the file changed
	// only by reading it through the filter, whatever the clock's
	// granularity (a new size would let it skip the filter unless the
	// index happened to be racily clean, as it was on fast machines).
	write(t, filepath.Join(nested, "f"), "g\n")
	later := time.Now().Add(time.Hour)
	if err := os.Chtimes(filepath.Join(nested, "f"), later, later); err != nil {
		t.Fatal(err)
	}
	_ = marked(t, markers)
	if _, err := Dirty(ctx, wt); err != nil {
		t.Fatal(err)
	}
	if got := marked(t, markers); len(got) > 0 {
		t.Fatalf("Dirty ran %v in the nested repository", got)
	}
	git(t, wt, "status", "--porcelain")
	if got := marked(t, markers); !slices.Contains(got, "submodule-clean") {
		t.Fatalf("git status ran %v; the trap is not armed", got)
	}
}

// BenchmarkDirty is one agent's git status in a list: with the guard, a
// git config run (repoFilters) and the status.
func BenchmarkDirty(b *testing.B) {
	ctx := context.Background()
	b.Setenv("GIT_CONFIG_GLOBAL", os.DevNull)
	b.Setenv("GIT_CONFIG_NOSYSTEM", "1")
	dir := filepath.Join(b.TempDir(), "repo")
	for _, args := range [][]string{{"init", "--quiet", "-b", "main", dir}} {
		if out, err := exec.Command("git", args...).CombinedOutput(); err != nil {
			b.Fatalf("%v: %s", err, out)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "README"), []byte("hi\n"), 0o644); err != nil {
		b.Fatal(err)
	}
	for _, args := range [][]string{{"add", "."}, {"-c", "user.name=b", "-c", "user.email=b@kaimon.invalid", "commit", "--quiet", "-m", "first"}} {
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("%v: %s", err, out)
		}
	}
	r, err := Find(ctx, dir)
	if err != nil {
		b.Fatal(err)
	}
	wt := filepath.Join(b.TempDir(), "wt")
	if err := r.Add(ctx, wt, "kaimon/b", "HEAD"); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := Dirty(ctx, wt); err != nil {
			b.Fatal(err)
		}
	}
}
