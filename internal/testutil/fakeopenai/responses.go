package fakeopenai

// The OpenAI Responses API (POST /v1/responses), which codex speaks: the
// same script and recording as chat completions, rendered as Responses
// items and server-sent events.

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/kaimon/kaimon/internal/testutil/fakescript"
)

type responsesRequest struct {
	Model        string `json:"model"`
	Stream       bool   `json:"stream"`
	Instructions string `json:"instructions"`
	Input        []struct {
		Type    string          `json:"type"`
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
		Output  json.RawMessage `json:"output"`
	} `json:"input"`
	Tools []struct {
		Type string `json:"type"`
		Name string `json:"name"`
	} `json:"tools"`
}

func (s *Server) responses(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 64<<20))
	var req responsesRequest
	if err == nil {
		err = json.Unmarshal(body, &req)
	}
	var text, toolResult string
	followUp := false
	if n := len(req.Input); n > 0 && req.Input[n-1].Type == "function_call_output" {
		followUp = true
		var res []string
		for i := n - 1; i >= 0 && req.Input[i].Type == "function_call_output"; i-- {
			res = append([]string{contentText(req.Input[i].Output, false)}, res...)
		}
		toolResult = strings.Join(res, "\n")
	}
	for i := len(req.Input) - 1; i >= 0 && !followUp; i-- {
		if it := req.Input[i]; it.Role == "user" {
			if text = contentText(it.Content, true); text != "" {
				break
			}
		}
	}
	tools := make([]string, 0, len(req.Tools))
	for _, t := range req.Tools {
		if t.Name != "" {
			tools = append(tools, t.Name)
		} else {
			tools = append(tools, t.Type)
		}
	}
	var history []string
	for _, it := range req.Input {
		if it.Role == "" || it.Role == "system" || it.Role == "developer" {
			continue
		}
		if t := contentText(it.Content, true); t != "" {
			history = append(history, it.Role+": "+t)
		}
	}
	n := s.Record(Request{Model: req.Model, LastUserText: text, ToolResult: toolResult, Stream: req.Stream, Tools: tools, History: history,
		System: req.Instructions, IncludeUsage: true, Authorization: r.Header.Get("Authorization")})
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
	id := fmt.Sprintf("resp_fake%d", n)
	items := responseItems(n, rep)
	if !req.Stream {
		writeJSON(w, http.StatusOK, responseObject(id, req.Model, "completed", items))
		return
	}
	s.streamResponses(w, r, id, req.Model, n, rep)
}

func responsesUsage() map[string]any {
	return map[string]any{"input_tokens": InputTokens, "output_tokens": OutputTokens, "total_tokens": InputTokens + OutputTokens,
		"input_tokens_details": map[string]int{"cached_tokens": 0}, "output_tokens_details": map[string]int{"reasoning_tokens": 0}}
}

func responseObject(id, model, status string, output []map[string]any) map[string]any {
	if output == nil {
		output = []map[string]any{}
	}
	o := map[string]any{"id": id, "object": "response", "created_at": time.Now().Unix(), "model": model, "status": status, "output": output}
	if status == "completed" {
		o["usage"] = responsesUsage()
	}
	return o
}

func reasoningItem(n int, summary string) map[string]any {
	return map[string]any{"type": "reasoning", "id": fmt.Sprintf("rs_fake%d", n), "summary": []any{map[string]any{"type": "summary_text", "text": summary}}}
}

func messageItem(n int, text string) map[string]any {
	return map[string]any{"type": "message", "id": fmt.Sprintf("msg_fake%d", n), "role": "assistant", "status": "completed",
		"content": []any{map[string]any{"type": "output_text", "text": text, "annotations": []any{}}}}
}

// callItem is a function call; a NAME of the form NAMESPACE/TOOL calls
// TOOL of a namespace tool (codex offers each MCP server's tools as one,
// mcp__SERVER).
func callItem(n int, name, args string) map[string]any {
	item := map[string]any{"type": "function_call", "id": fmt.Sprintf("fc_fake%d", n), "call_id": fmt.Sprintf("call_fake_%d", n),
		"name": name, "arguments": args, "status": "completed"}
	if ns, tool, ok := strings.Cut(name, "/"); ok {
		item["namespace"], item["name"] = ns, tool
	}
	return item
}

