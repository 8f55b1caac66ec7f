package claude

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"unicode/utf8"
	"unsafe"

	"github.com/tidwall/gjson"

	"github.com/kaimon/kaimon/internal/apitype"
	"github.com/kaimon/kaimon/internal/backend"
	"github.com/kaimon/kaimon/internal/event"
)

// Mapper translates the claude CLI's stream-json stdout into kaimon events.
// It is pure: it is fed one line at a time and does no I/O, so that it can be
// tested on recorded traffic. It is not safe for concurrent use.
//
// Turn attribution: the mapper keeps a FIFO of the turns sent and not yet
// ended. Every event carries the turn at the head of the FIFO (the active
// one); a result pops it, and the next queued turn then becomes active: its
// user_text and turn_started are emitted right after the result, and Output
// says that it is now to be written to the CLI.
//
// Only the active turn is ever on the CLI's stdin. The CLI does queue a
// message sent while a turn runs, but it merges every message queued by the
// end of that turn into one next turn with one result (observed with
// 2.1.197), which would leave turns that never end; holding queued turns
// back until the previous result keeps one result per turn.
type Mapper struct {
	// SessionID and Model are the CLI's, from its latest system/init.
	SessionID string
	Model     string
	// LastMessage is the uuid of the latest message of the agent's own
	// conversation (an assistant or user line, not a subagent's) the CLI
	// printed. Its transcript holds the same uuid once the CLI has
	// written that message there, which it does a moment after printing
	// it (Backend.Settle).
	LastMessage string

	backend.Turns
	// blocks maps a streamed content block's index to the tool call it
	// carries, for input_json_delta; reset at each message_start.
	blocks map[int64]string
	// evs backs Output.Events of a line that yields one event.
	evs []event.Event
}

// Output is everything one stdout line yields.
type Output struct {
	Events []event.Event
	// Control is set for a control_response: the answer to a
	// control_request kaimon sent (initialize, interrupt, set_model).
	Control *ControlResponse
	// Request is set for a control_request from the CLI: can_use_tool
	// (under --permission-prompt-tool stdio), which the backend turns into
	// a permission request, or another subtype, which it answers with an
	// error so that the CLI does not wait forever.
	Request *ControlRequest
	// Cancel is the request_id of a control_cancel_request: the CLI no
	// longer waits for the answer to that control request (its turn was
	// interrupted).
	Cancel string
	// Init is set for system/init; the mapper's SessionID and Model are
	// then up to date.
	Init bool
	// Ended is the number of the turn this line's result ended, 0 if none.
	Ended int
	// Next is the queued turn this line's result made active: the backend
	// must now write it to the CLI.
	Next *Turn
}

// Turn is a user turn: its number and text.
type Turn = backend.Turn

// ControlResponse is the CLI's answer to one of kaimon's control requests.
type ControlResponse struct {
	RequestID string
	Success   bool
	Error     string          // when !Success
	Payload   json.RawMessage // response.response, when present
}

// ControlRequest is a control request the CLI sent to kaimon.
type ControlRequest struct {
	RequestID string
	Subtype   string
	Request   json.RawMessage
}

// NewMapper returns a Mapper with no turn in flight.
func NewMapper() *Mapper {
	return &Mapper{blocks: map[int64]string{}, evs: make([]event.Event, 0, 1)}
}

// Line maps one stdout line to events; Map also returns side outputs.
func (m *Mapper) Line(line []byte) []event.Event { return slices.Clone(m.Map(line).Events) }

