package fakeapi

import (
	"encoding/json"
	"reflect"
	"testing"
)

// "call tool: NAME JSON" makes the model call any tool, MCP tools included,
// with the given input; a missing or bad input is {}.
func TestCallTool(t *testing.T) {
	s := New(t)
	for _, tc := range []struct {
		text, name string
		input      map[string]any
	}{
		{"call tool: mcp__kaimon__agent_list", "mcp__kaimon__agent_list", map[string]any{}},
		{`call tool: mcp__kaimon__agent_status {"agent_id": "ab12"}` + "\nignored", "mcp__kaimon__agent_status", map[string]any{"agent_id": "ab12"}},
		{"please call tool: Bash not json", "Bash", map[string]any{}},
		{`call tool: X [1,2]`, "X", map[string]any{}},
	} {
		m := stream(t, s, userText(tc.text))
		if len(m.Blocks) != 1 || m.Blocks[0].Type != "tool_use" || m.Blocks[0].Name != tc.name {
			t.Fatalf("%q: blocks %+v", tc.text, m.Blocks)
		}
		var input map[string]any
		if err := json.Unmarshal([]byte(m.Blocks[0].Text), &input); err != nil {
			t.Fatalf("%q: input %q: %v", tc.text, m.Blocks[0].Text, err)
		}
		if !reflect.DeepEqual(input, tc.input) || m.StopReason != "tool_use" {
			t.Errorf("%q: input %v stop %q, want %v tool_use", tc.text, input, m.StopReason, tc.input)
		}
	}
}

// The tools a request offers are recorded, so a test can see what the
// model was shown.
func TestRecordsTools(t *testing.T) {
	s := New(t)
	b := body("m", true, userText("hi"))
	b["tools"] = []any{map[string]any{"name": "Bash"}, map[string]any{"name": "mcp__kaimon__agent_list"}}
	resp := post(t, t.Context(), s, "/v1/messages", b)
	resp.Body.Close()
	reqs := s.Requests()
	if len(reqs) != 1 || !reflect.DeepEqual(reqs[0].Tools, []string{"Bash", "mcp__kaimon__agent_list"}) {
		t.Fatalf("requests %+v", reqs)
	}
}
