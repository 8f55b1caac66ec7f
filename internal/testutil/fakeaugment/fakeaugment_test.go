package fakeaugment

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kaimon/kaimon/internal/testutil/fakescript"
)

type line struct {
	Text  string `json:"text"`
	Nodes []struct {
		ID       int    `json:"id"`
		Type     int    `json:"type"`
		Content  string `json:"content"`
		Thinking *struct {
			Content string `json:"content"`
		} `json:"thinking"`
		ToolUse *struct {
			ToolUseID string `json:"tool_use_id"`
			ToolName  string `json:"tool_name"`
			InputJSON string `json:"input_json"`
		} `json:"tool_use"`
		TokenUsage *struct {
			InputTokens  int `json:"input_tokens"`
			OutputTokens int `json:"output_tokens"`
		} `json:"token_usage"`
	} `json:"nodes"`
	StopReason int `json:"stop_reason"`
}

func post(t *testing.T, s *Server, path string, body any) (*http.Response, []line) {
	t.Helper()
	b, _ := json.Marshal(body)
	req, _ := http.NewRequest(http.MethodPost, s.URL()+strings.TrimPrefix(path, "/"), bytes.NewReader(b))
	req.Header.Set("Authorization", "Bearer x")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var lines []line
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		var l line
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("%s: line %q: %v", path, sc.Text(), err)
		}
		lines = append(lines, l)
	}
	return resp, lines
}

var tools = []map[string]any{{"name": "save-file", "input_schema_json": "{}"}, {"name": "launch-process"}}

func textReq(text string) map[string]any {
	return map[string]any{"model": "", "mode": "CLI_NONINTERACTIVE", "conversation_id": "conv-1", "tool_definitions": tools,
		"nodes": []any{
			map[string]any{"id": 1, "type": NodeText, "text_node": map[string]any{"content": text}},
			map[string]any{"id": 2, "type": NodeIDEState, "ide_state_node": map[string]any{}},
		}}
}

// text and stop reason of a stream, and the node types in order.
func summary(lines []line) (string, []int, int) {
	var text strings.Builder
	var types []int
	stop := 0
	for _, l := range lines {
		text.WriteString(l.Text)
		for _, n := range l.Nodes {
			types = append(types, n.Type)
		}
		if l.StopReason != 0 {
			stop = l.StopReason
		}
	}
	return text.String(), types, stop
}

func TestGetModelsAnd404(t *testing.T) {
	s := New(t)
	b, _ := json.Marshal(map[string]any{})
	r2, err := http.Post(s.URL()+"get-models", "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		DefaultModel string `json:"default_model"`
		Models       []struct {
			Name string `json:"name"`
		} `json:"models"`
	}
	err = json.NewDecoder(r2.Body).Decode(&got)
	r2.Body.Close()
	if err != nil || r2.StatusCode != 200 {
		t.Fatalf("get-models: %d %v", r2.StatusCode, err)
	}
	if got.DefaultModel != Models[0] || len(got.Models) != len(Models) || got.Models[1].Name != Models[1] {
		t.Fatalf("get-models = %+v", got)
	}
	for _, p := range []string{"/agents/list-remote-tools", "/settings/get-mcp-user-configs"} {
		if resp, _ := post(t, s, p, map[string]any{}); resp.StatusCode != 404 {
			t.Errorf("%s: %d, want 404", p, resp.StatusCode)
		}
	}
	if n := len(s.Requests()); n != 0 {
		t.Errorf("recorded %d chat requests, want 0", n)
	}
}

