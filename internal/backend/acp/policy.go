package acp

import (
	"fmt"
	"sort"
	"strings"

	"github.com/kaimon/kaimon/internal/backend"
	"github.com/kaimon/kaimon/internal/policy"
)

// Route is how a preset reaches an ACP agent's own tools. ACP itself has no
// way to express tool policy, so there are three, none universal (spec:
// "Where an ACP preset is enforced"). Kaimon's own tools are checked at the
// door for every agent whatever its route.
type Route int

const (
	// RouteBridge: opencode. A generated per-session config carries the
	// preset's permissions, and a bridge plugin asks kaimon before each
	// tool call (refusing mutating tools when kaimon cannot be reached).
	RouteBridge Route = iota
	// RouteClaudeMeta: claude-agent-acp. The deny list goes in
	// _meta.claudeCode.options on session/new, so the agent never offers
	// those tools to the model; the rest asks through
	// session/request_permission.
	RouteClaudeMeta
	// RoutePermissionOnly: any other agent (gemini-cli). Only what the
	// agent asks about through session/request_permission can be refused;
	// what it does on its own (gemini-cli's reads, its harmless-looking
	// shell commands) cannot.
	RoutePermissionOnly
	// RoutePermissionEnv: a fork of opencode that takes opencode's
	// permission config as JSON in a variable of its own (kilo:
	// KILO_PERMISSION), laid over its global config. The preset goes
	// there (OpencodePermission): a denied key's tools are not offered to
	// the model, an "ask" comes as session/request_permission, which the
	// preset answers. The project's own config, which could loosen it, is
	// not loaded (Agent.NoProjectConfigEnv). What still wins over it is a
	// permission the user's own global config gives one of the agent's
	// modes (agent.NAME.permission), which kaimon does not rewrite.
	RoutePermissionEnv
)

func (r Route) String() string {
	switch r {
	case RouteBridge:
		return "bridge plugin"
	case RouteClaudeMeta:
		return "_meta.claudeCode.options"
	case RoutePermissionEnv:
		return "opencode permission overlay"
	default:
		return "session/request_permission only"
	}
}

// opencodeKeys are opencode's permission keys, with the preset's tool names
// each stands for.
var opencodeKeys = []struct {
	key   string
	tools []string
}{
	{"read", []string{"Read"}},
	{"edit", []string{"Edit", "Write", "MultiEdit", "NotebookEdit"}},
	{"glob", []string{"Glob"}},
	{"grep", []string{"Grep"}},
	{"list", []string{"Glob"}},
	{"bash", []string{"Bash"}},
	{"task", []string{"Task", "Agent"}},
	{"webfetch", []string{"WebFetch"}},
	{"websearch", []string{"WebSearch"}},
	{"todowrite", []string{"TodoWrite"}},
}

// OpencodePermission renders a policy as opencode's "permission" config:
// the permission mode gives each key allow or ask (acceptEdits allows
// edits and asks for shell commands, as the claude CLI does; plan denies
// edits; bypass allows all), the allowlist allows, and the deny list and,
// under specialist or only, everything the allowlist does not name, deny.
// Bash(pattern) entries become opencode's per-command patterns. What opencode
// asks comes to kaimon as session/request_permission.
func OpencodePermission(pol *policy.Policy) map[string]any {
	base := map[string]string{}
	for _, k := range opencodeKeys {
		base[k.key] = "allow"
	}
	base["external_directory"] = "ask"
	switch {
	case pol.Bypass():
		base["external_directory"] = "allow"
	case pol.Mode == "plan":
		base["edit"], base["bash"], base["webfetch"] = "deny", "ask", "ask"
	case pol.Mode == "default":
		base["edit"], base["bash"], base["webfetch"] = "ask", "ask", "ask"
	default: // acceptEdits, auto (opencode has no classifier: as acceptEdits)
		base["bash"], base["webfetch"] = "ask", "ask"
	}
	whole := pol.WholeSet()
	out := map[string]any{}
	bashPatterns := map[string]any{}
	for _, k := range opencodeKeys {
		v := base[k.key]
		allowed, denied := false, false
		for _, t := range k.tools {
			allowed = allowed || policy.NamesTool(pol.Allow, t)
			denied = denied || policy.NamesTool(pol.Deny, t)
		}
		if allowed {
			v = "allow"
		} else if whole {
			v = "deny"
		}
		if denied {
			v = "deny"
		}
		out[k.key] = v
	}
	if out["bash"] != "deny" {
		for _, e := range pol.Allow {
			if p, ok := strings.CutPrefix(strings.TrimSpace(e), "Bash("); ok && strings.HasSuffix(p, ")") {
				bashPatterns[strings.TrimSuffix(p, ")")] = "allow"
			}
		}
		if len(bashPatterns) > 0 {
			bashPatterns["*"] = out["bash"]
			out["bash"] = bashPatterns
		}
	}
	out["external_directory"] = base["external_directory"]
	out["doom_loop"] = "ask"
	return out
}

