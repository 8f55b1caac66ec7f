package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/kaimon/kaimon/internal/verbs"
)

// writeText writes a text file of size bytes (whole lines, the last cut
// where the size ends): what git diffs line by line, unlike a file of
// zeros, which it takes for binary and compresses to next to nothing.
func writeText(t testing.TB, path string, size int64) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	line := "a line of a log an agent's build left in its worktree, 64 bytes\n"
	chunk := []byte(strings.Repeat(line, (1<<20)/len(line)))
	for left := size; left > 0; left -= int64(len(chunk)) {
		if _, err := f.Write(chunk[:min(int64(len(chunk)), left)]); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestWorktreeDiffLargeFile (issue 27, item 5): an untracked file of 300
// MB in an agent's worktree is named by kaimon diff with its size, in the
// patch and in --stat, instead of its content, and the daemon's peak
// resident set (VmHWM) stays within 100 MB of what it was before (it
// gathered the diff whole, and peaked at some 8 times the file). A 1 MiB
// untracked file, under the limit, kaimon diff prints whole, streamed;
// agent_diff through kaimon mcp returns its first 256 KiB, marked as cut
// with the command that prints the whole.
func TestWorktreeDiffLargeFile(t *testing.T) {
	e := newEnv(t)
	e.gitRepo(t)
	id := e.ok("open", e.work, "--worktree", "--model", "replay:"+exampleLog())
	st := e.status(t, id)
	pid := e.daemonPID()
	// The peak so far, a diff included: what the daemon holds idle.
	e.ok("diff", id)
	idle := procStatusMB(t, pid, "VmHWM")

	const size = 300 << 20
	big := filepath.Join(st.Worktree, "sub", "build.log")
	t.Cleanup(func() { os.Remove(big) }) // its 300 MB at once, not with the test's home
	writeText(t, big, size)
	patch := e.ok("diff", id)
	peak := procStatusMB(t, pid, "VmHWM")
	t.Logf("kaimon-agentd VmHWM %.0f MB idle, %.0f MB after the diff of a %d MB file (%d bytes of output)", idle, peak, size>>20, len(patch))
	if peak-idle > 100 {
		t.Errorf("the daemon's peak grew by %.0f MB (%.0f to %.0f MB) in a diff of a %d MB file; want at most 100 MB", peak-idle, idle, peak, size>>20)
	}
	want := fmt.Sprintf("diff --git a/sub/build.log b/sub/build.log\nnew file mode 100644\nBinary files /dev/null and b/sub/build.log differ\n"+
		"kaimon: sub/build.log is %d bytes, untracked: over the %d MiB kaimon diff shows of a file, its content is left out", size, verbs.DiffFileMax>>20)
	if !strings.Contains(patch, want) || len(patch) > 4096 {
		t.Errorf("kaimon diff of a worktree with a %d MB untracked file printed %d bytes, without %q:\n%.2000s", size>>20, len(patch), want, patch)
	}
	stat := e.ok("diff", id, "--stat")
	if want := fmt.Sprintf(" sub/build.log | Bin 0 -> %d bytes (untracked, over the %d MiB", size, verbs.DiffFileMax>>20); !strings.Contains(stat, want) {
		t.Errorf("kaimon diff --stat lacks %q:\n%.2000s", want, stat)
	}
	if err := os.Remove(big); err != nil {
		t.Fatal(err)
	}

	// Under the limit, and over what agent_diff returns.
	writeText(t, filepath.Join(st.Worktree, "medium.txt"), 1<<20)
	whole := e.ok("diff", id)
	if n := strings.Count(whole, "\n+a line of a log"); !strings.Contains(whole, "+++ b/medium.txt") || n < (1<<20)/64 {
		t.Errorf("kaimon diff of a 1 MiB file: %d bytes, %d of its lines", len(whole), n)
	}
	o := startOrch(t, e, mcp.ClientCapabilities{})
	var d verbs.DiffResult
	o.structured(o.call("agent_diff", map[string]any{"agent_id": id}), &d)
	kept, marked := strings.CutSuffix(d.Diff, verbs.DiffCutNote(id))
	if !d.Truncated || !marked || !strings.Contains(verbs.DiffCutNote(id), "`kaimon diff "+id+"`") ||
		len(kept) > verbs.DiffMax || !strings.HasPrefix(whole, kept) || !strings.HasSuffix(kept, "\n") {
		t.Errorf("agent_diff through kaimon mcp: truncated %v, %d bytes, a prefix of kaimon diff's %v, ending %q",
			d.Truncated, len(d.Diff), strings.HasPrefix(whole, kept), d.Diff[max(0, len(d.Diff)-200):])
	}
	if d.Branch != st.Branch || d.BaseCommit != st.BaseCommit || d.AgentID != id {
		t.Errorf("agent_diff through kaimon mcp: %+v; want agent %s, branch %s, base %s", d, id, st.Branch, st.BaseCommit)
	}
}
