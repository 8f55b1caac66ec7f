package local

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/kaimon/kaimon/internal/config"
)

// DefaultOllamaURL is where Ollama listens unless told otherwise.
const DefaultOllamaURL = config.DefaultOllamaURL

// OllamaURL is the Ollama server: KAIMON_OLLAMA_URL, else the config's
// ollama_url, else OLLAMA_HOST read by Ollama's own rules, else the
// default.
func OllamaURL(getenv func(string) string, configured string) string {
	if v := strings.TrimSpace(getenv("KAIMON_OLLAMA_URL")); v != "" {
		return strings.TrimRight(v, "/")
	}
	if v := strings.TrimSpace(configured); v != "" {
		return strings.TrimRight(v, "/")
	}
	if v := strings.TrimSpace(getenv("OLLAMA_HOST")); v != "" {
		return ollamaHost(v)
	}
	return DefaultOllamaURL
}

// ollamaHost reads OLLAMA_HOST as Ollama's envconfig.Host does: a scheme
// is optional (http; https and http with one default to ports 443 and 80),
// a missing or bad port is 11434, a bare host or IP is that host, an empty
// one 127.0.0.1; a path is kept.
func ollamaHost(s string) string {
	defaultPort := "11434"
	scheme, hostport, ok := strings.Cut(s, "://")
	switch {
	case !ok:
		scheme, hostport = "http", s
	case scheme == "http":
		defaultPort = "80"
	case scheme == "https":
		defaultPort = "443"
	}
	hostport, path, _ := strings.Cut(hostport, "/")
	host, port, err := net.SplitHostPort(hostport)
	if err != nil {
		host, port = "127.0.0.1", defaultPort
		if ip := net.ParseIP(strings.Trim(hostport, "[]")); ip != nil {
			host = ip.String()
		} else if hostport != "" {
			host = hostport
		}
	}
	if n, err := strconv.ParseInt(port, 10, 32); err != nil || n > 65535 || n < 0 {
		port = defaultPort
	}
	if host == "" {
		host = "127.0.0.1"
	}
	u := url.URL{Scheme: scheme, Host: net.JoinHostPort(host, port), Path: path}
	return strings.TrimRight(u.String(), "/")
}

// ollama speaks Ollama's native chat API: POST /api/chat with stream true
// answers newline-delimited JSON objects, the last with done true.
type ollama struct {
	base      string
	think     json.RawMessage
	keepAlive json.RawMessage
}

func (o *ollama) URL() string { return o.base }

// CheckModel asks POST /api/show: 404 is a model not pulled.
func (o *ollama) CheckModel(ctx context.Context, model string) error {
	body, _ := json.Marshal(map[string]string{"model": model})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, o.base+"/api/show", bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := httpClient.Do(req)
	if err != nil {
		return fmt.Errorf("%w (is `ollama serve` running? set KAIMON_OLLAMA_URL or ollama_url to another server)", unreachable("Ollama", o.base, err))
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusNotFound:
		return fmt.Errorf("model not found: pull it with `ollama pull %s` (Ollama at %s)", model, o.base)
	case resp.StatusCode != http.StatusOK:
		return fmt.Errorf("Ollama at %s: /api/show %s: %w", o.base, model, apiError(resp))
	}
	return nil
}

type ollamaMessage struct {
	Role      string           `json:"role"`
	Content   string           `json:"content"`
	Thinking  string           `json:"thinking,omitempty"`
	ToolCalls []ollamaToolCall `json:"tool_calls,omitempty"`
	ToolName  string           `json:"tool_name,omitempty"`
}

type ollamaToolCall struct {
	ID       string `json:"id,omitempty"`
	Function struct {
		Index     *int            `json:"index,omitempty"`
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	} `json:"function"`
}

type ollamaChunk struct {
	Message         ollamaMessage `json:"message"`
	Done            bool          `json:"done"`
	DoneReason      string        `json:"done_reason"`
	PromptEvalCount int64         `json:"prompt_eval_count"`
	EvalCount       int64         `json:"eval_count"`
	Error           string        `json:"error"`
}

