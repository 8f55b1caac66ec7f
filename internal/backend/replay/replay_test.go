package replay

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kaimon/kaimon/internal/apitype"
	"github.com/kaimon/kaimon/internal/backend"
	"github.com/kaimon/kaimon/internal/event"
	"github.com/kaimon/kaimon/internal/eventlog"
	"github.com/kaimon/kaimon/internal/testutil/backendtest"
	"github.com/kaimon/kaimon/internal/verbs"
)

// sink records what the backend emits, and fails the test on an event
// after Exited or a second Exited.
type sink struct {
	t       *testing.T
	mu      sync.Mutex
	evs     []event.Event
	exited  int
	changed chan struct{}
}

func newSink(t *testing.T) *sink { return &sink{t: t, changed: make(chan struct{})} }

func (s *sink) Emit(ev event.Event) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.exited > 0 {
		s.t.Errorf("%s emitted after Exited", ev.Kind)
	}
	s.evs = append(s.evs, ev)
	close(s.changed)
	s.changed = make(chan struct{})
}

func (s *sink) Exited(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.exited++
	if s.exited > 1 || err != nil {
		s.t.Errorf("Exited #%d with %v", s.exited, err)
	}
}

// wait waits until cond holds for the events so far (a guard, not a
// timing: it fails only a replay that hangs).
func (s *sink) wait(what string, cond func([]event.Event) bool) []event.Event {
	s.t.Helper()
	guard := time.After(30 * time.Second)
	for {
		s.mu.Lock()
		evs, ch := slices.Clone(s.evs), s.changed
		s.mu.Unlock()
		if cond(evs) {
			return evs
		}
		select {
		case <-ch:
		case <-guard:
			s.t.Fatalf("no %s; events so far:\n%s", what, dump(evs))
		}
	}
}

func dump(evs []event.Event) string {
	var b strings.Builder
	for _, ev := range evs {
		b.WriteString(string(ev.Kind) + " " + string(ev.Data) + "\n")
	}
	return b.String()
}

// results counts result events.
func results(n int) func([]event.Event) bool {
	return func(evs []event.Event) bool {
		k := 0
		for _, ev := range evs {
			if ev.Kind == event.Result {
				k++
			}
		}
		return k >= n
	}
}

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func rec(seq uint64, at time.Duration, kind event.Kind, turn int, data any) event.Record {
	b, err := event.Marshal(data)
	if err != nil {
		panic(err)
	}
	return event.Record{TS: t0.Add(at), Seq: seq, Kind: kind, Turn: turn, Data: b}
}

func text(s string) event.TextData { return event.TextData{Content: event.Text{Type: "text", Text: s}} }

const (
	thought = "Let me look at\nthe  files first."
	answer1 = "  I will run a command, then report. 日本語 too."
	answer2 = "Two."
	input   = `{"command":"echo héllo","description":"Print"}`
)

// recording is two turns: thought, text and a tool call (announce,
// authoritative, result) with a 10-minute pause in it, then a text turn.
func recording() []event.Record {
	call := func(raw string) event.ToolUseData {
		c := event.ToolCall{ToolCallID: "tu1", Title: "Bash", Kind: "execute", Status: "in_progress", Content: []any{}, Locations: []any{}}
		if raw != "" {
			c.RawInput = json.RawMessage(raw)
		}
		return event.ToolUseData{Call: c}
	}
	usage := event.UsageFigures{InputTokens: 100, OutputTokens: 20}
	ms := time.Millisecond
	return []event.Record{
		rec(1, 0, event.Status, 0, event.StatusData{Status: "starting"}),
		rec(2, 10*ms, event.Status, 0, event.StatusData{Status: "idle"}),
		rec(3, 20*ms, event.Status, 1, event.StatusData{Status: "working"}),
		rec(4, 20*ms, event.UserText, 1, text("recorded prompt")),
		rec(5, 30*ms, event.TurnStarted, 1, struct{}{}),
		rec(6, 130*ms, event.Thought, 1, text(thought)),
		rec(7, 330*ms, event.AssistantText, 1, text(answer1)),
		rec(8, 340*ms, event.ToolUse, 1, call("")),
		rec(9, 10*time.Minute, event.ToolUse, 1, call(input)),
		rec(10, 10*time.Minute+50*ms, event.ToolResult, 1, event.ToolResultData{Update: event.ToolResultUpdate{ToolCallID: "tu1", Status: "completed", Content: []any{"hi"}}}),
		rec(11, 10*time.Minute+60*ms, event.Usage, 1, event.UsageData{Usage: usage}),
		rec(12, 10*time.Minute+60*ms, event.Result, 1, event.ResultData{StopReason: "end_turn", Usage: usage}),
		rec(13, 10*time.Minute+70*ms, event.Status, 1, event.StatusData{Status: "idle"}),
		rec(14, 11*time.Minute, event.UserText, 2, text("again")),
		rec(15, 11*time.Minute, event.TurnStarted, 2, struct{}{}),
		rec(16, 11*time.Minute+500*ms, event.AssistantText, 2, text(answer2)),
		rec(17, 11*time.Minute+600*ms, event.Result, 2, event.ResultData{StopReason: "end_turn", Usage: usage}),
	}
}

