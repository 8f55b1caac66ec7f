package policy

import (
	"slices"
	"strings"
	"testing"

	"github.com/kaimon/kaimon/internal/verbs"
)

// The presets an agent under each preset may open through the door, by
// the parent's preset (opened with disallowed_tools = [], as a parent
// through the door must be) for children with no options but the preset.
// Every preset of PresetNames needs a row: a new preset must say what it
// may open.
var openable = map[string][]string{
	"default":    {"default", "specialist"},
	"notebook":   {"notebook", "specialist"},
	"specialist": {"specialist"},
	"lab":        {"default", "notebook", "specialist", "lab"},
	"auto":       {"default", "specialist", "auto"},
	"bypass":     {"default", "notebook", "specialist", "lab", "auto", "bypass"},
}

// capProbe is what a capped child's verdicts are compared with its
// parent's on: sample, every tool a preset names, and kaimon's verbs.
var capProbe = func() []string {
	out := append(slices.Clone(sample), NativeFileTools...)
	out = append(out, Subagents...)
	for _, v := range AgentVerbs {
		out = append(out, KaimonTool(v))
	}
	return out
}()

func verdictRank(v Verdict) int { return map[Verdict]int{Deny: 0, Ask: 1, Allow: 2}[v] }

func TestCapPresetPairs(t *testing.T) {
	for _, pn := range PresetNames {
		want, ok := openable[pn]
		if !ok {
			t.Errorf("preset %s has no row in openable", pn)
			continue
		}
		parent, err := Resolve(Options{Preset: pn, DisallowedTools: []string{}})
		if err != nil {
			t.Fatal(err)
		}
		for _, cn := range PresetNames {
			child, err := Resolve(Options{Preset: cn})
			if err != nil {
				t.Fatal(err)
			}
			got, err := Cap(parent, child)
			if slices.Contains(want, cn) != (err == nil) {
				t.Errorf("%s opens %s: %v, want allowed %v", pn, cn, err, slices.Contains(want, cn))
				continue
			}
			if err != nil {
				// The refusal names the parent's preset and what it may
				// open instead, in the verb table's order.
				msg := err.Error()
				if !strings.Contains(msg, "runs under preset "+pn) || !strings.HasSuffix(msg, "agents under "+strings.Join(want, ", ")) {
					t.Errorf("%s opens %s: error %q does not name the parent's preset and %v", pn, cn, msg, want)
				}
				continue
			}
			// The capped child does nothing unasked that the parent
			// must ask about, and asks about nothing the parent may not
			// do at all.
			for _, tool := range capProbe {
				cv, _ := got.Permission(tool)
				pv, _ := parent.Permission(tool)
				if verdictRank(cv) > verdictRank(pv) {
					t.Errorf("%s opens %s: %s is %v for the child, %v for the parent", pn, cn, tool, cv, pv)
				}
				if got.Offers(tool) && !parent.Offers(tool) {
					t.Errorf("%s opens %s: the child is offered %s, the parent not", pn, cn, tool)
				}
			}
			if got.looseness() > parent.looseness() || (got.FS() && !parent.FS()) || (got.WholeSet() && !child.WholeSet()) {
				t.Errorf("%s opens %s: mode %s fs %v, parent's %s %v", pn, cn, got.Mode, got.FS(), parent.Mode, parent.FS())
			}
			for _, d := range parent.Deny {
				if !slices.Contains(got.Deny, d) {
					t.Errorf("%s opens %s: the child's deny list %v lacks the parent's %s", pn, cn, got.Deny, d)
				}
			}
			if !slices.Equal(got.Allow, child.Allow) || got.Mode != child.Mode || got.Preset.Name != cn {
				t.Errorf("%s opens %s: capped to %+v, want the child's own allowlist and mode", pn, cn, got)
			}
		}
	}
	for pn := range openable {
		if !slices.Contains(PresetNames, pn) {
			t.Errorf("openable has a row for %s, which is no preset", pn)
		}
	}
}

