// Package fakescript is the prompt-text script shared by the fake model
// servers of the ACP agents' tests (fakeopenai for opencode, fakegemini for
// gemini-cli): it turns the last user text of a request into an abstract
// reply, which each fake renders in its own wire format. The trigger phrases
// are those of fakeapi (the fake Anthropic API), so that one test text means
// the same to every agent.
//
// The trigger that occurs first in the text (case-sensitive substring)
// selects the reply:
//
//   - (no trigger) default: text "Hello from NAME (request #N)."
//   - "please think": a thought "Let me think about this briefly." then the
//     text "Thought about it. Answer: 42.".
//   - "call tool: NAME JSON": a call of tool NAME with arguments JSON (an
//     object; {} when absent or not an object). NAME and JSON are the rest
//     of the line, split at the first space.
//   - "please be slow": SlowChunks text chunks "chunk0 ", "chunk1 ", … with
//     SlowChunkDelay between them.
//   - "stream N chunks": N text chunks "tok0 ", "tok1 ", … without pauses.
//   - "please fail midway": the text chunks "partial ", "answer ", then
//     the stream breaks off with an error in the API's own mid-stream form
//     (fakeopenai and fakeollama; fakegemini sends the text whole).
//   - "please fail": the server answers HTTP 500.
//   - "say exactly: TEXT": the text TEXT (the rest of the user text).
//
// A request whose last message is a tool's result gets the follow-up
// "Tool said: RESULT. Done.". A request that offers the model no tools (a
// title or summary request of the agent) always gets the default text, so
// that a tool trigger cannot leak into it.
package fakescript

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Trigger phrases.
const (
	TriggerThink      = "please think"
	TriggerCallTool   = "call tool:"
	TriggerSlow       = "please be slow"
	TriggerFail       = "please fail"
	TriggerFailMidway = "please fail midway"
	TriggerSayExactly = "say exactly:"
)

// Fixed texts and timings.
const (
	ThoughtText    = "Let me think about this briefly."
	ThinkText      = "Thought about it. Answer: 42."
	FailMessage    = "fake model server: scripted failure"
	MidwayMessage  = "fake model server: scripted failure mid-stream"
	SlowChunks     = 60
	SlowChunkDelay = 250 * time.Millisecond
)

var streamChunksRE = regexp.MustCompile(`stream (\d+) chunks`)

// Reply is an abstract scripted answer.
type Reply struct {
	Fail bool
	// FailMidway: after Text, the stream ends with an error.
	FailMidway bool
	Thought    []string // thought chunks, before the text
	Text       []string // text chunks
	Delay      time.Duration
	ToolName   string // a tool call, after the text, when set
	ToolArgs   []byte // a JSON object
}

// FullText is the text chunks joined.
func (r *Reply) FullText() string { return strings.Join(r.Text, "") }

// Choose picks the reply. text is the last user text; toolResult and
// followUp say the request carries a tool's result instead; hasTools says
// whether the request offers tools; name and n make the default text.
func Choose(text, toolResult string, followUp, hasTools bool, name string, n int) Reply {
	def := Reply{Text: Split(fmt.Sprintf("Hello from %s (request #%d).", name, n), 16)}
	if followUp {
		return Reply{Text: Split("Tool said: "+toolResult+". Done.", 16)}
	}
	if !hasTools {
		return def
	}
	best, pos := "", -1
	// The first phrase of the list wins a tie: "please fail midway"
	// before "please fail".
	for _, t := range []string{TriggerThink, TriggerCallTool, TriggerSlow, TriggerFailMidway, TriggerFail, TriggerSayExactly} {
		if i := strings.Index(text, t); i >= 0 && (pos < 0 || i < pos) {
			best, pos = t, i
		}
	}
	streamN := 0
	if loc := streamChunksRE.FindStringSubmatchIndex(text); loc != nil && (pos < 0 || loc[0] < pos) {
		if v, err := strconv.Atoi(text[loc[2]:loc[3]]); err == nil {
			best, pos, streamN = "stream", loc[0], v
		}
	}
	var rest string
	if pos >= 0 && best != "stream" {
		rest = text[pos+len(best):]
	}
	switch best {
	case TriggerThink:
		return Reply{Thought: []string{"Let me think", " about this ", "briefly."}, Text: []string{"Thought about it", ". Answer: 42."}}
	case TriggerCallTool:
		name, args := CallTool(rest)
		return Reply{ToolName: name, ToolArgs: args}
	case TriggerSlow:
		r := Reply{Delay: SlowChunkDelay}
		for i := 0; i < SlowChunks; i++ {
			r.Text = append(r.Text, "chunk"+strconv.Itoa(i)+" ")
		}
		return r
	case "stream":
		var r Reply
		for i := 0; i < streamN; i++ {
			r.Text = append(r.Text, "tok"+strconv.Itoa(i)+" ")
		}
		return r
	case TriggerFailMidway:
		return Reply{Text: []string{"partial ", "answer "}, FailMidway: true}
	case TriggerFail:
		return Reply{Fail: true}
	case TriggerSayExactly:
		return Reply{Text: Split(strings.TrimPrefix(rest, " "), 16)}
	}
	return def
}

// CallTool parses the rest of a "call tool:" line: NAME, then an optional
// JSON object, compacted; {} when absent or not an object.
func CallTool(rest string) (string, []byte) {
	if i := strings.IndexAny(rest, "\r\n"); i >= 0 {
		rest = rest[:i]
	}
	name, input, _ := strings.Cut(strings.TrimSpace(rest), " ")
	var obj map[string]json.RawMessage
	var buf bytes.Buffer
	if json.Unmarshal([]byte(input), &obj) != nil || obj == nil || json.Compact(&buf, []byte(input)) != nil {
		return name, []byte("{}")
	}
	return name, buf.Bytes()
}

// Split cuts s into pieces of at most size runes (at least two pieces when
// s has two runes or more).
func Split(s string, size int) []string {
	n := utf8.RuneCountInString(s)
	if n == 0 {
		return nil
	}
	if n < size*2 && n >= 2 {
		size = (n + 1) / 2
	}
	var out []string
	for len(s) > 0 {
		i, c := 0, 0
		for i < len(s) && c < size {
			_, w := utf8.DecodeRuneInString(s[i:])
			i += w
			c++
		}
		out = append(out, s[:i])
		s = s[i:]
	}
	return out
}

// JSON encodes v without HTML escaping.
func JSON(v any) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		panic(err)
	}
	return bytes.TrimRight(buf.Bytes(), "\n")
}

// Clip cuts s for a log line.
func Clip(s string) string {
	if len(s) > 200 {
		return s[:200] + "…"
	}
	return s
}
