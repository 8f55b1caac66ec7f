// Package replay is the backend of `replay:<path>[?speed=N]` models: an
// agent that re-emits a recorded kaimon event log (<id>.events.jsonl), one
// recorded turn per agent_send, with the recorded pacing. It runs no
// process and no tool, and needs no account and no network: it is the demo
// on a fresh machine, and the way to build a consumer of the event stream
// (a UI, a script) without spending a token.
//
// The log holds authoritative events only, so the backend synthesizes
// what a live agent streams before them: assistant_text and thought
// deltas (a few words each, whose concatenation is the block's text) and
// tool_input_delta fragments of a tool call's input, paced across the
// recorded gap before the block.
package replay

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/kaimon/kaimon/internal/event"
	"github.com/kaimon/kaimon/internal/eventlog"
)

// Prefix starts every replay model string.
const Prefix = "replay:"

// IsReplay reports whether model selects this backend.
func IsReplay(model string) bool { return strings.HasPrefix(model, Prefix) }

// Model is a parsed `replay:<path>[?speed=N]`.
type Model struct {
	Path  string  // as written; relative to the agent's cwd
	Speed float64 // 1 the recorded pace, 2 twice as fast, 0 no waiting at all
}

// ParseModel reads a replay model string. The query, if any, follows the
// last '?'; speed is its only key. (A path with a '?' in it is written with
// a query after it: replay:/odd?name.jsonl?speed=1.)
func ParseModel(model string) (Model, error) {
	rest, ok := strings.CutPrefix(model, Prefix)
	if !ok {
		return Model{}, fmt.Errorf("model %q is not a replay model (replay:<path>[?speed=N])", model)
	}
	m := Model{Path: rest, Speed: 1}
	if i := strings.LastIndexByte(rest, '?'); i >= 0 {
		m.Path = rest[:i]
		q, err := url.ParseQuery(rest[i+1:])
		if err != nil {
			return Model{}, fmt.Errorf("model %q: bad query %q: %v", model, rest[i+1:], err)
		}
		for k, vs := range q {
			if k != "speed" {
				return Model{}, fmt.Errorf("model %q: unknown option %q (the one option is speed=N)", model, k)
			}
			s, err := strconv.ParseFloat(vs[len(vs)-1], 64)
			if err != nil || s < 0 || math.IsNaN(s) || math.IsInf(s, 0) {
				return Model{}, fmt.Errorf("model %q: speed must be a number >= 0 (1 the recorded pace, 0 as fast as possible), not %q", model, vs[len(vs)-1])
			}
			m.Speed = s
		}
	}
	if m.Path == "" {
		return Model{}, fmt.Errorf("model %q names no recording: replay:<path to an .events.jsonl>[?speed=N]", model)
	}
	return m, nil
}

// Turn is one recorded turn: its events in log order, the recorded user
// text, and when it began.
type Turn struct {
	Number int    // in the recording
	Prompt string // the recorded user_text
	Start  time.Time
	// Events are what the backend replays: everything of the turn but its
	// status, user_text and turn_started (the session and Send make those).
	Events []event.Record
}

// Recording is a parsed event log, split into turns.
type Recording struct {
	Path  string // absolute
	Turns []Turn
}

// Load reads the event log at path into turns. A log that cannot be read,
// holds a line that is not a whole record (damage, or a torn last line
// after a crash: the error names its line and byte offset, so it can be
// cut out), or holds no turn, is refused.
func Load(path string) (*Recording, error) {
	rec := &Recording{Path: path}
	index := map[int]int{} // recorded turn number → index in Turns
	var bad []eventlog.Bad
	err := eventlog.ScanBad(path, 0, func(r *event.Record) bool {
		if r.Turn <= 0 || r.Kind == event.Status {
			return true // the agent's life, not a turn's
		}
		i, ok := index[r.Turn]
		if !ok {
			i = len(rec.Turns)
			index[r.Turn] = i
			rec.Turns = append(rec.Turns, Turn{Number: r.Turn, Start: r.TS})
		}
		t := &rec.Turns[i]
		switch r.Kind {
		case event.UserText:
			var d event.TextData
			_ = json.Unmarshal(r.Data, &d)
			t.Prompt = d.Content.Text
		case event.TurnStarted:
			t.Start = r.TS // the pacing runs from here
		default:
			t.Events = append(t.Events, *r)
		}
		return true
	}, func(b eventlog.Bad) { bad = append(bad, b) })
	switch {
	case errors.Is(err, os.ErrNotExist):
		return nil, fmt.Errorf("replay: no recording at %s", path)
	case err != nil:
		return nil, fmt.Errorf("replay: cannot read the recording %s: %v", path, err)
	case len(bad) > 0:
		return nil, fmt.Errorf("replay: the recording %s is damaged at %v (%d bad line(s)); cut the line out to replay the rest", path, bad[0], len(bad))
	case len(rec.Turns) == 0:
		return nil, fmt.Errorf("replay: the recording %s has no turn to replay", path)
	}
	return rec, nil
}

// Resolve is the recording a model names for an agent in cwd: a relative
// path is relative to cwd.
func Resolve(path, cwd string) string {
	if !filepath.IsAbs(path) {
		path = filepath.Join(cwd, path)
	}
	return filepath.Clean(path)
}

// MaxGap caps a recorded pause (before scaling by 1/speed), so that a
// recording with a long pause in it does not stall a demo.
const MaxGap = 2 * time.Second

// gap is how long to wait between two recorded instants at speed.
func gap(from, to time.Time, speed float64) time.Duration {
	if speed == 0 {
		return 0
	}
	d := min(max(to.Sub(from), 0), MaxGap)
	return time.Duration(float64(d) / speed)
}

// chunkWords is how many words a synthesized delta carries.
const chunkWords = 2

// Chunks splits text into deltas of a few words each (a word with the
// space after it; leading space goes with the first), whose concatenation
// is text, exactly.
func Chunks(text string) []string {
	var out []string
	start, words, inWord := 0, 0, false
	for i, r := range text {
		space := r == ' ' || r == '\n' || r == '\t' || r == '\r'
		if !space && !inWord {
			if words == chunkWords {
				out = append(out, text[start:i])
				start, words = i, 0
			}
			words++
		}
		inWord = !space
	}
	if start < len(text) {
		out = append(out, text[start:])
	}
	return out
}

// jsonChunk is how many bytes a synthesized tool_input_delta carries (cut
// back to a rune boundary).
const jsonChunk = 12

// JSONChunks splits a tool call's input into partialJson fragments.
func JSONChunks(raw []byte) []string {
	var out []string
	s := string(raw)
	for len(s) > 0 {
		n := min(jsonChunk, len(s))
		for n < len(s) && n > 1 && !utf8Start(s[n]) {
			n--
		}
		out = append(out, s[:n])
		s = s[n:]
	}
	return out
}

func utf8Start(b byte) bool { return b&0xC0 != 0x80 }
