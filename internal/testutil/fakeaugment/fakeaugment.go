// Package fakeaugment is a fake of Augment's backend for end-to-end tests of
// auggie (`auggie --acp`), which talks to no standard model API but to its
// tenant's own: pointed here by AUGMENT_SESSION_AUTH's tenantURL
// (http://127.0.0.1:PORT/). It listens on 127.0.0.1 and answers:
//
//   - POST /get-models: the model config auggie needs at start
//     (default_model and the models Models names).
//   - POST /chat-stream: one agent step, newline-delimited JSON objects
//     {"text", "nodes", "stop_reason"}: a thought as a node of type 8
//     {thinking {content}}, each text chunk as "text" and a node of type 0
//     {content}, a tool call as a node of type 5 {tool_use {tool_use_id,
//     tool_name, input_json}} ending with stop_reason 3 (tool use
//     requested), else a node of type 10 {token_usage} ending with
//     stop_reason 1 (end turn).
//   - anything else (/settings/…, /agents/list-remote-tools, /report-…):
//     404, which auggie tolerates.
//
// A request's "nodes" are the new input of the step: a node of type 0
// {text_node {content}} is the user's text, of type 1 {tool_result_node
// {tool_use_id, content, is_error}} a tool's result (a step that carries
// one is a tool follow-up), of type 4 the IDE state (ignored).
// "chat_history" carries the earlier exchanges (request_nodes,
// response_nodes), "tool_definitions" the tools offered ({name, …}).
//
// The reply is chosen by fakescript from the user's text (or the tool
// result). "please fail" answers HTTP 500 (auggie retries chat-stream a few
// times within about 5s before it gives up); "please fail midway" streams
// two text chunks and breaks the stream off with no stop_reason; "please
// be slow" pauses between its chunks and ends when its request does
// (auggie aborts it on session/cancel): a turn to interrupt. Every
// chat-stream request is recorded (see [Server.Requests]). Usage:
// input_tokens [InputTokens], output_tokens [OutputTokens].
package fakeaugment

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/kaimon/kaimon/internal/testutil/fakescript"
)

// Token counts reported in every reply's token_usage node.
const (
	InputTokens  = 42
	OutputTokens = 7
)

// Models are the model names POST /get-models lists, the first the default.
var Models = []string{"fake-model", "fake-model-2"}

// Node types of the chat-stream protocol, in requests and responses.
const (
	NodeText       = 0  // request text_node; response text content
	NodeToolResult = 1  // request tool_result_node
	NodeIDEState   = 4  // request ide_state_node
	NodeToolUse    = 5  // response tool_use
	NodeThinking   = 8  // response thinking
	NodeTokenUsage = 10 // response token_usage
)

// Stop reasons of the chat-stream protocol.
const (
	StopEndTurn = 1
	StopToolUse = 3
)

// Request is one recorded chat-stream request.
type Request struct {
	// Model is the request's "model" ("" when auggie uses the default).
	Model string
	// LastUserText is the text of the step's text nodes ("" in a tool
	// follow-up).
	LastUserText string
	// ToolResult is the content of the step's tool results, joined by
	// newlines; IsError says one of them is an error.
	ToolResult string
	IsError    bool
	// Tools are the names of the tool definitions offered.
	Tools []string
	// History is the conversation of chat_history, one "user: text" or
	// "assistant: text" per exchange node with text: what shows that a
	// resumed session kept its earlier turns.
	History []string
	// ConversationID is the request's conversation_id.
	ConversationID string
	// Mode is the request's mode (auggie --acp sends CLI_NONINTERACTIVE).
	Mode string
	// Authorization is the request's Authorization header.
	Authorization string
}

// Server is a running fake.
type Server struct {
	*fakescript.Host[Request]
}

// Start serves on 127.0.0.1 with a free port.
func Start() (*Server, error) {
	s := &Server{}
	h, err := fakescript.Listen[Request]("fakeaugment", "127.0.0.1:0")
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

// URL is the tenant URL, http://127.0.0.1:PORT/ (auggie joins paths to it).
func (s *Server) URL() string { return s.BaseURL() + "/" }

func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.URL.Path == "/chat-stream" && r.Method == http.MethodPost:
		s.chat(w, r)
	case r.URL.Path == "/get-models" && r.Method == http.MethodPost:
		io.Copy(io.Discard, r.Body) //nolint:errcheck // the body says nothing we use
		var models []map[string]any
		for _, m := range Models {
			models = append(models, map[string]any{"name": m, "suggested_prefix_char_count": 4096, "suggested_suffix_char_count": 4096})
		}
		writeJSON(w, http.StatusOK, map[string]any{"default_model": Models[0], "models": models, "feature_flags": map[string]any{}})
	default:
		s.Logf("404 %s %s", r.Method, r.URL.Path)
		writeJSON(w, http.StatusNotFound, map[string]any{"error": "fakeaugment: no route for " + r.Method + " " + r.URL.Path})
	}
}

