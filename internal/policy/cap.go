package policy

import (
	"context"
	"fmt"
	"slices"
	"strings"
)

// A child is an agent that an agent kaimon owns opens through the door
// (which lets only a parent opened with disallowed_tools = [] call
// agent_open). It may not
// outrank its parent: whatever the child would do unasked, the parent
// must be allowed to do unasked, and whatever the parent may not do, the
// child may not either. Otherwise an agent whose own Bash asks permission
// opens a bypass child and has it run the command unasked.

// modesByLooseness orders the claude permission modes from the strictest
// to the loosest: what a mode lets the agent do unasked only grows along
// it (plan edits nothing; default asks for edits; acceptEdits makes them;
// auto lets the model's classifier run commands; bypassPermissions runs
// everything). A test checks it orders exactly PermissionModes.
var modesByLooseness = []string{"plan", "default", "acceptEdits", "auto", "bypassPermissions"}

// looseness is the rank of p's effective permission mode in
// modesByLooseness: bypass counts as bypassPermissions whatever its mode.
func (p *Policy) looseness() int {
	mode := p.Mode
	if p.Bypass() {
		mode = "bypassPermissions"
	}
	if i := slices.Index(modesByLooseness, mode); i >= 0 {
		return i
	}
	return len(modesByLooseness) // unknown: the loosest, so never allowed below a known one
}

// Cap holds child, the policy resolved from the options of an agent that
// an agent under parent opens, to parent's, and returns the policy the
// child runs under. It is applied once, by ForOpen, after a resume or a
// fork has filled in the options they inherit, so that a resumed or
// forked agent is held as a fresh one is.
//
// What the child's own options ask for beyond the parent's is refused,
// with an error that names the parent's preset and the presets it may
// open: a looser permission mode (bypass above all), the ACP fs/*
// callbacks the parent lacks, no recursion guard where the parent has
// one, a tool set beyond the allowlist where the parent's allowlist is
// its whole set (specialist, only), and an allowed tool (the preset's or
// allowed_tools') that the parent would have to ask about or may not use.
// Refused rather than quietly narrowed: the agent that asked for a bypass
// child and got a lab one would go on as if its child's tools ran
// unasked, and learn otherwise only when a call waits on a permission
// nobody expected; an error says at once what it may open instead.
//
// What the parent may not use at all, the child inherits without asking:
// the parent's deny list joins the child's. The opening model need not
// know its own deny list to stay within it, and nothing it asked for is
// taken away (a tool it named in allowed_tools that the parent is denied
// is refused above).
//
// Only the parent's policy counts, as resolved at its open: an "always"
// answer to one of its permission requests, or a set-model, changes what
// it does in its session, not what it may hand on.
func Cap(parent, child *Policy) (*Policy, error) {
	if why := parent.outranked(child); why != "" {
		return nil, fmt.Errorf("an agent kaimon owns may not open an agent looser than itself: %s; the opening agent runs under %s, under which it may open agents under %s",
			why, parent.describe(), parent.openable())
	}
	c := *child
	c.Deny = dedupe(append(slices.Clone(child.Deny), parent.Deny...))
	return &c, nil
}

// outranked says how child would do unasked what parent may not, or "".
func (p *Policy) outranked(child *Policy) string {
	parent := p // for reading: p is the opening agent's policy
	switch {
	case child.Bypass() && !parent.Bypass():
		return fmt.Sprintf("%s runs without permission checks", child.describe())
	case child.looseness() > parent.looseness():
		return fmt.Sprintf("%s has permission mode %s, looser than the opening agent's %s", child.describe(), child.Mode, parent.Mode)
	case child.FS() && !parent.FS():
		return fmt.Sprintf("%s grants the ACP fs/* callbacks, which the opening agent does not have", child.describe())
	case parent.Guard && !child.Guard:
		return "the new agent would run without the recursion guard, which holds for the opening agent"
	case parent.WholeSet() && !child.WholeSet():
		return fmt.Sprintf("the opening agent's tools are only its allowed_tools (%s), so the new agent's must be too (only, or specialist)", parent.wholeSetReason())
	}
	for _, e := range child.Allow {
		switch parent.entryVerdict(e) {
		case Deny:
			return fmt.Sprintf("%s allows %s, which the opening agent may not use", child.describe(), strings.TrimSpace(e))
		case Ask:
			return fmt.Sprintf("%s allows %s unasked, which the opening agent must ask permission for", child.describe(), strings.TrimSpace(e))
		}
	}
	return ""
}

