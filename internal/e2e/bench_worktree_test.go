package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// BenchmarkWorktreeOpen is issue 21's figure: eight agents opened at once
// with --worktree on one repository, each open timed, beside eight opens
// at once without a worktree and eight bare `git worktree add -b` at once
// on the same repository, in rotation, one round of each per op. What the
// worktree costs an open is worktree − (plain + git); the daemon's git
// runs of one repository go one at a time (gitwt.Lock), while the bare
// ones run together. The agents replay a recording with no pacing, so that
// no agent program's start hides what git and kaimon add.
//
// Reported: the median of each side's single opens (worktree-ms,
// plain-ms, git-ms) and of each round's wall time (…-wall-ms).
func BenchmarkWorktreeOpen(b *testing.B) {
	const n = 8
	e := newEnv(b)
	e.gitRepo(b)
	// A repository of some size: 200 files to check out.
	for i := range 200 {
		p := filepath.Join(e.work, "src", fmt.Sprintf("f%03d.txt", i))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(strings.Repeat(fmt.Sprintf("line %d\n", i), 100)), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	e.git(b, e.work, "add", ".")
	e.git(b, e.work, "commit", "--quiet", "-m", "files")
	e.ok("daemon", "start")
	model := "replay:" + exampleLog() + "?speed=0"
	bareDir := filepath.Join(e.home, "bare-worktrees")

	var wt, plain, git, wtWall, plainWall, gitWall []time.Duration
	round := func(per, wall *[]time.Duration, open func(i int) string) []string {
		out := make([]string, n)
		took := make([]time.Duration, n)
		var wg sync.WaitGroup
		t0 := time.Now()
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				s := time.Now()
				out[i] = open(i)
				took[i] = time.Since(s)
			}()
		}
		wg.Wait()
		*wall = append(*wall, time.Since(t0))
		*per = append(*per, took...)
		return out
	}
	failed := func(what string, r result) string {
		if r.code != 0 {
			return "FAIL " + what + ": " + r.String()
		}
		return strings.TrimSpace(r.stdout)
	}
	check := func(ids []string) []string {
		for _, id := range ids {
			if strings.HasPrefix(id, "FAIL ") {
				b.Fatal(id)
			}
		}
		return ids
	}
	seq := 0
	sides := []func(){
		func() {
			ids := check(round(&wt, &wtWall, func(int) string {
				return failed("open --worktree", e.kaimon("open", e.work, "--worktree", "--model", model))
			}))
			closeAll(e, ids)
		},
		func() {
			ids := check(round(&plain, &plainWall, func(int) string {
				return failed("open", e.kaimon("open", e.work, "--model", model))
			}))
			closeAll(e, ids)
		},
		func() {
			// The bare adds go one after another, as the daemon runs
			// them: eight at once race in git itself ("fatal: failed
			// to read .git/worktrees/1-6/commondir", git 2.39), which
			// is why the daemon serializes them (gitwt.Lock). Each
			// add's time is its own; the wall is all eight.
			seq++
			t0 := time.Now()
			for i := range n {
				s := time.Now()
				out, err := e.gitErr(e.work, "worktree", "add", "--quiet", "-b", fmt.Sprintf("bare/%d-%d", seq, i), filepath.Join(bareDir, fmt.Sprintf("%d-%d", seq, i)), "HEAD")
				if err != nil {
					b.Fatalf("git worktree add: %v\n%s", err, out)
				}
				git = append(git, time.Since(s))
			}
			gitWall = append(gitWall, time.Since(t0))
		},
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for j := range sides {
			sides[(i+j)%len(sides)]()
		}
	}
	b.StopTimer()
	w, p, g := median(wt), median(plain), median(git)
	b.ReportMetric(ms(w), "worktree-ms")
	b.ReportMetric(ms(p), "plain-ms")
	b.ReportMetric(ms(g), "git-ms")
	b.ReportMetric(ms(w-p-g), "over-ms")
	b.ReportMetric(ms(median(wtWall)), "worktree-wall-ms")
	b.ReportMetric(ms(median(plainWall)), "plain-wall-ms")
	b.ReportMetric(ms(median(gitWall)), "git-wall-ms")
}

// closeAll closes the agents a round opened, between rounds: not timed,
// since each side's figures are its own opens.
func closeAll(e *kenv, ids []string) {
	for _, id := range ids {
		e.ok("close", id)
	}
}