// writeLog writes records as an event log in dir, with eventlog's writer.
func writeLog(t *testing.T, dir string, recs []event.Record) string {
	t.Helper()
	path := filepath.Join(dir, "rec.events.jsonl")
	w, _, err := eventlog.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	for i := range recs {
		if err := w.Append(&recs[i]); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// open makes and starts a backend on model in a fresh dir holding the
// recording, and closes it at the end of the test.
func open(t *testing.T, model, resume string) (*Backend, *sink, *[]time.Duration) {
	t.Helper()
	dir := t.TempDir()
	writeLog(t, dir, recording())
	s := newSink(t)
	b, err := New(backendtest.Resolved(t, backend.Options{OpenArgs: verbs.OpenArgs{ID: "r1", Cwd: dir, Model: model}, ResumeSession: resume}), s)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var waits []time.Duration
	b.sleep = func(ctx context.Context, d time.Duration) bool {
		mu.Lock()
		waits = append(waits, d)
		mu.Unlock()
		return ctx.Err() == nil
	}
	if err := b.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b, s, &waits
}

// authoritative drops what the log would not keep, and user_text and
// turn_started, which Send makes.
func authoritative(evs []event.Event) []event.Event {
	var out []event.Event
	for _, ev := range evs {
		if event.Authoritative(ev.Kind, ev.Data) && ev.Kind != event.UserText && ev.Kind != event.TurnStarted {
			out = append(out, ev)
		}
	}
	return out
}

// recorded is the recording's turn n as the backend should replay it,
// numbered live.
func recorded(n, live int) []event.Event {
	var out []event.Event
	for _, r := range recording() {
		if r.Turn == n && r.Kind != event.Status && r.Kind != event.UserText && r.Kind != event.TurnStarted {
			out = append(out, event.Event{Kind: r.Kind, Turn: live, Data: r.Data})
		}
	}
	return out
}

func sameEvents(t *testing.T, what string, got, want []event.Event) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d events, want %d:\ngot:\n%swant:\n%s", what, len(got), len(want), dump(got), dump(want))
	}
	for i := range got {
		if got[i].Kind != want[i].Kind || got[i].Turn != want[i].Turn || !bytes.Equal(got[i].Data, want[i].Data) {
			t.Fatalf("%s: event %d is %s/%d %s, want %s/%d %s", what, i, got[i].Kind, got[i].Turn, got[i].Data, want[i].Kind, want[i].Turn, want[i].Data)
		}
	}
}

// The same recorded turns out, in order, whatever was sent; user_text
// echoes what was sent and opens the turn.
func TestReplayTurnsOut(t *testing.T) {
	b, s, _ := open(t, "replay:rec.events.jsonl?speed=0", "")
	if err := b.Send(1, "not the recorded prompt"); err != nil {
		t.Fatal(err)
	}
	evs := s.wait("result of turn 1", results(1))
	if evs[0].Kind != event.UserText || !strings.Contains(string(evs[0].Data), "not the recorded prompt") || evs[1].Kind != event.TurnStarted {
		t.Fatalf("turn opens with %s, %s:\n%s", evs[0].Kind, evs[1].Kind, dump(evs))
	}
	sameEvents(t, "turn 1", authoritative(evs), recorded(1, 1))
	if got := b.Info().SessionID; got != "replay@1" {
		t.Fatalf("session id after one turn: %q", got)
	}
}

