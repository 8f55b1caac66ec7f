package monitor

import (
	"encoding/json"
	"fmt"
	"strings"

	"charm.land/lipgloss/v2"
	"github.com/charmbracelet/x/ansi"

	"github.com/kaimon/kaimon/internal/apitype"
	"github.com/kaimon/kaimon/internal/event"
	"github.com/kaimon/kaimon/internal/render"
	"github.com/kaimon/kaimon/internal/verbs"
)

// The monitor renders events into lines of its own rather than through the
// CLI's tail --pretty printer: that one streams to a writer as envelopes
// come, while a pane is redrawn whole, at its width, and a tool call's line
// changes when its result arrives.

var (
	stFaint   = lipgloss.NewStyle().Faint(true)
	stThought = lipgloss.NewStyle().Faint(true).Italic(true)
	stBold    = lipgloss.NewStyle().Bold(true)
	stTool    = lipgloss.NewStyle().Foreground(lipgloss.Cyan)
	stOK      = lipgloss.NewStyle().Foreground(lipgloss.Green)
	stBad     = lipgloss.NewStyle().Foreground(lipgloss.Red)
	stRunning = lipgloss.NewStyle().Foreground(lipgloss.Yellow)
	stAsk     = lipgloss.NewStyle().Foreground(lipgloss.Magenta).Bold(true)
	stPlan    = lipgloss.NewStyle().Foreground(lipgloss.Yellow)
)

// stream is a block of text still streaming (delta:true chunks), shown at
// the end of the feed until its authoritative copy arrives.
type stream struct {
	kind event.Kind
	turn int
	text string
}