// claudeMeta is session/new's _meta for claude-agent-acp: the deny list
// (and under only the whole tool set) in claudeCode.options, and the
// system prompt to append.
func claudeMeta(pol *policy.Policy, o *backend.Options) map[string]any {
	opts := map[string]any{}
	if len(pol.Deny) > 0 {
		opts["disallowedTools"] = pol.Deny
	}
	if len(pol.Allow) > 0 {
		opts["allowedTools"] = pol.Allow
	}
	if pol.Only {
		tools, _ := pol.OnlyTools()
		if tools == nil {
			tools = []string{}
		}
		opts["tools"] = tools
	}
	meta := map[string]any{"claudeCode": map[string]any{"options": opts}}
	if o.SystemPrompt != "" {
		meta["systemPrompt"] = map[string]any{"append": o.SystemPrompt}
	}
	return meta
}

// sessionMode is the ACP session mode the policy's permission mode stands
// for on an agent whose session/new offered modes, "" for none that fits.
// An agent's own table (Agent.Modes: kaimon's permission mode → the
// agent's mode id) is asked first; else the names claude-agent-acp
// (default, acceptEdits, plan, bypassPermissions) and gemini-cli (default,
// autoEdit, plan, yolo) use. A mode id matches an available one exactly or
// as its last path segment (copilot's ids are URLs).
func sessionMode(a *Agent, pol *policy.Policy, available []string) string {
	mode := pol.Mode
	if pol.Bypass() {
		mode = "bypassPermissions"
	}
	want := map[string][]string{
		"acceptEdits":       {"acceptEdits", "autoEdit"},
		"bypassPermissions": {"bypassPermissions", "yolo"},
		"plan":              {"plan"},
		"default":           {"default"},
	}[mode]
	if a != nil && a.Modes != nil {
		want = nil
		if m, ok := a.Modes[mode]; ok {
			want = []string{m}
		}
	}
	for _, w := range want {
		for _, av := range available {
			if av == w || strings.HasSuffix(av, "/"+w) || strings.HasSuffix(av, "#"+w) {
				return av
			}
		}
	}
	return ""
}

// Enforcement says, for an agent on a route, what of the policy the agent's
// own tools are held to and what not, and a permission mode the agent
// cannot obey (Agent.ModeNotes): "" when the route holds all of it.
// Kaimon reports a non-empty answer as an error event at spawn, so that a
// preset never reads as configured when it is not.
func Enforcement(a *Agent, pol *policy.Policy) string {
	if a.Route != RoutePermissionOnly {
		return ""
	}
	var native []string
	for _, t := range pol.Deny {
		if !strings.HasPrefix(t, "mcp__") && !contains(policy.Subagents, t) && !excludes(a, t) {
			native = append(native, t)
		}
	}
	sort.Strings(native)
	var why []string
	if len(native) > 0 {
		why = append(why, fmt.Sprintf("it denies %s", strings.Join(native, ", ")))
	}
	if pol.WholeSet() {
		why = append(why, "allowed_tools is meant to be the whole tool set")
	}
	var msgs []string
	if len(why) > 0 {
		msgs = append(msgs, fmt.Sprintf("preset %s is not fully enforced on acp:%s: %s, but %s can only refuse what the agent asks about through session/request_permission, "+
			"and it reads files (and runs commands it deems safe) without asking. Kaimon's own tools are still checked at its door. "+
			"For a preset that holds against native tools, use acp:opencode or acp:claude",
			pol.Preset.Name, a.Name, strings.Join(why, " and "), "kaimon"))
	}
	if note := a.ModeNotes[pol.Mode]; note != "" && !pol.Bypass() {
		msgs = append(msgs, fmt.Sprintf("preset %s (permission mode %s) cannot be obeyed on acp:%s: %s", pol.Preset.Name, pol.Mode, a.Name, note))
	}
	return strings.Join(msgs, ". ")
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