// Map maps one stdout line (with or without its newline). Output.Events
// is the mapper's own buffer, valid until the next call: the caller hands
// the events on (their Data is their own) and drops the slice.
//
// The line is read in place: validated in one pass that picks the fields
// of the hot path (scanLine), then the rest a kind needs read from it
// without a copy; what outlives the call is copied (strings.Clone,
// encoded event data).
func (m *Mapper) Map(line []byte) Output {
	var out Output
	line = bytes.TrimSpace(line)
	if len(line) == 0 {
		return out
	}
	// No copy: what is read from line points into it, and the caller owns
	// it only for this call. Nothing taken from it is kept past it uncopied.
	raw := unsafe.String(unsafe.SliceData(line), len(line))
	var f picked
	if !scanLine(raw, lineFields, f[:]) || line[0] != '{' {
		msg := "not a JSON object"
		var v any
		if err := json.Unmarshal(line, &v); err != nil {
			msg = err.Error()
		}
		out.Events = append(m.evs[:0], event.NewError(m.Current(), "malformed line from claude: "+msg,
			map[string]any{"line": head(string(line), 200)}))
		return out
	}
	v := gjson.Parse(raw)
	switch str(f[fType]) {
	case "system":
		if v.Get("subtype").String() == "init" {
			m.SessionID = strings.Clone(v.Get("session_id").String())
			if model := v.Get("model").String(); model != "" {
				m.Model = strings.Clone(model)
			}
			out.Init = true
		}
	case "stream_event":
		if subagent(f[fParent]) {
			break
		}
		if ev, ok := m.streamEvent(&f); ok {
			out.Events = append(m.evs[:0], ev)
		}
	case "assistant":
		if subagent(f[fParent]) {
			break
		}
		m.noteMessage(v)
		out.Events = m.assistant(v)
	case "user":
		if subagent(f[fParent]) {
			break
		}
		m.noteMessage(v)
		out.Events = m.user(v)
	case "result":
		out.Events, out.Ended, out.Next = m.result(v)
	case "control_response":
		r := v.Get("response")
		out.Control = &ControlResponse{
			RequestID: strings.Clone(r.Get("request_id").String()),
			Success:   r.Get("subtype").String() == "success",
			Error:     strings.Clone(r.Get("error").String()),
		}
		if p := r.Get("response"); p.Exists() {
			out.Control.Payload = json.RawMessage(p.Raw)
		}
	case "control_request":
		req := v.Get("request")
		out.Request = &ControlRequest{
			RequestID: strings.Clone(v.Get("request_id").String()),
			Subtype:   strings.Clone(req.Get("subtype").String()),
			Request:   json.RawMessage(req.Raw),
		}
		if out.Request.Subtype != "can_use_tool" {
			out.Events = append(out.Events, event.NewError(m.Current(),
				"claude sent a control request kaimon does not handle: "+out.Request.Subtype,
				map[string]any{"request_id": out.Request.RequestID, "subtype": out.Request.Subtype}))
		}
	case "control_cancel_request":
		out.Cancel = strings.Clone(v.Get("request_id").String())
	}
	// Anything else (rate_limit_event, keep_alive, control_cancel_request,
	// types of later CLI versions) carries nothing for the event stream.
	return out
}

// subagent says whether a line whose parent_tool_use_id is p belongs to a
// subagent's conversation
// (the CLI's Task/Agent tools), whose text is not this agent's reply. The
// subagent's call and result appear at the top level as a tool_use and a
// tool_result.
func subagent(raw string) bool {
	return raw != "" && raw != "null" && str(raw) != ""
}

// lineFields are what scanLine picks from every line: what tells lines
// apart, and all a stream event (most of a turn's lines) needs.
var lineFields = []field{
	{key: "type", slot: fType},
	{key: "event", slot: fEvent, kids: []field{
		{key: "type", slot: fEventType},
		{key: "index", slot: fIndex},
		{key: "delta", slot: fDelta, kids: []field{
			{key: "type", slot: fDeltaType},
			{key: "text", slot: fText},
			{key: "thinking", slot: fThinking},
			{key: "partial_json", slot: fPartialJSON},
		}},
		{key: "content_block", slot: fContentBlock},
	}},
	{key: "parent_tool_use_id", slot: fParent},
}

