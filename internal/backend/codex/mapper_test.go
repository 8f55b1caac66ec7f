package codex

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/kaimon/kaimon/internal/apitype"
	"github.com/kaimon/kaimon/internal/event"
)

// The fixtures in testdata are real traffic of `codex app-server`
// (@openai/codex 0.169.0) against fakeopenai, one JSON object a line:
// {"dir": "out"|"in", "msg": <the JSON-RPC message>}, paths made
// /home/u/…:
//
//   - text.jsonl: a text turn, a reasoning turn ("please think"), and a
//     command execution run unasked (approval policy and sandbox left to
//     Codex's defaults);
//   - approvals.jsonl (on-request, workspace-write): an escalated command
//     accepted, one declined, a slow turn interrupted, a turn with model
//     and effort switched, and calls of tools this model has not
//     (update_plan, apply_patch);
//   - edits.jsonl (untrusted, workspace-write): apply_patch through the
//     shell, a file change asked and accepted; a command asked and
//     accepted; a turn the model API fails (HTTP 500).

// replayed is what the mapper made of a fixture: every event, by turn, and
// the server requests with the tool call each asks about.
type replayed struct {
	events map[int][]event.Event
	asks   []ask
	m      *Mapper
}

type ask struct {
	method string
	turn   int
	call   event.ToolCall
	tool   string
	ok     bool
}

