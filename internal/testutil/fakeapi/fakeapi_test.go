package fakeapi

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"
)

// sseEvent is one parsed server-sent event.
type sseEvent struct {
	Name string
	Data map[string]any
	Raw  string
}

// post sends a Messages API request body to the server.
func post(t *testing.T, ctx context.Context, s *Server, path string, body any) *http.Response {
	t.Helper()
	b, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.URL()+path, bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

func userText(text string) map[string]any {
	return map[string]any{"role": "user", "content": []any{map[string]any{"type": "text", "text": text}}}
}

func body(model string, stream bool, msgs ...map[string]any) map[string]any {
	return map[string]any{"model": model, "max_tokens": 1000, "stream": stream, "messages": msgs}
}

// readSSE parses a whole event stream and checks that each event's name
// matches its data's type.
func readSSE(t *testing.T, r io.Reader) []sseEvent {
	t.Helper()
	var out []sseEvent
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	var name, data string
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if name == "" && data == "" {
				continue
			}
			var m map[string]any
			if err := json.Unmarshal([]byte(data), &m); err != nil {
				t.Fatalf("event %q: bad data %q: %v", name, data, err)
			}
			if m["type"] != name {
				t.Fatalf("event name %q but data type %v", name, m["type"])
			}
			out = append(out, sseEvent{name, m, data})
			name, data = "", ""
		case strings.HasPrefix(line, "event: "):
			name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			data = strings.TrimPrefix(line, "data: ")
		default:
			t.Fatalf("unexpected SSE line %q", line)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if name != "" || data != "" {
		t.Fatalf("unterminated event %q", name)
	}
	return out
}

// block is a reassembled content block.
type gotBlock struct {
	Type      string
	Text      string // text, thinking, or the tool input JSON
	Deltas    int
	Signature string
	Name, ID  string
}

type gotMessage struct {
	Model      string
	StartUsage map[string]any
	Blocks     []gotBlock
	StopReason string
	OutTokens  float64
}

// assemble checks the event order and rebuilds the message.
func assemble(t *testing.T, evs []sseEvent) gotMessage {
	t.Helper()
	var m gotMessage
	if len(evs) < 3 || evs[0].Name != "message_start" || evs[len(evs)-2].Name != "message_delta" || evs[len(evs)-1].Name != "message_stop" {
		t.Fatalf("bad event order: %v", names(evs))
	}
	msg := evs[0].Data["message"].(map[string]any)
	m.Model, _ = msg["model"].(string)
	m.StartUsage = msg["usage"].(map[string]any)
	if msg["role"] != "assistant" || msg["type"] != "message" || !strings.HasPrefix(msg["id"].(string), "msg_") {
		t.Errorf("bad message_start message: %v", msg)
	}
	open := -1
	for _, ev := range evs[1 : len(evs)-2] {
		idx := int(ev.Data["index"].(float64))
		switch ev.Name {
		case "content_block_start":
			if open != -1 || idx != len(m.Blocks) {
				t.Fatalf("content_block_start index %d while block %d open, %d done", idx, open, len(m.Blocks))
			}
			cb := ev.Data["content_block"].(map[string]any)
			b := gotBlock{Type: cb["type"].(string)}
			if b.Type == "tool_use" {
				b.Name, b.ID = cb["name"].(string), cb["id"].(string)
			}
			m.Blocks = append(m.Blocks, b)
			open = idx
		case "content_block_delta":
			if idx != open {
				t.Fatalf("delta for block %d while %d open", idx, open)
			}
			b := &m.Blocks[idx]
			d := ev.Data["delta"].(map[string]any)
			switch want := map[string]string{"text": "text_delta", "thinking": "thinking_delta", "tool_use": "input_json_delta"}[b.Type]; d["type"] {
			case want:
				b.Text += d[map[string]string{"text_delta": "text", "thinking_delta": "thinking", "input_json_delta": "partial_json"}[want]].(string)
				b.Deltas++
			case "signature_delta":
				if b.Type != "thinking" {
					t.Fatalf("signature_delta in %s block", b.Type)
				}
				b.Signature = d["signature"].(string)
			default:
				t.Fatalf("delta %v in %s block", d["type"], b.Type)
			}
		case "content_block_stop":
			if idx != open {
				t.Fatalf("stop for block %d while %d open", idx, open)
			}
			open = -1
		default:
			t.Fatalf("unexpected event %q", ev.Name)
		}
	}
	if open != -1 {
		t.Fatalf("block %d never stopped", open)
	}
	md := evs[len(evs)-2].Data
	m.StopReason = md["delta"].(map[string]any)["stop_reason"].(string)
	m.OutTokens = md["usage"].(map[string]any)["output_tokens"].(float64)
	return m
}

func names(evs []sseEvent) []string {
	var out []string
	for _, e := range evs {
		out = append(out, e.Name)
	}
	return out
}

// stream posts a streaming request and returns the rebuilt message.
func stream(t *testing.T, s *Server, msgs ...map[string]any) gotMessage {
	t.Helper()
	resp := post(t, context.Background(), s, "/v1/messages?beta=true", body("claude-test-1", true, msgs...))
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("status %d: %s", resp.StatusCode, b)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("content type %q", ct)
	}
	m := assemble(t, readSSE(t, resp.Body))
	if m.Model != "claude-test-1" {
		t.Errorf("model %q, want the request's", m.Model)
	}
	return m
}