// node is a request or response node; only the fields the fake reads.
type node struct {
	Type     int `json:"type"`
	TextNode *struct {
		Content string `json:"content"`
	} `json:"text_node"`
	ToolResultNode *struct {
		ToolUseID string `json:"tool_use_id"`
		Content   string `json:"content"`
		IsError   bool   `json:"is_error"`
	} `json:"tool_result_node"`
	Content string `json:"content"` // response text (type 0)
}

type chatRequest struct {
	Model          string `json:"model"`
	Mode           string `json:"mode"`
	ConversationID string `json:"conversation_id"`
	Nodes          []node `json:"nodes"`
	ChatHistory    []struct {
		RequestNodes  []node `json:"request_nodes"`
		ResponseNodes []node `json:"response_nodes"`
	} `json:"chat_history"`
	ToolDefinitions []struct {
		Name string `json:"name"`
	} `json:"tool_definitions"`
}

func (s *Server) chat(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 64<<20))
	var req chatRequest
	if err == nil {
		err = json.Unmarshal(body, &req)
	}
	var texts, results []string
	isError := false
	for _, n := range req.Nodes {
		switch {
		case n.Type == NodeText && n.TextNode != nil:
			texts = append(texts, n.TextNode.Content)
		case n.Type == NodeToolResult && n.ToolResultNode != nil:
			results = append(results, n.ToolResultNode.Content)
			isError = isError || n.ToolResultNode.IsError
		}
	}
	followUp := len(results) > 0
	text, toolResult := strings.Join(texts, "\n"), strings.Join(results, "\n")
	if followUp {
		text = ""
	}
	tools := make([]string, 0, len(req.ToolDefinitions))
	for _, t := range req.ToolDefinitions {
		tools = append(tools, t.Name)
	}
	var history []string
	for _, ex := range req.ChatHistory {
		for _, n := range ex.RequestNodes {
			if n.Type == NodeText && n.TextNode != nil && n.TextNode.Content != "" {
				history = append(history, "user: "+n.TextNode.Content)
			}
		}
		var reply strings.Builder
		for _, n := range ex.ResponseNodes {
			if n.Type == NodeText {
				reply.WriteString(n.Content)
			}
		}
		if reply.Len() > 0 {
			history = append(history, "assistant: "+reply.String())
		}
	}
	n := s.Record(Request{Model: req.Model, LastUserText: text, ToolResult: toolResult, IsError: isError, Tools: tools, History: history,
		ConversationID: req.ConversationID, Mode: req.Mode, Authorization: r.Header.Get("Authorization")})
	s.Logf("POST %s #%d model=%q tools=%d history=%d text=%q toolResult=%q", r.URL.Path, n, req.Model, len(tools), len(history), fakescript.Clip(text), fakescript.Clip(toolResult))
	if err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]any{"error": "fakeaugment: bad request body: " + err.Error()})
		return
	}
	rep := fakescript.Choose(text, toolResult, followUp, len(tools) > 0, "fakeaugment", n)
	if rep.Fail {
		writeJSON(w, http.StatusInternalServerError, map[string]any{"error": fakescript.FailMessage})
		return
	}
	s.stream(w, r.Context(), n, rep)
}

// stream writes the reply as newline-delimited JSON objects.
func (s *Server) stream(w http.ResponseWriter, ctx context.Context, n int, rep fakescript.Reply) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	id := 0
	send := func(text string, nodes []map[string]any, stop int) error {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-s.Done():
			return io.EOF
		default:
		}
		for _, nd := range nodes {
			id++
			nd["id"] = id
		}
		obj := map[string]any{"text": text, "nodes": nodes}
		if stop != 0 {
			obj["stop_reason"] = stop
		}
		if _, err := fmt.Fprintf(w, "%s\n", fakescript.JSON(obj)); err != nil {
			return err
		}
		return rc.Flush()
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
			if err := send("", []map[string]any{{"type": NodeThinking, "content": "", "thinking": map[string]any{"content": t}}}, 0); err != nil {
				return err
			}
		}
		for i, t := range rep.Text {
			if i > 0 {
				if err := pause(); err != nil {
					return err
				}
			}
			if err := send(t, []map[string]any{{"type": NodeText, "content": t}}, 0); err != nil {
				return err
			}
		}
		if rep.FailMidway {
			return nil // the stream breaks off: no stop_reason
		}
		if rep.ToolName != "" {
			use := map[string]any{"tool_use_id": fmt.Sprintf("toolu_fake_%d", n), "tool_name": rep.ToolName, "input_json": string(rep.ToolArgs)}
			if err := send("", []map[string]any{{"type": NodeToolUse, "content": "", "tool_use": use}}, 0); err != nil {
				return err
			}
			return send("", []map[string]any{}, StopToolUse)
		}
		usage := map[string]any{"input_tokens": InputTokens, "output_tokens": OutputTokens}
		return send("", []map[string]any{{"type": NodeTokenUsage, "content": "", "token_usage": usage}}, StopEndTurn)
	}()
	if err != nil {
		s.Logf("stream #%d ended early: %v", n, err)
	}
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	w.Write(fakescript.JSON(v))
}
