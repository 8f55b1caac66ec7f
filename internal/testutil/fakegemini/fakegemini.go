// Package fakegemini is a fake Gemini API (generativelanguage v1beta) for
// end-to-end tests of gemini-cli (GOOGLE_GEMINI_BASE_URL pointed at
// http://127.0.0.1:PORT). It listens on 127.0.0.1 and answers:
//
//   - POST /v1beta/models/{m}:streamGenerateContent?alt=sse: server-sent
//     events of GenerateContentResponse objects (thought parts, text parts,
//     then a functionCall part for a tool call), the last with a finishReason
//     and usageMetadata.
//   - POST /v1beta/models/{m}:generateContent: one GenerateContentResponse.
//     A JSON-mode request (responseMimeType application/json: gemini-cli's
//     model routing and next-speaker checks) gets a JSON object that fills
//     the schema's required properties (enum properties with their first
//     value, "model_choice" with "flash", "next_speaker" with "user").
//   - POST /v1beta/models/{m}:countTokens: {"totalTokens": InputTokens}.
//   - anything else: 404.
//
// The reply is chosen by fakescript from the last content: one whose parts
// are functionResponses is a tool follow-up; otherwise the last text part of
// the last user content (parts beginning with "<" skipped). Every generate
// request is recorded (see [Server.Requests]).
package fakegemini

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

// Token counts reported in every reply.
const (
	InputTokens  = 42
	OutputTokens = 7
)

// Request is one recorded generate request.
type Request struct {
	Model        string // from the URL path
	LastUserText string
	ToolResult   string
	Stream       bool
	JSONMode     bool
	Tools        []string
	// History is the conversation the request carried, one "role: text"
	// per text part (thoughts and <…> blocks left out): what shows that a
	// resumed session kept its earlier turns.
	History []string
}

// Server is a running fake.
type Server struct {
	*fakescript.Host[Request]
}

// Start serves on 127.0.0.1 with a free port.
func Start() (*Server, error) {
	s := &Server{}
	h, err := fakescript.Listen[Request]("fakegemini", "127.0.0.1:0")
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

// URL is the base URL, http://127.0.0.1:PORT, for GOOGLE_GEMINI_BASE_URL.
func (s *Server) URL() string { return s.BaseURL() }

// Models returns the model of every streamed (chat) request, in order.
func (s *Server) Models() []string {
	var out []string
	for _, r := range s.Requests() {
		if r.Stream {
			out = append(out, r.Model)
		}
	}
	return out
}

func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request) {
	rest, ok := strings.CutPrefix(r.URL.Path, "/v1beta/models/")
	model, method, _ := strings.Cut(rest, ":")
	switch {
	case ok && r.Method == http.MethodPost && method == "streamGenerateContent":
		s.generate(w, r, model, true)
	case ok && r.Method == http.MethodPost && method == "generateContent":
		s.generate(w, r, model, false)
	case ok && r.Method == http.MethodPost && method == "countTokens":
		io.Copy(io.Discard, r.Body)
		writeJSON(w, http.StatusOK, map[string]any{"totalTokens": InputTokens})
	default:
		s.Logf("404 %s %s", r.Method, r.URL.Path)
		writeJSON(w, http.StatusNotFound, errBody(http.StatusNotFound, "fakegemini: no route for "+r.Method+" "+r.URL.Path))
	}
}

type part struct {
	Text             string          `json:"text"`
	Thought          bool            `json:"thought"`
	FunctionResponse json.RawMessage `json:"functionResponse"`
}

type genRequest struct {
	Contents []struct {
		Role  string `json:"role"`
		Parts []part `json:"parts"`
	} `json:"contents"`
	Tools []struct {
		FunctionDeclarations []struct {
			Name string `json:"name"`
		} `json:"functionDeclarations"`
	} `json:"tools"`
	GenerationConfig struct {
		ResponseMimeType   string          `json:"responseMimeType"`
		ResponseSchema     json.RawMessage `json:"responseSchema"`
		ResponseJSONSchema json.RawMessage `json:"responseJsonSchema"`
	} `json:"generationConfig"`
}

