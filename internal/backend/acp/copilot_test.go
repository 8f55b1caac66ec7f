package acp

import (
	"strings"
	"testing"

	"github.com/kaimon/kaimon/internal/event"
	"github.com/kaimon/kaimon/internal/policy"
)

// copilot's recorded sessions (copilot --acp 1.0.102 against fakeopenai,
// through a bare client): a text turn after --excluded-tools, a shell
// command allowed, a slow turn cancelled, a text turn; an edit and a shell
// command, both rejected.
func TestMapperCopilot(t *testing.T) {
	cp := Agents["copilot"]
	evs, tools := replayWith(t, "copilot-text-tools.jsonl", newMapperFor(cp))
	// "Info: Disabled tools: …" is copilot's notice, not the model's text.
	if got := shape(evs, 1); got != "user_text turn_started assistant_text(Hello from fakeopenai (request #36).) usage result(end_turn)" {
		t.Fatalf("turn 1: %s", got)
	}
	if got := shape(evs, 2); got != "user_text turn_started tool_use(write made.txt +input) tool_result(completed) assistant_text(Tool said: hi-from-copilot\n<shellId: 0 completed with exit code 0>. Done.) usage result(end_turn)" {
		t.Fatalf("turn 2: %s", got)
	}
	if strings.Join(tools, " ") != "Bash" {
		t.Fatalf("tools %v", tools)
	}
	// copilot reports a running total (42, 126, 126, 168 input tokens):
	// each turn gets what it added.
	for turn, want := range map[int]int64{1: 42, 2: 84, 3: 0, 4: 42} {
		if u := resultUsage(t, evs, turn); u.InputTokens != want || u.OutputTokens != want/6 {
			t.Errorf("turn %d usage %+v, want %d in", turn, u, want)
		}
	}
	if got := shape(evs, 3); !strings.HasSuffix(got, "usage result(cancelled)") {
		t.Fatalf("cancelled turn: %s", got)
	}
	// A mapper that does not know copilot's ways counts the total as the
	// turn's, and takes its notice for text.
	plain, _ := replay(t, "copilot-text-tools.jsonl")
	if u := resultUsage(t, plain, 4); u.InputTokens != 168 {
		t.Fatalf("plain mapper turn 4 usage %+v", u)
	}
	if got := shape(plain, 1); !strings.Contains(got, "Info: Disabled tools") {
		t.Fatalf("plain mapper turn 1: %s", got)
	}

	// The titles are descriptions ("touch"): the preset knows the calls
	// by their kinds.
	evs, tools = replayWith(t, "copilot-perm-reject.jsonl", newMapperFor(cp))
	if strings.Join(tools, " ") != "Edit Bash" {
		t.Fatalf("tools %v", tools)
	}
	if _, plainTools := replay(t, "copilot-perm-reject.jsonl"); strings.Join(plainTools, " ") != "Edit touch" {
		t.Fatalf("plain mapper tools %v", plainTools)
	}
	if got := shape(evs, 2); !strings.HasPrefix(got, "user_text turn_started tool_use(touch +input) tool_result(failed) assistant_text(Info: Operation cancelled by user)") {
		t.Fatalf("rejected turn: %s", got)
	}
}

func TestSinceLast(t *testing.T) {
	m := &Mapper{CumulativeUsage: true}
	u := func(in, out int64) event.UsageFigures { return event.UsageFigures{InputTokens: in, OutputTokens: out} }
	for i, c := range []struct{ cur, want event.UsageFigures }{
		{u(42, 7), u(42, 7)},
		{u(126, 21), u(84, 14)},
		{u(0, 0), u(0, 0)},     // no usage: nothing added, total kept
		{u(126, 21), u(0, 0)},  // a cancelled turn's unchanged total
		{u(168, 28), u(42, 7)}, // from the total before the gap
		{u(10, 2), u(10, 2)},   // below the total: another count, whole
		{u(15, 3), u(5, 1)},
	} {
		if got := m.sinceLast(c.cur); got != c.want {
			t.Errorf("step %d: sinceLast(%+v) = %+v, want %+v", i, c.cur, got, c.want)
		}
	}
}

