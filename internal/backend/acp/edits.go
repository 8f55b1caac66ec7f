package acp

import (
	"fmt"

	"github.com/kaimon/kaimon/internal/event"
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