func (s *Server) generate(w http.ResponseWriter, r *http.Request, model string, stream bool) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 64<<20))
	var req genRequest
	if err == nil {
		err = json.Unmarshal(body, &req)
	}
	var text, toolResult string
	followUp := false
	if n := len(req.Contents); n > 0 {
		last := req.Contents[n-1]
		var res []string
		for _, p := range last.Parts {
			if len(p.FunctionResponse) > 0 {
				res = append(res, functionResult(p.FunctionResponse))
			}
		}
		if len(res) > 0 {
			followUp, toolResult = true, strings.Join(res, "\n")
		}
		for i := n - 1; i >= 0 && !followUp; i-- {
			c := req.Contents[i]
			if c.Role != "user" {
				continue
			}
			for _, p := range c.Parts {
				if p.Text != "" && !strings.HasPrefix(strings.TrimSpace(p.Text), "<") {
					text = p.Text
				}
			}
			if text != "" {
				break
			}
		}
	}
	var tools []string
	for _, t := range req.Tools {
		for _, f := range t.FunctionDeclarations {
			tools = append(tools, f.Name)
		}
	}
	jsonMode := req.GenerationConfig.ResponseMimeType == "application/json"
	var history []string
	for _, c := range req.Contents {
		for _, p := range c.Parts {
			if p.Text != "" && !p.Thought && !strings.HasPrefix(strings.TrimSpace(p.Text), "<") {
				history = append(history, c.Role+": "+p.Text)
			}
		}
	}
	n := s.Record(Request{Model: model, LastUserText: text, ToolResult: toolResult, Stream: stream, JSONMode: jsonMode, Tools: tools, History: history})
	s.Logf("POST %s #%d stream=%v json=%v tools=%d text=%q toolResult=%q", r.URL.Path, n, stream, jsonMode, len(tools), fakescript.Clip(text), fakescript.Clip(toolResult))
	if err != nil {
		writeJSON(w, http.StatusBadRequest, errBody(http.StatusBadRequest, "fakegemini: bad request body: "+err.Error()))
		return
	}
	if jsonMode {
		schema := req.GenerationConfig.ResponseJSONSchema
		if len(schema) == 0 {
			schema = req.GenerationConfig.ResponseSchema
		}
		writeJSON(w, http.StatusOK, response([]any{map[string]any{"text": string(fakescript.JSON(fillSchema(schema)))}}, "STOP"))
		return
	}
	rep := fakescript.Choose(text, toolResult, followUp, len(tools) > 0, "fakegemini", n)
	if rep.Fail {
		writeJSON(w, http.StatusInternalServerError, errBody(http.StatusInternalServerError, fakescript.FailMessage))
		return
	}
	if !stream {
		var parts []any
		if t := strings.Join(rep.Thought, ""); t != "" {
			parts = append(parts, map[string]any{"text": t, "thought": true})
		}
		if t := rep.FullText(); t != "" {
			parts = append(parts, map[string]any{"text": t})
		}
		if rep.ToolName != "" {
			parts = append(parts, functionCall(rep))
		}
		writeJSON(w, http.StatusOK, response(parts, "STOP"))
		return
	}
	s.stream(w, r.Context(), rep)
}

// functionResult is the text of a functionResponse part: its response's
// output (or error), else the response as JSON.
func functionResult(raw json.RawMessage) string {
	var fr struct {
		Response map[string]json.RawMessage `json:"response"`
	}
	if json.Unmarshal(raw, &fr) != nil {
		return string(raw)
	}
	for _, k := range []string{"output", "error"} {
		if v, ok := fr.Response[k]; ok {
			var s string
			if json.Unmarshal(v, &s) == nil {
				return s
			}
			return string(v)
		}
	}
	return string(fakescript.JSON(fr.Response))
}

func functionCall(rep fakescript.Reply) map[string]any {
	return map[string]any{"functionCall": map[string]any{"name": rep.ToolName, "args": json.RawMessage(rep.ToolArgs)}}
}

func response(parts []any, finish string) map[string]any {
	cand := map[string]any{"content": map[string]any{"role": "model", "parts": parts}, "index": 0}
	if finish != "" {
		cand["finishReason"] = finish
	}
	return map[string]any{"candidates": []any{cand},
		"usageMetadata": map[string]any{"promptTokenCount": InputTokens, "candidatesTokenCount": OutputTokens, "totalTokenCount": InputTokens + OutputTokens},
		"modelVersion":  "fakegemini"}
}

// fillSchema makes a JSON object that satisfies a (simple) response schema.
func fillSchema(raw json.RawMessage) map[string]any {
	var sch struct {
		Properties map[string]struct {
			Type string   `json:"type"`
			Enum []string `json:"enum"`
		} `json:"properties"`
		Required []string `json:"required"`
	}
	_ = json.Unmarshal(raw, &sch)
	out := map[string]any{"reasoning": "fakegemini"}
	for name, p := range sch.Properties {
		switch {
		case name == "model_choice":
			out[name] = "flash"
		case name == "next_speaker":
			out[name] = "user"
		case len(p.Enum) > 0:
			out[name] = p.Enum[0]
		case strings.EqualFold(p.Type, "boolean"):
			out[name] = false
		case strings.EqualFold(p.Type, "number"), strings.EqualFold(p.Type, "integer"):
			out[name] = 1 // gemini-cli's complexity_score is 1 to 10
		case strings.EqualFold(p.Type, "array"):
			out[name] = []any{}
		case strings.EqualFold(p.Type, "object"):
			out[name] = map[string]any{}
		default:
			out[name] = "fakegemini"
		}
	}
	return out
}

func (s *Server) stream(w http.ResponseWriter, ctx context.Context, rep fakescript.Reply) {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
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
		if _, err := fmt.Fprintf(w, "data: %s\r\n\r\n", fakescript.JSON(v)); err != nil {
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
		var pending []map[string]any // sent with the finish in the last event
		for _, t := range rep.Thought {
			if err := send(response([]any{map[string]any{"text": t, "thought": true}}, "")); err != nil {
				return err
			}
		}
		for i, t := range rep.Text {
			if i > 0 {
				if err := pause(); err != nil {
					return err
				}
			}
			if i == len(rep.Text)-1 && rep.ToolName == "" {
				pending = append(pending, map[string]any{"text": t})
				break
			}
			if err := send(response([]any{map[string]any{"text": t}}, "")); err != nil {
				return err
			}
		}
		if rep.ToolName != "" {
			pending = append(pending, functionCall(rep))
		}
		parts := make([]any, len(pending))
		for i, p := range pending {
			parts[i] = p
		}
		if len(parts) == 0 {
			parts = []any{map[string]any{"text": ""}}
		}
		return send(response(parts, "STOP"))
	}()
	if err != nil {
		s.Logf("stream ended early: %v", err)
	}
}

func errBody(code int, msg string) map[string]any {
	status := "INTERNAL"
	if code == http.StatusNotFound {
		status = "NOT_FOUND"
	} else if code == http.StatusBadRequest {
		status = "INVALID_ARGUMENT"
	}
	return map[string]any{"error": map[string]any{"code": code, "message": msg, "status": status}}
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	w.Write(fakescript.JSON(v))
}
