// Package fakeollama is a fake Ollama server for tests of kaimon's
// ollama:<tag> agents. It listens on 127.0.0.1 and answers as Ollama's API
// documents (docs/api.md):
//
//   - GET /: "Ollama is running".
//   - POST /api/show {"model": M}: 200 with the model's details when M is
//     one of Models, else 404 {"error":"model 'M' not found"}.
//   - POST /api/chat: with "stream": true (Ollama's default), one JSON
//     object a line (application/x-ndjson): message.thinking pieces for a
//     thought, message.content pieces for text, a message with tool_calls
//     (each call whole, arguments an object) for a tool call, then the last
//     line with "done": true, "done_reason" ("stop"), "prompt_eval_count"
//     [InputTokens] and "eval_count" [OutputTokens]. An unknown model is
//     404. Without stream, one JSON object.
//   - anything else: 404.
//
// The reply is chosen by fakescript from the last message: a "tool"
// message is a tool follow-up; otherwise the last user message's text.
// "please fail midway" streams two content pieces and then a line
// {"error": MidwayMessage}, as Ollama reports an error mid-stream. Every
// chat request is recorded (see [Server.Requests]).
package fakeollama

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kaimon/kaimon/internal/testutil/fakescript"
)

// Token counts reported on every reply's last line.
const (
	InputTokens  = 31
	OutputTokens = 5
)

// Models are the tags the fake has "pulled".
var Models = []string{"qwen3:fake", "llama3:fake"}

// Request is one recorded chat request.
type Request struct {
	Model        string
	LastUserText string
	ToolResult   string
	Stream       bool
	Tools        []string
	// History is one "role: text" per message with text, the system
	// message left out; an assistant's tool calls as "assistant: call NAME".
	History []string
	System  string
	// Think and KeepAlive are the request's think and keep_alive as sent.
	Think     json.RawMessage
	KeepAlive json.RawMessage
}

// Server is a running fake.
type Server struct {
	*fakescript.Host[Request]
}

// Start serves on 127.0.0.1 with a free port.
func Start() (*Server, error) {
	s := &Server{}
	h, err := fakescript.Listen[Request]("fakeollama", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s.Host = h
	h.Serve(s.serveHTTP)
	return s, nil
}

// New starts a server for a test and closes it when the test ends.
func New(t testing.TB) *Server {
	t.Helper()
	s, err := Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// URL is the server's base URL, http://127.0.0.1:PORT.
func (s *Server) URL() string { return s.BaseURL() }

func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.URL.Path == "/" && (r.Method == http.MethodGet || r.Method == http.MethodHead):
		io.WriteString(w, "Ollama is running")
	case r.URL.Path == "/api/show" && r.Method == http.MethodPost:
		var req struct {
			Model string `json:"model"`
			Name  string `json:"name"`
		}
		_ = json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&req)
		m := req.Model
		if m == "" {
			m = req.Name
		}
		s.Logf("POST /api/show %q", m)
		if !slices.Contains(Models, m) {
			writeJSON(w, http.StatusNotFound, map[string]any{"error": fmt.Sprintf("model '%s' not found", m)})
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"modelfile": "FROM " + m, "parameters": "", "template": "{{ .Prompt }}",
			"details":      map[string]any{"format": "gguf", "family": "fake", "parameter_size": "1B", "quantization_level": "Q4_0"},
			"capabilities": []string{"completion", "tools", "thinking"}})
	case r.URL.Path == "/api/chat" && r.Method == http.MethodPost:
		s.chat(w, r)
	default:
		s.Logf("404 %s %s", r.Method, r.URL.Path)
		http.Error(w, "404 page not found", http.StatusNotFound)
	}
}

type message struct {
	Role      string `json:"role"`
	Content   string `json:"content"`
	Thinking  string `json:"thinking"`
	ToolName  string `json:"tool_name"`
	ToolCalls []struct {
		Function struct {
			Name      string          `json:"name"`
			Arguments json.RawMessage `json:"arguments"`
		} `json:"function"`
	} `json:"tool_calls"`
}

type chatRequest struct {
	Model     string          `json:"model"`
	Stream    *bool           `json:"stream"`
	Messages  []message       `json:"messages"`
	Think     json.RawMessage `json:"think"`
	KeepAlive json.RawMessage `json:"keep_alive"`
	Tools     []struct {
		Type     string `json:"type"`
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	} `json:"tools"`
}

