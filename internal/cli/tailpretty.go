package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/fatih/color"

	"github.com/kaimon/kaimon/internal/event"
)

// pretty renders envelopes for people (tail --pretty): assistant text
// flows as its deltas arrive, a tool call is one line and its result
// another, and a turn ends with its stop reason and usage. Colour only on a
// terminal (fatih/color; NO_COLOR is honoured).
type pretty struct {
	w     io.Writer
	multi bool // several agents: prefix lines with the agent id

	open     string            // agent/kind of the text streaming on the current line
	streamed map[string]string // agent/kind → text streamed so far in this block
	tools    map[string]string // toolCallId → tool name
}

func newPretty(w io.Writer, multi bool) *pretty {
	return &pretty{w: w, multi: multi, streamed: map[string]string{}, tools: map[string]string{}}
}

var (
	faint  = color.New(color.Faint)
	bold   = color.New(color.Bold)
	cyan   = color.New(color.FgCyan)
	green  = color.New(color.FgGreen)
	red    = color.New(color.FgRed)
	yellow = color.New(color.FgYellow)
	italic = color.New(color.Faint, color.Italic)
)

func (p *pretty) endLine() {
	if p.open != "" {
		io.WriteString(p.w, "\n")
		p.open = ""
	}
}

func (p *pretty) prefix(e *event.Envelope) string {
	if !p.multi {
		return ""
	}
	return faint.Sprintf("[%s] ", e.AgentID)
}

// line prints one whole line for e.
func (p *pretty) line(e *event.Envelope, s string) {
	p.endLine()
	io.WriteString(p.w, p.prefix(e)+s+"\n")
}

func (p *pretty) print(e *event.Envelope) {
	switch e.Kind {
	case event.AssistantText, event.Thought:
		var d event.TextData
		_ = json.Unmarshal(e.Data, &d)
		paint := fmt.Sprint
		if e.Kind == event.Thought {
			paint = italic.Sprint
		}
		key := e.AgentID + "/" + string(e.Kind)
		if d.Delta {
			if p.open != key {
				p.endLine()
				head := p.prefix(e)
				if e.Kind == event.Thought {
					head += italic.Sprint("thinking: ")
				}
				io.WriteString(p.w, head)
				p.open = key
			}
			io.WriteString(p.w, paint(d.Content.Text))
			p.streamed[key] += d.Content.Text
			return
		}
		// The complete block: it closes what streamed, or stands alone.
		// If deltas were lost on the way, the complete text is printed.
		so, ok := p.streamed[key]
		delete(p.streamed, key)
		if ok && so == d.Content.Text {
			if p.open == key {
				p.endLine()
			}
			return
		}
		head := ""
		if e.Kind == event.Thought {
			head = italic.Sprint("thinking: ")
		}
		p.line(e, head+paint(d.Content.Text))
	case event.UserText:
		var d event.TextData
		_ = json.Unmarshal(e.Data, &d)
		p.line(e, bold.Sprint("> "+d.Content.Text))
	case event.TurnStarted:
		p.line(e, faint.Sprintf("── turn %d ──", e.Turn))
	case event.ToolUse:
		var d event.ToolUseData
		_ = json.Unmarshal(e.Data, &d)
		p.tools[d.Call.ToolCallID] = d.Call.Title
		if len(d.Call.RawInput) == 0 {
			return // the announce; the complete call follows
		}
		p.line(e, cyan.Sprint("→ "+d.Call.Title)+" "+clip(string(d.Call.RawInput), 160))
	case event.ToolInputDelta:
		// Liveness only; the complete tool_use follows.
	case event.ToolResult:
		var d event.ToolResultData
		_ = json.Unmarshal(e.Data, &d)
		name := p.tools[d.Update.ToolCallID]
		if name == "" {
			name = d.Update.ToolCallID
		}
		mark := green.Sprint("← " + name)
		if d.Update.Status == "failed" {
			mark = red.Sprint("✗ " + name)
		}
		p.line(e, mark+" "+d.Update.Status+": "+clip(contentSummary(d.Update.Content), 160))
	case event.Result:
		var d event.ResultData
		_ = json.Unmarshal(e.Data, &d)
		u := d.Usage
		usage := faint.Sprintf("tokens in %d, out %d, cache read %d, cache write %d", u.InputTokens, u.OutputTokens, u.CacheReadTokens, u.CacheCreationTokens)
		if event.Failed(d.StopReason) {
			msg := d.StopReason
			if d.Error != "" {
				msg += ": " + d.Error
			}
			p.line(e, red.Sprintf("✗ turn %d failed (%s)", e.Turn, msg)+"  "+usage)
		} else {
			p.line(e, green.Sprintf("✓ turn %d %s", e.Turn, d.StopReason)+"  "+usage)
		}
	case event.Usage:
		// The turn's usage comes with its result.
	case event.Status:
		var d event.StatusData
		_ = json.Unmarshal(e.Data, &d)
		p.line(e, faint.Sprint("· "+d.Status))
	case event.Error:
		var d event.ErrorData
		_ = json.Unmarshal(e.Data, &d)
		p.line(e, red.Sprint("error: "+d.Message))
	case event.Plan:
		var d struct {
			Entries []struct{ Content, Status string } `json:"entries"`
		}
		_ = json.Unmarshal(e.Data, &d)
		var b strings.Builder
		b.WriteString(yellow.Sprint("plan:"))
		for _, en := range d.Entries {
			fmt.Fprintf(&b, "\n  [%s] %s", en.Status, en.Content)
		}
		p.line(e, b.String())
	case event.Permission:
		var d struct {
			ToolCall struct {
				Title string `json:"title"`
			} `json:"toolCall"`
		}
		_ = json.Unmarshal(e.Data, &d)
		p.line(e, yellow.Sprint("? permission asked: "+d.ToolCall.Title))
	default:
		p.line(e, string(e.Kind)+" "+clip(string(e.Data), 160))
	}
}

// contentSummary is the first text of ACP tool content, or what it holds.
func contentSummary(content []any) string {
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

// clip makes s one line of at most n runes.
func clip(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}
