package event

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/kaimon/kaimon/internal/apitype"
)

func TestAuthoritative(t *testing.T) {
	cases := []struct {
		ev   Event
		want bool
	}{
		{NewText(AssistantText, 1, true, "x"), false},
		{NewText(AssistantText, 1, false, "x"), true},
		{NewText(Thought, 1, true, "x"), false},
		{NewText(Thought, 1, false, "x"), true},
		{New(ToolInputDelta, 1, ToolInputDeltaData{ToolCallID: "t", PartialJSON: "{"}), false},
		{New(ToolUse, 1, ToolUseData{}), true},
		{New(Result, 1, ResultData{StopReason: apitype.StopEndTurn}), true},
		{Event{Kind: AssistantText, Turn: 1, Data: []byte(`{"content":{"type":"text","text":"no delta field"}}`)}, true},
	}
	for _, c := range cases {
		if got := Authoritative(c.ev.Kind, c.ev.Data); got != c.want {
			t.Errorf("%s %s: authoritative = %v, want %v", c.ev.Kind, c.ev.Data, got, c.want)
		}
	}
}

// Tool output like <tool_use_error> stays readable, through the envelope's
// RawMessage too, and remains valid JSON.
func TestMarshalKeepsAngleBrackets(t *testing.T) {
	ev := NewText(AssistantText, 1, false, "<tool_use_error>a & b</tool_use_error>")
	env := Envelope{Kind: ev.Kind, Turn: 1, Data: ev.Data, AgentID: "a", Seq: 1}
	b, err := Marshal(env)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), "<tool_use_error>a & b") || strings.HasSuffix(string(b), "\n") {
		t.Errorf("Marshal = %s", b)
	}
	var back Envelope
	if err := json.Unmarshal(b, &back); err != nil || back.Seq != 1 {
		t.Errorf("round trip: %v %+v", err, back)
	}
}

func TestUsageAddAndFailed(t *testing.T) {
	u := UsageFigures{InputTokens: 1, OutputTokens: 2, CacheReadTokens: 3, CacheCreationTokens: 4}.Add(UsageFigures{InputTokens: 10, OutputTokens: 20, CacheReadTokens: 30, CacheCreationTokens: 40})
	if u != (UsageFigures{InputTokens: 11, OutputTokens: 22, CacheReadTokens: 33, CacheCreationTokens: 44}) {
		t.Errorf("Add = %+v", u)
	}
	for stop, failed := range map[apitype.StopReason]bool{apitype.StopEndTurn: false, apitype.StopMaxTokens: false, apitype.StopError: true, apitype.StopCancelled: true, apitype.StopRefusal: true} {
		if stop.Failed() != failed {
			t.Errorf("Failed(%s) = %v", stop, !failed)
		}
	}
}

func TestIsDelta(t *testing.T) {
	for _, c := range []struct {
		data string
		want bool
	}{
		{`{"delta":true,"content":{}}`, true}, {`{"delta":false,"content":{}}`, false},
		{`{"content":{"type":"text","text":"x"},"delta":true}`, true}, {`{ "delta" : true }`, true},
		{`{"content":{}}`, false}, {`{"delta":false}`, false},
	} {
		if got := IsDelta([]byte(c.data)); got != c.want {
			t.Errorf("IsDelta(%s) = %v", c.data, got)
		}
	}
	for _, d := range []bool{false, true} {
		if got := IsDelta(NewText(Thought, 1, d, "x").Data); got != d {
			t.Errorf("IsDelta(NewText delta %v) = %v", d, got)
		}
	}
}

func TestTextOf(t *testing.T) {
	for _, s := range appendStrings {
		for _, d := range []bool{false, true} {
			if got := TextOf(NewText(AssistantText, 1, d, s).Data); got != strings.ToValidUTF8(s, "\uFFFD") {
				t.Errorf("TextOf(NewText(%q)) = %q", s, got)
			}
		}
	}
	if got := TextOf([]byte(`{"content": {"text": "a\nb", "type": "text"}, "delta": true}`)); got != "a\nb" {
		t.Errorf("TextOf of other data = %q", got)
	}
}