// The slots of lineFields.
const (
	fType         = iota // type
	fEvent               // event
	fParent              // parent_tool_use_id
	fEventType           // event.type
	fIndex               // event.index
	fDelta               // event.delta
	fContentBlock        // event.content_block
	fDeltaType           // event.delta.type
	fText                // event.delta.text
	fThinking            // event.delta.thinking
	fPartialJSON         // event.delta.partial_json
	nFields
)

// picked is the raw text of lineFields' values in a line, "" when absent.
type picked [nFields]string

// streamEvent maps a streamed event (its fields picked from the line): at
// most one event, the hot path of a turn (a text delta).
func (m *Mapper) streamEvent(f *picked) (event.Event, bool) {
	turn := m.Current()
	switch str(f[fEventType]) {
	case "message_start":
		clear(m.blocks)
	case "content_block_start":
		cb := gjson.Parse(f[fContentBlock])
		if cb.Get("type").String() == "tool_use" {
			id := strings.Clone(cb.Get("id").String())
			if m.blocks == nil {
				m.blocks = map[int64]string{}
			}
			m.blocks[gjson.Parse(f[fIndex]).Int()] = id
			return event.New(event.ToolUse, turn, event.ToolUseData{Call: toolCall(id, cb.Get("name").String(), "")}), true
		}
	case "content_block_delta":
		switch str(f[fDeltaType]) {
		case "text_delta":
			if t := str(f[fText]); t != "" {
				return event.NewText(event.AssistantText, turn, true, t), true
			}
		case "thinking_delta":
			if t := str(f[fThinking]); t != "" {
				return event.NewText(event.Thought, turn, true, t), true
			}
		case "input_json_delta":
			id, ok := m.blocks[gjson.Parse(f[fIndex]).Int()]
			if p := str(f[fPartialJSON]); ok && p != "" {
				return event.NewToolInputDelta(turn, id, p), true
			}
		}
	}
	return event.Event{}, false
}

// noteMessage keeps the uuid of a message line as LastMessage.
func (m *Mapper) noteMessage(v gjson.Result) {
	if id := v.Get("uuid").String(); id != "" && id != m.LastMessage {
		m.LastMessage = strings.Clone(id)
	}
}

// assistant maps an assistant line. The CLI prints each content block of a
// message as its own line, so these are the authoritative copies of what
// the stream events delivered in pieces.
func (m *Mapper) assistant(v gjson.Result) []event.Event {
	if v.Get("error").String() != "" {
		// A synthetic message ("API Error: …") standing for a failed
		// request: the result that follows carries it as an error.
		return nil
	}
	turn := m.Current()
	var evs []event.Event
	v.Get("message.content").ForEach(func(_, b gjson.Result) bool {
		switch b.Get("type").String() {
		case "text":
			if t := b.Get("text").String(); t != "" {
				evs = append(evs, event.NewText(event.AssistantText, turn, false, t))
			}
		case "thinking":
			if t := b.Get("thinking").String(); t != "" {
				evs = append(evs, event.NewText(event.Thought, turn, false, t))
			}
		case "tool_use":
			name := b.Get("name").String()
			input := b.Get("input")
			raw := input.Raw
			if !input.Exists() {
				raw = "{}"
			}
			evs = append(evs, event.New(event.ToolUse, turn, event.ToolUseData{Call: toolCall(b.Get("id").String(), name, raw)}))
			if name == "TodoWrite" {
				evs = append(evs, planEvent(turn, input))
			}
		}
		return true
	})
	return evs
}