func TestDefaultReply(t *testing.T) {
	s := New(t)
	m := stream(t, s, userText("hello there"))
	if len(m.Blocks) != 1 || m.Blocks[0].Type != "text" {
		t.Fatalf("blocks %+v", m.Blocks)
	}
	if got, want := m.Blocks[0].Text, "Hello from fakeapi (request #1)."; got != want {
		t.Errorf("text %q, want %q", got, want)
	}
	if m.Blocks[0].Deltas < 2 {
		t.Errorf("%d text deltas, want 2+", m.Blocks[0].Deltas)
	}
	if m.StopReason != "end_turn" || m.OutTokens != OutputTokens {
		t.Errorf("stop %q out %v", m.StopReason, m.OutTokens)
	}
	wantUsage := map[string]any{"input_tokens": float64(InputTokens), "output_tokens": float64(StartOutputTokens),
		"cache_creation_input_tokens": float64(0), "cache_read_input_tokens": float64(CacheReadTokens)}
	if !reflect.DeepEqual(m.StartUsage, wantUsage) {
		t.Errorf("message_start usage %v, want %v", m.StartUsage, wantUsage)
	}
	m = stream(t, s, userText("again"))
	if got := m.Blocks[0].Text; got != "Hello from fakeapi (request #2)." {
		t.Errorf("second reply %q", got)
	}
}

func TestToolScripts(t *testing.T) {
	s := New(t)
	for _, tc := range []struct {
		text, leadText, tool string
		input                map[string]any
	}{
		{"please use a tool", ToolText, "Bash", map[string]any{"command": "echo hi", "description": "Print hi"}},
		{"now run command: ls -la /tmp \nignored", ToolText, "Bash", map[string]any{"command": "ls -la /tmp", "description": "Run a command"}},
		{"please write a file /x/y ü.txt", WriteText, "Write", map[string]any{"file_path": "/x/y ü.txt", "content": "written by fakeapi\n"}},
		{"please read /etc/hostname", "", "Read", map[string]any{"file_path": "/etc/hostname"}},
	} {
		t.Run(tc.tool, func(t *testing.T) {
			m := stream(t, s, userText(tc.text))
			blocks := m.Blocks
			if tc.leadText != "" {
				if len(blocks) != 2 || blocks[0].Type != "text" || blocks[0].Text != tc.leadText {
					t.Fatalf("blocks %+v", blocks)
				}
				blocks = blocks[1:]
			}
			if len(blocks) != 1 || blocks[0].Type != "tool_use" || blocks[0].Name != tc.tool {
				t.Fatalf("blocks %+v", m.Blocks)
			}
			b := blocks[0]
			if !strings.HasPrefix(b.ID, "toolu_") {
				t.Errorf("tool id %q", b.ID)
			}
			if b.Deltas < 2 {
				t.Errorf("%d input_json_delta fragments, want several", b.Deltas)
			}
			var input map[string]any
			if err := json.Unmarshal([]byte(b.Text), &input); err != nil {
				t.Fatalf("tool input %q does not reassemble to JSON: %v", b.Text, err)
			}
			if !reflect.DeepEqual(input, tc.input) {
				t.Errorf("input %v, want %v", input, tc.input)
			}
			if m.StopReason != "tool_use" {
				t.Errorf("stop reason %q", m.StopReason)
			}
		})
	}
}

