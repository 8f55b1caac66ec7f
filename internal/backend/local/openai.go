package local

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"

	"github.com/kaimon/kaimon/internal/config"
)

// DefaultVMLXURL is the OpenAI-compatible base URL of vmlx: agents unless
// told otherwise.
const DefaultVMLXURL = config.DefaultVMLXURL

// VMLXURL is the base URL: KAIMON_VMLX_URL, else the config's vmlx_url,
// else the default.
func VMLXURL(getenv func(string) string, configured string) string {
	if v := strings.TrimSpace(getenv("KAIMON_VMLX_URL")); v != "" {
		return strings.TrimRight(v, "/")
	}
	if v := strings.TrimSpace(configured); v != "" {
		return strings.TrimRight(v, "/")
	}
	return DefaultVMLXURL
}

// openAI speaks the OpenAI chat completions API as MLX servers, llama.cpp's
// server, vLLM and LM Studio serve it: POST {base}/chat/completions with
// stream true answers server-sent events, "data: {chunk}" lines ending
// with "data: [DONE]".
type openAI struct {
	base   string
	apiKey string
}

func (o *openAI) URL() string { return o.base }

func (o *openAI) newRequest(ctx context.Context, method, path string, body []byte) (*http.Request, error) {
	var r io.Reader
	if body != nil {
		r = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, o.base+path, r)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if o.apiKey != "" {
		req.Header.Set("Authorization", "Bearer "+o.apiKey)
	}
	return req, nil
}

// CheckModel asks GET {base}/models. A server without that route (404)
// cannot say, and is believed.
func (o *openAI) CheckModel(ctx context.Context, model string) error {
	req, err := o.newRequest(ctx, http.MethodGet, "/models", nil)
	if err != nil {
		return err
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return fmt.Errorf("%w (is the server running? set KAIMON_VMLX_URL or vmlx_url to another one)", unreachable("the OpenAI-compatible server", o.base, err))
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusNotFound:
		return nil
	case resp.StatusCode != http.StatusOK:
		return fmt.Errorf("%s/models: %w", o.base, apiError(resp))
	}
	var list struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 16<<20)).Decode(&list); err != nil {
		return fmt.Errorf("%s/models: not a model list: %w", o.base, err)
	}
	var ids []string
	for _, m := range list.Data {
		if m.ID == model {
			return nil
		}
		ids = append(ids, m.ID)
	}
	sort.Strings(ids)
	return fmt.Errorf("model not found: %s does not serve %q (it serves: %s)", o.base, model, strings.Join(ids, ", "))
}

type openAIMessage struct {
	Role       string           `json:"role"`
	Content    string           `json:"content"`
	ToolCalls  []openAIToolCall `json:"tool_calls,omitempty"`
	ToolCallID string           `json:"tool_call_id,omitempty"`
}