// responseItems are the output items of a whole reply.
func responseItems(n int, rep fakescript.Reply) []map[string]any {
	var out []map[string]any
	if len(rep.Thought) > 0 {
		out = append(out, reasoningItem(n, strings.Join(rep.Thought, "")))
	}
	if t := rep.FullText(); t != "" {
		out = append(out, messageItem(n, t))
	}
	if rep.ToolName != "" {
		out = append(out, callItem(n, rep.ToolName, string(rep.ToolArgs)))
	}
	return out
}

func (s *Server) streamResponses(w http.ResponseWriter, r *http.Request, id, model string, n int, rep fakescript.Reply) {
	ctx := r.Context()
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	seq := 0
	send := func(typ string, v map[string]any) error {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-s.Done():
			return io.EOF
		default:
		}
		v["type"] = typ
		v["sequence_number"] = seq
		seq++
		if _, err := fmt.Fprintf(w, "event: %s\ndata: %s\n\n", typ, fakescript.JSON(v)); err != nil {
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
	var done []map[string]any
	err := func() error {
		if err := send("response.created", map[string]any{"response": responseObject(id, model, "in_progress", nil)}); err != nil {
			return err
		}
		idx := 0
		if len(rep.Thought) > 0 {
			item := reasoningItem(n, strings.Join(rep.Thought, ""))
			if err := send("response.output_item.added", map[string]any{"output_index": idx,
				"item": map[string]any{"type": "reasoning", "id": item["id"], "summary": []any{}}}); err != nil {
				return err
			}
			for _, t := range rep.Thought {
				if err := send("response.reasoning_summary_text.delta", map[string]any{"item_id": item["id"], "output_index": idx,
					"summary_index": 0, "delta": t}); err != nil {
					return err
				}
			}
			if err := send("response.output_item.done", map[string]any{"output_index": idx, "item": item}); err != nil {
				return err
			}
			done = append(done, item)
			idx++
		}
		if len(rep.Text) > 0 {
			item := messageItem(n, rep.FullText())
			if err := send("response.output_item.added", map[string]any{"output_index": idx,
				"item": map[string]any{"type": "message", "id": item["id"], "role": "assistant", "status": "in_progress", "content": []any{}}}); err != nil {
				return err
			}
			if err := send("response.content_part.added", map[string]any{"item_id": item["id"], "output_index": idx, "content_index": 0,
				"part": map[string]any{"type": "output_text", "text": "", "annotations": []any{}}}); err != nil {
				return err
			}
			for i, t := range rep.Text {
				if i > 0 {
					if err := pause(); err != nil {
						return err
					}
				}
				if err := send("response.output_text.delta", map[string]any{"item_id": item["id"], "output_index": idx, "content_index": 0, "delta": t}); err != nil {
					return err
				}
			}
			if rep.FailMidway {
				return send("response.failed", map[string]any{"response": map[string]any{"id": id, "object": "response", "status": "failed",
					"error": map[string]any{"code": "server_error", "message": fakescript.MidwayMessage}}})
			}
			if err := send("response.output_text.done", map[string]any{"item_id": item["id"], "output_index": idx, "content_index": 0, "text": rep.FullText()}); err != nil {
				return err
			}
			if err := send("response.output_item.done", map[string]any{"output_index": idx, "item": item}); err != nil {
				return err
			}
			done = append(done, item)
			idx++
		}
		if rep.ToolName != "" {
			item := callItem(n, rep.ToolName, string(rep.ToolArgs))
			added := map[string]any{}
			for k, v := range item {
				added[k] = v
			}
			added["arguments"], added["status"] = "", "in_progress"
			if err := send("response.output_item.added", map[string]any{"output_index": idx, "item": added}); err != nil {
				return err
			}
			for _, p := range fakescript.Split(string(rep.ToolArgs), 10) {
				if err := send("response.function_call_arguments.delta", map[string]any{"item_id": item["id"], "output_index": idx, "delta": p}); err != nil {
					return err
				}
			}
			if err := send("response.function_call_arguments.done", map[string]any{"item_id": item["id"], "output_index": idx, "arguments": string(rep.ToolArgs)}); err != nil {
				return err
			}
			if err := send("response.output_item.done", map[string]any{"output_index": idx, "item": item}); err != nil {
				return err
			}
			done = append(done, item)
		}
		return send("response.completed", map[string]any{"response": responseObject(id, model, "completed", done)})
	}()
	if err != nil {
		s.Logf("stream %s ended early: %v", id, err)
	}
}
