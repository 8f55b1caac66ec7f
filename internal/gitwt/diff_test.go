package gitwt

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// newWorktree is a worktree of a new repository on branch kaimon/w, and
// the commit it starts from.
func newWorktree(t *testing.T) (repo, wt, base string) {
	t.Helper()
	ctx := context.Background()
	repo = newRepo(t)
	r, err := Find(ctx, repo)
	if err != nil {
		t.Fatal(err)
	}
	if base, err = r.ResolveCommit(ctx, "HEAD"); err != nil {
		t.Fatal(err)
	}
	wt = filepath.Join(t.TempDir(), "w")
	if err := r.Add(ctx, wt, "kaimon/w", base); err != nil {
		t.Fatal(err)
	}
	return repo, wt, base
}

// sparse makes a file of size bytes that holds no data blocks.
func sparse(t *testing.T, path string, size int64) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// An untracked file over the limit is named with its size, in the patch
// and in the stat, and git never gets to read it; git apply refuses the
// patch at that file rather than make it empty, and applies the rest
// with --exclude. Files under the limit, and tracked ones over it, are
// diffed as before.
func TestDiffLeavesOutLargeUntracked(t *testing.T) {
	ctx := context.Background()
	repo, wt, base := newWorktree(t)
	const max = 1 << 20
	write(t, filepath.Join(wt, "small.txt"), "small\n")
	write(t, filepath.Join(wt, "tracked.txt"), strings.Repeat("t\n", max)) // 2 MiB, committed
	git(t, wt, "add", "tracked.txt")
	git(t, wt, "commit", "--quiet", "-m", "a big tracked file")
	sparse(t, filepath.Join(wt, "big.bin"), 3<<30)
	odd := "sub/odd \"name\"\tü.bin"
	sparse(t, filepath.Join(wt, odd), max+1)
	if err := os.Chmod(filepath.Join(wt, odd), 0o755); err != nil {
		t.Fatal(err)
	}

	var b strings.Builder
	if err := Diff(ctx, wt, base, false, max, &b); err != nil {
		t.Fatal(err)
	}
	patch := b.String()
	quoted := git(t, wt, "ls-files", "--others", "--", odd) // as git quotes it
	for _, want := range []string{
		"+++ b/small.txt\n@@ -0,0 +1 @@\n+small\n",
		"+++ b/tracked.txt\n",
		"diff --git a/big.bin b/big.bin\nnew file mode 100644\nBinary files /dev/null and b/big.bin differ\n" +
			"kaimon: big.bin is 3221225472 bytes, untracked: over the 1 MiB kaimon diff shows of a file, its content is left out",
		"new file mode 100755\n",
		"kaimon: " + quoted + " is 1048577 bytes,",
	} {
		if !strings.Contains(patch, want) {
			t.Errorf("the patch lacks %q:\n%.3000s", want, patch)
		}
	}
	if strings.Count(patch, "diff --git") != 4 || strings.Contains(patch, "GIT binary patch") {
		t.Errorf("the patch has other files than small.txt, tracked.txt, big.bin and %s, or one's content:\n%.3000s", odd, patch)
	}

	// Applied to the base, in a checkout of its own.
	other := filepath.Join(t.TempDir(), "other")
	git(t, repo, "worktree", "add", "--quiet", "--detach", other, base)
	pf := filepath.Join(t.TempDir(), "agent.patch")
	if err := os.WriteFile(pf, []byte(patch), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("git", "apply", pf)
	cmd.Dir = other
	if out, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(out), "big.bin") {
		t.Errorf("git apply of the patch: %v, %s; want a refusal naming big.bin", err, out)
	}
	if _, err := os.Stat(filepath.Join(other, "big.bin")); err == nil {
		t.Error("the refused git apply made big.bin")
	}
	git(t, other, "apply", "--exclude=big.bin", "--exclude=sub/*", pf)
	if got, err := os.ReadFile(filepath.Join(other, "small.txt")); err != nil || string(got) != "small\n" {
		t.Errorf("after git apply --exclude, small.txt = %q, %v", got, err)
	}

	b.Reset()
	if err := Diff(ctx, wt, base, true, max, &b); err != nil {
		t.Fatal(err)
	}
	stat := b.String()
	for _, want := range []string{"small.txt", "tracked.txt", " big.bin | Bin 0 -> 3221225472 bytes (untracked, over the 1 MiB kaimon diff shows of a file: left out)\n",
		" " + quoted + " | Bin 0 -> 1048577 bytes"} {
		if !strings.Contains(stat, want) {
			t.Errorf("the stat lacks %q:\n%s", want, stat)
		}
	}
	// The worktree's own index still knows nothing of them.
	if st := git(t, wt, "status", "--porcelain"); !strings.Contains(st, "?? big.bin") {
		t.Errorf("after Diff, git status = %q; want big.bin untracked", st)
	}
}