func (s *Server) chat(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 64<<20))
	var req chatRequest
	if err == nil {
		err = json.Unmarshal(body, &req)
	}
	stream := req.Stream == nil || *req.Stream
	var text, toolResult string
	followUp := false
	if n := len(req.Messages); n > 0 {
		if req.Messages[n-1].Role == "tool" {
			followUp = true
			var res []string
			for i := n - 1; i >= 0 && req.Messages[i].Role == "tool"; i-- {
				res = append([]string{req.Messages[i].Content}, res...)
			}
			toolResult = strings.Join(res, "\n")
		}
		for i := n - 1; i >= 0 && !followUp; i-- {
			if req.Messages[i].Role == "user" {
				text = req.Messages[i].Content
				break
			}
		}
	}
	tools := make([]string, 0, len(req.Tools))
	for _, t := range req.Tools {
		tools = append(tools, t.Function.Name)
	}
	var history []string
	system := ""
	for _, m := range req.Messages {
		switch {
		case m.Role == "system":
			system = m.Content
		case m.Content != "":
			history = append(history, m.Role+": "+m.Content)
		}
		for _, c := range m.ToolCalls {
			history = append(history, m.Role+": call "+c.Function.Name)
		}
	}
	n := s.Record(Request{Model: req.Model, LastUserText: text, ToolResult: toolResult, Stream: stream, Tools: tools,
		History: history, System: system, Think: req.Think, KeepAlive: req.KeepAlive})
	s.Logf("POST /api/chat #%d model=%q stream=%v tools=%d text=%q toolResult=%q", n, req.Model, stream, len(tools), fakescript.Clip(text), fakescript.Clip(toolResult))
	if err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]any{"error": "fakeollama: bad request body: " + err.Error()})
		return
	}
	if !slices.Contains(Models, req.Model) {
		writeJSON(w, http.StatusNotFound, map[string]any{"error": fmt.Sprintf("model '%s' not found", req.Model)})
		return
	}
	rep := fakescript.Choose(text, toolResult, followUp, len(tools) > 0, "fakeollama", n)
	if rep.Fail {
		writeJSON(w, http.StatusInternalServerError, map[string]any{"error": fakescript.FailMessage})
		return
	}
	var calls []any
	if rep.ToolName != "" {
		calls = []any{map[string]any{"function": map[string]any{"name": rep.ToolName, "arguments": json.RawMessage(rep.ToolArgs)}}}
	}
	final := func(msg map[string]any) map[string]any {
		return map[string]any{"model": req.Model, "created_at": now(), "message": msg, "done": true, "done_reason": "stop",
			"total_duration": 1000000, "load_duration": 1000, "prompt_eval_count": InputTokens, "prompt_eval_duration": 1000,
			"eval_count": OutputTokens, "eval_duration": 1000}
	}
	if !stream {
		msg := map[string]any{"role": "assistant", "content": rep.FullText(), "thinking": strings.Join(rep.Thought, "")}
		if calls != nil {
			msg["tool_calls"] = calls
		}
		writeJSON(w, http.StatusOK, final(msg))
		return
	}
	s.stream(w, r.Context(), req.Model, rep, calls, final)
}

func now() string { return time.Now().UTC().Format(time.RFC3339Nano) }

func (s *Server) stream(w http.ResponseWriter, ctx context.Context, model string, rep fakescript.Reply, calls []any, final func(map[string]any) map[string]any) {
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	send := func(v any) error {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-s.Done():
			return io.EOF
		default:
		}
		if _, err := fmt.Fprintf(w, "%s\n", fakescript.JSON(v)); err != nil {
			return err
		}
		return rc.Flush()
	}
	chunk := func(msg map[string]any) map[string]any {
		msg["role"] = "assistant"
		if _, ok := msg["content"]; !ok {
			msg["content"] = ""
		}
		return map[string]any{"model": model, "created_at": now(), "message": msg, "done": false}
	}
	pause := func() error {
		if rep.Delay <= 0 {
			return nil
		}
		t := time.NewTimer(rep.Delay)
		defer t.Stop()
		select {
		case <-t.C:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		case <-s.Done():
			return io.EOF
		}
	}
	err := func() error {
		for _, t := range rep.Thought {
			if err := send(chunk(map[string]any{"thinking": t})); err != nil {
				return err
			}
		}
		for i, t := range rep.Text {
			if i > 0 {
				if err := pause(); err != nil {
					return err
				}
			}
			if err := send(chunk(map[string]any{"content": t})); err != nil {
				return err
			}
		}
		if rep.FailMidway {
			return send(map[string]any{"error": fakescript.MidwayMessage})
		}
		if calls != nil {
			if err := send(chunk(map[string]any{"tool_calls": calls})); err != nil {
				return err
			}
		}
		return send(final(map[string]any{"role": "assistant", "content": ""}))
	}()
	if err != nil {
		s.Logf("stream ended early: %v", err)
	}
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(code)
	w.Write(fakescript.JSON(v))
}
