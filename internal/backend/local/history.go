package local

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
)

// Message is one message of the conversation kaimon holds for a local
// model, in a form neutral between the two APIs (each client renders it in
// its own wire format).
type Message struct {
	Role     string     `json:"role"` // system | user | assistant | tool
	Content  string     `json:"content,omitempty"`
	Thinking string     `json:"thinking,omitempty"`
	Calls    []ToolCall `json:"tool_calls,omitempty"`
	// ToolCallID and ToolName say which call a tool message answers.
	ToolCallID string `json:"tool_call_id,omitempty"`
	ToolName   string `json:"tool_name,omitempty"`
}

// ToolCall is a model's call of one tool.
type ToolCall struct {
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
}

// historyHeader is the first line of a conversation file: the session id
// that agent_status reports and a resume names, so that a resume of an
// earlier conversation never picks up a later one of the same agent id.
type historyHeader struct {
	Session string `json:"session"`
	Family  string `json:"family"`
}

// history is the conversation, in memory and on disk: one JSON message a
// line after the header, appended as each message is complete, fsynced at
// the end of each turn (as the event log is). A torn last line (a crash)
// is skipped when it is read back.
type history struct {
	path string
	f    *os.File
	msgs []Message
}

// createHistory starts a new conversation file for session, replacing
// any earlier one of the agent id.
func createHistory(path, session, family string) (*history, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return nil, fmt.Errorf("conversation file: %w", err)
	}
	h := &history{path: path, f: f}
	if err := h.writeLine(historyHeader{Session: session, Family: family}); err != nil {
		f.Close()
		return nil, err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return nil, fmt.Errorf("conversation file: %w", err)
	}
	return h, nil
}

// readHistory reads the conversation of session from path without
// changing the file: the messages, the file's contents and the length of
// its good part (a torn tail, from a crash, is not trusted).
func readHistory(path, session, family string) (msgs []Message, b []byte, good int, err error) {
	b, err = os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil, 0, fmt.Errorf("the conversation of session %s is gone: %s does not exist", session, path)
	}
	if err != nil {
		return nil, nil, 0, fmt.Errorf("conversation file: %w", err)
	}
	lines := bytes.Split(b, []byte("\n"))
	var hdr historyHeader
	if len(lines) == 0 || json.Unmarshal(lines[0], &hdr) != nil || hdr.Session == "" {
		return nil, nil, 0, fmt.Errorf("%s does not begin with a conversation header", path)
	}
	if hdr.Session != session {
		return nil, nil, 0, fmt.Errorf("the conversation of session %s is gone: %s now holds session %s", session, path, hdr.Session)
	}
	if hdr.Family != family {
		return nil, nil, 0, fmt.Errorf("session %s is a conversation of a %s: agent, not of %s:", session, hdr.Family, family)
	}
	good = len(lines[0]) + 1
	for _, ln := range lines[1:] {
		if len(bytes.TrimSpace(ln)) == 0 {
			good += len(ln) + 1
			continue
		}
		var m Message
		if json.Unmarshal(ln, &m) != nil || m.Role == "" {
			break // torn by a crash: what follows is not trusted
		}
		msgs = append(msgs, m)
		good += len(ln) + 1
	}
	return msgs, b, good, nil
}

// forkHistory starts the conversation file of a new session at path
// with a copy of the messages of session (another agent's, at from),
// which is read and not changed.
func forkHistory(path, session, from, fromSession, family string) (*history, error) {
	msgs, _, _, err := readHistory(from, fromSession, family)
	if err != nil {
		return nil, err
	}
	h, err := createHistory(path, session, family)
	if err != nil {
		return nil, err
	}
	for _, m := range msgs {
		if err := h.add(m); err != nil {
			h.close()
			return nil, err
		}
	}
	if err := h.sync(); err != nil {
		h.close()
		return nil, fmt.Errorf("conversation file: %w", err)
	}
	return h, nil
}

// loadHistory reopens the conversation of session for appending.
func loadHistory(path, session, family string) (*history, error) {
	msgs, b, good, err := readHistory(path, session, family)
	if err != nil {
		return nil, err
	}
	h := &history{path: path, msgs: msgs}
	f, err := os.OpenFile(path, os.O_WRONLY, 0o600)
	if err != nil {
		return nil, fmt.Errorf("conversation file: %w", err)
	}
	// Cut a torn tail, so that the next message starts a line of its own.
	if good > len(b) {
		good = len(b)
	}
	if err := f.Truncate(int64(good)); err != nil {
		f.Close()
		return nil, fmt.Errorf("conversation file: %w", err)
	}
	if _, err := f.Seek(int64(good), 0); err != nil {
		f.Close()
		return nil, fmt.Errorf("conversation file: %w", err)
	}
	if good > 0 && b[good-1] != '\n' {
		if _, err := f.Write([]byte("\n")); err != nil {
			f.Close()
			return nil, fmt.Errorf("conversation file: %w", err)
		}
	}
	h.f = f
	return h, nil
}

func (h *history) writeLine(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(h.f)
	w.Write(b)
	w.WriteByte('\n')
	if err := w.Flush(); err != nil {
		return fmt.Errorf("conversation file %s: %w", h.path, err)
	}
	return nil
}

// add appends m, in memory and on disk.
func (h *history) add(m Message) error {
	h.msgs = append(h.msgs, m)
	return h.writeLine(m)
}

// sync flushes the file to disk: once a turn.
func (h *history) sync() error {
	if h.f == nil {
		return nil
	}
	return h.f.Sync()
}

func (h *history) close() error {
	if h.f == nil {
		return nil
	}
	err := h.f.Sync()
	if cerr := h.f.Close(); err == nil {
		err = cerr
	}
	h.f = nil
	return err
}

// messages returns the conversation with the system message first.
func (h *history) messages(system string) []Message {
	out := make([]Message, 0, len(h.msgs)+1)
	if system != "" {
		out = append(out, Message{Role: "system", Content: system})
	}
	return append(out, h.msgs...)
}
