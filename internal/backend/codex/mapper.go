package codex

import (
	"encoding/json"
	"path/filepath"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/kaimon/kaimon/internal/apitype"
	"github.com/kaimon/kaimon/internal/backend"
	"github.com/kaimon/kaimon/internal/event"
)

// Mapper translates app-server notifications into kaimon events. It is
// pure (no I/O), so that it is tested on recorded traffic
// (testdata/*.jsonl), and not safe for concurrent use.
//
// Turns: app-server runs one turn of a thread at a time, and kaimon sends
// it one at a time (backend.Turns queues the rest), so every notification
// belongs to the head turn; its Codex turn id is kept for turn/interrupt.
//
// Items: an agentMessage streams as assistant_text deltas
// (item/agentMessage/delta) and its item/completed carries the whole text,
// the authoritative delta:false copy; a reasoning item likewise as
// thought (its summary, else its raw content). A commandExecution,
// fileChange or mcpToolCall is a tool call: item/started is its tool_use
// with the whole input, item/completed its tool_result with the output.
// turn/plan/updated is a plan. thread/tokenUsage/updated comes after each
// model request with that request's figures (last) and the thread's
// (total): the turn's usage is the sum of its lasts, reported with the
// result at turn/completed, whose status gives the stop reason.
type Mapper struct {
	backend.Turns

	// TurnID is Codex's id of the turn in flight ("" before its
	// turn/started, and between turns).
	TurnID string

	usage event.UsageFigures // the turn's, summed from last
	calls map[string]*call   // tool calls by item id, until they end
	// text and thought are what streamed of the message and the
	// reasoning whose item/completed has not come: an interrupted turn's
	// never does, and End makes their authoritative copies.
	text, thought strings.Builder
}

type call struct {
	call  event.ToolCall
	tool  string // the preset's name of the tool: Bash, Edit, mcp__…
	turn  int
	ended bool
}

// NewMapper returns a Mapper with no turn in flight.
func NewMapper() *Mapper { return &Mapper{calls: map[string]*call{}} }

// Map maps one notification, its method and params.
func (m *Mapper) Map(method string, params []byte) []event.Event {
	p := gjson.ParseBytes(params)
	if _, ok := m.Active(); !ok {
		// Outside any turn (a late notification of an interrupted one,
		// thread/started at spawn): no turn's events.
		return nil
	}
	turn := m.Current()
	switch method {
	case "turn/started":
		m.TurnID = p.Get("turn.id").String()
	case "item/agentMessage/delta":
		if d := p.Get("delta").String(); d != "" {
			m.text.WriteString(d)
			return []event.Event{event.NewText(event.AssistantText, turn, true, d)}
		}
	case "item/reasoning/summaryTextDelta", "item/reasoning/textDelta":
		if d := p.Get("delta").String(); d != "" {
			m.thought.WriteString(d)
			return []event.Event{event.NewText(event.Thought, turn, true, d)}
		}
	case "item/started":
		return m.started(turn, p.Get("item"))
	case "item/completed":
		return m.completed(turn, p.Get("item"))
	case "turn/plan/updated":
		entries := []event.PlanEntry{}
		for _, s := range p.Get("plan").Array() {
			entries = append(entries, event.PlanEntry{Content: s.Get("step").String(), Status: planStatus(s.Get("status").String())})
		}
		return []event.Event{event.New(event.Plan, turn, event.PlanData{Entries: entries})}
	case "thread/tokenUsage/updated":
		m.usage = m.usage.Add(figures(p.Get("tokenUsage.last")))
	case "error":
		if p.Get("willRetry").Bool() {
			return nil // Codex tries again; the turn goes on
		}
		// The turn's end follows (turn/completed, failed) and says it
		// in its result; this says it as it happened.
		return []event.Event{event.NewError(turn, p.Get("error.message").String(), json.RawMessage(p.Get("error").Raw))}
	}
	return nil
}

// End ends the active turn with its turn/completed: the open tool calls
// end (an interrupted command reports no completion), a usage event
// carries the turn's usage, then the result. If a turn was queued behind
// it, it opens, and next says it is to be sent.
func (m *Mapper) End(params []byte) (evs []event.Event, next *backend.Turn) {
	if _, ok := m.Active(); !ok {
		return nil, nil
	}
	t := gjson.GetBytes(params, "turn")
	turn := m.Current()
	res := event.ResultData{Usage: m.usage}
	switch t.Get("status").String() {
	case "completed":
		res.StopReason = apitype.StopEndTurn
	case "interrupted":
		res.StopReason = apitype.StopCancelled
	default: // failed
		res.StopReason = apitype.StopError
		res.Error = t.Get("error.message").String()
		if res.Error == "" {
			res.Error = "codex reported the turn " + t.Get("status").String()
		}
	}
	if m.Interrupted(turn) && res.StopReason == apitype.StopError {
		res.StopReason = apitype.StopCancelled
	}
	evs = m.flush(turn)
	evs = append(evs, m.endCalls(apitype.ToolFailed)...)
	evs = append(evs, event.New(event.Usage, turn, event.UsageData{Usage: m.usage}))
	evs = append(evs, event.New(event.Result, turn, res))
	m.usage, m.TurnID = event.UsageFigures{}, ""
	_, more, next := m.Pop()
	return append(evs, more...), next
}