func TestThink(t *testing.T) {
	s := New(t)
	m := stream(t, s, userText("please think and answer"))
	if len(m.Blocks) != 2 {
		t.Fatalf("blocks %+v", m.Blocks)
	}
	th, tx := m.Blocks[0], m.Blocks[1]
	if th.Type != "thinking" || th.Text != "Let me think about this briefly." || th.Deltas != 3 || th.Signature != ThinkSignature {
		t.Errorf("thinking block %+v", th)
	}
	if tx.Type != "text" || tx.Text != ThinkText {
		t.Errorf("text block %+v", tx)
	}
	if m.StopReason != "end_turn" {
		t.Errorf("stop reason %q", m.StopReason)
	}
}

func TestFail(t *testing.T) {
	s := New(t)
	for _, stream := range []bool{true, false} {
		resp := post(t, context.Background(), s, "/v1/messages?beta=true", body("m", stream, userText("please fail")))
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusInternalServerError {
			t.Fatalf("status %d", resp.StatusCode)
		}
		want := `{"type":"error","error":{"type":"api_error","message":"fakeapi: scripted failure"}}`
		if string(b) != want {
			t.Errorf("body %s, want %s", b, want)
		}
	}
	if n := len(s.Requests()); n != 2 {
		t.Errorf("%d requests recorded, want 2", n)
	}
}

func TestToolFollowUp(t *testing.T) {
	s := New(t)
	asst := map[string]any{"role": "assistant", "content": []any{
		map[string]any{"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": map[string]any{"command": "echo hi"}}}}
	for _, tc := range []struct {
		name    string
		content []any
		want    string
	}{
		{"string", []any{map[string]any{"type": "tool_result", "tool_use_id": "toolu_1", "content": "hi", "is_error": false}},
			"Tool said: hi. Done."},
		{"blocks+reminder", []any{
			map[string]any{"type": "tool_result", "tool_use_id": "toolu_1", "content": []any{map[string]any{"type": "text", "text": "out"}}},
			map[string]any{"type": "text", "text": "<system-reminder>please fail</system-reminder>"}},
			"Tool said: out. Done."},
		{"error", []any{map[string]any{"type": "tool_result", "tool_use_id": "toolu_1", "content": "denied", "is_error": true}},
			"Tool said: denied (is_error). Done."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := stream(t, s, userText("please use a tool"), asst, map[string]any{"role": "user", "content": tc.content})
			if len(m.Blocks) != 1 || m.Blocks[0].Text != tc.want || m.StopReason != "end_turn" {
				t.Errorf("got %+v stop %q, want text %q", m.Blocks, m.StopReason, tc.want)
			}
		})
	}
	reqs := s.Requests()
	if reqs[0].LastUserText != "" || reqs[0].ToolResult != "hi" {
		t.Errorf("recorded %+v", reqs[0])
	}
}

func TestLastUserText(t *testing.T) {
	s := New(t)
	// Injected <…> blocks are skipped; the last other text block counts; a
	// later system/assistant message does not hide the user message.
	m := stream(t, s,
		userText("please fail"),
		map[string]any{"role": "assistant", "content": "ok"},
		map[string]any{"role": "user", "content": []any{
			map[string]any{"type": "text", "text": "please fail"},
			map[string]any{"type": "text", "text": "say exactly: picked"},
			map[string]any{"type": "text", "text": "  <system-reminder>please fail</system-reminder>"},
		}},
		map[string]any{"role": "system", "content": "please fail"},
	)
	if m.Blocks[0].Text != "picked" {
		t.Errorf("text %q", m.Blocks[0].Text)
	}
	// String content; the CLI's title prompt (<session>…) gets the default.
	m = stream(t, s, map[string]any{"role": "user", "content": "say exactly: plain"})
	if m.Blocks[0].Text != "plain" {
		t.Errorf("text %q", m.Blocks[0].Text)
	}
	m = stream(t, s, userText("<session>\nplease fail\n</session>\n\nWrite the title."))
	if m.Blocks[0].Text != "Hello from fakeapi (request #3)." {
		t.Errorf("text %q", m.Blocks[0].Text)
	}
	// The earliest trigger wins: the payload of say exactly is not a trigger.
	m = stream(t, s, userText("say exactly: please fail\nor please think"))
	if m.Blocks[0].Text != "please fail\nor please think" {
		t.Errorf("text %q", m.Blocks[0].Text)
	}
	want := []string{"say exactly: picked", "say exactly: plain", "", "say exactly: please fail\nor please think"}
	for i, r := range s.Requests() {
		if r.LastUserText != want[i] || !r.Stream || r.Model != "claude-test-1" {
			t.Errorf("request %d: %+v, want text %q", i, r, want[i])
		}
	}
}

