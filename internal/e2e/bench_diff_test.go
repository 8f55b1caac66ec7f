package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// BenchmarkDiffLargeFile measures kaimon-agentd's peak resident set
// (VmHWM) through one `kaimon diff` of a worktree holding
// KAIMON_BENCH_DIFFFILE bytes (default 1 GiB) of untracked text, which
// git would diff line by line (issue 27, item 5: a 200 MB file took the
// daemon from 374 MB to 1.8 GB; target ≤ 100 MB over idle for 1 GB):
//
//   - one-file: one file of that size, over the limit of what a diff
//     shows of an untracked file, so named with its size;
//   - under-limit: that size in files of 4 MiB, each under the limit, so a
//     diff of more than that size streams through the daemon whole.
//
// A fresh daemon each, one diff whatever b.N: run it with -benchtime 1x.
// The diff goes to a counter, not to memory. Metrics: MB-peak, the
// daemon's VmHWM after the diff; MB-idle, before it; MB-files, the
// untracked files' size; MB-out, the diff's; MB-cli, the CLI's own peak
// (its maxrss); s, the diff's time.
//
//	go test ./internal/e2e -run '^$' -bench BenchmarkDiffLargeFile -benchtime 1x
func BenchmarkDiffLargeFile(b *testing.B) {
	size := int64(envInt("KAIMON_BENCH_DIFFFILE", 1<<30))
	for _, c := range []struct {
		name string
		file int64 // the size of each file
	}{{"one-file", size}, {"under-limit", 4 << 20}} {
		b.Run(c.name, func(b *testing.B) {
			e := newEnv(b)
			e.gitRepo(b)
			id := e.ok("open", e.work, "--worktree", "--model", "replay:"+exampleLog())
			wt := filepath.Join(e.home, "worktrees", id)
			pid := e.daemonPID()
			e.ok("diff", id)
			dir := filepath.Join(wt, "out")
			if err := os.MkdirAll(dir, 0o755); err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { os.RemoveAll(dir) }) // the gigabyte at once
			for i, left := 0, size; left > 0; i, left = i+1, left-c.file {
				writeText(b, filepath.Join(dir, fmt.Sprintf("part-%04d.log", i)), min(c.file, left))
			}
			idle := procStatusMB(b, pid, "VmHWM")
			b.ResetTimer()
			start := time.Now()
			out, cli := e.diffCounted(b, id)
			took := time.Since(start)
			b.StopTimer()
			b.ReportMetric(procStatusMB(b, pid, "VmHWM"), "MB-peak")
			b.ReportMetric(idle, "MB-idle")
			b.ReportMetric(float64(out)/1e6, "MB-out")
			b.ReportMetric(float64(size)/1e6, "MB-files")
			b.ReportMetric(cli, "MB-cli")
			b.ReportMetric(took.Seconds(), "s")
		})
	}
}

// diffCounted runs `kaimon diff ID` with its stdout counted, not kept,
// and returns the bytes it printed and the CLI's peak resident set in MB.
func (e *kenv) diffCounted(b *testing.B, id string) (int64, float64) {
	b.Helper()
	cmd := exec.Command(filepath.Join(binDir, "kaimon"), "diff", id)
	cmd.Dir = e.work
	cmd.Env = slices.Clone(e.env)
	n := &countWriter{}
	var stderr strings.Builder
	cmd.Stdout, cmd.Stderr = n, &stderr
	if err := cmd.Run(); err != nil {
		b.Fatalf("kaimon diff %s: %v\n%s", id, err, stderr.String())
	}
	return n.n, float64(cmd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss) / 1024
}

// countWriter counts what is written to it.
type countWriter struct{ n int64 }

func (c *countWriter) Write(p []byte) (int, error) { c.n += int64(len(p)); return len(p), nil }