// Deltas come before their block, concatenate to its text, and there are
// several of them; tool input fragments concatenate to the input.
func TestReplayDeltas(t *testing.T) {
	b, s, _ := open(t, "replay:rec.events.jsonl?speed=0", "")
	if err := b.Send(1, "go"); err != nil {
		t.Fatal(err)
	}
	evs := s.wait("result of turn 1", results(1))
	blocks := map[event.Kind]string{event.Thought: thought, event.AssistantText: answer1}
	acc := map[event.Kind]string{}
	chunks := map[event.Kind]int{}
	var partial string
	for _, ev := range evs {
		switch ev.Kind {
		case event.Thought, event.AssistantText:
			var d event.TextData
			if err := json.Unmarshal(ev.Data, &d); err != nil {
				t.Fatal(err)
			}
			if d.Delta {
				acc[ev.Kind] += d.Content.Text
				chunks[ev.Kind]++
				continue
			}
			if chunks[ev.Kind] < 2 || acc[ev.Kind] != d.Content.Text || d.Content.Text != blocks[ev.Kind] {
				t.Fatalf("%s block %q after %d deltas that concatenate to %q", ev.Kind, d.Content.Text, chunks[ev.Kind], acc[ev.Kind])
			}
			delete(blocks, ev.Kind)
		case event.ToolInputDelta:
			var d event.ToolInputDeltaData
			if err := json.Unmarshal(ev.Data, &d); err != nil || d.ToolCallID != "tu1" {
				t.Fatalf("tool_input_delta %s (%v)", ev.Data, err)
			}
			partial += d.PartialJSON
		case event.ToolUse:
			var d event.ToolUseData
			if err := json.Unmarshal(ev.Data, &d); err != nil {
				t.Fatal(err)
			}
			if len(d.Call.RawInput) > 0 && partial != input {
				t.Fatalf("tool input fragments concatenate to %q, want %q", partial, input)
			}
		}
	}
	if len(blocks) > 0 || partial == "" {
		t.Fatalf("blocks never seen: %v; tool input fragments %q", blocks, partial)
	}
}

func TestReplayChunks(t *testing.T) {
	for _, s := range []string{"", " ", "one", "one two three four five", "  lead\n\nand trail  ", thought, answer1, "a\tb c"} {
		c := Chunks(s)
		if strings.Join(c, "") != s {
			t.Fatalf("Chunks(%q) = %q", s, c)
		}
		if len(strings.Fields(s)) > chunkWords && len(c) < 2 {
			t.Fatalf("Chunks(%q) = %q: one chunk for %d words", s, c, len(strings.Fields(s)))
		}
	}
	for _, s := range []string{"", input, `{"a":"ééééééééééééé"}`} {
		c := JSONChunks([]byte(s))
		if strings.Join(c, "") != s {
			t.Fatalf("JSONChunks(%q) = %q", s, c)
		}
		for _, f := range c {
			if !utf8Valid(f) {
				t.Fatalf("JSONChunks(%q): fragment %q cuts a character", s, f)
			}
		}
	}
}

func utf8Valid(s string) bool { return strings.ToValidUTF8(s, "\uFFFD") == s }

// speed=0 asks for no wait at all; speed=1 for the recorded gaps, a long
// one capped at MaxGap; speed=4 for a quarter of that.
func TestReplayPacing(t *testing.T) {
	total := func(ds []time.Duration) (sum, most time.Duration) {
		for _, d := range ds {
			sum += d
			most = max(most, d)
		}
		return
	}
	run := func(model string) []time.Duration {
		b, s, waits := open(t, model, "")
		if err := b.Send(1, "go"); err != nil {
			t.Fatal(err)
		}
		s.wait("result of turn 1", results(1))
		b.Close()
		return *waits
	}
	if sum, _ := total(run("replay:rec.events.jsonl?speed=0")); sum != 0 {
		t.Fatalf("speed=0 waited %v in all", sum)
	}
	// Turn 1 runs from turn_started (30ms) to its result (10m60ms), with
	// the 10-minute pause cut to MaxGap. Integer division of a gap spread
	// over deltas may lose a few ns.
	want := 10*time.Minute + 60*time.Millisecond - 30*time.Millisecond - (10*time.Minute - 340*time.Millisecond) + MaxGap
	for _, c := range []struct {
		model string
		speed time.Duration
	}{{"replay:rec.events.jsonl", 1}, {"replay:rec.events.jsonl?speed=4", 4}} {
		sum, most := total(run(c.model))
		if d := want/c.speed - sum; d < 0 || d > 100 || most > MaxGap/c.speed {
			t.Fatalf("%s waited %v in all, at most %v at once; want %v, and at most %v", c.model, sum, most, want/c.speed, MaxGap/c.speed)
		}
	}
}