// ollamaBody renders a request in Ollama's shape.
func (o *ollama) body(req chatRequest) map[string]any {
	msgs := make([]ollamaMessage, 0, len(req.Messages))
	for _, m := range req.Messages {
		om := ollamaMessage{Role: m.Role, Content: m.Content, Thinking: m.Thinking, ToolName: m.ToolName}
		for _, c := range m.Calls {
			var tc ollamaToolCall
			tc.ID = c.ID
			tc.Function.Name = c.Name
			tc.Function.Arguments = argsObject(c.Arguments)
			om.ToolCalls = append(om.ToolCalls, tc)
		}
		msgs = append(msgs, om)
	}
	body := map[string]any{"model": req.Model, "messages": msgs, "stream": true}
	if len(req.Tools) > 0 {
		body["tools"] = toolsJSON(req.Tools)
	}
	if len(o.think) > 0 && string(o.think) != "null" {
		body["think"] = o.think
	}
	if len(o.keepAlive) > 0 && string(o.keepAlive) != "null" {
		body["keep_alive"] = o.keepAlive
	}
	return body
}

// argsObject is a call's arguments as a JSON object: Ollama takes them as
// one, never as a string.
func argsObject(raw json.RawMessage) json.RawMessage {
	var obj map[string]json.RawMessage
	if json.Unmarshal(raw, &obj) != nil || obj == nil {
		return json.RawMessage("{}")
	}
	return raw
}

// Chat posts /api/chat and reads its NDJSON stream.
func (o *ollama) Chat(ctx context.Context, cr chatRequest, sink streamSink) (roundResult, error) {
	body, err := json.Marshal(o.body(cr))
	if err != nil {
		return roundResult{}, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, o.base+"/api/chat", bytes.NewReader(body))
	if err != nil {
		return roundResult{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := httpClient.Do(req)
	if err != nil {
		return roundResult{}, unreachable("Ollama", o.base, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return roundResult{}, fmt.Errorf("Ollama /api/chat: %w", apiError(resp))
	}
	return parseOllamaStream(resp.Body, sink)
}

// parseOllamaStream reads Ollama's chat stream: one JSON object a line;
// message.content and message.thinking in pieces, message.tool_calls
// whole, and on the line with done true the done_reason and the token
// counts. A line with "error" is the server failing mid-stream.
func parseOllamaStream(r interface{ Read([]byte) (int, error) }, sink streamSink) (roundResult, error) {
	var res roundResult
	var content, thinking strings.Builder
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 64<<20)
	done := false
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		var c ollamaChunk
		if err := json.Unmarshal(line, &c); err != nil {
			return res, fmt.Errorf("Ollama sent a line that is not JSON: %w: %.200s", err, line)
		}
		if c.Error != "" {
			return res, fmt.Errorf("Ollama: %s", c.Error)
		}
		if c.Message.Thinking != "" {
			thinking.WriteString(c.Message.Thinking)
			sink.thought(c.Message.Thinking)
		}
		if c.Message.Content != "" {
			content.WriteString(c.Message.Content)
			sink.text(c.Message.Content)
		}
		for _, tc := range c.Message.ToolCalls {
			i := len(res.Calls)
			res.Calls = append(res.Calls, ToolCall{ID: tc.ID, Name: tc.Function.Name, Arguments: argsObject(tc.Function.Arguments)})
			sink.toolStart(i, tc.ID, tc.Function.Name)
		}
		if c.Done {
			done = true
			res.Stop = c.DoneReason
			res.Usage.InputTokens = c.PromptEvalCount
			res.Usage.OutputTokens = c.EvalCount
			break
		}
	}
	if err := sc.Err(); err != nil {
		return res, fmt.Errorf("reading Ollama's stream: %w", err)
	}
	if !done {
		return res, fmt.Errorf("Ollama's stream ended before its last chunk (done true)")
	}
	res.Content, res.Thinking = content.String(), thinking.String()
	return res, nil
}
