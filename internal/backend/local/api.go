package local

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/kaimon/kaimon/internal/event"
)

// The two model APIs are spoken with net/http, bufio and encoding/json
// rather than an SDK: each is one streaming POST and one model check, the
// official Go clients (ollama/api, openai-go) pull in far more than that,
// and kaimon needs the raw chunks anyway to turn them into deltas.

// chatRequest is one model request of a turn: the model tag, the whole
// conversation, and the tools offered.
type chatRequest struct {
	Model    string
	Messages []Message
	Tools    []toolDef
}

// streamSink receives a round's stream as it comes.
type streamSink interface {
	text(s string)
	thought(s string)
	// toolStart announces call index with its id and name; toolArgs
	// streams a fragment of its arguments' JSON (OpenAI only: Ollama sends
	// a call whole).
	toolStart(index int, id, name string)
	toolArgs(index int, fragment string)
}

// roundResult is a round's complete reply.
type roundResult struct {
	Content  string
	Thinking string
	Calls    []ToolCall
	// Stop is the server's own reason (Ollama's done_reason, OpenAI's
	// finish_reason).
	Stop  string
	Usage event.UsageFigures
}

// chatAPI is one model server's protocol.
type chatAPI interface {
	// CheckModel says whether the server has model: nil if it does (or
	// cannot say), else an error a user can act on.
	CheckModel(ctx context.Context, model string) error
	// Chat streams one round to its end.
	Chat(ctx context.Context, req chatRequest, sink streamSink) (roundResult, error)
	// URL is the server's base URL, for messages.
	URL() string
}

// httpClient has no overall timeout: a stream lasts as long as the model
// writes, and the turn's context (interrupt, close) ends it.
var httpClient = &http.Client{}

// apiError reads a failed response's error message: Ollama's
// {"error":"…"} or OpenAI's {"error":{"message":"…"}}, else the body.
func apiError(resp *http.Response) error {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	return fmt.Errorf("HTTP %d: %s", resp.StatusCode, errorText(b))
}

// errorText is the message of an error body.
func errorText(b []byte) string {
	var e struct {
		Error json.RawMessage `json:"error"`
	}
	if json.Unmarshal(b, &e) == nil && len(e.Error) > 0 {
		var s string
		if json.Unmarshal(e.Error, &s) == nil {
			return s
		}
		var o struct {
			Message string `json:"message"`
		}
		if json.Unmarshal(e.Error, &o) == nil && o.Message != "" {
			return o.Message
		}
		return string(e.Error)
	}
	s := strings.TrimSpace(string(b))
	if s == "" {
		return "(no body)"
	}
	return s
}

// unreachable wraps a transport error with what to check.
func unreachable(what, url string, err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return fmt.Errorf("cannot reach %s at %s: %w", what, url, err)
}
