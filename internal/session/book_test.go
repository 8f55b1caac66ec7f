package session

import (
	"strings"
	"testing"

	"github.com/kaimon/kaimon/internal/event"
)

func feed(b *book, evs ...event.Event) {
	for _, e := range evs {
		b.add(e.Kind, e.Turn, e.Data)
	}
}

func TestBookOutputModes(t *testing.T) {
	b := newBook()
	feed(b,
		event.New(event.TurnStarted, 1, struct{}{}),
		event.NewText(event.AssistantText, 1, true, "Hel"),
		event.NewText(event.AssistantText, 1, true, "lo"),
	)
	// While streaming, last_message is the partial text.
	if got, tr, n := b.text(0, "last_message", false); got != "Hello" || tr.done || n != 1 {
		t.Fatalf("partial last_message = %q done=%v n=%d", got, tr.done, n)
	}
	feed(b,
		event.NewText(event.AssistantText, 1, false, "Hello."),
		event.New(event.ToolUse, 1, event.ToolUseData{Call: event.ToolCall{ToolCallID: "t1", Title: "Bash", Status: "in_progress"}}),
		event.New(event.ToolUse, 1, event.ToolUseData{Call: event.ToolCall{ToolCallID: "t1", Title: "Bash", Status: "in_progress", RawInput: []byte(`{"command":"echo hi"}`)}}),
		event.New(event.ToolResult, 1, event.ToolResultData{Update: event.ToolResultUpdate{ToolCallID: "t1", Status: "completed",
			Content: []any{map[string]any{"type": "content", "content": map[string]any{"type": "text", "text": "hi"}}}}}),
		event.NewText(event.Thought, 1, false, "not output"),
		event.NewText(event.AssistantText, 1, false, "Done."),
		event.New(event.Result, 1, event.ResultData{StopReason: "end_turn", Usage: event.UsageFigures{InputTokens: 7, OutputTokens: 3}}),
		event.New(event.TurnStarted, 2, struct{}{}),
		event.NewText(event.AssistantText, 2, false, "Second."),
		event.New(event.Result, 2, event.ResultData{StopReason: "end_turn"}),
	)
	check := func(turn int, which string, tools bool, want string) {
		t.Helper()
		got, _, _ := b.text(turn, which, tools)
		if got != want {
			t.Errorf("text(%d, %s, tools=%v) = %q, want %q", turn, which, tools, got, want)
		}
	}
	check(1, "last_message", false, "Done.")
	check(0, "last_message", false, "Second.")
	check(1, "full_turn", false, "Hello.\n\nDone.")
	check(1, "full_turn", true, "Hello.\n\n→ Bash {\"command\":\"echo hi\"}\n\n← Bash completed: hi\n\nDone.")
	check(0, "all", false, "— turn 1 —\nHello.\n\nDone.\n\n— turn 2 —\nSecond.")
	if tr := b.turns[1]; !tr.done || tr.stopReason != "end_turn" || tr.usage.InputTokens != 7 {
		t.Errorf("turn 1 = %+v", tr)
	}
}

// A dropped delta heals: the authoritative block replaces what streamed.
func TestBookAuthoritativeReplacesDeltas(t *testing.T) {
	b := newBook()
	feed(b, event.NewText(event.AssistantText, 1, true, "Hel"), // "lo" lost
		event.NewText(event.AssistantText, 1, false, "Hello"))
	got, _, _ := b.text(1, "full_turn", false)
	if got != "Hello" {
		t.Errorf("full_turn = %q, want the authoritative copy only", got)
	}
}

func TestOneLine(t *testing.T) {
	if got := oneLine("a\n  b\tc", 10); got != "a b c" {
		t.Errorf("oneLine = %q", got)
	}
	if got := oneLine(strings.Repeat("x", 20), 10); len([]rune(got)) != 10 || !strings.HasSuffix(got, "…") {
		t.Errorf("oneLine cut = %q", got)
	}
}

// A live book keeps the turns not done and the last one done; a turn it
// dropped is known to be in the log, and a straggler of it is not taken.
func TestLiveBookDropsDoneTurns(t *testing.T) {
	b := newLiveBook()
	turn := func(n int, text string, done bool) {
		feed(b, event.New(event.TurnStarted, n, struct{}{}), event.NewText(event.AssistantText, n, false, text))
		if done {
			feed(b, event.New(event.Result, n, event.ResultData{StopReason: "end_turn"}))
		}
	}
	turn(1, "one", false) // never ended (a daemon lost mid-turn)
	turn(2, "two", true)
	turn(3, "three", true)
	turn(4, "four", false) // running
	if len(b.turns) != 3 || b.turns[1] == nil || b.turns[3] == nil || b.turns[4] == nil {
		t.Fatalf("turns kept: %v, want 1 (not done), 3 (last done), 4 (running)", b.turns)
	}
	if !b.dropped(2) || b.dropped(1) || b.dropped(3) || b.dropped(4) || b.dropped(5) {
		t.Errorf("dropped: 2 %v, 1 %v, 3 %v, 4 %v, 5 %v; want only 2", b.dropped(2), b.dropped(1), b.dropped(3), b.dropped(4), b.dropped(5))
	}
	feed(b, event.NewText(event.AssistantText, 2, false, "late"))
	if b.turns[2] != nil {
		t.Error("a straggler of a dropped turn started a copy of it")
	}
	feed(b, event.New(event.Result, 4, event.ResultData{StopReason: "end_turn"}))
	if got, tr, n := b.text(0, "last_message", false); got != "four" || !tr.done || n != 4 || b.turns[3] != nil || !b.dropped(3) {
		t.Errorf("after turn 4 ended: %q, %d, turn 3 kept %v", got, n, b.turns[3] != nil)
	}
	// A book read from a log keeps every turn.
	all := newBook()
	feed(all, event.New(event.Result, 1, event.ResultData{}), event.New(event.Result, 2, event.ResultData{}))
	if len(all.turns) != 2 || all.dropped(1) {
		t.Errorf("log book: %d turns", len(all.turns))
	}
}

// pieces is a strings.Builder that never copies what it holds: the same
// text, whatever the writes, across pieces, and a String taken earlier
// unchanged by later writes.
func TestPieces(t *testing.T) {
	var p pieces
	var want strings.Builder
	var early, earlyWant string
	for i := range 20000 {
		s := strings.Repeat(string(rune('a'+i%26)), i%97)
		if i%5000 == 0 {
			s = strings.Repeat("L", maxPiece+3) // over a piece at once
		}
		p.WriteString(s)
		want.WriteString(s)
		if i == 10 {
			early, earlyWant = p.String(), want.String()
		}
	}
	if p.Len() != want.Len() || p.String() != want.String() {
		t.Fatalf("len %d, want %d; texts equal: %v", p.Len(), want.Len(), p.String() == want.String())
	}
	if early != earlyWant {
		t.Fatal("a String taken earlier changed")
	}
	for _, piece := range p.p {
		if cap(piece) > maxPiece {
			t.Fatalf("a piece of %d bytes", cap(piece))
		}
	}
	p.Reset()
	if p.Len() != 0 || p.String() != "" || p.p != nil {
		t.Fatal("Reset kept something")
	}
}
