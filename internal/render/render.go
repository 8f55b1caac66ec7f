// Package render holds the words kaimon's two event front ends give an
// event: the line printer of `kaimon run` and `tail --pretty`
// (internal/cli) and the monitor's feed (internal/monitor). It decodes an
// envelope's data and says what it means in text; each front end keeps its
// own layout (streaming lines or a redrawn pane) and colour.
package render

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/charmbracelet/x/ansi"

	"github.com/kaimon/kaimon/internal/apitype"
	"github.com/kaimon/kaimon/internal/event"
)

// Clip makes s one line (runs of white space become one space) of at most
// n cells, ending in … when cut.
func Clip(s string, n int) string {
	return ansi.Truncate(strings.Join(strings.Fields(s), " "), n, "…")
}

// Result is a turn's result in words.
type Result struct {
	// Failed: the turn did not complete (apitype.StopReason.Failed), a
	// cancel included; Cancelled: it was stopped as asked, which is no
	// failure to show as one (kaimon run's "■ … cancelled").
	Failed, Cancelled bool
	// Head is "✓ turn N STOP_REASON", "■ turn N cancelled", or "✗ turn N
	// failed (STOP_REASON: ERROR)".
	Head       string
	StopReason apitype.StopReason
	Usage      event.UsageFigures
}

// ResultOf decodes a result envelope.
func ResultOf(e *event.Envelope) Result {
	var d event.ResultData
	_ = json.Unmarshal(e.Data, &d)
	if d.StopReason == apitype.StopCancelled {
		head := fmt.Sprintf("■ turn %d cancelled", e.Turn)
		if d.Error != "" {
			head += " (" + d.Error + ")"
		}
		return Result{Failed: true, Cancelled: true, Head: head, StopReason: d.StopReason, Usage: d.Usage}
	}
	if d.StopReason.Failed() {
		msg := string(d.StopReason)
		if d.Error != "" {
			msg += ": " + d.Error
		}
		return Result{Failed: true, Head: fmt.Sprintf("✗ turn %d failed (%s)", e.Turn, msg), StopReason: d.StopReason, Usage: d.Usage}
	}
	return Result{Head: fmt.Sprintf("✓ turn %d %s", e.Turn, d.StopReason), StopReason: d.StopReason, Usage: d.Usage}
}

// PlanLines are a plan envelope's entries, one "[STATUS] CONTENT" each.
func PlanLines(e *event.Envelope) []string {
	var d event.PlanData
	_ = json.Unmarshal(e.Data, &d)
	out := make([]string, 0, len(d.Entries))
	for _, en := range d.Entries {
		out = append(out, "["+en.Status+"] "+en.Content)
	}
	return out
}

// Decided is a permission decision's word: allowed, denied, or the
// decision as it came.
func Decided(d *event.PermissionData) string { return d.Decision.Past() }

// Decision is a decision in full: "denied by timeout (MESSAGE)".
func Decision(d *event.PermissionData) string {
	s := Decided(d)
	if d.By != "" {
		s += " by " + d.By
	}
	if d.Message != "" {
		s += " (" + d.Message + ")"
	}
	return s
}

// ToolInput is a tool call's input as one line of at most n cells.
func ToolInput(c *event.ToolCall, n int) string {
	return Clip(string(c.RawInput), n)
}

// ContentSummary is the first text of ACP tool content, or what it holds.
func ContentSummary(content []any) string {
	var parts []string
	for _, c := range content {
		m, _ := c.(map[string]any)
		inner, _ := m["content"].(map[string]any)
		switch inner["type"] {
		case "text":
			s, _ := inner["text"].(string)
			parts = append(parts, s)
		case "image":
			mt, _ := inner["mimeType"].(string)
			parts = append(parts, "["+mt+" image]")
		default:
			if t, _ := m["type"].(string); t != "" {
				parts = append(parts, "["+t+"]")
			}
		}
	}
	return strings.Join(parts, " ")
}