// A resumed agent goes on from its position, its turns renumbered to the
// live ones; past the last recorded turn a send fails its turn clearly.
func TestReplayResumeRenumberAndOutOfTurns(t *testing.T) {
	b, s, _ := open(t, "replay:rec.events.jsonl?speed=0", "replay@1")
	if err := b.Send(7, "go on"); err != nil {
		t.Fatal(err)
	}
	evs := s.wait("result of turn 7", results(1))
	for _, ev := range evs {
		if ev.Turn != 7 {
			t.Fatalf("%s carries turn %d, want 7", ev.Kind, ev.Turn)
		}
	}
	sameEvents(t, "recorded turn 2 as turn 7", authoritative(evs), recorded(2, 7))
	if err := b.Send(8, "more"); err != nil {
		t.Fatal(err)
	}
	evs = s.wait("result of turn 8", results(2))
	last := evs[len(evs)-1]
	var d event.ResultData
	if err := json.Unmarshal(last.Data, &d); err != nil {
		t.Fatal(err)
	}
	if last.Kind != event.Result || last.Turn != 8 || d.StopReason != apitype.StopError || !strings.Contains(d.Error, "the recording has no turn 3") {
		t.Fatalf("turn 8 ended with %s/%d %s", last.Kind, last.Turn, last.Data)
	}
	if got := b.Info().SessionID; got != "replay@2" {
		t.Fatalf("session id after all turns: %q", got)
	}
}

// A fork replays from the turn the forked agent is at, under its own
// count; a fork that cannot be made is refused at New, naming why.
func TestReplayFork(t *testing.T) {
	dir := t.TempDir()
	good := writeLog(t, dir, recording())
	fork := func(cwd, model, session string) (*Backend, error) {
		return New(backendtest.Resolved(t, backend.Options{OpenArgs: verbs.OpenArgs{ID: "f1", Cwd: cwd, Model: model},
			Fork: &backend.Fork{AgentID: "p1", Session: session, Cwd: dir}}), newSink(t))
	}
	b, err := fork(dir, "replay:rec.events.jsonl", "replay@1")
	if err != nil {
		t.Fatal(err)
	}
	if b.pos != 1 {
		t.Fatalf("a fork of replay@1 starts at recorded turn %d", b.pos+1)
	}
	for _, c := range []struct{ cwd, model, session, want string }{
		{dir, "replay:rec.events.jsonl", "replay@3", `cannot fork session "replay@3"`},
		{t.TempDir(), "replay:rec.events.jsonl", "replay@1", "relative to agent p1's cwd"},
	} {
		if _, err := fork(c.cwd, c.model, c.session); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("fork %s %s in %s: %v; want %q", c.model, c.session, c.cwd, err, c.want)
		}
	}
	// An absolute recording forks into any cwd.
	if _, err := fork(t.TempDir(), "replay:"+good, "replay@2"); err != nil {
		t.Fatal(err)
	}
}

// Sends during a turn queue: each turn opens after the previous result.
func TestReplayQueues(t *testing.T) {
	b, s, _ := open(t, "replay:rec.events.jsonl?speed=0", "")
	for n := 1; n <= 2; n++ {
		if err := b.Send(n, "go"); err != nil {
			t.Fatal(err)
		}
	}
	evs := s.wait("two results", results(2))
	var turns []event.Event
	for _, ev := range evs {
		if ev.Kind == event.TurnStarted || ev.Kind == event.Result {
			turns = append(turns, ev)
		}
	}
	if len(turns) != 4 || turns[0].Turn != 1 || turns[1].Kind != event.Result || turns[1].Turn != 1 || turns[2].Turn != 2 || turns[3].Turn != 2 {
		t.Fatalf("turns interleave:\n%s", dump(evs))
	}
	sameEvents(t, "turn 2", authoritative(evs[slices.IndexFunc(evs, func(e event.Event) bool { return e.Turn == 2 }):]), recorded(2, 2))
}

