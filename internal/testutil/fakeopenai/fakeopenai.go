// Package fakeopenai is a fake OpenAI-compatible chat completions API for
// end-to-end tests of opencode (its built-in @ai-sdk/openai-compatible
// provider pointed at http://127.0.0.1:PORT/v1). It listens on 127.0.0.1 and
// answers:
//
//   - POST /v1/chat/completions: with "stream": true, server-sent events of
//     chat.completion.chunk objects (role, content deltas, reasoning_content
//     deltas for a thought, tool_calls deltas with the arguments in pieces,
//     a finish_reason, a usage chunk, then "data: [DONE]"); otherwise one
//     chat.completion object.
//   - POST /v1/responses (the Responses API, which codex speaks; see
//     responses.go): with "stream": true, server-sent events
//     response.created, output_item.added/done, output_text.delta,
//     function_call_arguments.delta, response.completed with usage;
//     otherwise one response object. Same script and recording.
//   - GET /v1/models: the two models Models names (404 after
//     [Server.SetNoModels], as servers without the route answer).
//   - anything else: 404.
//
// "please fail midway" streams two text chunks, then an event
// {"error":{"message":MidwayMessage,…}} and ends the stream without
// [DONE], as vLLM and llama.cpp's server report an error mid-stream.
//
// The reply is chosen by fakescript from the last message: a "tool" message
// is a tool follow-up; otherwise the last text of the last user message
// (parts beginning with "<" skipped). Every chat completion request is
// recorded (see [Server.Requests]). Usage: prompt_tokens [InputTokens],
// completion_tokens [OutputTokens].
package fakeopenai

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kaimon/kaimon/internal/event"
	"github.com/kaimon/kaimon/internal/testutil/fakescript"
)

// Token counts reported in every reply.
const (
	InputTokens  = 42
	OutputTokens = 7
)

// Usage is what n requests count, in kaimon's figures: what an agent that
// reports every request's usage sums to over n of them.
func Usage(n int) event.UsageFigures {
	return event.UsageFigures{InputTokens: int64(n) * InputTokens, OutputTokens: int64(n) * OutputTokens}
}

// Models are the model ids GET /v1/models lists (any id is answered).
var Models = []string{"fake-model", "fake-model-2"}

// Request is one recorded chat completion request.
type Request struct {
	Model        string
	LastUserText string
	ToolResult   string
	Stream       bool
	Tools        []string
	// History is the conversation the request carried, one "role: text"
	// per message with text (system messages left out): what shows that a
	// resumed session kept its earlier turns.
	History []string
	// System is the system message's text, if any.
	System string
	// IncludeUsage is stream_options.include_usage.
	IncludeUsage bool
	// Authorization is the request's Authorization header.
	Authorization string
}

// Server is a running fake.
type Server struct {
	*fakescript.Host[Request]
	noModels atomic.Bool
}

// SetNoModels makes GET /v1/models answer 404 (on) or the list (off).
func (s *Server) SetNoModels(on bool) { s.noModels.Store(on) }

// Start serves on 127.0.0.1 with a free port.
func Start() (*Server, error) {
	s := &Server{}
	h, err := fakescript.Listen[Request]("fakeopenai", "127.0.0.1:0")
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

// URL is the API's base URL, http://127.0.0.1:PORT/v1.
func (s *Server) URL() string { return s.BaseURL() + "/v1" }

func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.URL.Path == "/v1/chat/completions" && r.Method == http.MethodPost:
		s.chat(w, r)
	case r.URL.Path == "/v1/responses" && r.Method == http.MethodPost:
		s.responses(w, r)
	case r.URL.Path == "/v1/models" && r.Method == http.MethodGet && !s.noModels.Load():
		var data []map[string]any
		for _, m := range Models {
			data = append(data, map[string]any{"id": m, "object": "model", "owned_by": "fakeopenai"})
		}
		writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": data})
	default:
		s.Logf("404 %s %s", r.Method, r.URL.Path)
		writeJSON(w, http.StatusNotFound, errBody("fakeopenai: no route for "+r.Method+" "+r.URL.Path))
	}
}

type chatRequest struct {
	Model    string `json:"model"`
	Stream   bool   `json:"stream"`
	Messages []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	} `json:"messages"`
	Tools []struct {
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	} `json:"tools"`
	StreamOptions struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
}

// contentText is a message content (a string or text parts: chat's text,
// the Responses API's input_text and output_text) as text; with skipTags,
// parts beginning with "<" are skipped and the last part wins.
func contentText(raw json.RawMessage, skipTags bool) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(raw, &parts) != nil {
		return ""
	}
	var all []string
	last := ""
	for _, p := range parts {
		if p.Type != "text" && p.Type != "input_text" && p.Type != "output_text" {
			continue
		}
		all = append(all, p.Text)
		if !skipTags || !strings.HasPrefix(strings.TrimSpace(p.Text), "<") {
			last = p.Text
		}
	}
	if skipTags {
		return last
	}
	return strings.Join(all, "\n")
}

