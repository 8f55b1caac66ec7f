package cli

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestWriteLastLines(t *testing.T) {
	long := strings.Repeat("x", 70<<10) // longer than one backwards read
	var many strings.Builder
	for i := 1; i <= 3000; i++ {
		fmt.Fprintf(&many, "line %d\n", i)
	}
	for _, tc := range []struct {
		name, log string
		n         int
		want      string
	}{
		{"empty", "", 5, ""},
		{"none asked", "a\nb\n", 0, ""},
		{"fewer than asked", "a\nb\n", 5, "a\nb\n"},
		{"exactly", "a\nb\n", 2, "a\nb\n"},
		{"last", "a\nb\nc\n", 1, "c\n"},
		{"no final newline", "a\nb\nc", 2, "b\nc"},
		{"blank first line", "\nabc\n", 1, "abc\n"},
		{"blank lines count", "a\n\n\n", 2, "\n\n"},
		{"a line longer than a read", "a\n" + long + "\nb\n", 2, long + "\nb\n"},
		{"many lines over several reads", many.String(), 2, "line 2999\nline 3000\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "agentd.log")
			if err := os.WriteFile(path, []byte(tc.log), 0o600); err != nil {
				t.Fatal(err)
			}
			f, err := os.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			var out bytes.Buffer
			end, err := writeLastLines(&out, f, tc.n)
			if err != nil {
				t.Fatal(err)
			}
			if out.String() != tc.want {
				t.Errorf("last %d lines: got %q, want %q", tc.n, trim(out.String()), trim(tc.want))
			}
			if end != int64(len(tc.log)) {
				t.Errorf("offset %d, want the file's size %d", end, len(tc.log))
			}
		})
	}
}

func trim(s string) string {
	if len(s) > 60 {
		return s[:30] + "…" + s[len(s)-30:]
	}
	return s
}

func TestUnitEnvironment(t *testing.T) {
	t.Parallel()
	got, names := unitEnvironment([]string{
		"PATH=/usr/bin", "HOME=/home/u", "KAIMON_HOME=/k", "ANTHROPIC_API_KEY=sk-1", "KAIMON_CLAUDE_BIN=",
		"ANTHROPIC_MODEL=it's $x \\ \"q\"", "KAIMON_MULTI=a\nb", "PATH=/bin",
	})
	// Sorted, the last value of a name kept, empty and multi-line values
	// and other variables left out; single quotes unless the value holds
	// one, then double quotes with systemd's escapes.
	want := "ANTHROPIC_API_KEY='sk-1'\n" +
		"ANTHROPIC_MODEL=\"it's \\$x \\\\ \\\"q\\\"\"\n" +
		"KAIMON_HOME='/k'\n" +
		"PATH='/bin'\n"
	var body []string
	for _, l := range strings.SplitAfter(string(got), "\n") {
		if !strings.HasPrefix(l, "#") {
			body = append(body, l)
		}
	}
	if strings.Join(body, "") != want {
		t.Errorf("environment file:\n%s\nwant:\n%s", got, want)
	}
	if strings.Join(names, " ") != "ANTHROPIC_API_KEY ANTHROPIC_MODEL KAIMON_HOME PATH" {
		t.Errorf("names: %v", names)
	}
}

// lockedBuffer is a bytes.Buffer follow writes to while the test reads it.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestFollowRotation rotates the log the way logrotate does (append, rename,
// create anew) between two polls: the old file's last lines must come out
// before the new file's, and follow must leave no file open.
func TestFollowRotation(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "agentd.log")
	if err := os.WriteFile(path, []byte("one\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out lockedBuffer
	done := make(chan error, 1)
	go func() { done <- followFile(ctx, &out, path, f, 0) }()
	waitFor := func(want string) {
		t.Helper()
		for deadline := time.Now().Add(5 * time.Second); out.String() != want; {
			if time.Now().After(deadline) {
				t.Fatalf("follow printed %q, want %q", out.String(), want)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	waitFor("one\n")

	old, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := old.WriteString("two\n"); err != nil {
		t.Fatal(err)
	}
	old.Close()
	if err := os.Rename(path, path+".1"); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte("three\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	waitFor("one\ntwo\nthree\n")
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("follow: %v", err)
	}
	if open := openFilesUnder(t, dir); len(open) > 0 {
		t.Errorf("follow left open: %v", open)
	}
}

// openFilesUnder lists the files under dir this process holds open.
func openFilesUnder(t *testing.T, dir string) []string {
	t.Helper()
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("no /proc/self/fd: %v", err)
	}
	var open []string
	for _, fd := range fds {
		if target, err := os.Readlink(filepath.Join("/proc/self/fd", fd.Name())); err == nil && strings.HasPrefix(target, dir+string(filepath.Separator)) {
			open = append(open, target)
		}
	}
	return open
}
