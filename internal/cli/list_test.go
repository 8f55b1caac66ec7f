package cli

import (
	"regexp"
	"strings"
	"testing"

	"github.com/kaimon/kaimon/internal/apitype"
	"github.com/kaimon/kaimon/internal/verbs"
)

// The agent table stays aligned with its status colored (a terminal): the
// columns after the status begin where their headings do, the status
// keeps its color, and the reason of a dead agent follows its status.
func TestWriteAgentsAlignedInColor(t *testing.T) {
	t.Parallel()
	pal := newPalette(true)
	agents := []verbs.ListEntry{
		{AgentID: "aaaa1111", Host: "local", AgentStatus: verbs.AgentStatus{Status: "idle", Model: "sonnet", Cwd: "/p"}},
		{AgentID: "build-box/bbbb2222", Host: "build-box", AgentStatus: verbs.AgentStatus{Status: "working", Model: "opus", Turn: 3, Cwd: "/q",
			PendingPermissions: []verbs.PendingPermission{{RequestID: "r1"}}}},
		{AgentID: "h1/cccc3333", Host: "h1", AgentStatus: verbs.AgentStatus{Status: "dead", Model: "haiku", Cwd: "/r", Reason: "closed"}},
	}
	// With and without list --all-hosts' HOST column.
	for _, withHost := range []bool{false, true} {
		var b strings.Builder
		writeAgents(&b, pal, agents, withHost)
		out := b.String()
		if !strings.Contains(out, "\x1b[") {
			t.Fatalf("no color in %q", out)
		}
		ansi := regexp.MustCompile("\x1b\\[[0-9;]*m")
		lines := strings.Split(strings.TrimSuffix(ansi.ReplaceAllString(out, ""), "\n"), "\n")
		if len(lines) != 4 {
			t.Fatalf("%d lines: %q", len(lines), lines)
		}
		if got := strings.HasPrefix(lines[0], "HOST "); got != withHost {
			t.Errorf("withHost %v: heading %q", withHost, lines[0])
		}
		model := strings.Index(lines[0], "MODEL")
		for i, a := range agents {
			if got := lines[i+1][model:]; !strings.HasPrefix(got, a.Model+" ") {
				t.Errorf("row %d, as seen: %q; MODEL at %d: %q, want %q", i, lines[i+1], model, got, a.Model)
			}
			if withHost && !strings.HasPrefix(lines[i+1], a.Host+" ") {
				t.Errorf("row %d: %q does not start with its host %s", i, lines[i+1], a.Host)
			}
		}
		for _, want := range []string{"working (asks permission)", "dead (closed)"} {
			if !strings.Contains(strings.Join(lines, "\n"), want) {
				t.Errorf("no %q in %q", want, lines)
			}
		}
	}
}

// Every agent state of the wire has its colour: a state added to
// apitype.AgentStates without one would show uncoloured in list and status.
func TestEveryStateHasAColor(t *testing.T) {
	t.Parallel()
	for _, s := range apitype.AgentStates {
		if _, ok := statusColors[s]; !ok {
			t.Errorf("no colour for agent state %q", s)
		}
	}
}