// renderFeed renders an agent's authoritative envelopes (in seq order) and
// the block streaming after them into lines at most width cells wide.
func renderFeed(id string, envs []event.Envelope, open *stream, width int) []string {
	if width < 10 {
		width = 10
	}
	// A tool call is one line, at its first tool_use, showing its latest
	// status; a permission request likewise shows its decision once made.
	results := map[string]event.ToolResultUpdate{}
	decided := map[string]event.PermissionData{}
	// The latest copy of each call replaces the earlier (the first is an
	// announce without input).
	calls := map[string]event.ToolCall{}
	for i := range envs {
		switch envs[i].Kind {
		case event.ToolUse:
			var d event.ToolUseData
			if json.Unmarshal(envs[i].Data, &d) == nil {
				c, had := calls[d.Call.ToolCallID]
				if !had || d.Call.Title != "" {
					c.ToolCallID, c.Title = d.Call.ToolCallID, d.Call.Title
				}
				if len(d.Call.RawInput) > 0 {
					c.RawInput = d.Call.RawInput
				}
				calls[d.Call.ToolCallID] = c
			}
		case event.ToolResult:
			var d event.ToolResultData
			if json.Unmarshal(envs[i].Data, &d) == nil {
				results[d.Update.ToolCallID] = d.Update
			}
		case event.Permission:
			var d event.PermissionData
			if json.Unmarshal(envs[i].Data, &d) == nil && d.Decision != "" {
				decided[d.RequestID] = d
			}
		}
	}
	var out []string
	add := func(style lipgloss.Style, prefix, text string) {
		for _, l := range wrap(prefix+text, width) {
			out = append(out, style.Render(l))
		}
	}
	asked := map[string]bool{}     // requestIds shown as a request
	shownTool := map[string]bool{} // toolCallIds with their line
	turns := map[int]bool{}        // turns whose heading is out
	for i := range envs {
		e := &envs[i]
		switch e.Kind {
		case event.TurnStarted, event.UserText:
			// A turn opens with its number, once, then the user's text.
			if !turns[e.Turn] {
				turns[e.Turn] = true
				add(stFaint, "", fmt.Sprintf("── turn %d ──", e.Turn))
			}
			if e.Kind == event.UserText {
				var d event.TextData
				_ = json.Unmarshal(e.Data, &d)
				add(stBold, "> ", d.Content.Text)
			}
		case event.AssistantText:
			var d event.TextData
			_ = json.Unmarshal(e.Data, &d)
			add(lipgloss.NewStyle(), "", d.Content.Text)
		case event.Thought:
			var d event.TextData
			_ = json.Unmarshal(e.Data, &d)
			add(stThought, "thinking: ", d.Content.Text)
		case event.ToolUse:
			var d event.ToolUseData
			_ = json.Unmarshal(e.Data, &d)
			id := d.Call.ToolCallID
			if shownTool[id] {
				continue
			}
			shownTool[id] = true
			out = append(out, toolLine(calls[id], results[id], width))
		case event.ToolResult:
			var d event.ToolResultData
			_ = json.Unmarshal(e.Data, &d)
			if shownTool[d.Update.ToolCallID] {
				continue // its call's line shows it
			}
			shownTool[d.Update.ToolCallID] = true
			out = append(out, toolLine(event.ToolCall{ToolCallID: d.Update.ToolCallID, Title: d.Update.ToolCallID}, d.Update, width))
		case event.Permission:
			var d event.PermissionData
			_ = json.Unmarshal(e.Data, &d)
			if d.Decision == "" {
				asked[d.RequestID] = true
				if dd, ok := decided[d.RequestID]; ok {
					add(stFaint, "", fmt.Sprintf("? permission for %s: %s", d.ToolCall.Title, render.Decision(&dd)))
					continue
				}
				add(stAsk, "", fmt.Sprintf("? permission asked: %s %s", d.ToolCall.Title, render.ToolInput(&d.ToolCall, 120)))
				add(stAsk, "  ", "answer: "+verbs.PermitCommand(id, d.RequestID, "")+"   (or press p)")
				continue
			}
			if !asked[d.RequestID] { // decided at once, by the preset
				add(stFaint, "", fmt.Sprintf("· permission for %s: %s", d.ToolCall.Title, render.Decision(&d)))
			}
		case event.Result:
			r := render.ResultOf(e)
			style := stOK
			switch {
			case r.Cancelled:
				style = stRunning // stopped as asked: yellow, as kaimon run's ■
			case r.Failed:
				style = stBad
			}
			add(style, "", fmt.Sprintf("%s  tokens in %d, out %d", r.Head, r.Usage.InputTokens, r.Usage.OutputTokens))
		case event.Status:
			// idle and working go with each turn and say nothing new.
			var d event.StatusData
			_ = json.Unmarshal(e.Data, &d)
			if d.Status != apitype.Idle && d.Status != apitype.Working {
				add(stFaint, "· ", string(d.Status))
			}
		case event.Error:
			var d event.ErrorData
			_ = json.Unmarshal(e.Data, &d)
			add(stBad, "error: ", d.Message)
		case event.Plan:
			add(stPlan, "", "plan:")
			for _, l := range render.PlanLines(e) {
				add(stPlan, "  ", l)
			}
		case event.Usage, event.ToolInputDelta:
			// Usage comes with the result; input deltas are liveness only.
		default:
			add(stFaint, "", string(e.Kind)+" "+render.Clip(string(e.Data), 120))
		}
	}
	if open != nil && open.text != "" {
		if open.kind == event.Thought {
			add(stThought, "thinking: ", open.text)
		} else {
			add(lipgloss.NewStyle(), "", open.text)
		}
	}
	return out
}

// toolLine is a tool call's one line: its title, its input, its status.
func toolLine(c event.ToolCall, res event.ToolResultUpdate, width int) string {
	var mark string
	switch res.Status {
	case apitype.ToolCompleted:
		mark = stOK.Render("✓ " + string(res.Status))
	case apitype.ToolFailed:
		mark = stBad.Render("✗ " + string(res.Status))
	default:
		mark = stRunning.Render("… running")
	}
	head := stTool.Render("⚙ " + c.Title)
	room := width - lipgloss.Width(head) - lipgloss.Width(mark) - 2
	arg := ""
	if room > 3 && len(c.RawInput) > 0 {
		arg = " " + render.ToolInput(&c, room)
	}
	return ansi.Truncate(head+arg+" "+mark, width, "…")
}

// wrap word-wraps s to width cells, breaking words longer than a line.
func wrap(s string, width int) []string {
	s = strings.TrimRight(strings.ReplaceAll(s, "\t", "    "), "\n")
	return strings.Split(ansi.Wrap(s, width, ""), "\n")
}
