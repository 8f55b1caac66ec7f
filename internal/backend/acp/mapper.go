package acp

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"

	sdk "github.com/coder/acp-go-sdk"

	"github.com/kaimon/kaimon/internal/apitype"
	"github.com/kaimon/kaimon/internal/backend"
	"github.com/kaimon/kaimon/internal/event"
	"github.com/kaimon/kaimon/internal/policy"
)

// Mapper translates an ACP agent's session/update notifications and prompt
// responses into kaimon events. It is pure (no I/O), so that it can be
// tested on recorded traffic, and not safe for concurrent use.
//
// Turns: the mapper keeps a FIFO of the turns sent and not yet ended; the
// head is the one the agent works on, and every event carries its number.
// Only the head is ever sent to the agent (session/prompt): ACP updates
// carry no turn id, so with two prompts in flight kaimon could not tell
// whose an update is. A prompt response ends the head; the next queued turn
// then opens (its user_text and turn_started), and Next says it is to be
// sent.
//
// Blocks: agent_message_chunk and agent_thought_chunk stream as
// assistant_text / thought with delta true; the authoritative delta:false
// copy is synthesized when the block ends: at a chunk of the other kind, a
// new messageId, any other output update (a tool call, a plan, usage), or
// the turn's end.
//
// Tool calls are tracked by toolCallId: the first sight of a call (a
// tool_call, a tool_call_update for a call never announced, or a permission
// request) emits the announce tool_use; a tool_use with the complete
// rawInput follows when the input arrives (opencode and claude-agent-acp
// send it in a later update); a completed or failed status emits
// tool_result, once.
type Mapper struct {
	backend.Turns

	open    event.Kind // assistant_text or thought; "" when no block is open
	openMsg string     // the open block's messageId
	text    strings.Builder
	calls   map[string]*toolCall
	// metaUsage sums the turn's per-request usage that an agent reports
	// in _meta.usage of a message chunk (qwen-code, whose prompt response
	// carries none); metaUsed says some came.
	metaUsage event.UsageFigures
	metaUsed  bool

	// CumulativeUsage and TitlesDescribe are the agent's (see Agent).
	CumulativeUsage bool
	TitlesDescribe  bool
	Notice          *regexp.Regexp
	total           event.UsageFigures // the last cumulative usage seen
	// usage: what the agent has reported of usage (UsageNote).
	ended, counted bool
	context        *event.ContextWindow
}

// UsageNote says, once a turn has ended, when the agent reports no
// per-turn token counts (none of its prompt responses carried usage), so
// that status does not show zeros as if counted; with the running context
// size when the agent sends that instead. "" when usage is counted.
func (m *Mapper) UsageNote() string {
	if !m.ended || m.counted {
		return ""
	}
	note := "usage not reported by this agent"
	if c := m.context; c != nil {
		note += fmt.Sprintf("; context size only: %d of %d tokens", c.Used, c.Size)
	}
	return note
}

// modeNotice is gemini-cli's notice of a session mode change, which it
// sends as an agent message chunk (observed with 0.61.0).
var modeNotice = regexp.MustCompile(`^\[MODE_UPDATE\] \w+$`)

// Turn is a user turn: its number and text.
type Turn = backend.Turn

type toolCall struct {
	call   event.ToolCall
	name   string // the agent's own tool name
	input  string // the rawInput last emitted, "" if none
	ended  bool
	turnOf int
}

// NewMapper returns a Mapper with no turn in flight.
func NewMapper() *Mapper {
	return &Mapper{calls: map[string]*toolCall{}}
}

// Output is what one notification yields besides events.
type Output struct {
	Events []event.Event
	// Model is the agent's current model when the update said so
	// (config_option_update of the model option).
	Model string
}