// The status kind's documentation (kaimon-events(7)) names every agent
// state there is.
func TestStatusDocNamesEveryState(t *testing.T) {
	for _, s := range apitype.AgentStates {
		if !strings.Contains(Docs[Status].Meaning, string(s)) {
			t.Errorf("Docs[Status] does not name state %q: %s", s, Docs[Status].Meaning)
		}
	}
}

// Every kind has its documentation and the Go types of its data.
func TestEveryKindHasDocsAndDataTypes(t *testing.T) {
	for _, k := range Kinds {
		if _, ok := Docs[k]; !ok {
			t.Errorf("kind %s has no Docs entry", k)
		}
		if len(DataTypes[k]) == 0 {
			t.Errorf("kind %s has no DataTypes entry", k)
		}
	}
	if len(Docs) != len(Kinds) || len(DataTypes) != len(Kinds) {
		t.Errorf("%d Docs and %d DataTypes for %d kinds", len(Docs), len(DataTypes), len(Kinds))
	}
}

// TestTypedWordsWire keeps the wire of the typed tool-call statuses and
// stop reasons the bare ACP words the events have always carried.
func TestTypedWordsWire(t *testing.T) {
	for _, c := range []struct {
		v    any
		want string
	}{
		{ToolCall{ToolCallID: "t1", Status: apitype.ToolPending, Content: []any{}, Locations: []any{}},
			`{"toolCallId":"t1","title":"","kind":"","status":"pending","content":[],"locations":[]}`},
		{ToolCall{ToolCallID: "t1", Status: apitype.ToolInProgress, Content: []any{}, Locations: []any{}},
			`{"toolCallId":"t1","title":"","kind":"","status":"in_progress","content":[],"locations":[]}`},
		{ToolResultUpdate{ToolCallID: "t1", Status: apitype.ToolCompleted, Content: []any{}},
			`{"toolCallId":"t1","status":"completed","content":[]}`},
		{ToolResultUpdate{ToolCallID: "t1", Status: apitype.ToolFailed, Content: []any{}},
			`{"toolCallId":"t1","status":"failed","content":[]}`},
		{ResultData{StopReason: apitype.StopEndTurn}, `{"stopReason":"end_turn","usage":{"inputTokens":0,"outputTokens":0,"cacheReadTokens":0,"cacheCreationTokens":0,"costUsd":0}}`},
		{ResultData{StopReason: apitype.StopMaxTokens}, `{"stopReason":"max_tokens","usage":{"inputTokens":0,"outputTokens":0,"cacheReadTokens":0,"cacheCreationTokens":0,"costUsd":0}}`},
		{ResultData{StopReason: apitype.StopRefusal}, `{"stopReason":"refusal","usage":{"inputTokens":0,"outputTokens":0,"cacheReadTokens":0,"cacheCreationTokens":0,"costUsd":0}}`},
		{ResultData{StopReason: apitype.StopCancelled}, `{"stopReason":"cancelled","usage":{"inputTokens":0,"outputTokens":0,"cacheReadTokens":0,"cacheCreationTokens":0,"costUsd":0}}`},
		{ResultData{StopReason: apitype.StopError, Error: "boom"}, `{"stopReason":"error","usage":{"inputTokens":0,"outputTokens":0,"cacheReadTokens":0,"cacheCreationTokens":0,"costUsd":0},"error":"boom"}`},
	} {
		b, err := json.Marshal(c.v)
		if err != nil || string(b) != c.want {
			t.Errorf("marshal %+v = %s, %v; want %s", c.v, b, err, c.want)
		}
	}
	var d ToolResultData
	if err := json.Unmarshal([]byte(`{"update":{"toolCallId":"t1","status":"failed","content":[]}}`), &d); err != nil || d.Update.Status != apitype.ToolFailed || !d.Update.Status.Ended() {
		t.Errorf("unmarshal failed update = %+v, %v", d, err)
	}
}