func TestCopilotPresets(t *testing.T) {
	cp := Agents["copilot"]
	modes := []string{
		"https://agentclientprotocol.com/protocol/session-modes#agent",
		"https://agentclientprotocol.com/protocol/session-modes#plan",
		"https://agentclientprotocol.com/protocol/session-modes#autopilot",
	}
	resolve := func(preset, mode string) *policy.Policy {
		p, err := policy.Resolve(policy.Options{Preset: preset, PermissionMode: mode})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, c := range []struct{ preset, mode, want string }{
		{"default", "", "#agent"}, {"notebook", "", "#agent"}, {"auto", "", "#agent"},
		{"bypass", "", "#agent"}, {"default", "plan", "#plan"}, {"default", "default", "#agent"},
	} {
		if got := sessionMode(cp, resolve(c.preset, c.mode), modes); !strings.HasSuffix(got, c.want) {
			t.Errorf("%s/%s: mode %q, want …%s", c.preset, c.mode, got, c.want)
		}
	}
	// notebook's deny list is excluded whole, so nothing is left to warn
	// of; specialist's whole-set allowlist still is (copilot's sql).
	nb := resolve("notebook", "")
	if got := strings.Join(excludedTools(cp, nb), " "); got != "bash create edit glob grep list_agents list_bash read_agent read_bash stop_bash task view write_agent" {
		t.Fatalf("notebook excludes %s", got)
	}
	if msg := Enforcement(cp, nb); msg != "" {
		t.Fatalf("notebook on copilot: %s", msg)
	}
	if msg := Enforcement(cp, resolve("specialist", "")); !strings.Contains(msg, "whole tool set") {
		t.Fatalf("specialist on copilot: %q", msg)
	}
	// The default guard keeps copilot's subagents; with no guard, nothing.
	if got := strings.Join(excludedTools(cp, resolve("default", "")), " "); got != "list_agents read_agent task write_agent" {
		t.Fatalf("default excludes %s", got)
	}
	open, _ := policy.Resolve(policy.Options{Preset: "bypass", DisallowedTools: []string{}})
	if got := excludedTools(cp, open); len(got) != 0 {
		t.Fatalf("bypass without the guard excludes %v", got)
	}
	// Other agents take no such flag.
	if got := excludedTools(Agents["gemini"], nb); got != nil {
		t.Fatalf("gemini excludes %v", got)
	}
}

func TestAcceptedEdit(t *testing.T) {
	dir := t.TempDir()
	jail, err := NewJail(dir)
	if err != nil {
		t.Fatal(err)
	}
	call := func(paths ...string) event.ToolCall {
		var locs []any
		for _, p := range paths {
			locs = append(locs, map[string]any{"path": p})
		}
		return event.ToolCall{Kind: "edit", Locations: locs}
	}
	for _, c := range []struct {
		agent, preset, mode, tool string
		call                      event.ToolCall
		accepted                  bool
	}{
		{"copilot", "default", "", "Edit", call(dir + "/a.txt"), true},
		{"copilot", "auto", "", "Write", call(dir + "/sub/b.txt"), true},
		{"copilot", "default", "", "Edit", call(dir+"/a.txt", "/etc/passwd"), false},
		{"copilot", "default", "", "Edit", call(), false},
		{"copilot", "default", "", "Bash", call(dir + "/a.txt"), false},
		{"copilot", "default", "default", "Edit", call(dir + "/a.txt"), false},
		{"copilot", "default", "plan", "Edit", call(dir + "/a.txt"), false},
		{"gemini", "default", "", "Edit", call(dir + "/a.txt"), false},
	} {
		pol, err := policy.Resolve(policy.Options{Preset: c.preset, PermissionMode: c.mode})
		if err != nil {
			t.Fatal(err)
		}
		b := &Backend{agent: Agents[c.agent], pol: pol, jail: jail}
		if got := b.acceptedEdit(c.tool, c.call); (got != "") != c.accepted {
			t.Errorf("%+v: accepted %q", c, got)
		}
	}
}