// quotePath writes a name as git does in a diff.
func TestQuotePath(t *testing.T) {
	setup(t)
	dir := t.TempDir()
	git(t, dir, "init", "--quiet")
	for _, name := range []string{"plain name.txt", "tab\there", "new\nline", `back\slash`, `"quoted"`, "ümlaut", "bell\a\x7f"} {
		write(t, filepath.Join(dir, name), "x")
		if got, want := quotePath(name), git(t, dir, "ls-files", "--others", "--", name); got != want {
			t.Errorf("quotePath(%q) = %s; git writes %s", name, got, want)
		}
	}
}

// errFull is the error of a writer that takes no more.
var errFull = errors.New("full")

// fullAfter takes n bytes, then fails.
type fullAfter struct{ n int }

func (f *fullAfter) Write(p []byte) (int, error) {
	if len(p) > f.n {
		k := f.n
		f.n = 0
		return k, errFull
	}
	f.n -= len(p)
	return len(p), nil
}

// A writer that fails stops the diff: its error is Diff's, and git is
// gone when Diff returns (it was stopped, its group with it).
func TestDiffStopsAtTheWritersError(t *testing.T) {
	ctx := context.Background()
	_, wt, base := newWorktree(t)
	write(t, filepath.Join(wt, "long.txt"), strings.Repeat("a line of an agent's long file\n", 1<<17)) // 4 MiB
	err := Diff(ctx, wt, base, false, 0, &fullAfter{n: 64 << 10})
	if !errors.Is(err, errFull) {
		t.Fatalf("Diff into a writer that fails = %v; want its error", err)
	}
	if left := gitsIn(t, wt); left != "" {
		t.Fatalf("git still runs after Diff returned: %s", left)
	}
}

// gitsIn lists the git processes whose cwd is dir.
func gitsIn(t *testing.T, dir string) string {
	t.Helper()
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		cwd, err := os.Readlink(filepath.Join("/proc", e.Name(), "cwd"))
		if err != nil || cwd != dir {
			continue
		}
		cmdline, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		out = append(out, fmt.Sprintf("%s: %q", e.Name(), cmdline))
	}
	return strings.Join(out, "; ")
}

// cancelOnWrite cancels a context at its first write, and takes all;
// with settle, it first waits there for git to have exited and for the
// cancel to reach the diff's read.
type cancelOnWrite struct {
	t      *testing.T
	cancel func()
	dir    string
	settle bool
	n      int
}

func (c *cancelOnWrite) Write(p []byte) (int, error) {
	if c.n == 0 {
		c.cancel()
		for c.settle && gitsIn(c.t, c.dir) != "" {
			time.Sleep(10 * time.Millisecond)
		}
		if c.settle {
			time.Sleep(100 * time.Millisecond) // the read deadline, set by the cancel
		}
	}
	c.n += len(p)
	return len(p), nil
}

// A diff whose context ends partway (its client went away, or the
// timeout) is an error, never a short diff that looks whole: not while
// git still writes (32 MiB), nor once it has written everything into the
// pipe and exited (48 KiB: 32 KiB read, the rest still in the pipe).
func TestDiffStoppedPartwayIsAnError(t *testing.T) {
	_, wt, base := newWorktree(t)
	for _, c := range []struct {
		lines  int
		settle bool
	}{{1 << 20, false}, {1500, true}} {
		write(t, filepath.Join(wt, "long.txt"), strings.Repeat("a line of an agent's long file\n", c.lines))
		ctx, cancel := context.WithCancel(context.Background())
		w := &cancelOnWrite{t: t, cancel: cancel, dir: wt, settle: c.settle}
		err := Diff(ctx, wt, base, false, 0, w)
		cancel()
		if !errors.Is(err, context.Canceled) || w.n >= c.lines*32 {
			t.Errorf("%d lines: Diff whose context ended at its first write = %v, after %d bytes; want the context's error", c.lines, err, w.n)
		}
		if left := gitsIn(t, wt); left != "" {
			t.Fatalf("git still runs after Diff returned: %s", left)
		}
	}
}
