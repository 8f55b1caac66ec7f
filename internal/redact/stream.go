package redact

import (
	"encoding/json"
	"strings"

	"github.com/kaimon/kaimon/internal/event"
)

// A Stream redacts one agent's events in the order they are published.
// Whole events (a complete text block, a tool's result, an error with the
// agent's stderr) are redacted as they are. Streamed chunks need more: a
// model that read a key (in a tool's output, which the agent saw as it
// was) may repeat it, and a model's text streams a few characters per
// delta, so a secret spans many of them and no one delta holds it whole.
// The tail of a delta that could begin a secret is held back and goes
// out at the front of the next delta of the same stream, redacted if the
// secret is then whole; at the first event of any other stream (the
// complete block that ends the deltas, most often) what is held goes out
// first as a delta of its own. So the chunks a live subscriber joins are
// the complete block's text, redacted the same way, and nothing is lost.
// (A delta whose text is all held is not published. A Secret.Whole, the
// door token, is replaced in a delta that holds it whole, never held
// back.)
//
// What the user sent (user_text) is the agent's input, not its output,
// and is left as it is.
//
// A Stream is not safe for concurrent use: the session manager calls it
// from the one holder of the agent's publishing (its drain).
type Stream struct {
	r *Redactor
	// open is the stream whose tail is held: the kind, and for a
	// tool_input_delta its call; turn is its turn; held its tail.
	open  streamKey
	turn  int
	held  string
	evbuf [2]event.Event
}

type streamKey struct {
	kind event.Kind
	call string
}

// Stream returns a Stream of r's secrets; nil (which passes events as they
// are) for a nil Redactor.
func (r *Redactor) Stream() *Stream {
	if r == nil {
		return nil
	}
	return &Stream{r: r}
}

// Redactor is the stream's Redactor (nil for a nil Stream).
func (s *Stream) Redactor() *Redactor {
	if s == nil {
		return nil
	}
	return s.r
}

// Events returns what to publish for ev, in order: none (a delta held
// whole), ev redacted, or a delta of what was held and then ev redacted.
// The slice is valid until the next call.
func (s *Stream) Events(ev event.Event) []event.Event {
	if s == nil {
		return []event.Event{ev}
	}
	out := s.evbuf[:0]
	key, text, ok := deltaOf(ev)
	if s.held != "" && (!ok || key != s.open) {
		out = append(out, s.deltaEvent(s.open, s.turn, s.r.text(s.held, s.open.kind == event.ToolInputDelta)))
		s.held = ""
	}
	if !ok {
		if ev.Kind == event.UserText {
			return append(out, ev)
		}
		return append(out, s.r.Event(ev))
	}
	jsonForm := key.kind == event.ToolInputDelta
	whole := s.held + text
	// The tail is held as it came, and looked for before anything is
	// replaced: a secret that begins with a shorter one is then held
	// until it is told apart, and replaced whole, as the block has it.
	at := s.r.holdFrom(whole, jsonForm)
	// A copy: text may share ev's data (event.TextOf).
	s.open, s.turn, s.held = key, ev.Turn, strings.Clone(whole[at:])
	if at == 0 {
		return out // all held
	}
	red := s.r.text(whole[:at], jsonForm)
	if red == text {
		return append(out, ev) // nothing held, nothing replaced: as it was
	}
	return append(out, s.deltaEvent(key, ev.Turn, red))
}

// text is String for plain text, or for JSON text (jsonForm) as the
// secrets are inside its strings.
func (r *Redactor) text(s string, jsonForm bool) string {
	if !jsonForm {
		return r.String(s)
	}
	for _, sc := range r.secrets {
		if strings.Contains(s, sc.jvalue) {
			s = strings.ReplaceAll(s, sc.jvalue, sc.jmark)
		}
	}
	return s
}

// deltaOf says whether ev is a streamed chunk, of which stream, with
// which text.
func deltaOf(ev event.Event) (streamKey, string, bool) {
	switch ev.Kind {
	case event.AssistantText, event.Thought:
		if event.IsDelta(ev.Data) {
			return streamKey{kind: ev.Kind}, event.TextOf(ev.Data), true
		}
	case event.ToolInputDelta:
		var d event.ToolInputDeltaData
		if json.Unmarshal(ev.Data, &d) == nil {
			return streamKey{kind: ev.Kind, call: d.ToolCallID}, d.PartialJSON, true
		}
	}
	return streamKey{}, "", false
}

func (s *Stream) deltaEvent(k streamKey, turn int, text string) event.Event {
	if k.kind == event.ToolInputDelta {
		return event.NewToolInputDelta(turn, k.call, text)
	}
	return event.NewText(k.kind, turn, true, text)
}