func (s *Server) chat(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 64<<20))
	var req chatRequest
	if err == nil {
		err = json.Unmarshal(body, &req)
	}
	var text, toolResult string
	followUp := false
	if n := len(req.Messages); n > 0 {
		if last := req.Messages[n-1]; last.Role == "tool" {
			followUp = true
			// Every tool message at the end: one turn may call several.
			var res []string
			for i := n - 1; i >= 0 && req.Messages[i].Role == "tool"; i-- {
				res = append([]string{contentText(req.Messages[i].Content, false)}, res...)
			}
			toolResult = strings.Join(res, "\n")
		}
		for i := n - 1; i >= 0 && !followUp; i-- {
			if req.Messages[i].Role == "user" {
				text = contentText(req.Messages[i].Content, true)
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
		if m.Role == "system" {
			system = contentText(m.Content, false)
		}
		if t := contentText(m.Content, true); t != "" && m.Role != "system" {
			history = append(history, m.Role+": "+t)
		}
	}
	n := s.Record(Request{Model: req.Model, LastUserText: text, ToolResult: toolResult, Stream: req.Stream, Tools: tools, History: history,
		System: system, IncludeUsage: req.StreamOptions.IncludeUsage, Authorization: r.Header.Get("Authorization")})
	s.Logf("POST %s #%d model=%q stream=%v tools=%d text=%q toolResult=%q", r.URL.Path, n, req.Model, req.Stream, len(tools), fakescript.Clip(text), fakescript.Clip(toolResult))
	if err != nil {
		writeJSON(w, http.StatusBadRequest, errBody("fakeopenai: bad request body: "+err.Error()))
		return
	}
	rep := fakescript.Choose(text, toolResult, followUp, len(tools) > 0, "fakeopenai", n)
	if rep.Fail {
		writeJSON(w, http.StatusInternalServerError, errBody(fakescript.FailMessage))
		return
	}
	id := fmt.Sprintf("chatcmpl-fake%d", n)
	callID := fmt.Sprintf("call_fake_%d", n)
	if !req.Stream {
		msg := map[string]any{"role": "assistant", "content": rep.FullText()}
		finish := "stop"
		if rep.ToolName != "" {
			finish = "tool_calls"
			msg["tool_calls"] = []any{map[string]any{"id": callID, "type": "function",
				"function": map[string]any{"name": rep.ToolName, "arguments": string(rep.ToolArgs)}}}
		}
		writeJSON(w, http.StatusOK, map[string]any{"id": id, "object": "chat.completion", "created": time.Now().Unix(), "model": req.Model,
			"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": finish}},
			"usage":   usage()})
		return
	}
	s.stream(w, r.Context(), id, callID, req.Model, rep)
}

func usage() map[string]int {
	return map[string]int{"prompt_tokens": InputTokens, "completion_tokens": OutputTokens, "total_tokens": InputTokens + OutputTokens}
}

func (s *Server) stream(w http.ResponseWriter, ctx context.Context, id, callID, model string, rep fakescript.Reply) {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	created := time.Now().Unix()
	send := func(v any) error {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-s.Done():
			return io.EOF
		default:
		}
		if _, err := fmt.Fprintf(w, "data: %s\n\n", fakescript.JSON(v)); err != nil {
			return err
		}
		return rc.Flush()
	}
	chunk := func(delta map[string]any, finish any) map[string]any {
		return map[string]any{"id": id, "object": "chat.completion.chunk", "created": created, "model": model,
			"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}}}
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
		if err := send(chunk(map[string]any{"role": "assistant", "content": ""}, nil)); err != nil {
			return err
		}
		for _, t := range rep.Thought {
			if err := send(chunk(map[string]any{"reasoning_content": t}, nil)); err != nil {
				return err
			}
		}
		for i, t := range rep.Text {
			if i > 0 {
				if err := pause(); err != nil {
					return err
				}
			}
			if err := send(chunk(map[string]any{"content": t}, nil)); err != nil {
				return err
			}
		}
		if rep.FailMidway {
			return send(map[string]any{"error": map[string]any{"message": fakescript.MidwayMessage, "type": "server_error", "code": 500}})
		}
		finish := "stop"
		if rep.ToolName != "" {
			finish = "tool_calls"
			first := map[string]any{"tool_calls": []any{map[string]any{"index": 0, "id": callID, "type": "function",
				"function": map[string]any{"name": rep.ToolName, "arguments": ""}}}}
			if err := send(chunk(first, nil)); err != nil {
				return err
			}
			for _, p := range fakescript.Split(string(rep.ToolArgs), 10) {
				d := map[string]any{"tool_calls": []any{map[string]any{"index": 0, "function": map[string]any{"arguments": p}}}}
				if err := send(chunk(d, nil)); err != nil {
					return err
				}
			}
		}
		if err := send(chunk(map[string]any{}, finish)); err != nil {
			return err
		}
		if err := send(map[string]any{"id": id, "object": "chat.completion.chunk", "created": created, "model": model,
			"choices": []any{}, "usage": usage()}); err != nil {
			return err
		}
		if _, err := io.WriteString(w, "data: [DONE]\n\n"); err != nil {
			return err
		}
		return rc.Flush()
	}()
	if err != nil {
		s.Logf("stream %s ended early: %v", id, err)
	}
}

func errBody(msg string) map[string]any {
	return map[string]any{"error": map[string]any{"message": msg, "type": "server_error", "code": nil}}
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	w.Write(fakescript.JSON(v))
}