// blockingOpen is open with a sleep that, at the first long wait (the
// capped pause, spread over the tool input's fragments), waits until the
// turn is stopped, and says when it began waiting.
func blockingOpen(t *testing.T) (*Backend, *sink, chan struct{}) {
	b, s, _ := open(t, "replay:rec.events.jsonl", "")
	waiting := make(chan struct{})
	var once sync.Once
	b.sleep = func(ctx context.Context, d time.Duration) bool {
		block := false
		if d >= 300*time.Millisecond {
			once.Do(func() { block = true })
		}
		if block {
			close(waiting)
			<-ctx.Done()
			return false
		}
		return ctx.Err() == nil
	}
	return b, s, waiting
}

// Interrupt stops the turn at its long pause: a cancelled result, and the
// queued turn then plays; with no turn playing it reports false.
func TestReplayInterrupt(t *testing.T) {
	b, s, waiting := blockingOpen(t)
	if ok, err := b.Interrupt(context.Background()); ok || err != nil {
		t.Fatalf("interrupt with no turn: %v, %v", ok, err)
	}
	if err := b.Send(1, "go"); err != nil {
		t.Fatal(err)
	}
	if err := b.Send(2, "queued"); err != nil {
		t.Fatal(err)
	}
	<-waiting
	if ok, err := b.Interrupt(context.Background()); !ok || err != nil {
		t.Fatalf("interrupt mid-turn: %v, %v", ok, err)
	}
	evs := s.wait("two results", results(2))
	var stops []apitype.StopReason
	for _, ev := range evs {
		if ev.Kind == event.Result {
			var d event.ResultData
			_ = json.Unmarshal(ev.Data, &d)
			stops = append(stops, d.StopReason)
		}
		if ev.Kind == event.ToolResult && ev.Turn == 1 {
			t.Fatalf("turn 1 went on after the interrupt:\n%s", dump(evs))
		}
	}
	if !slices.Equal(stops, []apitype.StopReason{apitype.StopCancelled, "end_turn"}) {
		t.Fatalf("results %v:\n%s", stops, dump(evs))
	}
}

// Close mid-turn ends it and the queued one cancelled, then Exited, once
// (the sink fails an event after it or a second one).
func TestReplayClose(t *testing.T) {
	b, s, waiting := blockingOpen(t)
	if err := b.Send(1, "go"); err != nil {
		t.Fatal(err)
	}
	if err := b.Send(2, "queued"); err != nil {
		t.Fatal(err)
	}
	<-waiting
	b.Close()
	b.Close()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.exited != 1 {
		t.Fatalf("Exited %d times", s.exited)
	}
	var ends []string
	for _, ev := range s.evs {
		if ev.Kind == event.Result {
			ends = append(ends, string(ev.Data))
		}
	}
	if len(ends) != 2 || !strings.Contains(ends[0], `"cancelled"`) || !strings.Contains(ends[1], `"cancelled"`) {
		t.Fatalf("results after close: %v", ends)
	}
	if err := b.Send(3, "late"); err == nil {
		t.Fatal("send after close accepted")
	}
}

// What cannot be replayed fails New, naming the file and what is wrong.
func TestReplayOpenErrors(t *testing.T) {
	dir := t.TempDir()
	good := writeLog(t, dir, recording())
	lines, err := os.ReadFile(good)
	if err != nil {
		t.Fatal(err)
	}
	write := func(name, content string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	first, rest, _ := strings.Cut(string(lines), "\n")
	write("bad.jsonl", first+"\n{not json\n"+rest)
	write("torn.jsonl", string(lines)+`{"ts":"2026`)
	write("statusonly.jsonl", first+"\n")
	for _, c := range []struct{ model, resume, want string }{
		{"replay:missing.jsonl", "", "no recording at " + filepath.Join(dir, "missing.jsonl")},
		{"replay:bad.jsonl", "", "bad.jsonl is damaged at line 2 (byte "},
		{"replay:torn.jsonl", "", "torn last record"},
		{"replay:statusonly.jsonl", "", "has no turn to replay"},
		{"replay:" + dir, "", "cannot read the recording " + dir},
		{"replay:", "", "names no recording"},
		{"replay:rec.events.jsonl?speed=-1", "", "speed must be a number >= 0"},
		{"replay:rec.events.jsonl?speed=fast", "", "speed must be a number >= 0"},
		{"replay:rec.events.jsonl?pace=2", "", `unknown option "pace"`},
		{"replay:rec.events.jsonl", "replay@3", "cannot resume session"},
		{"replay:rec.events.jsonl", "5e97-uuid", "cannot resume session"},
	} {
		_, err := New(backendtest.Resolved(t, backend.Options{OpenArgs: verbs.OpenArgs{Cwd: dir, Model: c.model}, ResumeSession: c.resume}), newSink(t))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("New(%s, resume %q): %v; want %q", c.model, c.resume, err, c.want)
		}
	}
	// An absolute path is taken as it is, whatever the cwd.
	if _, err := New(backendtest.Resolved(t, backend.Options{OpenArgs: verbs.OpenArgs{Cwd: t.TempDir(), Model: "replay:" + good + "?speed=2"}}), newSink(t)); err != nil {
		t.Fatal(err)
	}
}