func TestStreamChunks(t *testing.T) {
	s := New(t)
	m := stream(t, s, userText("stream 1000 chunks"))
	b := m.Blocks[0]
	if b.Deltas != 1000 || !strings.HasPrefix(b.Text, "tok0 tok1 ") || !strings.HasSuffix(b.Text, " tok999 ") {
		t.Errorf("%d deltas, text %.40q…", b.Deltas, b.Text)
	}
	m = stream(t, s, userText("stream 0 chunks"))
	if len(m.Blocks) != 1 || m.Blocks[0].Deltas != 0 {
		t.Errorf("blocks %+v", m.Blocks)
	}
}

func TestSlowCancel(t *testing.T) {
	s := New(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	resp := post(t, ctx, s, "/v1/messages", body("m", true, userText("please be slow")))
	defer resp.Body.Close()
	r := bufio.NewReader(resp.Body)
	var stamps []time.Time
	for len(stamps) < 3 {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(line, `"text_delta"`) {
			if want := fmt.Sprintf(`"text":"chunk%d "`, len(stamps)); !strings.Contains(line, want) {
				t.Fatalf("line %q lacks %s", line, want)
			}
			stamps = append(stamps, time.Now())
		}
	}
	if d := stamps[2].Sub(stamps[1]); d < SlowChunkDelay*8/10 {
		t.Errorf("chunks %v apart, want about %v", d, SlowChunkDelay)
	}
	cancel()
	// Close waits for handlers: it must return promptly once the client left.
	start := time.Now()
	s.Close()
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("Close took %v", d)
	}
	s.Close() // idempotent
}

func TestCloseEndsSlowStream(t *testing.T) {
	s, err := Start()
	if err != nil {
		t.Fatal(err)
	}
	resp := post(t, context.Background(), s, "/v1/messages", body("m", true, userText("please be slow")))
	defer resp.Body.Close()
	r := bufio.NewReader(resp.Body)
	if _, err := r.ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	s.Close()
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("Close took %v", d)
	}
	io.Copy(io.Discard, r) // the stream ends
}