// entryVerdict is what p says of the calls an allowlist entry allows:
// Allow when p runs all of them unasked too, Deny when p may not run the
// tool at all, else Ask. An entry with an argument pattern (Bash(git *))
// is allowed where p allows its tool whole or has the very same entry.
func (p *Policy) entryVerdict(entry string) Verdict {
	e := strings.TrimSpace(entry)
	tool := e
	if i := strings.IndexByte(tool, '('); i >= 0 {
		tool = strings.TrimSpace(tool[:i])
	}
	if !p.Offers(tool) {
		return Deny
	}
	v, _ := p.Permission(tool)
	if v == Ask && tool != e && slices.ContainsFunc(p.Allow, func(a string) bool { return strings.TrimSpace(a) == e }) {
		v = Allow
	}
	return v
}

// describe names what p was opened with, for errors: its preset, and
// permission_mode and only where they were given.
func (p *Policy) describe() string {
	s := "preset " + p.Preset.Name
	if p.Mode != p.Preset.Mode {
		s += " with permission_mode " + p.Mode
	}
	if p.Only {
		s += " with only"
	}
	return s
}

// openable lists the presets that an agent under p may open with their
// own options, or else (p under a stricter permission_mode than its
// preset's) with p's permission mode: what an error tells the opening
// agent to pick from.
func (p *Policy) openable() string {
	for _, mode := range []string{"", p.Mode} {
		var ok []string
		for _, n := range PresetNames {
			if c, err := Resolve(Options{Preset: n, PermissionMode: mode}); err == nil && p.outranked(c) == "" {
				ok = append(ok, n)
			}
		}
		if len(ok) > 0 && mode != "" {
			return strings.Join(ok, ", ") + " with permission_mode " + mode
		}
		if len(ok) > 0 {
			return strings.Join(ok, ", ")
		}
	}
	return "no preset by itself: give the new agent a permission_mode and allowed_tools no looser than the opening agent's"
}

// Grants says whether an agent under p may answer another agent's
// permission request for tool (by kaimon's name of it) with allow, and if
// not why: only where p itself runs the tool unasked. Otherwise an agent
// that may not open a looser child opens one as strict as itself and
// allows its child's requests, the same escalation one step removed. A
// deny it may always answer.
func (p *Policy) Grants(tool string) error {
	switch v, _ := p.Permission(tool); v {
	case Allow:
		return nil
	case Deny:
		return fmt.Errorf("an agent kaimon owns may allow another agent only what it may do unasked itself, and it may not use %s (it runs under %s)", tool, p.describe())
	}
	return fmt.Errorf("an agent kaimon owns may allow another agent only what it may do unasked itself, and it must ask permission for %s (it runs under %s)", tool, p.describe())
}

type callerKey struct{}

// WithCaller returns ctx carrying the policy of the agent kaimon owns on
// whose behalf the request is made (the door's caller), so that an open
// in that request is capped at it (ForOpen), and an allow it answers
// another agent's permission request with too (Grants). A request from a
// person's client carries none.
func WithCaller(ctx context.Context, p *Policy) context.Context {
	return context.WithValue(ctx, callerKey{}, p)
}

// CallerOf is the policy WithCaller put in ctx, or nil.
func CallerOf(ctx context.Context) *Policy {
	p, _ := ctx.Value(callerKey{}).(*Policy)
	return p
}