func TestChatStream(t *testing.T) {
	s := New(t)

	// A text turn.
	_, lines := post(t, s, "/chat-stream", textReq("hi there"))
	text, types, stop := summary(lines)
	if text != "Hello from fakeaugment (request #1)." || stop != StopEndTurn {
		t.Fatalf("text turn: %q stop %d", text, stop)
	}
	if last := types[len(types)-1]; last != NodeTokenUsage {
		t.Errorf("last node type %d, want token usage", last)
	}
	u := lines[len(lines)-1].Nodes[0].TokenUsage
	if u == nil || u.InputTokens != InputTokens || u.OutputTokens != OutputTokens {
		t.Errorf("token usage %+v", u)
	}
	// Node ids are distinct and increasing.
	prev := 0
	for _, l := range lines {
		for _, n := range l.Nodes {
			if n.ID <= prev {
				t.Errorf("node id %d after %d", n.ID, prev)
			}
			prev = n.ID
		}
	}

	// A tool call.
	_, lines = post(t, s, "/chat-stream", textReq(`call tool: save-file {"path":"a.txt", "file_content":"x"}`))
	text, types, stop = summary(lines)
	if text != "" || stop != StopToolUse || !reflect.DeepEqual(types, []int{NodeToolUse}) {
		t.Fatalf("tool call: %q types %v stop %d", text, types, stop)
	}
	use := lines[0].Nodes[0].ToolUse
	if use == nil || use.ToolName != "save-file" || use.InputJSON != `{"path":"a.txt","file_content":"x"}` || use.ToolUseID != "toolu_fake_2" {
		t.Fatalf("tool use %+v", use)
	}

	// Its follow-up, with the history of the first turn.
	follow := map[string]any{"tool_definitions": tools, "conversation_id": "conv-1",
		"chat_history": []any{map[string]any{
			"request_nodes":  []any{map[string]any{"type": NodeText, "text_node": map[string]any{"content": "hi there"}}},
			"response_nodes": []any{map[string]any{"type": NodeText, "content": "Hello from fakeaugment (request #1)."}},
		}},
		"nodes": []any{
			map[string]any{"type": NodeIDEState, "ide_state_node": map[string]any{}},
			map[string]any{"type": NodeToolResult, "tool_result_node": map[string]any{"tool_use_id": use.ToolUseID, "content": "File saved.", "is_error": false}},
		}}
	_, lines = post(t, s, "/chat-stream", follow)
	if text, _, stop = summary(lines); text != "Tool said: File saved.. Done." || stop != StopEndTurn {
		t.Fatalf("follow-up: %q stop %d", text, stop)
	}

	// A thought.
	_, lines = post(t, s, "/chat-stream", textReq("please think"))
	text, types, _ = summary(lines)
	if text != "Thought about it. Answer: 42." || types[0] != NodeThinking || lines[0].Nodes[0].Thinking == nil {
		t.Fatalf("think: %q types %v", text, types)
	}

	// Failures: HTTP 500, and a stream broken off.
	if resp, _ := post(t, s, "/chat-stream", textReq("please fail")); resp.StatusCode != 500 {
		t.Errorf("please fail: %d", resp.StatusCode)
	}
	_, lines = post(t, s, "/chat-stream", textReq("please fail midway"))
	if text, _, stop = summary(lines); text != "partial answer " || stop != 0 {
		t.Errorf("fail midway: %q stop %d", text, stop)
	}

	reqs := s.Requests()
	if len(reqs) != 6 {
		t.Fatalf("%d requests recorded, want 6", len(reqs))
	}
	if r := reqs[0]; r.LastUserText != "hi there" || r.Authorization != "Bearer x" || r.ConversationID != "conv-1" || r.Mode != "CLI_NONINTERACTIVE" ||
		!reflect.DeepEqual(r.Tools, []string{"save-file", "launch-process"}) {
		t.Errorf("request 1 = %+v", r)
	}
	if r := reqs[2]; r.LastUserText != "" || r.ToolResult != "File saved." ||
		!reflect.DeepEqual(r.History, []string{"user: hi there", "assistant: Hello from fakeaugment (request #1)."}) {
		t.Errorf("request 3 = %+v", r)
	}
}

func TestNoToolsGetsDefault(t *testing.T) {
	s := New(t)
	req := textReq("call tool: save-file {}")
	delete(req, "tool_definitions")
	_, lines := post(t, s, "/chat-stream", req)
	if text, _, stop := summary(lines); text != "Hello from fakeaugment (request #1)." || stop != StopEndTurn {
		t.Fatalf("no tools: %q stop %d", text, stop)
	}
}

// syncLog is a log the server's handlers and the test share.
type syncLog struct {
	mu  sync.Mutex
	buf strings.Builder
}

func (l *syncLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *syncLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// "please be slow" streams its chunks one at a time, with pauses, long
// enough to interrupt (the whole reply takes SlowChunks × SlowChunkDelay);
// a client that goes away (auggie's session/cancel aborts its request)
// ends the stream by the request's context, not by failing to write a
// chunk nobody reads.
func TestSlowStreamEndsWithTheRequest(t *testing.T) {
	s := New(t)
	var log syncLog
	s.SetLog(&log)
	b, _ := json.Marshal(textReq("please be slow"))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, s.URL()+"chat-stream", bytes.NewReader(b))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for i := 0; i < 2; i++ {
		if !sc.Scan() {
			t.Fatalf("slow stream ended after %d lines: %v", i, sc.Err())
		}
		var l line
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil || l.Text != "chunk"+string(rune('0'+i))+" " || l.StopReason != 0 {
			t.Fatalf("slow line %d: %s (%v)", i, sc.Bytes(), err)
		}
	}
	cancel()
	// Bounded by what is left of the slow reply: a handler that ignored
	// the context would end only on a failed write, and say so.
	deadline := time.Now().Add(fakescript.SlowChunks * fakescript.SlowChunkDelay)
	for !strings.Contains(log.String(), "stream #1 ended early") {
		if time.Now().After(deadline) {
			t.Fatalf("the slow stream went on after its request ended; log:\n%s", log.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if got := log.String(); !strings.Contains(got, "stream #1 ended early: context canceled") {
		t.Fatalf("the slow stream ended otherwise than by its request:\n%s", got)
	}
}