// The recording shipped in examples/ is a valid log the backend takes:
// every line a record, at least two turns, a text turn and a tool turn,
// each ending in its result, and no path of the machine it was made on.
func TestReplayExample(t *testing.T) {
	path, err := filepath.Abs("../../../examples/hello.events.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	var bad []eventlog.Bad
	n := 0
	if err := eventlog.ScanBad(path, 0, func(*event.Record) bool { n++; return true }, func(b eventlog.Bad) { bad = append(bad, b) }); err != nil || len(bad) > 0 || n == 0 {
		t.Fatalf("%s: %d records, bad lines %v, %v", path, n, bad, err)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, leak := range []string{"/tmp/", "/work/", "kaimon-rec."} {
		if bytes.Contains(raw, []byte(leak)) {
			t.Errorf("%s holds %q: make its paths generic (go test ./internal/e2e -run TestReplayExampleIsCurrent -update-example)", path, leak)
		}
	}
	r, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Turns) < 2 {
		t.Fatalf("%d turns", len(r.Turns))
	}
	kinds := map[event.Kind]bool{}
	for _, turn := range r.Turns {
		evs := turn.Events
		if len(evs) == 0 || evs[len(evs)-1].Kind != event.Result {
			t.Fatalf("recorded turn %d does not end in a result", turn.Number)
		}
		for _, ev := range evs {
			kinds[ev.Kind] = true
		}
	}
	for _, k := range []event.Kind{event.AssistantText, event.ToolUse, event.ToolResult, event.Usage} {
		if !kinds[k] {
			t.Errorf("the example has no %s", k)
		}
	}
	// And it replays, whole.
	s := newSink(t)
	b, err := New(backendtest.Resolved(t, backend.Options{OpenArgs: verbs.OpenArgs{Cwd: filepath.Dir(path), Model: "replay:hello.events.jsonl?speed=0"}}), s)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if err := b.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	for n := range r.Turns {
		if err := b.Send(n+1, "hi"); err != nil {
			t.Fatal(err)
		}
	}
	evs := s.wait("every turn's result", results(len(r.Turns)))
	for _, ev := range evs {
		if ev.Kind == event.Result && strings.Contains(string(ev.Data), `"error"`) {
			t.Fatalf("a replayed turn failed: %s", ev.Data)
		}
	}
}

// A recorded turn cut short (its agent died mid-turn) replays what it has
// and fails, saying so, rather than hang.
func TestReplayTurnWithoutResult(t *testing.T) {
	dir := t.TempDir()
	writeLog(t, dir, recording()[:8]) // turn 1 up to its tool call's announce
	s := newSink(t)
	b, err := New(backendtest.Resolved(t, backend.Options{OpenArgs: verbs.OpenArgs{Cwd: dir, Model: "replay:rec.events.jsonl?speed=0"}}), s)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if err := b.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := b.Send(1, "go"); err != nil {
		t.Fatal(err)
	}
	evs := s.wait("the result", results(1))
	sameEvents(t, "the cut turn", authoritative(evs[:len(evs)-1]), recorded(1, 1)[:3])
	if last := evs[len(evs)-1]; !strings.Contains(string(last.Data), `"stopReason":"error"`) || !strings.Contains(string(last.Data), "ends without a result") {
		t.Fatalf("the cut turn ended with %s", last.Data)
	}
}