// Abort ends every turn in flight with stopReason (the process is gone).
func (m *Mapper) Abort(stopReason apitype.StopReason, msg string) []event.Event {
	evs := append(m.flush(m.Current()), m.endCalls(apitype.ToolFailed)...)
	m.usage, m.TurnID = event.UsageFigures{}, ""
	return append(evs, m.Turns.Abort(stopReason, msg)...)
}

// flush makes the authoritative copies of the text and thought that
// streamed without an item/completed (an interrupted turn's).
func (m *Mapper) flush(turn int) []event.Event {
	var evs []event.Event
	if m.thought.Len() > 0 {
		evs = append(evs, event.NewText(event.Thought, turn, false, m.thought.String()))
	}
	if m.text.Len() > 0 {
		evs = append(evs, event.NewText(event.AssistantText, turn, false, m.text.String()))
	}
	m.text.Reset()
	m.thought.Reset()
	return evs
}

// endCalls ends the tool calls still open with status: Codex reports no
// completion of a command it interrupted.
func (m *Mapper) endCalls(status apitype.ToolStatus) []event.Event {
	var evs []event.Event
	for id, c := range m.calls {
		if !c.ended {
			evs = append(evs, toolResult(c.turn, id, status, ""))
		}
		delete(m.calls, id)
	}
	return evs
}

// Call returns the tool call of item id as a permission request shows it
// (status pending) and the preset's name of its tool; false when the item
// is not a tool call kaimon saw start.
func (m *Mapper) Call(id string) (event.ToolCall, string, bool) {
	c, ok := m.calls[id]
	if !ok {
		return event.ToolCall{}, "", false
	}
	tc := c.call
	tc.Status = apitype.ToolPending
	return tc, c.tool, true
}

// started maps item/started: a tool call's tool_use.
func (m *Mapper) started(turn int, item gjson.Result) []event.Event {
	c := toolCallOf(item)
	if c == nil {
		return nil
	}
	c.turn = turn
	m.calls[c.call.ToolCallID] = c
	return []event.Event{event.New(event.ToolUse, turn, event.ToolUseData{Call: c.call})}
}

// completed maps item/completed: the whole text of a message or of
// reasoning, or a tool call's result.
func (m *Mapper) completed(turn int, item gjson.Result) []event.Event {
	switch item.Get("type").String() {
	case "agentMessage":
		m.text.Reset()
		if t := item.Get("text").String(); t != "" {
			return []event.Event{event.NewText(event.AssistantText, turn, false, t)}
		}
		return nil
	case "reasoning":
		m.thought.Reset()
		if t := joinStrings(item.Get("summary")); t != "" {
			return []event.Event{event.NewText(event.Thought, turn, false, t)}
		}
		if t := joinStrings(item.Get("content")); t != "" {
			return []event.Event{event.NewText(event.Thought, turn, false, t)}
		}
		return nil
	case "plan":
		// A plan item (plan mode's proposal) is the agent's text.
		if t := item.Get("text").String(); t != "" {
			return []event.Event{event.NewText(event.AssistantText, turn, false, t)}
		}
		return nil
	}
	id := item.Get("id").String()
	var evs []event.Event
	c, ok := m.calls[id]
	if !ok {
		// Completed without a start kaimon saw: announce it now.
		evs = m.started(turn, item)
		if c, ok = m.calls[id]; !ok {
			return nil
		}
	}
	c.ended = true
	delete(m.calls, id)
	status, out := outcome(item)
	return append(evs, toolResult(c.turn, id, status, out))
}

