package schema

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/kaimon/kaimon/internal/apitype"
	"github.com/kaimon/kaimon/internal/event"
)

var call = event.ToolCall{ToolCallID: "t1", Title: "Bash", Kind: "execute", Status: "in_progress", Content: []any{}, Locations: []any{}}

// samples are events of every kind as the backends and the session
// manager build them, each shape a kind has.
func samples() []event.Event {
	full := call
	full.RawInput = json.RawMessage(`{"command":"ls"}`)
	full.Locations = []any{map[string]any{"path": "/w/a.go"}}
	var nilContent event.ToolCall // content and locations null
	nilContent.ToolCallID = "t2"
	return []event.Event{
		event.NewText(event.AssistantText, 1, true, "Hel"),
		event.NewText(event.AssistantText, 1, false, "Hello <b>"),
		event.NewText(event.Thought, 1, false, "hmm"),
		event.NewText(event.UserText, 1, false, "hi"),
		event.New(event.ToolUse, 1, event.ToolUseData{Call: call}),
		event.New(event.ToolUse, 1, event.ToolUseData{Call: full}),
		event.New(event.ToolUse, 1, event.ToolUseData{Call: nilContent}),
		event.NewToolInputDelta(1, "t1", `{"comm`),
		event.New(event.ToolResult, 1, event.ToolResultData{Update: event.ToolResultUpdate{ToolCallID: "t1", Status: "completed",
			Content: []any{map[string]any{"type": "content", "content": event.Text{Type: "text", Text: "a.go"}}}}}),
		event.New(event.Plan, 1, event.PlanData{Entries: []event.PlanEntry{{Content: "test", Priority: "high", Status: "pending"}}}),
		// An ACP plan entry as its agent sent it, _meta and all.
		event.New(event.Plan, 1, map[string]any{"entries": []any{map[string]any{"content": "x", "priority": "low", "status": "completed", "_meta": map[string]any{"k": 1}}}}),
		event.New(event.Plan, 1, event.PlanData{}),
		event.New(event.Usage, 1, event.UsageData{Usage: usage}),
		event.New(event.Usage, 1, event.UsageContextData{Context: event.ContextWindow{Used: 100, Size: 200000}}),
		event.New(event.TurnStarted, 1, struct{}{}),
		event.New(event.Result, 1, event.ResultData{StopReason: apitype.StopEndTurn, Usage: usage}),
		event.New(event.Result, 1, event.ResultData{StopReason: apitype.StopError, Error: "API error"}),
		event.New(event.Status, 1, event.StatusData{Status: apitype.Working}),
		event.NewError(1, "malformed line", nil),
		event.NewError(0, "exited", map[string]any{"exitCode": 1, "stderrTail": "boom"}),
		event.NewError(0, "renumbered", map[string]any{"reason": "daemon crashed", event.RenumberedKey: true}),
		event.NewError(0, "too long", map[string]int64{"bytes": 1, "limit": 2}),
		event.NewError(0, "odd", []any{"data", "is", "anything"}),
		// Data New cannot encode becomes an error event.
		event.New(event.Result, 1, map[string]any{"c": make(chan int)}),
		event.New(event.Permission, 1, event.PermissionData{RequestID: "p1", ToolCall: call, ExpiresAt: "2026-01-02T15:09:05Z",
			Options: []event.PermissionOption{{OptionID: "allow", Name: "Allow", Kind: "allow_once"}}}),
		event.New(event.Permission, 1, event.PermissionData{RequestID: "p1", ToolCall: call, ExpiresAt: "2026-01-02T15:09:05Z"}),
		event.New(event.Permission, 1, event.PermissionData{RequestID: "p1", ToolCall: call, Decision: apitype.Allow, Always: true,
			By: event.DecidedByUser, Message: "ok"}),
		event.New(event.Permission, 1, event.PermissionData{RequestID: "p1", ToolCall: call, Decision: apitype.Deny, By: event.DecidedByTimeout}),
	}
}

var ts = time.Date(2026, 1, 2, 15, 4, 5, 123456789, time.UTC)

// Every kind's events, as envelopes and as log lines, validate; so does
// the daemon's note of a damaged log line (seq 0). Events of another
// shape do not.
func TestEvents(t *testing.T) {
	doc := Events()
	env := compile(t, doc, "")
	rec := compile(t, doc, RecordRef)
	seen := map[event.Kind]bool{}
	for i, ev := range samples() {
		seen[ev.Kind] = true
		e := ev.Stamp("ab12", uint64(i+1), ts)
		check(t, env, string(ev.Kind)+" envelope", &e, true)
		check(t, rec, string(ev.Kind)+" record", e.Record(), true)
		check(t, env, string(ev.Kind)+" as a log line", e.Record(), false) // no agent_id
		check(t, rec, string(ev.Kind)+" envelope as a log line", &e, false)
	}
	for _, k := range event.Kinds {
		if !seen[k] {
			t.Errorf("no sample event of kind %s", k)
		}
	}
	bad := event.NewError(0, "event log x line 3: not JSON; skipped", map[string]any{"log_line": 3, "log_offset": 10, "torn": false})
	note := event.Envelope{Kind: bad.Kind, Turn: bad.Turn, Data: bad.Data, AgentID: "ab12", TS: ts}
	check(t, env, "damaged line's note", &note, true)

	wrong := func(kind event.Kind, data string) event.Envelope {
		return event.Envelope{Kind: kind, Turn: 1, Data: json.RawMessage(data), AgentID: "ab12", Seq: 1, TS: ts}
	}
	for name, e := range map[string]event.Envelope{
		"status sleeping":                        wrong(event.Status, `{"status":"sleeping"}`),
		"a kind not in the list":                 wrong("tool_called", `{}`),
		"text without content":                   wrong(event.AssistantText, `{"delta":false}`),
		"text as a string":                       wrong(event.AssistantText, `"hi"`),
		"delta as text":                          wrong(event.Thought, `{"delta":"no","content":{"type":"text","text":"x"}}`),
		"tool_use without its call":              wrong(event.ToolUse, `{"toolCallId":"t1"}`),
		"result without usage":                   wrong(event.Result, `{"stopReason":"end_turn"}`),
		"usage of neither shape":                 wrong(event.Usage, `{"tokens":3}`),
		"error without message":                  wrong(event.Error, `{"data":null}`),
		"permission neither pending nor decided": wrong(event.Permission, `{"requestId":"p1","toolCall":`+mustJSON(call)+`}`),
		"permission both":                        wrong(event.Permission, `{"requestId":"p1","toolCall":`+mustJSON(call)+`,"expiresAt":"x","decision":"allow","by":"user"}`),
		"permission maybe":                       wrong(event.Permission, `{"requestId":"p1","toolCall":`+mustJSON(call)+`,"decision":"maybe","by":"user"}`),
		"turn_started with data":                 wrong(event.TurnStarted, `null`),
	} {
		check(t, env, name, &e, false)
	}
	e := wrong(event.Status, `{"status":"idle"}`)
	check(t, env, "status idle", &e, true) // the wrong ones above fail for their fault
	e.AgentID = ""
	raw := map[string]any{}
	_ = json.Unmarshal([]byte(mustJSON(&e)), &raw)
	delete(raw, "agent_id")
	check(t, env, "envelope without agent_id", raw, false)
	raw["agent_id"], raw["seq"] = "ab12", -1
	check(t, env, "negative seq", raw, false)
	raw["seq"], raw["extra"] = 1, true
	check(t, env, "envelope with another field", raw, false)
}

func mustJSON(v any) string {
	b, err := event.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}
