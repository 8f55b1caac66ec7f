package backend

import (
	"fmt"
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
// notebook and specialist presets deny.
var NativeFileTools = []string{"Bash", "Read", "Write", "Edit", "Glob", "Grep", "NotebookEdit"}

// Presets maps each preset name to its posture, as the spec defines them.
var Presets = map[string]Preset{
	"default": {Name: "default", Mode: "acceptEdits", FS: true,
		Doc: "edits only: acceptEdits permission mode, no extra tools"},
	"notebook": {Name: "notebook", Mode: "acceptEdits", Allow: []string{KaimonServer}, Deny: NativeFileTools,
		Doc: "kaimon's tools instead of its own: allows mcp__kaimon, denies Bash, Read, Write, Edit, Glob, Grep, NotebookEdit"},
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

// Efforts are the effort levels accepted by effort and a model's suffix.
var Efforts = verbs.Efforts

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

// RecursionGuard returns the default disallowed_tools.
func RecursionGuard() []string {
	out := make([]string, 0, len(AgentVerbs)+len(Subagents))
	for _, v := range AgentVerbs {
		out = append(out, KaimonServer+"__"+v)
	}
	return append(out, Subagents...)
}

// Policy is a resolved tool policy: what the agent may and may not call.
type Policy struct {
	Preset          Preset
	Mode            string
	Allow           []string
	Deny            []string
	SkipPermissions bool
}

// Resolve validates o's permission options and composes them as the spec
// says: permission_mode overrides the preset's mode; allowed_tools composes
// with the preset's allowlist, or replaces it under specialist; the
// recursion guard (or the caller's disallowed_tools) joins the preset's
// deny list.
func Resolve(o *Options) (Policy, error) {
	name := o.Permission
	if name == "" {
		name = "default"
	}
	p, ok := Presets[name]
	if !ok {
		return Policy{}, fmt.Errorf("unknown permission preset %q: use one of %s", name, strings.Join(PresetNames, ", "))
	}
	pol := Policy{Preset: p, Mode: p.Mode, SkipPermissions: p.SkipPermissions}
	if o.PermissionMode != "" {
		if !contains(PermissionModes, o.PermissionMode) {
			return Policy{}, fmt.Errorf("unknown permission_mode %q: use one of %s", o.PermissionMode, strings.Join(PermissionModes, ", "))
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
			return Policy{}, fmt.Errorf("empty tool name in allowed_tools or disallowed_tools")
		case strings.HasPrefix(t, "-"):
			// The tool lists are the agent program's variadic flags: a
			// name like a flag would be read as one.
			return Policy{}, fmt.Errorf("tool name %q in allowed_tools or disallowed_tools looks like a flag: a tool's name begins with a letter", t)
		}
	}
	return pol, nil
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

// PresetDocs renders "name: doc" lines in the spec's order, for help texts.
func PresetDocs() []string {
	out := make([]string, 0, len(PresetNames))
	for _, n := range PresetNames {
		out = append(out, n+": "+Presets[n].Doc)
	}
	return out
}
