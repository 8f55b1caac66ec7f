// Package policy owns kaimon's permission presets, their resolution from
// agent_open's options, and the mapping between kaimon's tool names and
// each vendor's. A Policy is resolved once, when an agent is opened, and
// carried with the agent (backend.Options.Policy): every backend and the
// MCP door ask it and none resolves presets again.
package policy

import (
	"fmt"
	"slices"
	"strings"

	"github.com/kaimon/kaimon/internal/verbs"
)

// Preset is a permission posture picked with one word at agent_open.
type Preset struct {
	Name string
	// Mode is the claude permission mode the preset implies.
	Mode string
	// Allow is the preset's own allowlist; allowed_tools composes with it,
	// except under a preset whose ReplaceAllow is set (specialist).
	Allow        []string
	ReplaceAllow bool
	// Deny is the preset's deny list; the recursion guard is added to it.
	Deny []string
	// SkipPermissions adds --dangerously-skip-permissions.
	SkipPermissions bool
	// FS says whether the ACP fs/* callbacks are granted.
	FS  bool
	Doc string
}

// KaimonServer is the MCP server name under which owned agents see kaimon.
const KaimonServer = "mcp__kaimon"

// NativeFileTools are the claude CLI's own file and shell tools, which the
// notebook and specialist presets deny. Monitor (2.1.328) runs a script
// of the model's and streams its output: a shell by another name.
var NativeFileTools = []string{"Bash", "Read", "Write", "Edit", "Glob", "Grep", "NotebookEdit", "Monitor"}

// Presets maps each preset name to its posture, as the spec defines them.
var Presets = map[string]Preset{
	"default": {Name: "default", Mode: "acceptEdits", FS: true,
		Doc: "edits only: acceptEdits permission mode, no extra tools"},
	"notebook": {Name: "notebook", Mode: "acceptEdits", Allow: []string{KaimonServer}, Deny: NativeFileTools,
		Doc: "kaimon's tools instead of its own: allows mcp__kaimon, denies " + strings.Join(NativeFileTools, ", ")},
	"specialist": {Name: "specialist", Mode: "acceptEdits", ReplaceAllow: true, Deny: NativeFileTools,
		Doc: "a named few verbs: notebook without the allowance; allowed_tools is the whole toolset"},
	"lab": {Name: "lab", Mode: "acceptEdits", Allow: []string{KaimonServer}, FS: true,
		Doc: "drive the lab: allows the whole kaimon MCP server plus the ACP fs/* callbacks"},
	"auto": {Name: "auto", Mode: "auto", FS: true,
		Doc: "self-governing: the model's permission classifier decides per call"},
	"bypass": {Name: "bypass", Mode: "bypassPermissions", SkipPermissions: true, FS: true,
		Doc: "no checks: --dangerously-skip-permissions; sandboxed or trusted directories only"},
}

// PresetNames lists the presets in the spec's order: the verb table's
// enumeration, which Presets must cover (a test checks).
var PresetNames = verbs.PresetNames

// PermissionModes are the raw claude permission modes permission_mode takes.
var PermissionModes = verbs.PermissionModes

// AgentVerbs are the kaimon verbs an owned agent must not call by default:
// with them it could spawn or kill agents recursively. Every verb of the
// table, so that a new verb cannot escape the guard.
var AgentVerbs = func() []string {
	out := make([]string, len(verbs.All))
	for i, v := range verbs.All {
		out[i] = v.Name
	}
	return out
}()

// Subagents are the claude CLI's own subagent spawners. The guard is about
// the count of processes, not the toolset, so they are in it too.
var Subagents = []string{"Agent", "Task", "Workflow"}

// RecursionGuard returns the default disallowed_tools: a copy of one
// list whose names every agent's policy shares (built per agent, they
// were a third of a kilobyte of each idle agent's heap).
func RecursionGuard() []string { return slices.Clone(recursionGuard) }

var recursionGuard = func() []string {
	out := make([]string, 0, len(AgentVerbs)+len(Subagents))
	for _, v := range AgentVerbs {
		out = append(out, KaimonTool(v))
	}
	return append(out, Subagents...)
}()

// Options are agent_open's permission options, as given.
type Options struct {
	Preset         string // "" is default
	PermissionMode string
	AllowedTools   []string
	Only           bool
	// DisallowedTools nil means "the default recursion guard"; an empty,
	// non-nil slice means "no guard" (nested agents allowed).
	DisallowedTools []string
}

// Policy is a resolved tool policy: what the agent may and may not call.
// It is immutable once resolved; share it freely.
type Policy struct {
	Preset Preset
	// Mode is the claude permission mode: the preset's, or permission_mode.
	Mode string
	// Allow is the allowlist: the preset's (unless it replaces it) and
	// allowed_tools.
	Allow []string
	// Deny is the deny list: the preset's and the recursion guard, or the
	// caller's disallowed_tools instead of the guard.
	Deny            []string
	SkipPermissions bool
	// Only makes Allow the agent's whole tool set.
	Only bool
	// Guard says whether the door's recursion guard holds: everywhere but
	// under disallowed_tools = [].
	Guard bool
}

