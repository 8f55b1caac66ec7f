package acp

import (
	"fmt"
	"slices"
	"sort"

	"github.com/kaimon/kaimon/internal/event"
	"github.com/kaimon/kaimon/internal/policy"
)

// acceptedEdit says why the preset's mode accepts an edit the agent asked
// about, "" if it does not: only for an agent that asks before every edit
// (Agent.AsksEdits), under acceptEdits or auto, for an edit whose every
// location is inside the cwd. Anything else is the policy's and the
// user's to answer.
func (b *Backend) acceptedEdit(tool string, call event.ToolCall) string {
	if !b.agent.AsksEdits || (b.pol.Mode != "acceptEdits" && b.pol.Mode != "auto") || (tool != "Edit" && tool != "Write") {
		return ""
	}
	paths := locationPaths(call.Locations)
	if len(paths) == 0 {
		return ""
	}
	for _, p := range paths {
		if _, err := b.jail.Resolve(p); err != nil {
			return ""
		}
	}
	return fmt.Sprintf("permission mode %s accepts edits inside the agent's directory (acp:%s asks about every edit: kaimon answers)", b.pol.Mode, b.agent.Name)
}

// locationPaths are the paths of a tool call's ACP locations.
func locationPaths(locs []any) []string {
	var out []string
	for _, l := range locs {
		var loc struct {
			Path string `json:"path"`
		}
		if sameJSON(l, &loc) != nil || loc.Path == "" {
			return nil
		}
		out = append(out, loc.Path)
	}
	return out
}

// excludes says whether the agent keeps the preset's tool t from its
// model at spawn (Agent.ExcludeFlag): it does for every tool it has
// (NativeTools lists them all), and one it has not it cannot call.
func excludes(a *Agent, t string) bool {
	return a.ExcludeFlag != ""
}

// excludedTools are the agent's own tools that the preset's deny list
// names (and, where the allowlist is the whole tool set, those it does
// not allow; under plan, for an agent whose plan mode does not hold, its
// edit tools), for Agent.ExcludeFlag; sorted, each once.
func excludedTools(a *Agent, pol *policy.Policy) []string {
	if a.ExcludeFlag == "" {
		return nil
	}
	seen := map[string]bool{}
	var out []string
	for t, names := range a.NativeTools {
		if !excludesTool(a, pol, t) {
			continue
		}
		for _, n := range names {
			if !seen[n] {
				seen[n] = true
				out = append(out, n)
			}
		}
	}
	sort.Strings(out)
	return out
}

// excludesTool says whether the agent keeps its tools that stand for the
// preset tool t from the model (see excludedTools).
func excludesTool(a *Agent, pol *policy.Policy, t string) bool {
	if a.ExcludeFlag == "" {
		return false
	}
	return policy.NamesTool(pol.Deny, t) || (pol.WholeSet() && !policy.NamesTool(pol.Allow, t)) ||
		(a.AdvisoryPlan && pol.Mode == "plan" && t != "Bash" && policy.Mutating(t))
}

// askRules are the agent's tool permission rules for its PermissionFlag:
// NAME:ask-user for each of its AskTools not excluded whose preset tool
// the policy leaves to ask (an allowed one runs as the agent's mode says,
// and the deny list is held by exclusion); sorted.
func askRules(a *Agent, pol *policy.Policy) []string {
	if a.PermissionFlag == "" {
		return nil
	}
	var out []string
	for t, names := range a.NativeTools {
		if excludesTool(a, pol, t) {
			continue
		}
		if v, _ := pol.Permission(t); v != policy.Ask {
			continue
		}
		for _, n := range names {
			if slices.Contains(a.AskTools, n) {
				out = append(out, n+":ask-user")
			}
		}
	}
	sort.Strings(out)
	return out
}
