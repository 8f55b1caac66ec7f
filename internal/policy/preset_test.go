package policy

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// The tools every preset is tried on: the claude CLI's own, a subagent
// spawner (in the recursion guard), kaimon's verb and another MCP
// server's tool.
var sample = []string{"Bash", "Read", "Edit", "WebFetch", "Task", "mcp__kaimon__agent_list", "mcp__other__x"}

// What docs/permissions.md says each preset decides of a permission request ("the
// preset decides what it can: a tool in the deny list is denied, bypass
// allows everything, a kaimon tool follows the door's rules, a tool the
// allowlist names is allowed, and under specialist or only anything else
// is denied"), with the presets' own lists from the options table, with
// and without the recursion guard. The letters are sample's tools in order:
// a allow, d deny, ? ask.
var presetTable = []struct {
	preset      string
	guard       string // default disallowed_tools
	noGuard     string // disallowed_tools = []
	mode        string
	fs          bool
	doorVisible bool
}{
	{"default", "????dd?", "???????", "acceptEdits", true, true},
	{"notebook", "ddd?dd?", "ddd??a?", "acceptEdits", false, true},
	{"specialist", "ddddddd", "ddddddd", "acceptEdits", false, true},
	{"lab", "????dd?", "?????a?", "acceptEdits", true, true},
	{"auto", "????dd?", "???????", "auto", true, true},
	{"bypass", "aaaadda", "aaaaaaa", "bypassPermissions", true, true},
}

func verdictLetter(v Verdict) string {
	return map[Verdict]string{Allow: "a", Deny: "d", Ask: "?"}[v]
}

func TestPresetTable(t *testing.T) {
	if len(presetTable) != len(PresetNames) || len(Presets) != len(PresetNames) {
		t.Fatalf("presets %v, table %d rows, verb table %v", Presets, len(presetTable), PresetNames)
	}
	for i, row := range presetTable {
		if PresetNames[i] != row.preset {
			t.Errorf("preset %d is %s in the verb table, %s here", i, PresetNames[i], row.preset)
		}
		for _, guard := range []bool{true, false} {
			o := Options{Preset: row.preset}
			want := row.guard
			if !guard {
				o.DisallowedTools, want = []string{}, row.noGuard
			}
			p, err := Resolve(o)
			if err != nil {
				t.Fatal(err)
			}
			got := ""
			for _, tool := range sample {
				v, why := p.Permission(tool)
				if v != Ask && why == "" {
					t.Errorf("%s: %s decided (%v) without a reason", row.preset, tool, v)
				}
				got += verdictLetter(v)
			}
			if got != want {
				t.Errorf("%s (guard %v): verdicts %s for %v, want %s", row.preset, guard, got, sample, want)
			}
			if p.Mode != row.mode || p.FS() != row.fs {
				t.Errorf("%s: mode %s fs %v, want %s %v", row.preset, p.Mode, p.FS(), row.mode, row.fs)
			}
			if p.DoorVisible("agent_list") != row.doorVisible {
				t.Errorf("%s: agent_list visible %v", row.preset, !row.doorVisible)
			}
		}
	}
}

// allowed_tools composes with a preset, replaces specialist's allowance,
// and under only is the whole set (the verb table's allowed_tools and only).
func TestAllowedTools(t *testing.T) {
	for _, tc := range []struct {
		o    Options
		want string // verdicts for sample, as in TestPresetTable
	}{
		{Options{AllowedTools: []string{"Bash", "WebFetch"}}, "a??add?"},
		{Options{Preset: "notebook", AllowedTools: []string{"WebFetch"}}, "dddadd?"},
		{Options{Preset: "specialist", AllowedTools: []string{"WebFetch", "mcp__kaimon__agent_list"}, DisallowedTools: []string{}}, "dddadad"},
		{Options{Only: true, AllowedTools: []string{"Read"}}, "daddddd"},
		{Options{Only: true, Preset: "bypass", AllowedTools: []string{"Read"}}, "aaaadda"},
	} {
		p, err := Resolve(tc.o)
		if err != nil {
			t.Fatal(err)
		}
		got := ""
		for _, tool := range sample {
			v, _ := p.Permission(tool)
			got += verdictLetter(v)
		}
		if got != tc.want {
			t.Errorf("%+v: verdicts %s, want %s", tc.o, got, tc.want)
		}
	}
}

// docs/agents.md's table of where each preset holds on ACP agents (the
// README's until it moved there) names every preset of the verb table, in
// its order.
func TestDocsPresetTable(t *testing.T) {
	b, err := os.ReadFile("../../docs/agents.md")
	if err != nil {
		t.Skip("no docs/agents.md:", err)
	}
	_, table, ok := strings.Cut(string(b), "| preset | acp:opencode")
	if !ok {
		t.Fatal("docs/agents.md has no preset × ACP agent table")
	}
	var names []string
	for _, m := range regexp.MustCompile(`(?m)^\| (\w+) \|`).FindAllStringSubmatch(strings.SplitN(table, "\n\n", 2)[0], -1) {
		names = append(names, m[1])
	}
	if !slices.Equal(names, PresetNames) {
		t.Errorf("docs/agents.md's table lists %v, the verb table %v", names, PresetNames)
	}
}

func TestResolveRefuses(t *testing.T) {
	for _, o := range []Options{
		{Preset: "yolo"},
		{PermissionMode: "yes"},
		{AllowedTools: []string{" "}},
		{DisallowedTools: []string{"--help"}},
	} {
		if _, err := Resolve(o); err == nil {
			t.Errorf("%+v resolved", o)
		}
	}
}

func TestNativeToolName(t *testing.T) {
	for _, tc := range []struct{ name, kind, want string }{
		{"bash", "", "Bash"},
		{"run_shell_command", "execute", "Bash"},
		{"write_file", "", "Write"},
		{"kaimon_agent_list", "", "mcp__kaimon__agent_list"},
		{"mcp__kaimon__agent_list", "", "mcp__kaimon__agent_list"},
		{"echo hi", "execute", "Bash"},
		{"", "", "other"},
		{"Read", "", "Read"},
		{"frobnicate", "other", "frobnicate"},
	} {
		if got := NativeToolName(tc.name, tc.kind); got != tc.want {
			t.Errorf("NativeToolName(%q, %q) = %q, want %q", tc.name, tc.kind, got, tc.want)
		}
	}
}

// What a tool loop kaimon runs offers the model (issue 11: notebook no
// native tools, specialist and only what allowed_tools names).
func TestOffers(t *testing.T) {
	for _, tc := range []struct {
		o    Options
		want string // sample's tools: o offered, - not
	}{
		{Options{}, "oooo--o"},
		{Options{Preset: "notebook"}, "---o--o"},
		{Options{Preset: "notebook", DisallowedTools: []string{}}, "---oooo"},
		{Options{Preset: "specialist", AllowedTools: []string{"Bash(git *)", "WebFetch"}}, "---o---"},
		{Options{Only: true, AllowedTools: []string{"Bash(git *)", "Read"}}, "oo-----"},
		{Options{Preset: "bypass"}, "oooo--o"},
	} {
		p, err := Resolve(tc.o)
		if err != nil {
			t.Fatal(err)
		}
		got := ""
		for _, tool := range sample {
			if p.Offers(tool) {
				got += "o"
			} else {
				got += "-"
			}
		}
		if got != tc.want {
			t.Errorf("%+v: offers %s, want %s", tc.o, got, tc.want)
		}
	}
}