// TestCapTools holds a child's own tool options (allowed_tools, only,
// permission_mode, disallowed_tools) to its parent's.
func TestCapTools(t *testing.T) {
	noGuard := []string{}
	for _, tc := range []struct {
		name          string
		parent, child Options
		refused       string // "" when the child may be opened
		deny          []string
	}{
		{name: "an allowed tool the parent must ask for",
			parent: Options{Preset: "lab", DisallowedTools: noGuard}, child: Options{Preset: "lab", AllowedTools: []string{"Bash"}},
			refused: "preset lab allows Bash unasked, which the opening agent must ask permission for"},
		{name: "an allowed tool the parent may not use",
			parent: Options{Preset: "notebook", DisallowedTools: noGuard}, child: Options{Preset: "specialist", AllowedTools: []string{"Bash"}},
			refused: "preset specialist allows Bash, which the opening agent may not use"},
		{name: "an allowed tool the parent allows",
			parent: Options{Preset: "lab", AllowedTools: []string{"Bash"}, DisallowedTools: noGuard}, child: Options{Preset: "default", AllowedTools: []string{"Bash"}}},
		{name: "a pattern the parent has",
			parent: Options{Preset: "lab", AllowedTools: []string{"Bash(git *)"}, DisallowedTools: noGuard}, child: Options{AllowedTools: []string{"Bash(git *)"}}},
		{name: "a pattern the parent allows whole",
			parent: Options{Preset: "lab", AllowedTools: []string{"Bash"}, DisallowedTools: noGuard}, child: Options{AllowedTools: []string{"Bash(rm *)"}}},
		{name: "another pattern",
			parent: Options{Preset: "lab", AllowedTools: []string{"Bash(git *)"}, DisallowedTools: noGuard}, child: Options{AllowedTools: []string{"Bash(rm *)"}},
			refused: "allows Bash(rm *) unasked"},
		{name: "the whole tool the parent allows by a pattern",
			parent: Options{Preset: "lab", AllowedTools: []string{"Bash(git *)"}, DisallowedTools: noGuard}, child: Options{AllowedTools: []string{"Bash"}},
			refused: "allows Bash unasked"},
		{name: "bypass allows everything not denied",
			parent: Options{Preset: "bypass", DisallowedTools: noGuard}, child: Options{AllowedTools: []string{"Bash", "mcp__other"}}},
		{name: "a looser permission_mode",
			parent: Options{Preset: "lab", DisallowedTools: noGuard}, child: Options{Preset: "lab", PermissionMode: "auto"},
			refused: "preset lab with permission_mode auto has permission mode auto, looser than the opening agent's acceptEdits"},
		{name: "permission_mode bypassPermissions",
			parent: Options{Preset: "auto", DisallowedTools: noGuard}, child: Options{PermissionMode: "bypassPermissions"},
			refused: "preset default with permission_mode bypassPermissions runs without permission checks"},
		{name: "a stricter permission_mode",
			parent: Options{Preset: "lab", DisallowedTools: noGuard}, child: Options{Preset: "lab", PermissionMode: "plan"}},
		{name: "a parent under a stricter permission_mode",
			parent: Options{Preset: "lab", PermissionMode: "plan", DisallowedTools: noGuard}, child: Options{Preset: "lab"},
			refused: "the opening agent runs under preset lab with permission_mode plan, under which it may open agents under default, notebook, specialist, lab, auto with permission_mode plan"},
		{name: "the whole set of an only parent",
			parent: Options{Preset: "lab", Only: true, AllowedTools: []string{"Read", "mcp__kaimon__agent_open"}, DisallowedTools: noGuard}, child: Options{Preset: "lab"},
			refused: "the opening agent's tools are only its allowed_tools (only)"},
		{name: "a part of an only parent's whole set",
			parent: Options{Preset: "lab", Only: true, AllowedTools: []string{"Read", "mcp__kaimon__agent_open"}, DisallowedTools: noGuard}, child: Options{Preset: "lab", Only: true, AllowedTools: []string{"Read"}}},
		{name: "more than an only parent's whole set",
			parent: Options{Preset: "lab", Only: true, AllowedTools: []string{"Read", "mcp__kaimon__agent_open"}, DisallowedTools: noGuard}, child: Options{Preset: "lab", Only: true, AllowedTools: []string{"Read", "Bash"}},
			refused: "allows Bash, which the opening agent may not use"},
		{name: "more than a bypass only parent's whole set",
			parent: Options{Preset: "bypass", Only: true, AllowedTools: []string{"Read"}, DisallowedTools: noGuard}, child: Options{Preset: "bypass", Only: true, AllowedTools: []string{"Bash"}},
			refused: "allows Bash, which the opening agent may not use"},
		{name: "no recursion guard under a guarded parent",
			parent: Options{Preset: "lab"}, child: Options{Preset: "lab", DisallowedTools: noGuard},
			refused: "without the recursion guard"},
		{name: "the parent's deny list is inherited",
			parent: Options{Preset: "lab", DisallowedTools: []string{"WebFetch"}}, child: Options{Preset: "lab"},
			deny: append(RecursionGuard(), "WebFetch")},
		{name: "a child's own deny list keeps the parent's",
			parent: Options{Preset: "notebook", DisallowedTools: noGuard}, child: Options{Preset: "specialist", DisallowedTools: noGuard},
			deny: NativeFileTools},
	} {
		parent, err := Resolve(tc.parent)
		if err != nil {
			t.Fatal(tc.name, err)
		}
		child, err := Resolve(tc.child)
		if err != nil {
			t.Fatal(tc.name, err)
		}
		got, err := Cap(parent, child)
		switch {
		case tc.refused == "" && err != nil:
			t.Errorf("%s: refused: %v", tc.name, err)
		case tc.refused != "" && (err == nil || !strings.Contains(err.Error(), tc.refused)):
			t.Errorf("%s: %v, want refused with %q", tc.name, err, tc.refused)
		case err == nil:
			if tc.deny != nil && !slices.Equal(got.Deny, tc.deny) {
				t.Errorf("%s: deny %v, want %v", tc.name, got.Deny, tc.deny)
			}
			for _, tool := range append(slices.Clone(capProbe), "Bash", "mcp__other__y") {
				cv, _ := got.Permission(tool)
				pv, _ := parent.Permission(tool)
				if verdictRank(cv) > verdictRank(pv) {
					t.Errorf("%s: %s is %v for the child, %v for the parent", tc.name, tool, cv, pv)
				}
			}
		}
	}
}

