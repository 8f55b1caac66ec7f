// Package event defines kaimon's vendor-neutral event envelope: the
// {kind, turn, data} record every backend's native output is normalized into,
// modeled on the Agent Client Protocol's session/update schema.
//
// Backends build Events; the session manager stamps them into Envelopes
// (agent_id, seq, ts) and fans them out to the log and the bus.
package event

import (
	"bytes"
	"encoding/json"
	"time"
	"unsafe"

	"github.com/tidwall/gjson"

	"github.com/kaimon/kaimon/internal/apitype"
)

// Kind is the envelope's kind. The set is the spec's, closed.
type Kind string

const (
	AssistantText  Kind = "assistant_text"
	Thought        Kind = "thought"
	UserText       Kind = "user_text"
	ToolUse        Kind = "tool_use"
	ToolInputDelta Kind = "tool_input_delta"
	ToolResult     Kind = "tool_result"
	Plan           Kind = "plan"
	Usage          Kind = "usage"
	TurnStarted    Kind = "turn_started"
	Result         Kind = "result"
	Status         Kind = "status"
	Error          Kind = "error"
	Permission     Kind = "permission"
)

// Kinds lists every kind, in the spec's order.
var Kinds = []Kind{AssistantText, Thought, UserText, ToolUse, ToolInputDelta, ToolResult,
	Plan, Usage, TurnStarted, Result, Status, Error, Permission}

// Event is what a backend emits: a kind, the turn it belongs to, and the
// kind's data, already JSON-encoded so that it is marshalled once.
type Event struct {
	Kind Kind
	Turn int
	Data json.RawMessage
	// compact says Data was encoded by this package (New and the like):
	// valid, compact JSON that an encoder appends as it is. Data from
	// elsewhere (a log read back, a backend's literal) is checked.
	compact bool
}

// New builds an Event, encoding data. Data that cannot be encoded is a
// programming error in a backend; it becomes an error event so nothing is
// silently lost.
func New(kind Kind, turn int, data any) Event {
	b, err := Marshal(data)
	if err != nil {
		b, _ = Marshal(map[string]any{"message": "kaimon: cannot encode " + string(kind) + " data: " + err.Error(), "data": nil})
		kind = Error
	}
	return Event{Kind: kind, Turn: turn, Data: b, compact: true}
}

// Stamp makes the envelope of ev: ev with agent_id, seq and ts.
func (ev Event) Stamp(agentID string, seq uint64, ts time.Time) Envelope {
	return Envelope{Kind: ev.Kind, Turn: ev.Turn, Data: ev.Data, AgentID: agentID, Seq: seq, TS: ts, compact: ev.compact}
}

// Marshal encodes v as JSON without escaping <, > and &: tool output such as
// "<tool_use_error>" stays readable in logs and to jq, and is still valid
// JSON.
func Marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// Envelope is an Event as published: the spec's {kind, turn, data} plus the
// additive agent_id, seq (per agent, from 1, strictly increasing) and ts.
type Envelope struct {
	Kind    Kind            `json:"kind"`
	Turn    int             `json:"turn"`
	Data    json.RawMessage `json:"data"`
	AgentID string          `json:"agent_id"`
	Seq     uint64          `json:"seq"`
	TS      time.Time       `json:"ts"`

	compact bool // as Event's
}

// Record is one line of the on-disk event log: {ts, seq, kind, turn, data}.
type Record struct {
	TS   time.Time       `json:"ts"`
	Seq  uint64          `json:"seq"`
	Kind Kind            `json:"kind"`
	Turn int             `json:"turn"`
	Data json.RawMessage `json:"data"`
}

// Record returns the log form of e.
func (e *Envelope) Record() Record {
	return Record{TS: e.TS, Seq: e.Seq, Kind: e.Kind, Turn: e.Turn, Data: e.Data}
}

// Envelope returns the bus form of a logged record.
func (r *Record) Envelope(agentID string) Envelope {
	return Envelope{Kind: r.Kind, Turn: r.Turn, Data: r.Data, AgentID: agentID, Seq: r.Seq, TS: r.TS}
}

