package local

// Every call this package makes into the permission policy is in this
// file, so that a change of the policy's API touches nothing else.

import (
	"context"

	"github.com/kaimon/kaimon/internal/apitype"
	"github.com/kaimon/kaimon/internal/backend"
	"github.com/kaimon/kaimon/internal/event"
	"github.com/kaimon/kaimon/internal/policy"
)

// gate applies the agent's preset to the built-in tools, as the claude
// CLI applies it to its own: each tool stands for the CLI's tool of the
// same purpose (tools.go: Native), and allowed_tools and disallowed_tools
// may name either.
type gate struct {
	// pol is the agent's policy, with the tools' own names in its lists
	// mapped to the CLI's.
	pol *policy.Policy
	// deny is the caller's own disallowed_tools, mapped alike.
	deny []string
	ask  backend.Asker
}

// newGate takes the policy o carries (resolved once, at open) and views it
// in the CLI's tool names: the lists are mapped, nothing is resolved again.
func newGate(o *backend.Options) (*gate, error) {
	if err := o.Check(); err != nil {
		return nil, err
	}
	pol := o.Policy
	view := *pol
	view.Allow = nativeNames(pol.Allow)
	view.Deny = nativeNames(pol.Deny)
	return &gate{pol: &view, deny: nativeNames(o.Disallowed()), ask: o.Ask}, nil
}

// nativeNames maps the built-in tools' names in a tool list to the CLI's.
func nativeNames(list []string) []string {
	out := make([]string, 0, len(list))
	for _, t := range list {
		if d, ok := toolByName(t); ok {
			t = d.Native
		}
		out = append(out, t)
	}
	return out
}

// verdict is the policy's word on tool t. Under specialist or only, where
// allowed_tools is the whole tool set, a tool it names is allowed although
// the preset denies the native tools: the built-in tools are kaimon's own,
// and naming one is how a specialist gets it. disallowed_tools still wins.
func (g *gate) verdict(t toolDef) (policy.Verdict, string) {
	if g.pol.WholeSet() && policy.NamesTool(g.pol.Allow, t.Native) && !policy.NamesTool(g.deny, t.Native) {
		return policy.Allow, t.Name + " is in this agent's allowed tools"
	}
	return g.pol.Permission(t.Native)
}

// offered says whether the model is offered tool t: not when the deny list
// names it (notebook denies every native tool), nor, under specialist or
// only, when the allowlist does not name it.
func (g *gate) offered(t toolDef) bool {
	v, _ := g.verdict(t)
	return v != policy.Deny
}

// offeredTools are the tools the model is offered.
func (g *gate) offeredTools() []toolDef {
	var out []toolDef
	for _, t := range Tools {
		if g.offered(t) {
			out = append(out, t)
		}
	}
	return out
}

// allow decides one call, asking through agent_permit what the policy
// leaves open, and says why when it refuses. What the policy leaves open
// is decided as the claude CLI decides it in the preset's permission mode:
// reads and searches in the cwd run; edits run under acceptEdits (and auto
// and bypass), are asked under default and refused under plan; bash is
// always asked (there is no classifier here for auto).
func (g *gate) allow(ctx context.Context, turn int, t toolDef, call event.ToolCall) (bool, string) {
	v, why := g.verdict(t)
	switch v {
	case policy.Allow:
		return true, why
	case policy.Deny:
		return false, why
	}
	switch t.Kind {
	case "read", "search":
		return true, ""
	case "edit":
		switch g.pol.Mode {
		case "plan":
			return false, t.Name + " is refused in plan mode"
		case "default":
		default:
			return true, ""
		}
	}
	if g.ask == nil {
		return false, "nobody can answer a permission request for " + t.Name
	}
	call.Status = apitype.ToolPending
	d := g.ask(ctx, backend.PermissionRequest{Turn: turn, Tool: t.Native, Call: call})
	return d.Allow, d.Message
}
