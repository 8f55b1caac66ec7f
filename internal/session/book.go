package session

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"unsafe"

	"github.com/tidwall/gjson"

	"github.com/kaimon/kaimon/internal/apitype"
	"github.com/kaimon/kaimon/internal/event"
	"github.com/kaimon/kaimon/internal/verbs"
)

// book accumulates what agent_output reads: per turn, the assistant's text
// blocks and one-line tool summaries, plus the text still streaming. It is
// fed every envelope (deltas included) of a live agent, or the authoritative
// records of a log for an agent that is gone.
//
// A live agent's book (newLiveBook) keeps only the turns not done and the
// last one done: an agent may run for thousands of turns, and their text
// is in the log, which is where the others are read from when asked for
// (Agent.output). It drops each done turn when a later one ends; pruned is
// the last turn it dropped, so a turn up to it that it lacks is in the log.
// A book read from a log keeps every turn.
type book struct {
	turns  map[int]*turnRec
	last   int
	live   bool
	pruned int
	// bad names the lines of the log read into the book that are not
	// records: what agent_output reads from it may lack them.
	bad []string
}

type blockKind int

const (
	textBlock blockKind = iota
	toolBlock
)

type block struct {
	kind blockKind
	text string
}

type turnRec struct {
	blocks     []block
	streaming  pieces // assistant text deltas of the open block
	done       bool
	stopReason apitype.StopReason
	errMsg     string
	usage      event.UsageFigures
	titles     map[string]string // toolCallId → title, for result summaries
}

// pieces is a text built by appending, kept in pieces of up to
// maxPiece bytes: a long streamed block is never copied again as it
// grows. (A strings.Builder doubles and copies: at full speed, with a
// block of tens of thousands of deltas, that was 8% of the relay's CPU.)
type pieces struct {
	p [][]byte
	n int
}

const maxPiece = 64 << 10

func (t *pieces) WriteString(s string) {
	t.n += len(s)
	for len(s) > 0 {
		k := len(t.p) - 1
		if k < 0 || len(t.p[k]) == cap(t.p[k]) {
			c := maxPiece
			if k < 0 || cap(t.p[k]) < maxPiece {
				// Small texts stay small: the first piece doubles up
				// to maxPiece, as a builder would.
				c = min(max(2*len(s), 256), maxPiece)
				if k >= 0 {
					c = min(2*cap(t.p[k]), maxPiece)
				}
			}
			t.p = append(t.p, make([]byte, 0, c))
			k++
		}
		n := min(len(s), cap(t.p[k])-len(t.p[k]))
		t.p[k] = append(t.p[k], s[:n]...)
		s = s[n:]
	}
}

func (t *pieces) Len() int { return t.n }

func (t *pieces) Reset() { *t = pieces{} }

// String is the text. It may share the pieces' memory, which later
// writes do not change (they append past it) and Reset lets go of.
func (t *pieces) String() string {
	switch len(t.p) {
	case 0:
		return ""
	case 1:
		return unsafe.String(unsafe.SliceData(t.p[0]), len(t.p[0]))
	}
	b := make([]byte, 0, t.n)
	for _, p := range t.p {
		b = append(b, p...)
	}
	return unsafe.String(unsafe.SliceData(b), len(b))
}

func newBook() *book { return &book{turns: map[int]*turnRec{}} }

// newLiveBook is the book of a live agent, which drops the turns done.
func newLiveBook() *book { return &book{turns: map[int]*turnRec{}, live: true} }

// dropped says whether turn n was done and dropped: the log has it.
func (b *book) dropped(n int) bool {
	return b != nil && n > 0 && n <= b.pruned && b.turns[n] == nil
}

// prune drops the turns done before turn n, which just ended.
func (b *book) prune(n int) {
	for k, t := range b.turns {
		if k < n && t.done {
			delete(b.turns, k)
			b.pruned = max(b.pruned, k)
		}
	}
}

// get returns turn n's record, nil if there is none (or no book).
func (b *book) get(n int) *turnRec {
	if b == nil {
		return nil
	}
	return b.turns[n]
}

func (b *book) turn(n int) *turnRec {
	t := b.turns[n]
	if t == nil {
		t = &turnRec{titles: map[string]string{}}
		b.turns[n] = t
		if n > b.last {
			b.last = n
		}
	}
	return t
}