// Authoritative reports whether an event is kept in the log and replay:
// everything but streamed chunks (delta:true) and tool_input_delta. Deltas
// exist for liveness only; the complete copy that follows them is truth.
func Authoritative(kind Kind, data []byte) bool {
	if kind == ToolInputDelta {
		return false
	}
	if kind == AssistantText || kind == Thought {
		return !IsDelta(data)
	}
	return true
}

// Renumbered reports whether an envelope of kind with data is the first a
// daemon published for an agent whose daemon was lost: the error whose
// data holds RenumberedKey, numbered from the ceiling the agent's record
// reserved, past every seq the lost daemon may have issued. What lies
// between the last seq a reader has and that one cannot be told apart
// (never issued, or streamed by the lost daemon and missed), so a reader
// does not count that jump as envelopes lost.
func Renumbered(kind Kind, data []byte) bool {
	return kind == Error && bytes.Contains(data, renumbered)
}

// RenumberedKey is the key, set to true in the data of an error's data,
// that marks the error as the first envelope after a jump in seq
// (Renumbered).
const RenumberedKey = "renumbered"

var renumbered = []byte(`"` + RenumberedKey + `":true`)

// TextOf returns the text of an assistant_text, thought or user_text's
// data (content.text). The data NewText builds is read without a parse
// but of the string itself; the string returned may share data's memory
// (data is never changed once built): copy it to keep it.
func TextOf(data []byte) string {
	for _, head := range []string{`{"delta":true,"content":{"type":"text","text":"`, `{"delta":false,"content":{"type":"text","text":"`} {
		if len(data) > len(head) && string(data[:len(head)]) == head {
			rest := data[len(head):]
			for i := 0; i < len(rest); i++ {
				switch rest[i] {
				case '\\':
					return gjson.ParseBytes(data).Get("content.text").String() // escapes: unescape
				case '"':
					return unsafe.String(unsafe.SliceData(rest), i)
				}
			}
		}
	}
	return gjson.Get(unsafe.String(unsafe.SliceData(data), len(data)), "content.text").String()
}

// IsDelta reports whether the data of an assistant_text or thought is a
// streamed chunk (delta:true). The data NewText builds begins with its
// delta, so that most need no parse.
func IsDelta(data []byte) bool {
	switch {
	case bytes.HasPrefix(data, []byte(`{"delta":true,`)):
		return true
	case bytes.HasPrefix(data, []byte(`{"delta":false,`)):
		return false
	}
	return gjson.GetBytes(data, "delta").Bool()
}

// UsageFigures is the spec's usage object. CostUSD is held at 0.0: the
// figures vendors report are unreliable on subscription plans.
type UsageFigures struct {
	InputTokens         int64   `json:"inputTokens"`
	OutputTokens        int64   `json:"outputTokens"`
	CacheReadTokens     int64   `json:"cacheReadTokens"`
	CacheCreationTokens int64   `json:"cacheCreationTokens"`
	CostUSD             float64 `json:"costUsd"`
	// ThoughtTokens are the output tokens spent thinking, already counted
	// in OutputTokens (ACP's thoughtTokens; the claude CLI's
	// output_tokens_details.thinking_tokens): present only where the agent
	// reports them.
	ThoughtTokens int64 `json:"thoughtTokens,omitempty"`
}

// Add returns u plus v, field by field.
func (u UsageFigures) Add(v UsageFigures) UsageFigures {
	return UsageFigures{
		InputTokens:         u.InputTokens + v.InputTokens,
		OutputTokens:        u.OutputTokens + v.OutputTokens,
		CacheReadTokens:     u.CacheReadTokens + v.CacheReadTokens,
		CacheCreationTokens: u.CacheCreationTokens + v.CacheCreationTokens,
		CostUSD:             u.CostUSD + v.CostUSD,
		ThoughtTokens:       u.ThoughtTokens + v.ThoughtTokens,
	}
}

// Text is an ACP text content block.
type Text struct {
	Type string `json:"type"` // "text"
	Text string `json:"text"`
}

