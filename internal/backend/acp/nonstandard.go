package acp

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"strings"
)

// Some agents send the client requests that are neither ACP's nor named as
// ACP extensions ("_name"), which the SDK answers "method not found".
// Those kaimon can answer truthfully are taken off the stream before the
// SDK reads it and answered here (nonStandard), so that the agent gets a
// real answer rather than marking the feature broken or waiting on it.
//
// qwen-code 0.24 asks craft/drainMidTurnQueue after each tool result: the
// prompts its host queued during the turn, to fold into it. Kaimon sends
// one prompt at a time and keeps the next turns as turns of their own, so
// it drains nothing; it says whether one is queued (hasQueuedPrompt, which
// qwen's todo stop guard watches). Its answer must come within 2 s, else
// qwen counts a strike and after three stops asking.
var nonStandard = map[string]func(b *Backend, params json.RawMessage) any{
	"craft/drainMidTurnQueue": func(b *Backend, _ json.RawMessage) any {
		b.life.Lock()
		queued := b.m.InFlight() > 1
		b.life.Unlock()
		return map[string]any{"messages": []string{}, "hasQueuedPrompt": queued}
	},
}

// quietNotifications are prefixes of non-standard notifications that carry
// nothing kaimon maps (qwen-code's qwen/notify/session/mode-update,
// prompt-suggestion, sources-changed…): dropped before the SDK, which
// would log each as an error ("method not found").
var quietNotifications = []string{"qwen/notify/"}

// requestFilter passes the agent's stdout through to the SDK, less the
// requests nonStandard answers (each goes to answer instead) and the
// quietNotifications. Only lines of
// up to filterLine bytes are looked at (those requests are small); a longer
// one passes as it is.
type requestFilter struct {
	br      *bufio.Reader
	pending []byte // the rest of the line being passed on
	midLine bool   // pending's line goes on past the buffer
	err     error  // the read error to report once pending is out
	answer  func(id json.RawMessage, method string, params json.RawMessage)
}

const filterLine = 64 << 10

func newRequestFilter(r io.Reader, answer func(id json.RawMessage, method string, params json.RawMessage)) *requestFilter {
	return &requestFilter{br: bufio.NewReaderSize(r, filterLine), answer: answer}
}

func (f *requestFilter) Read(p []byte) (int, error) {
	for len(f.pending) == 0 {
		if f.err != nil {
			return 0, f.err
		}
		line, err := f.br.ReadSlice('\n')
		if err != nil && err != bufio.ErrBufferFull {
			f.err = err
		}
		start := !f.midLine
		f.midLine = err == bufio.ErrBufferFull
		if start && !f.midLine && f.take(line) {
			continue
		}
		f.pending = line
	}
	n := copy(p, f.pending)
	f.pending = f.pending[n:]
	return n, nil
}

// take answers line if it is a request of nonStandard's.
func (f *requestFilter) take(line []byte) bool {
	if !bytes.Contains(line, []byte(`"method"`)) {
		return false
	}
	hit := false
	for m := range nonStandard {
		if bytes.Contains(line, []byte(`"`+m+`"`)) {
			hit = true
			break
		}
	}
	for _, q := range quietNotifications {
		if bytes.Contains(line, []byte(`"`+q)) {
			hit = true
			break
		}
	}
	if !hit {
		return false
	}
	var msg struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params json.RawMessage `json:"params"`
	}
	if json.Unmarshal(line, &msg) != nil {
		return false
	}
	if len(msg.ID) == 0 || string(msg.ID) == "null" {
		for _, q := range quietNotifications {
			if strings.HasPrefix(msg.Method, q) {
				return true
			}
		}
		return false
	}
	if nonStandard[msg.Method] == nil {
		return false
	}
	f.answer(msg.ID, msg.Method, msg.Params)
	return true
}

// answerNonStandard answers one of nonStandard's requests, on its own
// goroutine: never in the way of the stream the SDK reads.
func (b *Backend) answerNonStandard(id json.RawMessage, method string, params json.RawMessage) {
	p := b.p.Load()
	go func() {
		res := nonStandard[method](b, params)
		_ = p.WriteJSON(map[string]any{"jsonrpc": "2.0", "id": id, "result": res})
	}()
}