// add feeds one event.
func (b *book) add(kind event.Kind, turnN int, data []byte) {
	if turnN <= 0 || b.dropped(turnN) {
		// A straggler of a dropped turn would start a partial copy of
		// it: the log has the whole.
		return
	}
	switch kind {
	case event.TurnStarted:
		b.turn(turnN)
	case event.AssistantText:
		t := b.turn(turnN)
		// Read in place (data is never changed once built); the text
		// is copied where it is kept.
		text := event.TextOf(data)
		if event.IsDelta(data) {
			t.streaming.WriteString(text)
			return
		}
		t.streaming.Reset()
		t.blocks = append(t.blocks, block{kind: textBlock, text: strings.Clone(text)})
	case event.ToolUse:
		raw := gjson.GetBytes(data, "call.rawInput")
		if !raw.Exists() {
			return // the announce; the authoritative copy follows
		}
		t := b.turn(turnN)
		id := gjson.GetBytes(data, "call.toolCallId").String()
		title := gjson.GetBytes(data, "call.title").String()
		t.titles[id] = title
		t.blocks = append(t.blocks, block{kind: toolBlock, text: "→ " + title + " " + oneLine(raw.Raw, 120)})
	case event.ToolResult:
		t := b.turn(turnN)
		id := gjson.GetBytes(data, "update.toolCallId").String()
		status := gjson.GetBytes(data, "update.status").String()
		var texts []string
		gjson.GetBytes(data, "update.content").ForEach(func(_, c gjson.Result) bool {
			if s := c.Get("content.text"); s.Exists() {
				texts = append(texts, s.String())
			} else if c.Get("content.type").String() == "image" {
				texts = append(texts, "[image]")
			}
			return true
		})
		name := t.titles[id]
		if name == "" {
			name = id
		}
		t.blocks = append(t.blocks, block{kind: toolBlock, text: fmt.Sprintf("← %s %s: %s", name, status, oneLine(strings.Join(texts, " "), 120))})
	case event.Result:
		t := b.turn(turnN)
		var r event.ResultData
		_ = json.Unmarshal(data, &r)
		t.done = true
		t.stopReason = r.StopReason
		t.errMsg = r.Error
		t.usage = r.Usage
		t.streaming.Reset()
		if b.live {
			b.prune(turnN)
		}
	}
}

// clone copies what the turn's text is rendered from.
func (t *turnRec) clone() *turnRec {
	c := &turnRec{blocks: slices.Clone(t.blocks), done: t.done, stopReason: t.stopReason, errMsg: t.errMsg, usage: t.usage}
	c.streaming.WriteString(t.streaming.String())
	return c
}

func oneLine(s string, max int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > max {
		return string(r[:max-1]) + "…"
	}
	return s
}

// lastMessage is the turn's final assistant text block, or what is
// streaming after it.
func (t *turnRec) lastMessage() string {
	if t.streaming.Len() > 0 {
		return t.streaming.String()
	}
	for i := len(t.blocks) - 1; i >= 0; i-- {
		if t.blocks[i].kind == textBlock {
			return t.blocks[i].text
		}
	}
	return ""
}

// fullTurn is every assistant text block in order, joined by a blank line,
// with tool summaries interleaved when asked.
func (t *turnRec) fullTurn(tools bool) string {
	var parts []string
	for _, bl := range t.blocks {
		if bl.kind == textBlock || tools {
			parts = append(parts, bl.text)
		}
	}
	if t.streaming.Len() > 0 {
		parts = append(parts, t.streaming.String())
	}
	return strings.Join(parts, "\n\n")
}

// text renders which for turn n (0: the latest).
func (b *book) text(n int, which string, tools bool) (string, *turnRec, int) {
	if n <= 0 {
		n = b.last
	}
	if which == verbs.WhichAll {
		var parts []string
		for i := 1; i <= b.last; i++ {
			if t := b.turns[i]; t != nil {
				parts = append(parts, fmt.Sprintf("— turn %d —\n%s", i, t.fullTurn(tools)))
			}
		}
		return strings.Join(parts, "\n\n"), b.turns[n], n
	}
	t := b.turns[n]
	if t == nil {
		return "", nil, n
	}
	if which == verbs.WhichFullTurn {
		return t.fullTurn(tools), t, n
	}
	return t.lastMessage(), t, n
}