// Update maps one session/update notification.
func (m *Mapper) Update(n sdk.SessionNotification) Output {
	var out Output
	u := n.Update
	turn := m.Current()
	switch {
	case u.AgentMessageChunk != nil:
		if m.chunkUsage(u.AgentMessageChunk.Meta) && u.AgentMessageChunk.Content.Text != nil && u.AgentMessageChunk.Content.Text.Text == "" {
			// qwen-code's empty chunk that carries a model request's
			// usage: no text, so no block opens or ends.
			break
		}
		out.Events = m.chunk(event.AssistantText, u.AgentMessageChunk.Content, u.AgentMessageChunk.MessageId)
	case u.AgentThoughtChunk != nil:
		out.Events = m.chunk(event.Thought, u.AgentThoughtChunk.Content, u.AgentThoughtChunk.MessageId)
	case u.ToolCall != nil:
		tc := u.ToolCall
		out.Events = m.closeBlock()
		out.Events = append(out.Events, m.toolUpdate(sdk.ToolCallUpdate{
			Meta: tc.Meta, Content: tc.Content, Kind: &tc.Kind, Locations: tc.Locations, RawInput: tc.RawInput,
			RawOutput: tc.RawOutput, Status: &tc.Status, Title: &tc.Title, ToolCallId: tc.ToolCallId,
		})...)
	case u.ToolCallUpdate != nil:
		tc := u.ToolCallUpdate
		out.Events = m.closeBlock()
		out.Events = append(out.Events, m.toolUpdate(sdk.ToolCallUpdate{
			Meta: tc.Meta, Content: tc.Content, Kind: tc.Kind, Locations: tc.Locations, RawInput: tc.RawInput,
			RawOutput: tc.RawOutput, Status: tc.Status, Title: tc.Title, ToolCallId: tc.ToolCallId,
		})...)
	case u.Plan != nil:
		out.Events = m.closeBlock()
		entries := u.Plan.Entries
		if entries == nil {
			entries = []sdk.PlanEntry{}
		}
		out.Events = append(out.Events, event.New(event.Plan, turn, map[string]any{"entries": entries}))
	case u.UsageUpdate != nil:
		// Context size and a cumulative cost: a running figure, never
		// added to the turn's usage (which comes with the prompt's
		// response). costUsd stays 0.0.
		out.Events = m.closeBlock()
		m.context = &event.ContextWindow{Used: u.UsageUpdate.Used, Size: u.UsageUpdate.Size}
		out.Events = append(out.Events, event.New(event.Usage, turn, event.UsageContextData{
			Context: event.ContextWindow{Used: u.UsageUpdate.Used, Size: u.UsageUpdate.Size},
		}))
	case u.ConfigOptionUpdate != nil:
		out.Model = modelOption(u.ConfigOptionUpdate.ConfigOptions)
	}
	// user_message_chunk (the agent's echo: kaimon emits user_text
	// itself), available_commands_update, current_mode_update and
	// session_info_update carry nothing for the event stream.
	return out
}

// chunkUsage adds a chunk's _meta.usage (ACP's usage fields: one model
// request's figures, not a running total) to the turn's, and says whether
// there was one.
func (m *Mapper) chunkUsage(meta map[string]any) bool {
	raw, ok := meta["usage"].(map[string]any)
	if !ok || m.InFlight() == 0 {
		return false
	}
	var u sdk.Usage
	if sameJSON(raw, &u) != nil {
		return false
	}
	f := usageFigures(&u)
	m.metaUsage.InputTokens += f.InputTokens
	m.metaUsage.OutputTokens += f.OutputTokens
	m.metaUsage.CacheReadTokens += f.CacheReadTokens
	m.metaUsage.CacheCreationTokens += f.CacheCreationTokens
	m.metaUsed = true
	return true
}

// chunk maps a text or thought chunk.
func (m *Mapper) chunk(kind event.Kind, c sdk.ContentBlock, msgID *string) []event.Event {
	var evs []event.Event
	id := ""
	if msgID != nil {
		id = *msgID
	}
	if m.InFlight() == 0 {
		// Outside any turn: no turn's reply (gemini-cli reports a mode
		// change set at spawn as a message chunk).
		return nil
	}
	if c.Text != nil && m.Notice != nil && kind == event.AssistantText && m.Notice.MatchString(c.Text.Text) {
		return nil // the agent's notice (Agent.Notice)
	}
	if c.Text != nil && modeNotice.MatchString(c.Text.Text) {
		// gemini-cli's "[MODE_UPDATE] autoEdit", late for the above.
		return nil
	}
	if m.open != kind || (id != "" && m.openMsg != "" && id != m.openMsg) {
		evs = m.closeBlock()
		m.open, m.openMsg = kind, id
	} else if m.openMsg == "" {
		m.openMsg = id
	}
	text := ""
	switch {
	case c.Text != nil:
		text = c.Text.Text
	case c.ResourceLink != nil:
		text = c.ResourceLink.Uri
	}
	if text == "" {
		return evs
	}
	m.text.WriteString(text)
	return append(evs, event.NewText(kind, m.Current(), true, text))
}

