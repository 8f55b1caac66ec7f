package acp

import (
	"encoding/json"
	"os"
	"reflect"
	"testing"

	sdk "github.com/coder/acp-go-sdk"

	"github.com/kaimon/kaimon/internal/policy"
)

// TestPermissionOverlay: what a RoutePermissionEnv agent (kilo) is told
// per preset, key by key.
func TestPermissionOverlay(t *testing.T) {
	cases := []struct {
		name string
		o    policy.Options
		want map[string]any // keys checked; nil value: must be absent
	}{
		{"default asks for commands, allows edits, hides the guarded verbs",
			policy.Options{},
			map[string]any{"bash": "ask", "edit": "allow", "read": "allow", "webfetch": "ask", "external_directory": "ask",
				"kaimon_agent_open": "deny", "task": "deny", "*": nil}},
		{"permission mode default asks for edits too",
			policy.Options{PermissionMode: "default"},
			map[string]any{"bash": "ask", "edit": "ask"}},
		{"plan denies edits",
			policy.Options{PermissionMode: "plan"},
			map[string]any{"edit": "deny", "bash": "ask"}},
		{"notebook denies the native file and shell tools",
			policy.Options{Preset: "notebook"},
			map[string]any{"bash": "deny", "read": "deny", "edit": "deny", "glob": "deny", "grep": "deny", "list": "deny", "*": nil}},
		{"only denies every tool no key allows, kaimon's left to the door",
			policy.Options{Only: true, AllowedTools: []string{"Read"}},
			map[string]any{"*": "deny", "read": "allow", "bash": "deny", "edit": "deny", "kaimon_*": "allow", "kaimon_agent_run": "deny"}},
		{"specialist: the same, its native file tools denied",
			policy.Options{Preset: "specialist", AllowedTools: []string{"mcp__kaimon__agent_status"}},
			map[string]any{"*": "deny", "read": "deny", "bash": "deny", "kaimon_*": "allow"}},
		{"bypass allows all, but a denied command pattern",
			policy.Options{Preset: "bypass", DisallowedTools: []string{"Bash(rm *)", "mcp__github__create_issue", "mcp__my.srv"}},
			map[string]any{"bash": map[string]any{"*": "allow", "rm *": "deny"}, "edit": "allow", "external_directory": "allow",
				"github_create_issue": "deny", "my_srv_*": "deny", "kaimon_agent_open": nil}},
		{"an allowed and a denied pattern",
			policy.Options{AllowedTools: []string{"Bash(git status)"}, DisallowedTools: []string{"Bash(git push *)"}},
			map[string]any{"bash": map[string]any{"*": "ask", "git status": "allow", "git push *": "deny"}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			pol, err := policy.Resolve(c.o)
			if err != nil {
				t.Fatal(err)
			}
			got := PermissionOverlay(pol)
			for k, want := range c.want {
				v, ok := got[k]
				if want == nil {
					if ok {
						t.Errorf("%s = %v, want it absent", k, v)
					}
					continue
				}
				if !reflect.DeepEqual(v, want) {
					t.Errorf("%s = %v, want %v", k, v, want)
				}
			}
		})
	}
}

// TestKiloModes: kilo 7.7.7's session/new answer offers its modes as a
// config option of category mode; each preset's mode maps onto one.
func TestKiloModes(t *testing.T) {
	b, err := os.ReadFile("testdata/kilo-session-new.json")
	if err != nil {
		t.Fatal(err)
	}
	var msg struct {
		Result sdk.NewSessionResponse `json:"result"`
	}
	if err := json.Unmarshal(b, &msg); err != nil {
		t.Fatal(err)
	}
	opts := msg.Result.ConfigOptions
	id, cur := modeOption(opts)
	if id != "mode" || cur != "code" {
		t.Fatalf("modeOption = %q %q", id, cur)
	}
	if m := modelOption(opts); m != "fake/fake-model" {
		t.Fatalf("modelOption = %q", m)
	}
	avail := configValues(opts, id)
	kilo := Agents["kilo"]
	for _, c := range []struct {
		o    policy.Options
		want string
	}{
		{policy.Options{}, "code"},
		{policy.Options{PermissionMode: "default"}, "code"},
		{policy.Options{PermissionMode: "plan"}, "plan"},
		{policy.Options{Preset: "auto"}, "code"},
		{policy.Options{Preset: "bypass"}, "code"},
		{policy.Options{Preset: "notebook"}, "code"},
	} {
		pol, err := policy.Resolve(c.o)
		if err != nil {
			t.Fatal(err)
		}
		if got := sessionMode(kilo, pol, avail); got != c.want {
			t.Errorf("%+v: mode %q, want %q (of %v)", c.o, got, c.want, avail)
		}
	}
	if msg := Enforcement(kilo, mustResolve(t, policy.Options{Preset: "notebook"})); msg != "" {
		t.Errorf("kilo holds notebook through its permission overlay, yet: %s", msg)
	}
}

func mustResolve(t *testing.T, o policy.Options) *policy.Policy {
	t.Helper()
	pol, err := policy.Resolve(o)
	if err != nil {
		t.Fatal(err)
	}
	return pol
}
