package local

// Every call this package makes into the permission policy is in this
// file, so that a change of the policy's API touches nothing else.

import (
	"context"

	"github.com/kaimon/kaimon/internal/backend"
	"github.com/kaimon/kaimon/internal/event"
)

// gate applies the agent's preset to the built-in tools, as the claude
// CLI applies it to its own: each tool stands for the CLI's tool of the
// same purpose (tools.go: Native), and allowed_tools and disallowed_tools
// may name either.
type gate struct {
	pol backend.Policy
	o   backend.Options // with the tools' own names mapped to the CLI's
	ask backend.Asker
}

// newGate resolves the policy of o.
func newGate(o *backend.Options) (*gate, error) {
	n := *o
	n.AllowedTools = nativeNames(o.AllowedTools)
	if o.DisallowedTools != nil {
		n.DisallowedTools = nativeNames(o.DisallowedTools)
	}
	pol, err := backend.Resolve(&n)
	if err != nil {
		return nil, err
	}
	return &gate{pol: pol, o: n, ask: o.Ask}, nil
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
func (g *gate) verdict(t toolDef) (backend.Verdict, string) {
	whole := g.pol.Preset.ReplaceAllow || g.o.Only
	if whole && backend.NamesTool(g.pol.Allow, t.Native) && !backend.NamesTool(g.o.DisallowedTools, t.Native) {
		return backend.VerdictAllow, t.Name + " is in this agent's allowed tools"
	}
	return g.pol.Permission(&g.o, t.Native)
}

// offered says whether the model is offered tool t: not when the deny list
// names it (notebook denies every native tool), nor, under specialist or
// only, when the allowlist does not name it.
func (g *gate) offered(t toolDef) bool {
	v, _ := g.verdict(t)
	return v != backend.VerdictDeny
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
	case backend.VerdictAllow:
		return true, why
	case backend.VerdictDeny:
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
	call.Status = "pending"
	d := g.ask(ctx, backend.PermissionRequest{Turn: turn, Tool: t.Native, Call: call})
	return d.Allow, d.Message
}