// closeBlock ends the open text or thought block with its authoritative
// copy.
func (m *Mapper) closeBlock() []event.Event {
	if m.open == "" {
		return nil
	}
	kind, text := m.open, m.text.String()
	m.open, m.openMsg = "", ""
	m.text.Reset()
	if text == "" {
		return nil
	}
	return []event.Event{event.NewText(kind, m.Current(), false, text)}
}

// toolUpdate folds a tool_call or tool_call_update into the
// call's state and emits what is new: the announce, the authoritative
// tool_use with the complete input, the result.
func (m *Mapper) toolUpdate(u sdk.ToolCallUpdate) []event.Event {
	id := string(u.ToolCallId)
	c, known := m.calls[id]
	if !known {
		c = &toolCall{call: event.ToolCall{ToolCallID: id, Content: []any{}, Locations: []any{}, Status: apitype.ToolPending}, turnOf: m.Current()}
		m.calls[id] = c
	}
	if name := metaToolName(u.Meta); name != "" {
		c.name = name
	}
	if u.Title != nil && *u.Title != "" {
		if c.name == "" && !m.TitlesDescribe {
			c.name = toolNameOf(id, *u.Title)
		}
		c.call.Title = *u.Title
	}
	if u.Kind != nil && *u.Kind != "" {
		c.call.Kind = string(*u.Kind)
	}
	if c.call.Kind == "" {
		c.call.Kind = "other"
	}
	if u.Status != nil && *u.Status != "" {
		c.call.Status = apitype.ToolStatus(*u.Status)
	}
	if len(u.Locations) > 0 {
		c.call.Locations = jsonList(u.Locations)
	}
	var evs []event.Event
	input := rawJSON(u.RawInput)
	if !known {
		// The announce: no input yet unless the agent gave all of it.
		ann := c.call
		if input != "" {
			ann.RawInput = json.RawMessage(input)
			c.input = input
		}
		evs = append(evs, event.New(event.ToolUse, c.turnOf, event.ToolUseData{Call: ann}))
	} else if input != "" && input != c.input {
		c.input = input
		full := c.call
		full.RawInput = json.RawMessage(input)
		evs = append(evs, event.New(event.ToolUse, c.turnOf, event.ToolUseData{Call: full}))
	}
	if c.input != "" {
		c.call.RawInput = json.RawMessage(c.input)
	}
	if s := c.call.Status; s.Ended() && !c.ended {
		c.ended = true
		content := jsonList(u.Content)
		if len(content) == 0 {
			if out := outputText(u.RawOutput); out != "" {
				content = []any{map[string]any{"type": "content", "content": event.Text{Type: "text", Text: out}}}
			}
		}
		evs = append(evs, event.New(event.ToolResult, c.turnOf, event.ToolResultData{Update: event.ToolResultUpdate{
			ToolCallID: id, Status: s, Content: content,
		}}))
	}
	return evs
}

// Permission maps the tool call of a session/request_permission: a call
// kaimon has not seen yet (gemini-cli announces a call that needs approval
// only here) gets its tool_use now, and so does a call announced without
// its input when the question carries it (qwen-code). It returns the call as the permission
// event shows it (status pending) and the preset's name of the tool.
func (m *Mapper) Permission(tc sdk.ToolCallUpdate) ([]event.Event, event.ToolCall, string) {
	id := string(tc.ToolCallId)
	var evs []event.Event
	c, known := m.calls[id]
	if !known {
		evs = m.closeBlock()
		pending := sdk.ToolCallStatus(apitype.ToolPending)
		upd := tc
		if upd.Status == nil {
			upd.Status = &pending
		}
		evs = append(evs, m.toolUpdate(upd)...)
		c = m.calls[id]
	} else if in := rawJSON(tc.RawInput); in != "" && c.input == "" {
		// Announced without input, which only the question carries
		// (qwen-code in mode default): the authoritative tool_use now.
		evs = append(m.closeBlock(), m.toolUpdate(sdk.ToolCallUpdate{ToolCallId: tc.ToolCallId, RawInput: tc.RawInput})...)
	}
	call := c.call
	if t := tc.Title; t != nil && *t != "" {
		call.Title = *t
	}
	if k := tc.Kind; k != nil && *k != "" {
		call.Kind = string(*k)
	}
	if in := rawJSON(tc.RawInput); in != "" {
		call.RawInput = json.RawMessage(in)
	}
	if len(tc.Content) > 0 {
		call.Content = jsonList(tc.Content)
	}
	if len(tc.Locations) > 0 {
		call.Locations = jsonList(tc.Locations)
	}
	call.Status = apitype.ToolPending
	return evs, call, policy.NativeToolName(c.name, c.call.Kind)
}