type openAIToolCall struct {
	Index    *int   `json:"index,omitempty"`
	ID       string `json:"id,omitempty"`
	Type     string `json:"type,omitempty"`
	Function struct {
		Name      string `json:"name,omitempty"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

func (o *openAI) body(req chatRequest) map[string]any {
	msgs := make([]openAIMessage, 0, len(req.Messages))
	for _, m := range req.Messages {
		om := openAIMessage{Role: m.Role, Content: m.Content, ToolCallID: m.ToolCallID}
		for _, c := range m.Calls {
			var tc openAIToolCall
			tc.ID, tc.Type = c.ID, "function"
			tc.Function.Name = c.Name
			tc.Function.Arguments = string(argsObject(c.Arguments))
			om.ToolCalls = append(om.ToolCalls, tc)
		}
		msgs = append(msgs, om)
	}
	body := map[string]any{"model": req.Model, "messages": msgs, "stream": true,
		"stream_options": map[string]any{"include_usage": true}}
	if len(req.Tools) > 0 {
		body["tools"] = toolsJSON(req.Tools)
	}
	return body
}

// Chat posts /chat/completions and reads its event stream.
func (o *openAI) Chat(ctx context.Context, cr chatRequest, sink streamSink) (roundResult, error) {
	body, err := json.Marshal(o.body(cr))
	if err != nil {
		return roundResult{}, err
	}
	req, err := o.newRequest(ctx, http.MethodPost, "/chat/completions", body)
	if err != nil {
		return roundResult{}, err
	}
	req.Header.Set("Accept", "text/event-stream")
	resp, err := httpClient.Do(req)
	if err != nil {
		return roundResult{}, unreachable("the OpenAI-compatible server", o.base, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return roundResult{}, fmt.Errorf("%s/chat/completions: %w", o.base, apiError(resp))
	}
	return parseOpenAIStream(resp.Body, sink)
}

type openAIChunk struct {
	Choices []struct {
		Delta struct {
			Content          string           `json:"content"`
			ReasoningContent string           `json:"reasoning_content"`
			Reasoning        string           `json:"reasoning"`
			ToolCalls        []openAIToolCall `json:"tool_calls"`
		} `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *struct {
		PromptTokens     int64 `json:"prompt_tokens"`
		CompletionTokens int64 `json:"completion_tokens"`
		PromptDetails    *struct {
			CachedTokens int64 `json:"cached_tokens"`
		} `json:"prompt_tokens_details"`
	} `json:"usage"`
	Error json.RawMessage `json:"error"`
}

// parseOpenAIStream reads a chat completions event stream: delta.content
// is text, delta.reasoning_content (or delta.reasoning, as some servers
// name it) is thought, tool_calls arrive by index, the id and name in the
// first piece and the arguments' JSON in fragments after; finish_reason
// closes the choice, and with stream_options.include_usage a last chunk
// with no choices carries the usage. "data: [DONE]" ends the stream.
func parseOpenAIStream(r io.Reader, sink streamSink) (roundResult, error) {
	var res roundResult
	var content, thinking strings.Builder
	type acc struct {
		id, name string
		args     strings.Builder
	}
	var calls []*acc
	byIndex := map[int]*acc{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 64<<20)
	sawDone, sawFinish := false, false
	for sc.Scan() {
		line := sc.Text()
		data, ok := strings.CutPrefix(line, "data:")
		if !ok {
			continue // event:, id:, comments, the blank line between events
		}
		data = strings.TrimSpace(data)
		if data == "[DONE]" {
			sawDone = true
			break
		}
		if data == "" {
			continue
		}
		var c openAIChunk
		if err := json.Unmarshal([]byte(data), &c); err != nil {
			return res, fmt.Errorf("the server sent an event that is not JSON: %w: %.200s", err, data)
		}
		if len(c.Error) > 0 && string(c.Error) != "null" {
			return res, fmt.Errorf("the server failed mid-stream: %s", errorText([]byte(`{"error":`+string(c.Error)+`}`)))
		}
		if c.Usage != nil {
			res.Usage.InputTokens = c.Usage.PromptTokens
			res.Usage.OutputTokens = c.Usage.CompletionTokens
			if c.Usage.PromptDetails != nil {
				res.Usage.CacheReadTokens = c.Usage.PromptDetails.CachedTokens
			}
		}
		for _, ch := range c.Choices {
			d := ch.Delta
			if t := d.ReasoningContent + d.Reasoning; t != "" {
				thinking.WriteString(t)
				sink.thought(t)
			}
			if d.Content != "" {
				content.WriteString(d.Content)
				sink.text(d.Content)
			}
			for _, tc := range d.ToolCalls {
				i := len(calls)
				if tc.Index != nil {
					i = *tc.Index
				}
				a := byIndex[i]
				if a == nil {
					a = &acc{}
					byIndex[i] = a
					calls = append(calls, a)
				}
				if tc.ID != "" && a.id == "" {
					a.id = tc.ID
				}
				if tc.Function.Name != "" && a.name == "" {
					a.name = tc.Function.Name
					sink.toolStart(len(calls)-1, a.id, a.name)
				}
				if f := tc.Function.Arguments; f != "" {
					a.args.WriteString(f)
					sink.toolArgs(indexOf(calls, a), f)
				}
			}
			if ch.FinishReason != nil && *ch.FinishReason != "" {
				res.Stop = *ch.FinishReason
				sawFinish = true
			}
		}
	}
	if err := sc.Err(); err != nil {
		return res, fmt.Errorf("reading the server's stream: %w", err)
	}
	if !sawDone && !sawFinish {
		return res, fmt.Errorf("the server's stream ended before a finish_reason or [DONE]")
	}
	for _, a := range calls {
		args := strings.TrimSpace(a.args.String())
		if args == "" {
			args = "{}"
		}
		if !json.Valid([]byte(args)) {
			// Kept as a string, so that the history stays JSON and the
			// tool reports the bad arguments to the model.
			b, _ := json.Marshal(args)
			args = string(b)
		}
		res.Calls = append(res.Calls, ToolCall{ID: a.id, Name: a.name, Arguments: json.RawMessage(args)})
	}
	res.Content, res.Thinking = content.String(), thinking.String()
	return res, nil
}

func indexOf[T comparable](s []T, v T) int {
	for i, x := range s {
		if x == v {
			return i
		}
	}
	return -1
}