// The order of looseness covers exactly the permission modes.
func TestModesByLooseness(t *testing.T) {
	a, b := slices.Clone(modesByLooseness), slices.Clone(PermissionModes)
	slices.Sort(a)
	slices.Sort(b)
	if !slices.Equal(a, b) {
		t.Fatalf("modesByLooseness %v, permission modes %v", modesByLooseness, PermissionModes)
	}
	for _, n := range PresetNames {
		if !slices.Contains(modesByLooseness, Presets[n].Mode) {
			t.Errorf("preset %s's mode %s has no place in modesByLooseness", n, Presets[n].Mode)
		}
	}
}

// ForOpen caps only an agent opened by another: a person's open is not.
func TestForOpenParent(t *testing.T) {
	a := &verbs.OpenArgs{Permission: "bypass"}
	if _, err := ForOpen(a, nil); err != nil {
		t.Fatalf("a person's bypass open: %v", err)
	}
	lab, _ := Resolve(Options{Preset: "lab", DisallowedTools: []string{}})
	if _, err := ForOpen(a, lab); err == nil || !strings.Contains(err.Error(), "preset bypass runs without permission checks") {
		t.Fatalf("a lab agent's bypass open: %v", err)
	}
}

// An agent allows another's request only for what it runs unasked.
func TestGrants(t *testing.T) {
	for _, tc := range []struct {
		preset, tool, refused string
	}{
		{"lab", "Bash", "must ask permission for Bash (it runs under preset lab)"},
		{"lab", "mcp__kaimon__agent_list", ""},
		{"notebook", "Bash", "may not use Bash"},
		{"bypass", "Bash", ""},
	} {
		p, err := Resolve(Options{Preset: tc.preset, DisallowedTools: []string{}})
		if err != nil {
			t.Fatal(err)
		}
		err = p.Grants(tc.tool)
		if (tc.refused == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), tc.refused) {
			t.Errorf("%s grants %s: %v, want %q", tc.preset, tc.tool, err, tc.refused)
		}
	}
}