// TextData is the data of assistant_text, thought and user_text.
type TextData struct {
	Delta   bool `json:"delta"`
	Content Text `json:"content"`
}

// NewText builds an assistant_text/thought/user_text event: the data
// New(kind, turn, TextData{…}) builds, encoded by hand in one allocation
// (it is most of what a turn streams).
func NewText(kind Kind, turn int, delta bool, text string) Event {
	const head, tail = `{"delta":false,"content":{"type":"text","text":`, `}}`
	b := make([]byte, 0, len(head)+len(text)+len(tail)+8)
	if delta {
		b = append(b, `{"delta":true`...)
	} else {
		b = append(b, `{"delta":false`...)
	}
	b = append(b, `,"content":{"type":"text","text":`...)
	b = AppendString(b, text)
	b = append(b, tail...)
	return Event{Kind: kind, Turn: turn, Data: b, compact: true}
}

// NewToolInputDelta builds a tool_input_delta event, as NewText does.
func NewToolInputDelta(turn int, toolCallID, partialJSON string) Event {
	b := make([]byte, 0, len(toolCallID)+len(partialJSON)+48)
	b = append(b, `{"toolCallId":`...)
	b = AppendString(b, toolCallID)
	b = append(b, `,"partialJson":`...)
	b = AppendString(b, partialJSON)
	b = append(b, '}')
	return Event{Kind: ToolInputDelta, Turn: turn, Data: b, compact: true}
}

// ToolCall is the ACP tool call carried by tool_use.
type ToolCall struct {
	ToolCallID string             `json:"toolCallId"`
	Title      string             `json:"title"`
	Kind       string             `json:"kind"` // read|edit|delete|move|search|execute|think|fetch|other
	Status     apitype.ToolStatus `json:"status"`
	Content    []any              `json:"content"`
	Locations  []any              `json:"locations"`
	RawInput   json.RawMessage    `json:"rawInput,omitempty"`
}

// PlanData is plan's data: the agent's whole plan, replaced by each plan
// event.
type PlanData struct {
	Entries []PlanEntry `json:"entries"`
}

// PlanEntry is one step of a plan.
type PlanEntry struct {
	Content  string `json:"content"`
	Priority string `json:"priority,omitempty"` // high | medium | low
	Status   string `json:"status"`             // pending | in_progress | completed
}

// ToolUseData is tool_use's data.
type ToolUseData struct {
	Call ToolCall `json:"call"`
}

// ToolResultUpdate is the ACP tool_call_update carried by tool_result.
type ToolResultUpdate struct {
	ToolCallID string             `json:"toolCallId"`
	Status     apitype.ToolStatus `json:"status"` // completed|failed
	Content    []any              `json:"content"`
}

// ToolResultData is tool_result's data.
type ToolResultData struct {
	Update ToolResultUpdate `json:"update"`
}

// ToolInputDeltaData is tool_input_delta's data.
type ToolInputDeltaData struct {
	ToolCallID  string `json:"toolCallId"`
	PartialJSON string `json:"partialJson"`
}

// ResultData is result's data.
type ResultData struct {
	StopReason apitype.StopReason `json:"stopReason"`
	Usage      UsageFigures       `json:"usage"`
	// Error says why a turn with stopReason "error" failed.
	Error string `json:"error,omitempty"`
}

// UsageData is usage's data.
type UsageData struct {
	Usage UsageFigures `json:"usage"`
}

// UsageContextData is usage's data from an ACP agent's usage_update: how
// much of its context window is used, a running figure never added to the
// turn's usage (which comes with the result).
type UsageContextData struct {
	Context ContextWindow `json:"context"`
}

// ContextWindow is an ACP agent's context window: tokens used of size.
type ContextWindow struct {
	Used int `json:"used"`
	Size int `json:"size"`
}

// StatusData is status's data.
type StatusData struct {
	Status apitype.AgentState `json:"status"`
}

// ErrorData is error's data.
type ErrorData struct {
	Message string `json:"message"`
	Data    any    `json:"data"`
}

// NewError builds an error event.
func NewError(turn int, msg string, data any) Event {
	return New(Error, turn, ErrorData{Message: msg, Data: data})
}