// replay feeds a fixture to a Mapper as the backend does: each turn/start
// kaimon sent is a turn pushed, each notification mapped, turn/completed
// the turn's end.
func replay(t *testing.T, name string) replayed {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r := replayed{events: map[int][]event.Event{}, m: NewMapper()}
	add := func(evs []event.Event) {
		for _, ev := range evs {
			r.events[ev.Turn] = append(r.events[ev.Turn], ev)
		}
	}
	n := 0
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := gjson.ParseBytes(sc.Bytes())
		msg := line.Get("msg")
		method := msg.Get("method").String()
		params := []byte(msg.Get("params").Raw)
		switch {
		case line.Get("dir").String() == "out":
			if method == "turn/start" {
				n++
				evs, _ := r.m.Push(n, msg.Get("params.input.0.text").String())
				add(evs)
			}
		case method == "":
			// a response
		case msg.Get("id").Exists():
			call, tool, ok := r.m.Call(msg.Get("params.itemId").String())
			r.asks = append(r.asks, ask{method: method, turn: r.m.Current(), call: call, tool: tool, ok: ok})
		case method == "turn/completed":
			evs, _ := r.m.End(params)
			add(evs)
		default:
			add(r.m.Map(method, params))
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return r
}

// kinds lists a turn's authoritative events' kinds, as the log keeps them.
func kinds(evs []event.Event) string {
	var out []string
	for _, ev := range evs {
		if event.Authoritative(ev.Kind, ev.Data) {
			out = append(out, string(ev.Kind))
		}
	}
	return strings.Join(out, " ")
}

// whole returns the text of the turn's authoritative events of kind.
func whole(evs []event.Event, kind event.Kind) []string {
	var out []string
	for _, ev := range evs {
		if ev.Kind == kind && !event.IsDelta(ev.Data) {
			out = append(out, event.TextOf(ev.Data))
		}
	}
	return out
}

// streamed joins the turn's deltas of kind.
func streamed(evs []event.Event, kind event.Kind) string {
	var b strings.Builder
	for _, ev := range evs {
		if ev.Kind == kind && event.IsDelta(ev.Data) {
			b.WriteString(event.TextOf(ev.Data))
		}
	}
	return b.String()
}

func result(t *testing.T, evs []event.Event) event.ResultData {
	t.Helper()
	last := evs[len(evs)-1]
	if last.Kind != event.Result {
		t.Fatalf("the turn's last event is %s, not result", last.Kind)
	}
	var r event.ResultData
	if err := json.Unmarshal(last.Data, &r); err != nil {
		t.Fatal(err)
	}
	return r
}

func find(evs []event.Event, kind event.Kind) gjson.Result {
	for _, ev := range evs {
		if ev.Kind == kind {
			return gjson.ParseBytes(ev.Data)
		}
	}
	return gjson.Result{}
}

func TestMapText(t *testing.T) {
	r := replay(t, "text.jsonl")
	one := r.events[1]
	if k := kinds(one); k != "user_text turn_started assistant_text usage result" {
		t.Fatalf("turn 1: %s", k)
	}
	if w := whole(one, event.AssistantText); len(w) != 1 || w[0] != "Hello from fakeopenai (request #1)." || streamed(one, event.AssistantText) != w[0] {
		t.Fatalf("turn 1 text: %q, streamed %q", w, streamed(one, event.AssistantText))
	}
	res := result(t, one)
	if res.StopReason != apitype.StopEndTurn || res.Usage != (event.UsageFigures{InputTokens: 42, OutputTokens: 7}) {
		t.Fatalf("turn 1 result: %+v", res)
	}

	two := r.events[2]
	if k := kinds(two); k != "user_text turn_started thought assistant_text usage result" {
		t.Fatalf("turn 2: %s", k)
	}
	if w := whole(two, event.Thought); len(w) != 1 || w[0] != "Let me think about this briefly." || streamed(two, event.Thought) != w[0] {
		t.Fatalf("turn 2 thought: %q", w)
	}

	// A command: its tool_use with the whole input at item/started, its
	// result with the output; the turn's usage sums both requests' lasts.
	three := r.events[3]
	if k := kinds(three); k != "user_text turn_started tool_use tool_result assistant_text usage result" {
		t.Fatalf("turn 3: %s", k)
	}
	use := find(three, event.ToolUse)
	if use.Get("call.title").String() != "echo hi-from-codex" || use.Get("call.kind").String() != "execute" ||
		use.Get("call.rawInput.command").String() != "/bin/bash -lc 'echo hi-from-codex'" || use.Get("call.rawInput.cwd").String() != "/home/u/work" {
		t.Fatalf("tool_use: %s", use.Raw)
	}
	out := find(three, event.ToolResult)
	if out.Get("update.status").String() != "completed" || out.Get("update.toolCallId").String() != use.Get("call.toolCallId").String() ||
		!strings.HasSuffix(out.Get("update.content.0.content.text").String(), "hi-from-codex\n") {
		t.Fatalf("tool_result: %s", out.Raw)
	}
	if u := result(t, three).Usage; u != (event.UsageFigures{InputTokens: 84, OutputTokens: 14}) {
		t.Fatalf("turn 3 usage: %+v", u)
	}
}

func TestMapApprovals(t *testing.T) {
	r := replay(t, "approvals.jsonl")
	if len(r.asks) != 2 {
		t.Fatalf("asks: %+v", r.asks)
	}
	// The request names an item whose tool_use came first: the
	// permission shows that call, pending, as Bash.
	for i, want := range []string{"echo yes > allowed.txt", "echo no > denied.txt"} {
		a := r.asks[i]
		if !a.ok || a.method != "item/commandExecution/requestApproval" || a.turn != i+1 || a.tool != "Bash" ||
			a.call.Title != want || a.call.Status != apitype.ToolPending {
			t.Fatalf("ask %d: %+v", i, a)
		}
	}
	if s := find(r.events[1], event.ToolResult).Get("update.status").String(); s != "completed" {
		t.Fatalf("accepted command: %s", s)
	}
	// Declined: the call failed, the turn goes on to its end.
	declined := find(r.events[2], event.ToolResult)
	if declined.Get("update.status").String() != "failed" || declined.Get("update.content.0.content.text").String() != "declined" {
		t.Fatalf("declined command: %s", declined.Raw)
	}
	if res := result(t, r.events[2]); res.StopReason != apitype.StopEndTurn {
		t.Fatalf("declined turn: %+v", res)
	}

	// Interrupted mid-message: no item/completed came, so the text that
	// streamed is made authoritative at the end; the turn is cancelled
	// with the usage Codex reported for it.
	three := r.events[3]
	if k := kinds(three); k != "user_text turn_started assistant_text usage result" {
		t.Fatalf("interrupted turn: %s", k)
	}
	if w := whole(three, event.AssistantText); len(w) != 1 || !strings.HasPrefix(w[0], "chunk0 chunk1 ") || w[0] != streamed(three, event.AssistantText) {
		t.Fatalf("interrupted text: %q", w)
	}
	if res := result(t, three); res.StopReason != apitype.StopCancelled || res.Usage.InputTokens != 42 {
		t.Fatalf("interrupted turn: %+v", res)
	}
	for n := 4; n <= 6; n++ {
		if res := result(t, r.events[n]); res.StopReason != apitype.StopEndTurn {
			t.Fatalf("turn %d: %+v", n, res)
		}
	}
}

func TestMapEdits(t *testing.T) {
	r := replay(t, "edits.jsonl")
	one := r.events[1]
	if k := kinds(one); k != "user_text turn_started tool_use tool_result assistant_text usage result" {
		t.Fatalf("turn 1: %s", k)
	}
	use := find(one, event.ToolUse)
	if use.Get("call.kind").String() != "edit" || use.Get("call.title").String() != "edit added.txt" ||
		use.Get("call.locations.0.path").String() != "/home/u/work/added.txt" || use.Get("call.rawInput.changes.0.diff").String() != "hello\n" {
		t.Fatalf("file change: %s", use.Raw)
	}
	if len(r.asks) != 2 || r.asks[0].method != "item/fileChange/requestApproval" || r.asks[0].tool != "Edit" || !r.asks[0].ok ||
		r.asks[1].tool != "Bash" || r.asks[1].call.Title != "echo untrusted > u.txt" {
		t.Fatalf("asks: %+v", r.asks)
	}
	if s := find(one, event.ToolResult).Get("update.status").String(); s != "completed" {
		t.Fatalf("file change result: %s", s)
	}

	// The model API failed: an error as it happened, the result says it.
	three := r.events[3]
	if k := kinds(three); k != "user_text turn_started error usage result" {
		t.Fatalf("failed turn: %s", k)
	}
	res := result(t, three)
	if res.StopReason != apitype.StopError || !strings.Contains(res.Error, "high demand") {
		t.Fatalf("failed turn: %+v", res)
	}
}

// A plan update is the whole plan, in ACP's words.
func TestMapPlan(t *testing.T) {
	m := NewMapper()
	m.Push(1, "plan")
	evs := m.Map("turn/plan/updated", []byte(`{"threadId":"t","turnId":"u","explanation":"two steps","plan":[{"step":"look","status":"completed"},{"step":"fix","status":"inProgress"},{"step":"test","status":"pending"}]}`))
	if len(evs) != 1 || evs[0].Kind != event.Plan {
		t.Fatalf("events: %v", evs)
	}
	want := `{"entries":[{"content":"look","status":"completed"},{"content":"fix","status":"in_progress"},{"content":"test","status":"pending"}]}`
	if string(evs[0].Data) != want {
		t.Fatalf("plan: %s", evs[0].Data)
	}
}

// Cached input is counted apart from input, as kaimon counts it for
// every agent; reasoning stays in output and is kept apart too.
func TestFigures(t *testing.T) {
	u := figures(gjson.Parse(`{"totalTokens":130,"inputTokens":100,"cachedInputTokens":60,"cacheWriteInputTokens":5,"outputTokens":30,"reasoningOutputTokens":12}`))
	if u != (event.UsageFigures{InputTokens: 40, CacheReadTokens: 60, CacheCreationTokens: 5, OutputTokens: 30, ThoughtTokens: 12}) {
		t.Fatalf("figures: %+v", u)
	}
}