func TestNonStreaming(t *testing.T) {
	s := New(t)
	resp := post(t, context.Background(), s, "/v1/messages?beta=true", body("claude-haiku-x", false, userText("please use a tool")))
	defer resp.Body.Close()
	var msg struct {
		ID, Type, Role, Model string
		Content               []map[string]any
		StopReason            string         `json:"stop_reason"`
		Usage                 map[string]int `json:"usage"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&msg); err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 || msg.Type != "message" || msg.Role != "assistant" || msg.Model != "claude-haiku-x" || msg.StopReason != "tool_use" {
		t.Fatalf("status %d message %+v", resp.StatusCode, msg)
	}
	if len(msg.Content) != 2 || msg.Content[0]["text"] != ToolText || msg.Content[1]["name"] != "Bash" ||
		!reflect.DeepEqual(msg.Content[1]["input"], map[string]any{"command": "echo hi", "description": "Print hi"}) {
		t.Errorf("content %v", msg.Content)
	}
	if msg.Usage["input_tokens"] != InputTokens || msg.Usage["output_tokens"] != OutputTokens || msg.Usage["cache_read_input_tokens"] != CacheReadTokens {
		t.Errorf("usage %v", msg.Usage)
	}
	if got := s.Requests(); len(got) != 1 || got[0].Stream || got[0].Model != "claude-haiku-x" {
		t.Errorf("requests %+v", got)
	}
}

func TestOtherRoutes(t *testing.T) {
	s := New(t)
	for _, m := range []string{http.MethodHead, http.MethodGet} {
		req, _ := http.NewRequest(m, s.URL()+"/", nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Errorf("%s /: %d", m, resp.StatusCode)
		}
	}
	resp := post(t, context.Background(), s, "/v1/messages/count_tokens?beta=true", body("m", false, userText("hi")))
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(b) != `{"input_tokens":100}` {
		t.Errorf("count_tokens: %d %s", resp.StatusCode, b)
	}
	resp = post(t, context.Background(), s, "/v1/complete", body("m", false, userText("hi")))
	var e struct {
		Type  string
		Error struct{ Type, Message string }
	}
	json.NewDecoder(resp.Body).Decode(&e)
	resp.Body.Close()
	if resp.StatusCode != 404 || e.Type != "error" || e.Error.Type != "not_found_error" {
		t.Errorf("unknown path: %d %+v", resp.StatusCode, e)
	}
	resp, err := http.Post(s.URL()+"/v1/messages", "application/json", strings.NewReader("{not json"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 400 {
		t.Errorf("bad body: %d", resp.StatusCode)
	}
	if n := len(s.Requests()); n != 1 {
		t.Errorf("%d requests recorded, want only the bad POST /v1/messages", n)
	}
}

func TestModels(t *testing.T) {
	s := New(t)
	for _, m := range []string{"claude-opus-x", "claude-haiku-y"} {
		resp := post(t, context.Background(), s, "/v1/messages", body(m, m == "claude-opus-x", userText("hi")))
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	if got, want := s.Models(), []string{"claude-opus-x", "claude-haiku-y"}; !reflect.DeepEqual(got, want) {
		t.Errorf("models %v, want %v", got, want)
	}
	if !strings.HasPrefix(s.URL(), "http://127.0.0.1:") {
		t.Errorf("URL %q", s.URL())
	}
}

func BenchmarkStream1000Chunks(b *testing.B) {
	s, err := Start()
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	payload, _ := json.Marshal(body("m", true, userText("stream 1000 chunks")))
	for b.Loop() {
		resp, err := http.Post(s.URL()+"/v1/messages", "application/json", bytes.NewReader(payload))
		if err != nil {
			b.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
}

// TestHold: "please hold" streams HoldFirst, then sends nothing until
// Release, then the rest; the assembled reply is the whole text.
func TestHold(t *testing.T) {
	s := New(t)
	resp := post(t, context.Background(), s, "/v1/messages", body("m", true, userText("please hold")))
	defer resp.Body.Close()
	r := bufio.NewReader(resp.Body)
	var got string
	for got != HoldFirst {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("stream ended before the hold, with %q", got)
		}
		if strings.Contains(line, `"text_delta"`) {
			var ev struct{ Delta struct{ Text string } }
			if err := json.Unmarshal([]byte(strings.TrimPrefix(strings.TrimSpace(line), "data: ")), &ev); err != nil {
				t.Fatal(err)
			}
			got += ev.Delta.Text
			if !strings.HasPrefix(HoldFirst, got) {
				t.Fatalf("streamed %q, want %q first", got, HoldFirst)
			}
		}
	}
	s.Release()
	evs := readSSE(t, r)
	for _, ev := range evs {
		if d, ok := ev.Data["delta"].(map[string]any); ok && d["type"] == "text_delta" {
			got += d["text"].(string)
		}
	}
	if got != HoldFirst+HoldRest || names(evs)[len(evs)-1] != "message_stop" {
		t.Fatalf("after the release: %q, events %v", got, names(evs))
	}
}

// TestRunCommands: "run commands:" calls Bash with each command in turn,
// one tool follow-up after another, then ends as any follow-up does.
func TestRunCommands(t *testing.T) {
	s := New(t)
	user := userText("run commands: touch a ;; touch b")
	call := func(id string) map[string]any {
		return map[string]any{"role": "assistant", "content": []any{map[string]any{"type": "tool_use", "id": id, "name": "Bash", "input": map[string]any{}}}}
	}
	result := func(id string) map[string]any {
		return map[string]any{"role": "user", "content": []any{map[string]any{"type": "tool_result", "tool_use_id": id, "content": "ok"}}}
	}
	command := func(m gotMessage) string {
		t.Helper()
		if len(m.Blocks) != 2 || m.Blocks[1].Type != "tool_use" || m.StopReason != "tool_use" {
			t.Fatalf("not a tool call: %+v", m)
		}
		var in map[string]any
		_ = json.Unmarshal([]byte(m.Blocks[1].Text), &in)
		return fmt.Sprint(in["command"])
	}
	if c := command(stream(t, s, user)); c != "touch a" {
		t.Fatalf("first command %q", c)
	}
	if c := command(stream(t, s, user, call("t1"), result("t1"))); c != "touch b" {
		t.Fatalf("second command %q", c)
	}
	m := stream(t, s, user, call("t1"), result("t1"), call("t2"), result("t2"))
	if len(m.Blocks) != 1 || m.Blocks[0].Text != "Tool said: ok. Done." || m.StopReason != "end_turn" {
		t.Fatalf("after both: %+v", m)
	}
}