// toolCallOf is the tool call an item is, nil for an item that is none.
func toolCallOf(item gjson.Result) *call {
	id := item.Get("id").String()
	tc := event.ToolCall{ToolCallID: id, Status: apitype.ToolInProgress, Content: []any{}, Locations: []any{}}
	c := &call{}
	switch item.Get("type").String() {
	case "commandExecution":
		cmd := item.Get("command").String()
		title := cmd
		if a := item.Get("commandActions"); len(a.Array()) == 1 && a.Get("0.command").String() != "" {
			title = a.Get("0.command").String() // without the shell's wrapping
		}
		tc.Title, tc.Kind = title, "execute"
		tc.RawInput = rawObject(map[string]any{"command": cmd, "cwd": item.Get("cwd").String()})
		c.tool = "Bash"
	case "fileChange":
		var paths []string
		for _, ch := range item.Get("changes").Array() {
			p := ch.Get("path").String()
			paths = append(paths, p)
			tc.Locations = append(tc.Locations, map[string]any{"path": p})
		}
		tc.Title, tc.Kind = "edit "+strings.Join(baseNames(paths), ", "), "edit"
		tc.RawInput = rawObject(map[string]any{"changes": json.RawMessage(orEmptyList(item.Get("changes").Raw))})
		c.tool = "Edit"
	case "mcpToolCall":
		server, tool := item.Get("server").String(), item.Get("tool").String()
		tc.Title, tc.Kind = server+"."+tool, "other"
		tc.RawInput = json.RawMessage(orEmptyObject(item.Get("arguments").Raw))
		c.tool = "mcp__" + server + "__" + tool
	case "webSearch":
		tc.Title, tc.Kind = "web search "+item.Get("query").String(), "fetch"
		tc.RawInput = rawObject(map[string]any{"query": item.Get("query").String()})
		c.tool = "WebSearch"
	default:
		return nil
	}
	c.call = tc
	return c
}

// outcome is a finished tool item's status and output.
func outcome(item gjson.Result) (apitype.ToolStatus, string) {
	status := apitype.ToolCompleted
	switch item.Get("status").String() {
	case "failed", "declined":
		status = apitype.ToolFailed
	}
	switch item.Get("type").String() {
	case "commandExecution":
		out := item.Get("aggregatedOutput").String()
		if code := item.Get("exitCode"); code.Exists() && code.Type != gjson.Null && code.Int() != 0 {
			status = apitype.ToolFailed
		}
		if item.Get("status").String() == "declined" && out == "" {
			out = "declined"
		}
		return status, out
	case "fileChange":
		var diffs []string
		for _, ch := range item.Get("changes").Array() {
			diffs = append(diffs, ch.Get("path").String()+"\n"+ch.Get("diff").String())
		}
		return status, strings.Join(diffs, "\n")
	case "mcpToolCall":
		if e := item.Get("error.message").String(); e != "" {
			return apitype.ToolFailed, e
		}
		var texts []string
		for _, c := range item.Get("result.content").Array() {
			if t := c.Get("text").String(); t != "" {
				texts = append(texts, t)
			}
		}
		return status, strings.Join(texts, "\n")
	}
	return status, ""
}

func toolResult(turn int, id string, status apitype.ToolStatus, out string) event.Event {
	content := []any{}
	if out != "" {
		content = append(content, map[string]any{"type": "content", "content": event.Text{Type: "text", Text: out}})
	}
	return event.New(event.ToolResult, turn, event.ToolResultData{Update: event.ToolResultUpdate{ToolCallID: id, Status: status, Content: content}})
}

// figures are app-server's token figures in kaimon's: OpenAI's input
// counts the cached part, which kaimon counts apart (as the claude CLI
// does), and its output counts the reasoning, which is kept apart too.
func figures(v gjson.Result) event.UsageFigures {
	cached := v.Get("cachedInputTokens").Int()
	return event.UsageFigures{
		InputTokens:         v.Get("inputTokens").Int() - cached,
		OutputTokens:        v.Get("outputTokens").Int(),
		CacheReadTokens:     cached,
		CacheCreationTokens: v.Get("cacheWriteInputTokens").Int(),
		ThoughtTokens:       v.Get("reasoningOutputTokens").Int(),
	}
}

// planStatus is a plan step's status in ACP's words.
func planStatus(s string) string {
	switch s {
	case "inProgress", "in_progress":
		return "in_progress"
	case "completed":
		return "completed"
	}
	return "pending"
}

func joinStrings(v gjson.Result) string {
	var out []string
	for _, s := range v.Array() {
		if t := s.String(); t != "" {
			out = append(out, t)
		}
	}
	return strings.Join(out, "\n\n")
}

func baseNames(paths []string) []string {
	out := make([]string, len(paths))
	for i, p := range paths {
		out[i] = filepath.Base(p)
	}
	return out
}

func rawObject(v map[string]any) json.RawMessage {
	b, _ := event.Marshal(v)
	return b
}

func orEmptyList(raw string) string {
	if raw == "" || raw == "null" {
		return "[]"
	}
	return raw
}

func orEmptyObject(raw string) string {
	if raw == "" || raw == "null" {
		return "{}"
	}
	return raw
}