// Question maps a permission request that asks about no tool call (one of
// the agent's Questions): the call to show with it, which is not tracked
// as a tool call (no tool_use, no tool_result), and the events that come
// before it (the open block closed).
func (m *Mapper) Question(tc sdk.ToolCallUpdate) ([]event.Event, event.ToolCall) {
	call := event.ToolCall{ToolCallID: string(tc.ToolCallId), Kind: "other", Status: apitype.ToolPending, Content: []any{}, Locations: []any{}}
	if t := tc.Title; t != nil {
		call.Title = *t
	}
	if k := tc.Kind; k != nil && *k != "" {
		call.Kind = string(*k)
	}
	if in := rawJSON(tc.RawInput); in != "" {
		call.RawInput = json.RawMessage(in)
	}
	return m.closeBlock(), call
}

// Knows says whether the mapper has seen tool call id.
func (m *Mapper) Knows(id string) bool { return m.calls[id] != nil }

// End ends the active turn with the agent's prompt response: the block in
// progress is closed, a usage event carries the turn's usage (from the
// response only: never cumulative figures), then the result. If a turn was
// queued behind it, it opens, and next says it is to be sent.
func (m *Mapper) End(resp sdk.PromptResponse) (evs []event.Event, next *Turn) {
	turn := m.Current()
	evs = m.closeBlock()
	usage := promptUsage(resp)
	if resp.Usage == nil && m.metaUsed {
		usage = m.metaUsage
	}
	m.ended = true
	m.counted = m.counted || resp.Usage != nil || m.metaUsed
	if m.CumulativeUsage {
		usage = m.sinceLast(usage)
	}
	m.metaUsage, m.metaUsed = event.UsageFigures{}, false
	evs = append(evs, event.New(event.Usage, turn, event.UsageData{Usage: usage}))
	res := event.ResultData{Usage: usage, StopReason: stopReason(string(resp.StopReason))}
	evs = append(evs, event.New(event.Result, turn, res))
	_, more, next := m.Pop()
	return append(evs, more...), next
}

// sinceLast turns a running total of usage into the part added since the
// previous one. A response without usage (a cancelled turn) adds nothing
// and keeps the total; a total below the last (another process's count)
// is taken as the turn's whole. What a cancelled turn's requests used is
// counted in the next turn that reports.
func (m *Mapper) sinceLast(cur event.UsageFigures) event.UsageFigures {
	if cur == (event.UsageFigures{}) {
		return cur
	}
	last := m.total
	m.total = cur
	if cur.InputTokens < last.InputTokens || cur.OutputTokens < last.OutputTokens ||
		cur.CacheReadTokens < last.CacheReadTokens || cur.CacheCreationTokens < last.CacheCreationTokens {
		return cur
	}
	cur.InputTokens -= last.InputTokens
	cur.OutputTokens -= last.OutputTokens
	cur.CacheReadTokens -= last.CacheReadTokens
	cur.CacheCreationTokens -= last.CacheCreationTokens
	return cur
}

// Fail ends the active turn with a failed prompt request (a JSON-RPC error
// from the agent): an error event, then a result with stopReason error.
func (m *Mapper) Fail(msg string, data any) (evs []event.Event, next *Turn) {
	turn := m.Current()
	evs = m.closeBlock()
	stop := apitype.StopError
	if m.Interrupted(turn) {
		stop = apitype.StopCancelled
	} else {
		evs = append(evs, event.NewError(turn, msg, data))
	}
	evs = append(evs, event.New(event.Result, turn, event.ResultData{StopReason: stop, Error: msg}))
	m.metaUsage, m.metaUsed = event.UsageFigures{}, false
	_, more, next := m.Pop()
	return append(evs, more...), next
}

// Abort ends every turn in flight with stopReason (the process is gone):
// the block in progress is closed first.
func (m *Mapper) Abort(stopReason apitype.StopReason, msg string) []event.Event {
	m.metaUsage, m.metaUsed = event.UsageFigures{}, false
	return append(m.closeBlock(), m.Turns.Abort(stopReason, msg)...)
}