// user maps a user line: tool results. Plain text ("[Request interrupted by
// user]", the CLI's echo of a prompt) carries nothing: kaimon emits
// user_text itself, with the right turn.
func (m *Mapper) user(v gjson.Result) []event.Event {
	turn := m.Current()
	var evs []event.Event
	content := v.Get("message.content")
	if !content.IsArray() {
		return nil
	}
	content.ForEach(func(_, b gjson.Result) bool {
		if b.Get("type").String() != "tool_result" {
			return true
		}
		status := apitype.ToolCompleted
		if b.Get("is_error").Bool() {
			status = apitype.ToolFailed
		}
		evs = append(evs, event.New(event.ToolResult, turn, event.ToolResultData{Update: event.ToolResultUpdate{
			ToolCallID: b.Get("tool_use_id").String(),
			Status:     status,
			Content:    toolResultContent(b.Get("content")),
		}}))
		return true
	})
	return evs
}

// result ends the active turn: a usage event, then the result (preceded by
// an error event when the turn failed).
func (m *Mapper) result(v gjson.Result) ([]event.Event, int, *Turn) {
	turn := m.Current()
	usage := resultUsage(v)
	evs := []event.Event{event.New(event.Usage, turn, event.UsageData{Usage: usage})}

	subtype := v.Get("subtype").String()
	res := event.ResultData{Usage: usage}
	switch {
	case subtype == "error_during_execution" &&
		(strings.HasPrefix(v.Get("terminal_reason").String(), "aborted") || m.Interrupted(turn)):
		res.StopReason = apitype.StopCancelled
	case subtype == "success" && !v.Get("is_error").Bool():
		res.StopReason = stopReason(v.Get("stop_reason").String())
	default:
		msg := failureMessage(v)
		evs = append(evs, event.NewError(turn, msg, map[string]any{
			"subtype":          subtype,
			"api_error_status": v.Get("api_error_status").Value(),
		}))
		res.StopReason, res.Error = apitype.StopError, msg
	}
	evs = append(evs, event.New(event.Result, turn, res))

	ended, opened, next := m.Pop()
	return append(evs, opened...), ended, next
}

// resultUsage is a result's token usage. An interrupted turn's usage is
// all 0 (every CLI so far); since 2.1.328 its real tokens are in
// model_usage_since_last_result, by model, summed here. costUsd stays 0.0:
// total_cost_usd is cumulative and unreliable. output_tokens already
// counts usage.output_tokens_details.thinking_tokens (2.1.328), which are
// kept apart too.
func resultUsage(v gjson.Result) event.UsageFigures {
	u := v.Get("usage")
	usage := event.UsageFigures{
		InputTokens:         u.Get("input_tokens").Int(),
		OutputTokens:        u.Get("output_tokens").Int(),
		CacheReadTokens:     u.Get("cache_read_input_tokens").Int(),
		CacheCreationTokens: u.Get("cache_creation_input_tokens").Int(),
		ThoughtTokens:       u.Get("output_tokens_details.thinking_tokens").Int(),
	}
	if usage != (event.UsageFigures{}) {
		return usage
	}
	v.Get("model_usage_since_last_result").ForEach(func(_, m gjson.Result) bool {
		usage.ThoughtTokens += m.Get("thinkingTokens").Int()
		usage.InputTokens += m.Get("inputTokens").Int()
		usage.OutputTokens += m.Get("outputTokens").Int()
		usage.CacheReadTokens += m.Get("cacheReadInputTokens").Int()
		usage.CacheCreationTokens += m.Get("cacheCreationInputTokens").Int()
		return true
	})
	return usage
}

// stopReason maps the API's stop_reason of a successful turn to ACP's.
func stopReason(s string) apitype.StopReason {
	switch s {
	case "max_tokens", "model_context_window_exceeded":
		return apitype.StopMaxTokens
	case "refusal":
		return apitype.StopRefusal
	default: // end_turn, tool_use, stop_sequence, pause_turn, none
		return apitype.StopEndTurn
	}
}

