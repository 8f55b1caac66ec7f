package cli

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
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