// promptUsage is the turn's usage from a prompt response: the ACP usage
// field (opencode, claude-agent-acp), else gemini-cli's
// _meta.quota.token_count. costUsd stays 0.0. (qwen-code reports usage in
// its message chunks instead: see chunkUsage.)
func promptUsage(resp sdk.PromptResponse) event.UsageFigures {
	var u event.UsageFigures
	if r := resp.Usage; r != nil {
		return usageFigures(r)
	}
	if q, ok := resp.Meta["quota"].(map[string]any); ok {
		if tc, ok := q["token_count"].(map[string]any); ok {
			u.InputTokens = num(tc["input_tokens"])
			u.OutputTokens = num(tc["output_tokens"])
		}
	}
	return u
}

// usageFigures is ACP's usage in kaimon's figures: thought tokens count
// as output, and are kept apart too.
func usageFigures(r *sdk.Usage) event.UsageFigures {
	var u event.UsageFigures
	u.InputTokens, u.OutputTokens = int64(r.InputTokens), int64(r.OutputTokens)
	if r.ThoughtTokens != nil {
		u.OutputTokens += int64(*r.ThoughtTokens)
		u.ThoughtTokens = int64(*r.ThoughtTokens)
	}
	if r.CachedReadTokens != nil {
		u.CacheReadTokens = int64(*r.CachedReadTokens)
	}
	if r.CachedWriteTokens != nil {
		u.CacheCreationTokens = int64(*r.CachedWriteTokens)
	}
	return u
}

func num(v any) int64 {
	switch x := v.(type) {
	case float64:
		return int64(x)
	case json.Number:
		n, _ := x.Int64()
		return n
	}
	return 0
}

// stopReason maps ACP's stop reasons to kaimon's.
func stopReason(s string) apitype.StopReason {
	switch s {
	case "max_tokens", "max_turn_requests":
		return apitype.StopMaxTokens
	case "refusal":
		return apitype.StopRefusal
	case "cancelled":
		return apitype.StopCancelled
	default:
		return apitype.StopEndTurn
	}
}

// metaToolName is the agent's own name of a tool from a call's _meta:
// claude-agent-acp's _meta.claudeCode.toolName, qwen-code's _meta.toolName
// (its titles are "Shell", "WriteFile": not names presets know).
func metaToolName(meta map[string]any) string {
	cc, _ := meta["claudeCode"].(map[string]any)
	if name, _ := cc["toolName"].(string); name != "" {
		return name
	}
	name, _ := meta["toolName"].(string)
	return name
}

// toolNameOf guesses the agent's own name of a tool from the first title it
// gave: gemini-cli's call ids are NAME__NAME_<n>; opencode's first title
// is the tool's name.
func toolNameOf(id, title string) string {
	if name, _, ok := strings.Cut(id, "__"); ok && name != "" {
		return name
	}
	return title
}

// modelOption is the current value of the model config option, "" if none.
func modelOption(opts []sdk.SessionConfigOption) string {
	for _, o := range opts {
		if o.Select != nil && (o.Select.Id == "model" || (o.Select.Category != nil && *o.Select.Category == "model")) {
			return string(o.Select.CurrentValue)
		}
	}
	return ""
}

// rawJSON is v (a decoded rawInput) as compact JSON; "" for nothing or an
// empty object (the announce of opencode and claude-agent-acp).
func rawJSON(v any) string {
	if v == nil {
		return ""
	}
	b, err := event.Marshal(v)
	if err != nil {
		return ""
	}
	if s := string(bytes.TrimSpace(b)); s != "{}" && s != "null" {
		return s
	}
	return ""
}

// jsonList re-encodes SDK values as raw JSON items of an event list.
func jsonList[T any](in []T) []any {
	out := make([]any, 0, len(in))
	for _, v := range in {
		b, err := event.Marshal(v)
		if err == nil {
			out = append(out, json.RawMessage(b))
		}
	}
	return out
}

// outputText renders a rawOutput for a result without content: a string as
// is, {output|error: string} by that string, anything else as JSON.
func outputText(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		return x
	case map[string]any:
		for _, k := range []string{"output", "error"} {
			if s, ok := x[k].(string); ok {
				return s
			}
		}
	}
	b, _ := event.Marshal(v)
	return string(b)
}
