package e2e

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// TestWorktreeOpenKilled: the daemon SIGKILLed while open --worktree
// checks out (held there by a smudge filter of the user's global git
// config, which kaimon's git runs keep) leaves a branch or worktree no
// record knows; the next daemon removes them when it starts, so that the
// next open of that id works, and leaves nothing else.
func TestWorktreeOpenKilled(t *testing.T) {
	e := newEnv(t)
	e.gitRepo(t)
	if err := os.WriteFile(filepath.Join(e.work, ".gitattributes"), []byte("slow.bin filter=slow\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(e.work, "slow.bin"), []byte("slow\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	e.git(t, e.work, "add", ".")
	e.git(t, e.work, "commit", "--quiet", "-m", "a file checked out slowly")
	// The filter says it is smudging, then waits (a bounded time) until
	// the test lets it go.
	smudging, release := filepath.Join(e.home, "smudging"), filepath.Join(e.home, "release")
	filter := filepath.Join(e.home, "slow-smudge")
	script := "#!/bin/sh\ntouch " + smudging + "\ni=0\nwhile [ ! -e " + release + " ] && [ $i -lt 600 ]; do sleep 0.05; i=$((i+1)); done\nexec cat\n"
	if err := os.WriteFile(filter, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	// The daemon's HOME is claude-home: its global git config.
	global := "[filter \"slow\"]\n\tsmudge = " + filter + "\n"
	if err := os.WriteFile(filepath.Join(e.home, "claude-home", ".gitconfig"), []byte(global), 0o644); err != nil {
		t.Fatal(err)
	}

	e.ok("daemon", "start")
	replay := "replay:" + exampleLog()
	opened := make(chan result, 1)
	go func() { opened <- e.kaimon("open", e.work, "--worktree", "--id", "w1", "--model", replay) }()
	waitFor(t, "the open's checkout to reach the smudge filter", 30*time.Second, func() bool {
		_, err := os.Stat(smudging)
		return err == nil
	})
	e.killDaemon(t)
	if r := <-opened; r.code == 0 {
		t.Fatalf("the open whose daemon was killed succeeded: %s", r)
	}
	// The filter, and any git still running, end.
	if err := os.WriteFile(release, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the killed daemon's git runs to end", 30*time.Second, func() bool { return len(e.processes()) == 0 })
	wt := filepath.Join(e.home, "worktrees", "w1")
	_, statErr := os.Stat(wt)
	if statErr != nil && !slices.Contains(e.branches(t), "kaimon/w1") {
		t.Fatal("the interrupted open left neither its worktree nor its branch: the test did not interrupt it")
	}

	e.ok("daemon", "start")
	if got := e.ok("open", e.work, "--worktree", "--id", "w1", "--model", replay); got != "w1" {
		t.Fatalf("open --id w1 after the interrupted one printed %q", got)
	}
	st := e.status(t, "w1")
	if st.Worktree != wt || st.Branch != "kaimon/w1" || st.Dirty {
		t.Fatalf("the reopened agent: %+v", st)
	}
	if b := e.branches(t); !slices.Equal(b, []string{"kaimon/w1", "main"}) {
		t.Fatalf("branches %v; want main and kaimon/w1", b)
	}
	if w := e.worktrees(t); len(w) != 2 {
		t.Fatalf("git worktree list: %v; want the checkout and w1's", w)
	}
	if _, err := os.Stat(e.paths().Agent("w1").Opening); !os.IsNotExist(err) {
		t.Fatalf("the open's note is still there: %v", err)
	}
}
