package policy

import (
	"strings"
	"testing"
)

func TestNamesTool(t *testing.T) {
	for _, tc := range []struct {
		list []string
		tool string
		want bool
	}{
		{[]string{"Bash"}, "Bash", true},
		{[]string{"Bash(git *)"}, "Bash", false},
		{[]string{"mcp__kaimon"}, "mcp__kaimon__agent_list", true},
		{[]string{"mcp__kaimon__*"}, "mcp__kaimon__agent_list", true},
		{[]string{"mcp__kaimon__agent_list"}, "mcp__kaimon__agent_list", true},
		{[]string{"mcp__kaimon__agent_list"}, "mcp__kaimon__agent_open", false},
		{[]string{"mcp__kaimonx"}, "mcp__kaimon__agent_list", false},
		{[]string{"mcp__kaimon"}, "mcp__kaimonx__y", false},
		{nil, "Read", false},
	} {
		if got := NamesTool(tc.list, tc.tool); got != tc.want {
			t.Errorf("NamesTool(%q, %s) = %v", tc.list, tc.tool, got)
		}
	}
}

func resolve(t *testing.T, o *Options) *Policy {
	t.Helper()
	p, err := Resolve(*o)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// The door's rules: the recursion guard unless disallowed_tools = [], the
// deny list, and under specialist and only the allowlist as the whole set.
func TestDoorCheck(t *testing.T) {
	none := []string{}
	for _, tc := range []struct {
		name    string
		o       Options
		verb    string
		wantErr string // "" allowed
		visible bool
	}{
		{"default guard refuses", Options{}, "agent_list", "recursion guard refuses mcp__kaimon__agent_list", true},
		{"lab with the guard refuses", Options{Preset: "lab"}, "agent_open", "recursion guard", true},
		{"lab without the guard allows", Options{Preset: "lab", DisallowedTools: none}, "agent_list", "", true},
		{"notebook without the guard allows", Options{Preset: "notebook", DisallowedTools: none}, "agent_status", "", true},
		{"default without the guard allows (the CLI asks)", Options{DisallowedTools: none}, "agent_list", "", true},
		{"a caller's own deny list keeps the guard here", Options{Preset: "lab", DisallowedTools: []string{"Task"}}, "agent_list", "recursion guard", true},
		{"a deny list naming a kaimon tool still has the guard", Options{Preset: "lab", DisallowedTools: []string{"mcp__kaimon__agent_close"}}, "agent_close", "recursion guard", true},
		{"specialist names it", Options{Preset: "specialist", DisallowedTools: none, AllowedTools: []string{"mcp__kaimon__agent_list"}}, "agent_list", "", true},
		{"specialist does not name it", Options{Preset: "specialist", DisallowedTools: none, AllowedTools: []string{"mcp__kaimon__agent_list"}}, "agent_open", "not in this agent's allowed_tools, which are its whole tool set (the specialist preset)", true},
		{"only names it", Options{Only: true, DisallowedTools: none, AllowedTools: []string{"mcp__kaimon__agent_list"}}, "agent_list", "", true},
		{"only hides and refuses the rest", Options{Only: true, DisallowedTools: none, AllowedTools: []string{"mcp__kaimon__agent_list"}}, "agent_status", "whole tool set (only)", false},
		{"only under lab cannot narrow", Options{Only: true, Preset: "lab", DisallowedTools: none}, "agent_close", "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := resolve(t, &tc.o)
			err := p.DoorCheck(tc.verb)
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Errorf("DoorCheck = %v, want %q", err, tc.wantErr)
			}
			if got := p.DoorVisible(tc.verb); got != tc.visible {
				t.Errorf("DoorVisible = %v", got)
			}
		})
	}
}

// What the preset decides of a permission request, and what it leaves to
// agent_permit.
func TestPermission(t *testing.T) {
	none := []string{}
	for _, tc := range []struct {
		name string
		o    Options
		tool string
		want Verdict
		why  string
	}{
		{"default asks about Bash", Options{}, "Bash", Ask, ""},
		{"bypass allows", Options{Preset: "bypass"}, "Bash", Allow, "bypass"},
		{"permission_mode bypassPermissions allows", Options{PermissionMode: "bypassPermissions"}, "Bash", Allow, "bypass"},
		{"deny list denies", Options{DisallowedTools: []string{"WebFetch"}}, "WebFetch", Deny, "disallowed"},
		{"notebook denies Bash even under bypass mode", Options{Preset: "notebook", PermissionMode: "bypassPermissions"}, "Bash", Deny, "disallowed"},
		{"allowlist allows", Options{AllowedTools: []string{"WebFetch"}}, "WebFetch", Allow, "allowed tools"},
		{"a pattern still asks", Options{AllowedTools: []string{"Bash(git *)"}}, "Bash", Ask, ""},
		{"specialist denies the unnamed", Options{Preset: "specialist"}, "WebFetch", Deny, "whole tool set (the specialist preset)"},
		{"only denies the unnamed", Options{Only: true, AllowedTools: []string{"Read"}}, "WebFetch", Deny, "whole tool set (only)"},
		{"the guard denies a kaimon tool", Options{Preset: "lab"}, "mcp__kaimon__agent_open", Deny, "recursion guard"},
		{"lab allows the kaimon server", Options{Preset: "lab", DisallowedTools: none}, "mcp__kaimon__agent_list", Allow, "allowed tools"},
		{"default asks about a kaimon tool without the guard", Options{DisallowedTools: none}, "mcp__kaimon__agent_list", Ask, ""},
		{"another MCP server's tool asks", Options{Preset: "lab"}, "mcp__other__x", Ask, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := resolve(t, &tc.o)
			v, why := p.Permission(tc.tool)
			if v != tc.want || !strings.Contains(why, tc.why) {
				t.Errorf("Permission = %v %q, want %v %q", v, why, tc.want, tc.why)
			}
		})
	}
}

func TestKaimonVerb(t *testing.T) {
	if v, ok := KaimonVerb("mcp__kaimon__agent_run"); !ok || v != "agent_run" {
		t.Errorf("KaimonVerb = %q %v", v, ok)
	}
	if _, ok := KaimonVerb("mcp__other__agent_run"); ok {
		t.Errorf("another server's tool read as kaimon's")
	}
}