// Resolve validates o and composes it as the spec says: permission_mode
// overrides the preset's mode; allowed_tools composes with the preset's
// allowlist, or replaces it under specialist; the recursion guard (or the
// caller's disallowed_tools) joins the preset's deny list.
func Resolve(o Options) (*Policy, error) {
	name := o.Preset
	if name == "" {
		name = "default"
	}
	p, ok := Presets[name]
	if !ok {
		return nil, fmt.Errorf("unknown permission preset %q: use one of %s", name, strings.Join(PresetNames, ", "))
	}
	pol := &Policy{Preset: p, Mode: p.Mode, SkipPermissions: p.SkipPermissions, Only: o.Only,
		Guard: !(o.DisallowedTools != nil && len(o.DisallowedTools) == 0)}
	if o.PermissionMode != "" {
		if !contains(PermissionModes, o.PermissionMode) {
			return nil, fmt.Errorf("unknown permission_mode %q: use one of %s", o.PermissionMode, strings.Join(PermissionModes, ", "))
		}
		pol.Mode = o.PermissionMode
	}
	if !p.ReplaceAllow {
		pol.Allow = append(pol.Allow, p.Allow...)
	}
	pol.Allow = dedupe(append(pol.Allow, o.AllowedTools...))
	guard := o.DisallowedTools
	if guard == nil {
		guard = RecursionGuard()
	}
	pol.Deny = dedupe(append(append([]string{}, p.Deny...), guard...))
	for _, t := range append(append([]string{}, pol.Allow...), pol.Deny...) {
		switch t := strings.TrimSpace(t); {
		case t == "":
			return nil, fmt.Errorf("empty tool name in allowed_tools or disallowed_tools")
		case strings.HasPrefix(t, "-"):
			// The tool lists are the agent program's variadic flags: a
			// name like a flag would be read as one.
			return nil, fmt.Errorf("tool name %q in allowed_tools or disallowed_tools looks like a flag: a tool's name begins with a letter", t)
		}
	}
	return pol, nil
}

// ForOpen resolves the policy of an agent opened with a: the session
// manager does so once, at open, and the agent carries it. parent is the
// policy of the agent kaimon owns that opens it through the door (nil
// when a person's client opens it), at which the new agent is capped
// (Cap).
func ForOpen(a *verbs.OpenArgs, parent *Policy) (*Policy, error) {
	o := Options{Preset: a.Permission, PermissionMode: a.PermissionMode, AllowedTools: a.AllowedTools, Only: a.Only}
	if a.DisallowedTools != nil {
		o.DisallowedTools = append([]string{}, (*a.DisallowedTools)...)
	}
	p, err := Resolve(o)
	if err != nil || parent == nil {
		return p, err
	}
	return Cap(parent, p)
}

// WholeSet says whether the allowlist is the agent's whole tool set: under
// specialist, or under only.
func (p *Policy) WholeSet() bool { return p.Preset.ReplaceAllow || p.Only }

// Bypass says whether the agent runs without permission checks: bypass,
// or permission_mode bypassPermissions.
func (p *Policy) Bypass() bool { return p.SkipPermissions || p.Mode == "bypassPermissions" }

// FS says whether the ACP fs/* callbacks are granted.
func (p *Policy) FS() bool { return p.Preset.FS }

// OnlyTools returns the built-in tool set under only: the tools the
// allowlist names that are not MCP tools, each once and without its
// argument pattern (Bash(git *) loads all of Bash). namesMCP says whether
// the allowlist names MCP tools too.
func (p *Policy) OnlyTools() (tools []string, namesMCP bool) {
	seen := map[string]bool{}
	for _, t := range p.Allow {
		if strings.HasPrefix(t, "mcp__") {
			namesMCP = true
			continue
		}
		name := t
		if i := strings.IndexByte(name, '('); i >= 0 {
			name = name[:i]
		}
		name = strings.TrimSpace(name)
		if name != "" && !seen[name] {
			seen[name] = true
			tools = append(tools, name)
		}
	}
	return tools, namesMCP
}

// Offers says whether an agent whose tool set kaimon itself offers (a
// local model's tool loop) is to be offered tool, by kaimon's name of it
// (see NativeToolName): not when the deny list names it, and where the
// allowlist is the whole set (specialist, only) only when the allowlist
// names it, whole or with an argument pattern. What it offers may still
// be asked about: see Permission.
func (p *Policy) Offers(tool string) bool {
	if NamesTool(p.Deny, tool) {
		return false
	}
	if !p.WholeSet() || NamesTool(p.Allow, tool) {
		return true
	}
	tools, _ := p.OnlyTools()
	return contains(tools, tool)
}

// PresetDocs renders "name: doc" lines in the spec's order, for help texts.
func PresetDocs() []string {
	out := make([]string, 0, len(PresetNames))
	for _, n := range PresetNames {
		out = append(out, n+": "+Presets[n].Doc)
	}
	return out
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

func dedupe(in []string) []string {
	seen := make(map[string]bool, len(in))
	out := in[:0:0]
	for _, v := range in {
		if !seen[v] {
			seen[v] = true
			out = append(out, v)
		}
	}
	return out
}