// failureMessage says why a turn failed, from what the result carries.
func failureMessage(v gjson.Result) string {
	if s := strings.TrimSpace(v.Get("result").String()); s != "" {
		return s
	}
	var errs []string
	v.Get("errors").ForEach(func(_, e gjson.Result) bool {
		if s := strings.TrimSpace(e.String()); s != "" {
			errs = append(errs, s)
		}
		return true
	})
	msg := "claude turn failed: " + v.Get("subtype").String()
	if len(errs) > 0 {
		msg += ": " + strings.Join(errs, "; ")
	}
	return msg
}

// Location is an ACP tool call location.
type Location struct {
	Path string `json:"path"`
}

// ContentBlock is an ACP tool call content item: {type:"content", content}.
type ContentBlock struct {
	Type    string `json:"type"` // "content"
	Content any    `json:"content"`
}

// Image is an ACP image content block.
type Image struct {
	Type     string `json:"type"` // "image"
	MimeType string `json:"mimeType"`
	Data     string `json:"data"`
}

// toolCall builds the ACP tool call of tool_use. rawInput is "" for the
// announce at block start, which has no input yet.
func toolCall(id, name, rawInput string) event.ToolCall {
	c := event.ToolCall{
		ToolCallID: id,
		Title:      name,
		Kind:       ToolKind(name),
		Status:     apitype.ToolInProgress,
		Content:    []any{},
		Locations:  []any{},
	}
	if rawInput != "" {
		c.RawInput = json.RawMessage(rawInput)
		in := gjson.Parse(rawInput)
		for _, key := range []string{"file_path", "notebook_path", "path"} {
			if p := in.Get(key); p.Type == gjson.String && p.Str != "" {
				c.Locations = append(c.Locations, Location{Path: p.Str})
				break
			}
		}
	}
	return c
}

// ToolKind is the ACP tool kind of a claude tool, by name.
func ToolKind(name string) string {
	switch name {
	case "Read":
		return "read"
	case "Write", "Edit", "MultiEdit", "NotebookEdit":
		return "edit"
	case "Bash", "Monitor":
		return "execute"
	case "Glob", "Grep", "ToolSearch":
		return "search"
	case "ListAgents":
		return "read"
	case "WebFetch", "WebSearch":
		return "fetch"
	case "TodoWrite", "Think":
		return "think"
	default:
		return "other"
	}
}

// toolResultContent maps a tool_result's content (a string, or an array of
// text and image blocks) to ACP content items.
func toolResultContent(c gjson.Result) []any {
	out := []any{}
	text := func(s string) ContentBlock {
		return ContentBlock{Type: "content", Content: event.Text{Type: "text", Text: s}}
	}
	switch {
	case c.Type == gjson.String:
		if c.Str != "" {
			out = append(out, text(c.Str))
		}
	case c.IsArray():
		c.ForEach(func(_, b gjson.Result) bool {
			switch b.Get("type").String() {
			case "text":
				out = append(out, text(b.Get("text").String()))
			case "image":
				src := b.Get("source")
				if src.Get("type").String() == "base64" {
					out = append(out, ContentBlock{Type: "content", Content: Image{
						Type: "image", MimeType: src.Get("media_type").String(), Data: src.Get("data").String()}})
				}
			}
			return true
		})
	}
	return out
}

// planEvent turns TodoWrite's input into the ACP plan it stands for.
func planEvent(turn int, input gjson.Result) event.Event {
	type entry struct {
		Content  string `json:"content"`
		Priority string `json:"priority"`
		Status   string `json:"status"`
	}
	entries := []entry{}
	input.Get("todos").ForEach(func(_, t gjson.Result) bool {
		status := t.Get("status").String()
		if status == "" {
			status = "pending"
		}
		prio := t.Get("priority").String()
		if prio == "" {
			prio = "medium"
		}
		entries = append(entries, entry{Content: t.Get("content").String(), Priority: prio, Status: status})
		return true
	})
	return event.New(event.Plan, turn, map[string]any{"entries": entries})
}

// head returns s cut to at most n runes.
func head(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	i := 0
	for k := range s {
		if i == n {
			return s[:k]
		}
		i++
	}
	return s
}
