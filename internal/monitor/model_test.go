package monitor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"

	"github.com/kaimon/kaimon/internal/apitype"
	"github.com/kaimon/kaimon/internal/event"
	"github.com/kaimon/kaimon/internal/verbs"
)

// fakeDaemon answers the model's requests from fields and records them.
type fakeDaemon struct {
	mu      sync.Mutex
	agents  []verbs.ListEntry
	history map[string][]event.Envelope
	output  map[string]*verbs.OutputResult
	calls   []string
	lists   int
}

func (d *fakeDaemon) record(s string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.calls = append(d.calls, s)
}

func (d *fakeDaemon) List(context.Context) ([]verbs.ListEntry, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.lists++
	return append([]verbs.ListEntry(nil), d.agents...), nil
}
func (d *fakeDaemon) Close(_ context.Context, id string) error {
	d.record("close " + id)
	return nil
}
func (d *fakeDaemon) Forget(_ context.Context, id string) error {
	d.record("forget " + id)
	return nil
}
func (d *fakeDaemon) Permit(_ context.Context, id, req string, decision apitype.Decision) error {
	d.record(fmt.Sprintf("permit %s %s %s", id, req, decision))
	return nil
}
func (d *fakeDaemon) Interrupt(_ context.Context, id string) (bool, error) {
	d.record("interrupt " + id)
	return true, nil
}
func (d *fakeDaemon) Send(_ context.Context, id, text string) (int, error) {
	d.record(fmt.Sprintf("send %s %q", id, text))
	return 2, nil
}
func (d *fakeDaemon) History(_ context.Context, id string) ([]event.Envelope, error) {
	return d.history[id], nil
}
func (d *fakeDaemon) Output(_ context.Context, id string) (*verbs.OutputResult, error) {
	d.record("output " + id)
	if r := d.output[id]; r != nil {
		return r, nil
	}
	return nil, errors.New("no output")
}

// harness drives a Model as the program would, running the commands it
// returns (but the clock's and the cursor's, which only wait).
type harness struct {
	t    *testing.T
	m    *Model
	d    *fakeDaemon
	now  time.Time
	seq  map[string]uint64
	quit bool
}

func newHarness(t *testing.T, agents ...verbs.ListEntry) *harness {
	d := &fakeDaemon{agents: agents, history: map[string][]event.Envelope{}}
	h := &harness{t: t, d: d, now: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), seq: map[string]uint64{}}
	h.m = New(d, "/home/u")
	h.m.now = func() time.Time { return h.now }
	h.send(tea.WindowSizeMsg{Width: 100, Height: 30})
	h.send(ConnectedMsg{})
	return h
}

func (h *harness) send(msg tea.Msg) {
	h.t.Helper()
	_, cmd := h.m.Update(msg)
	h.run(cmd)
}

func (h *harness) run(cmd tea.Cmd) {
	if cmd == nil || h.m.hist.typing || h.m.mode == modeSend { // the cursor's blink only waits
		return
	}
	switch msg := cmd().(type) {
	case nil:
	case tea.BatchMsg:
		for _, c := range msg {
			h.run(c)
		}
	case tea.QuitMsg:
		h.quit = true
	case tickMsg:
	default:
		h.send(msg)
	}
}

func (h *harness) press(keys ...string) {
	h.t.Helper()
	for _, k := range keys {
		var msg tea.KeyPressMsg
		switch k {
		case "enter":
			msg = tea.KeyPressMsg{Code: tea.KeyEnter}
		case "esc":
			msg = tea.KeyPressMsg{Code: tea.KeyEscape}
		case "space":
			msg = tea.KeyPressMsg{Code: tea.KeySpace, Text: " "}
		case "down":
			msg = tea.KeyPressMsg{Code: tea.KeyDown}
		case "up":
			msg = tea.KeyPressMsg{Code: tea.KeyUp}
		case "ctrl+c":
			msg = tea.KeyPressMsg{Code: 'c', Mod: tea.ModCtrl}
		default:
			r := []rune(k)[0]
			msg = tea.KeyPressMsg{Code: r, Text: k}
		}
		h.send(msg)
	}
}

// env sends agent id's next envelope of kind with data.
func (h *harness) env(id string, kind event.Kind, turn int, data any) {
	h.t.Helper()
	b, err := json.Marshal(data)
	if err != nil {
		h.t.Fatal(err)
	}
	h.seq[id]++
	h.send(EnvelopeMsg{Env: event.Envelope{Kind: kind, Turn: turn, Data: b, AgentID: id, Seq: h.seq[id], TS: h.now}})
}

// screen is the screen as text, without styles or trailing blanks.
func (h *harness) screen() string {
	lines := strings.Split(ansi.Strip(h.m.Render()), "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRight(l, " ")
	}
	return strings.Join(lines, "\n")
}

func (h *harness) row(id string) string {
	for _, l := range strings.Split(h.screen(), "\n") {
		if strings.HasPrefix(l, id+" ") {
			return l
		}
	}
	return ""
}

func (h *harness) wantScreen(want ...string) {
	h.t.Helper()
	s := h.screen()
	for _, w := range want {
		if !strings.Contains(s, w) {
			h.t.Errorf("screen lacks %q:\n%s", w, s)
		}
	}
}

func entry(id string, status apitype.AgentState, turn int) verbs.ListEntry {
	return verbs.ListEntry{AgentID: id, AgentStatus: verbs.AgentStatus{Status: status, Model: "sonnet", Cwd: "/home/u/src/proj",
		Turn: turn, CreatedAt: "2026-01-02T03:00:00Z", LastActivity: "2026-01-02T03:04:00Z",
		Usage: event.UsageFigures{InputTokens: 1200, OutputTokens: 340}}}
}

func text(delta bool, s string) event.TextData {
	return event.TextData{Delta: delta, Content: event.Text{Type: "text", Text: s}}
}

// Every agent state of the wire has its colour in the table.
func TestEveryStateHasAStyle(t *testing.T) {
	for _, s := range append(apitype.AgentStates, stPermission) {
		if _, ok := statusStyles[s]; !ok {
			t.Errorf("no style for status %q", s)
		}
	}
}

func TestRowsFromListAndBus(t *testing.T) {
	h := newHarness(t, entry("a1", "idle", 2), entry("d1", "dead", 5))
	if h.d.lists != 1 {
		t.Fatalf("agent_list asked %d times at connect, want 1", h.d.lists)
	}
	h.wantScreen("2 agents, 1 live", "ID", "STATUS", "MODEL", "CWD", "TURN", "IN/OUT", "LAST")
	if r := h.row("a1"); !strings.Contains(r, "idle") || !strings.Contains(r, "~/src/proj") ||
		!strings.Contains(r, "1200/340") || !strings.Contains(r, "5s") || !strings.Contains(r, " 2 ") {
		t.Errorf("row a1 = %q", r)
	}
	if r := h.row("d1"); !strings.Contains(r, "dead") {
		t.Errorf("row d1 = %q", r)
	}
	// A turn on the bus moves the row: working, with no new list; then
	// the result adds the turn's usage, and at its end the list is read
	// again (for the model the agent named).
	h.env("a1", event.Status, 3, event.StatusData{Status: "working"})
	if r := h.row("a1"); !strings.Contains(r, "working") || !strings.Contains(r, " 3 ") || !strings.Contains(r, "now") {
		t.Errorf("row a1 while working = %q", r)
	}
	if h.d.lists != 1 {
		t.Errorf("agent_list asked %d times for a known agent's turn, want 1", h.d.lists)
	}
	h.env("a1", event.Result, 3, event.ResultData{StopReason: "end_turn", Usage: event.UsageFigures{InputTokens: 100, OutputTokens: 10}})
	if r := h.row("a1"); !strings.Contains(r, "1300/350") {
		t.Errorf("row a1 after the result = %q", r)
	}
	h.d.agents[0].Usage, h.d.agents[0].Turn = event.UsageFigures{InputTokens: 1300, OutputTokens: 350}, 3
	h.env("a1", event.Status, 3, event.StatusData{Status: "idle"})
	if r := h.row("a1"); !strings.Contains(r, "idle") || !strings.Contains(r, "1300/350") || h.d.lists != 2 {
		t.Errorf("row a1 after the turn = %q (lists %d)", r, h.d.lists)
	}
	h.now = h.now.Add(2 * time.Hour)
	h.m.Update(tickMsg(h.now)) // its command is the next tick, a second away
	if r := h.row("a1"); !strings.Contains(r, "2h") {
		t.Errorf("row a1 two hours later = %q", r)
	}
	if h.d.lists != 2 {
		t.Errorf("agent_list asked %d times, want 2", h.d.lists)
	}
	// An envelope of an agent it does not know: a row at once, and the
	// list asked again.
	h.d.agents = append(h.d.agents, entry("n1", "starting", 0))
	h.env("n1", event.Status, 0, event.StatusData{Status: "starting"})
	if h.d.lists != 3 || h.row("n1") == "" {
		t.Errorf("new agent: lists %d, row %q", h.d.lists, h.row("n1"))
	}
	// It dies: greyed and below the live ones.
	h.env("a1", event.Status, 3, event.StatusData{Status: "dead"})
	if r := h.row("a1"); !strings.Contains(r, "dead") {
		t.Errorf("row a1 dead = %q", r)
	}
	h.wantScreen("3 agents, 1 live")
}

func TestDaemonGoneAndBack(t *testing.T) {
	h := newHarness(t, entry("a1", "idle", 1), entry("a2", "idle", 1))
	h.send(DisconnectedMsg{Err: errors.New("no answer on /x/agentd.sock")})
	h.wantScreen("daemon not running — waiting", "a1")
	// Back, with a2 forgotten meanwhile: the list is read again.
	h.d.agents = h.d.agents[:1]
	h.send(ConnectedMsg{})
	if s := h.screen(); strings.Contains(s, "not running") || h.row("a2") != "" || h.row("a1") == "" || h.d.lists != 2 {
		t.Errorf("after reconnect (lists %d):\n%s", h.d.lists, s)
	}
}

// An envelope that arrives while the list is asked for is newer than the
// list's answer.
func TestListDoesNotUndoNewerEnvelopes(t *testing.T) {
	h := newHarness(t, entry("a1", "idle", 1))
	cmd := h.m.list() // a list in flight (as after a reconnect)
	h.env("a1", event.Status, 2, event.StatusData{Status: "working"})
	h.run(cmd) // answers idle, turn 1: older than the envelope
	if r := h.row("a1"); !strings.Contains(r, "working") || !strings.Contains(r, " 2 ") {
		t.Errorf("row a1 = %q, want working in turn 2", r)
	}
}

func TestFeed(t *testing.T) {
	h := newHarness(t, entry("a1", "idle", 0))
	h.env("a1", event.UserText, 1, text(false, "fix it"))
	h.env("a1", event.TurnStarted, 1, struct{}{})
	h.env("a1", event.Thought, 1, text(true, "hmm, "))
	h.wantScreen("── turn 1 ──", "> fix it", "thinking: hmm,")
	h.env("a1", event.Thought, 1, text(false, "hmm, the test"))
	h.env("a1", event.AssistantText, 1, text(true, "Looking "))
	h.env("a1", event.AssistantText, 1, text(true, "at it"))
	h.wantScreen("thinking: hmm, the test", "Looking at it")
	h.env("a1", event.AssistantText, 1, text(false, "Looking at it now."))
	if s := h.screen(); strings.Count(s, "Looking at it") != 1 {
		t.Errorf("the streamed block and its complete copy both shown:\n%s", s)
	}
	// A tool call: the announce, its complete input, its result — one
	// line whose status changes.
	call := event.ToolCall{ToolCallID: "tu1", Title: "Bash", Status: "in_progress"}
	h.env("a1", event.ToolUse, 1, event.ToolUseData{Call: call})
	call.RawInput = json.RawMessage(`{"command":"go test ./..."}`)
	h.env("a1", event.ToolUse, 1, event.ToolUseData{Call: call})
	h.wantScreen("⚙ Bash {\"command\":\"go test ./...\"} … running")
	h.env("a1", event.ToolResult, 1, event.ToolResultData{Update: event.ToolResultUpdate{ToolCallID: "tu1", Status: "completed"}})
	s := h.screen()
	if strings.Count(s, "⚙ Bash") != 1 || !strings.Contains(s, "✓ completed") || strings.Contains(s, "running") {
		t.Errorf("tool line:\n%s", s)
	}
	// The complete copy of a call replaces an announce that had input.
	call = event.ToolCall{ToolCallID: "tu2", Title: "bash", Status: "in_progress", RawInput: json.RawMessage(`{"cwd":"/w"}`)}
	h.env("a1", event.ToolUse, 1, event.ToolUseData{Call: call})
	call.RawInput = json.RawMessage(`{"command":"make"}`)
	h.env("a1", event.ToolUse, 1, event.ToolUseData{Call: call})
	h.env("a1", event.ToolResult, 1, event.ToolResultData{Update: event.ToolResultUpdate{ToolCallID: "tu2", Status: "failed"}})
	if s := h.screen(); !strings.Contains(s, `⚙ bash {"command":"make"} ✗ failed`) || strings.Contains(s, `"cwd"`) {
		t.Errorf("tool line of tu2:\n%s", s)
	}
	h.env("a1", event.Result, 1, event.ResultData{StopReason: "end_turn", Usage: event.UsageFigures{InputTokens: 5, OutputTokens: 7}})
	h.wantScreen("✓ turn 1 end_turn  tokens in 5, out 7")
	// Long text wraps to the pane.
	long := strings.Repeat("word ", 60)
	h.env("a1", event.AssistantText, 2, text(false, long))
	for _, l := range strings.Split(h.screen(), "\n") {
		if ansi.StringWidth(l) > 100 {
			t.Errorf("line wider than the screen: %q", l)
		}
	}
	if strings.Count(h.screen(), "word") != 60 {
		t.Errorf("wrapped text lost words:\n%s", h.screen())
	}
}

// The feed begins with the agent's log, read once when it is selected,
// joined with the bus by seq.
func TestFeedBackfill(t *testing.T) {
	d := []verbs.ListEntry{entry("a1", "idle", 1), entry("a2", "idle", 1)}
	h := newHarness(t, d...)
	mk := func(seq uint64, kind event.Kind, data any) event.Envelope {
		b, _ := json.Marshal(data)
		return event.Envelope{Kind: kind, Turn: 1, Data: b, AgentID: "a2", Seq: seq}
	}
	h.d.history["a2"] = []event.Envelope{mk(1, event.UserText, text(false, "old question")), mk(2, event.AssistantText, text(false, "old answer"))}
	h.press("j")
	h.wantScreen("feed a2", "> old question", "old answer")
}

func TestPermission(t *testing.T) {
	h := newHarness(t, entry("a1", "idle", 0))
	h.env("a1", event.Status, 1, event.StatusData{Status: "working"})
	req := event.PermissionData{RequestID: "r7", ToolCall: event.ToolCall{Title: "Write", RawInput: json.RawMessage(`{"file_path":"/etc/x"}`)}}
	h.env("a1", event.Permission, 1, req)
	if r := h.row("a1"); !strings.Contains(r, "permission") {
		t.Errorf("row with a waiting permission = %q", r)
	}
	h.wantScreen("? permission asked: Write", "kaimon permit a1 r7 allow|deny")
	h.press("p")
	h.wantScreen("a1 asks to run Write", "a=allow d=deny")
	h.press("a")
	if len(h.d.calls) != 1 || h.d.calls[0] != "permit a1 r7 allow" {
		t.Fatalf("calls = %v", h.d.calls)
	}
	decided := req
	decided.Decision, decided.By = apitype.Allow, event.DecidedByUser
	h.env("a1", event.Permission, 1, decided)
	if r := h.row("a1"); !strings.Contains(r, "working") {
		t.Errorf("row after the decision = %q", r)
	}
	h.wantScreen("? permission for Write: allowed by user")
	// A question the turn's end makes moot.
	req.RequestID = "r8"
	h.env("a1", event.Permission, 1, req)
	h.env("a1", event.Result, 1, event.ResultData{StopReason: "cancelled"})
	if r := h.row("a1"); strings.Contains(r, "permission") {
		t.Errorf("row after the result = %q", r)
	}
	// The cancel (the interrupt's result) reads as kaimon run says it.
	h.wantScreen("■ turn 1 cancelled")
	if s := h.screen(); strings.Contains(s, "failed (cancelled)") {
		t.Errorf("a cancelled turn reads as a failure:\n%s", s)
	}
	h.press("p")
	h.wantScreen("no permission request is waiting")
}

// A question asked before the monitor started is found in the log of a
// working agent, selected or not; one already answered is not.
func TestPermissionAskedBeforeStart(t *testing.T) {
	mk := func(id string, seq uint64, kind event.Kind, data any) event.Envelope {
		b, _ := json.Marshal(data)
		return event.Envelope{Kind: kind, Turn: 1, Data: b, AgentID: id, Seq: seq}
	}
	ask := event.PermissionData{RequestID: "r1", ToolCall: event.ToolCall{Title: "Bash"}}
	answered := ask
	answered.Decision, answered.By = apitype.Deny, event.DecidedByTimeout
	d := &fakeDaemon{history: map[string][]event.Envelope{
		"w1": {mk("w1", 1, event.TurnStarted, struct{}{}), mk("w1", 2, event.Permission, ask)},
		"w2": {mk("w2", 1, event.Permission, ask), mk("w2", 2, event.Permission, answered)},
	}, agents: []verbs.ListEntry{entry("i1", "idle", 1), entry("w1", "working", 1), entry("w2", "working", 1)}}
	h := &harness{t: t, d: d, seq: map[string]uint64{}}
	h.m = New(d, "/home/u")
	h.send(tea.WindowSizeMsg{Width: 100, Height: 30})
	h.send(ConnectedMsg{})
	if r := h.row("w1"); !strings.Contains(r, "permission") {
		t.Errorf("w1, waiting since before the monitor: %q", r)
	}
	if r := h.row("w2"); !strings.Contains(r, "working") {
		t.Errorf("w2, whose question was answered: %q", r)
	}
}

func TestCloseAndDismiss(t *testing.T) {
	h := newHarness(t, entry("a1", "idle", 1), entry("d1", "dead", 1))
	h.press("x")
	h.wantScreen("close agent a1? y/n")
	h.press("n")
	if len(h.d.calls) != 0 || strings.Contains(h.screen(), "y/n") {
		t.Fatalf("n: calls %v", h.d.calls)
	}
	h.press("x", "y")
	if len(h.d.calls) != 1 || h.d.calls[0] != "close a1" {
		t.Fatalf("x y: calls %v", h.d.calls)
	}
	// The dead one is forgotten, which cannot be undone: asked too.
	h.press("j", "x")
	h.wantScreen("forget dead agent d1? it can't be resumed after: y/n")
	h.press("n")
	if len(h.d.calls) != 1 || h.row("d1") == "" || strings.Contains(h.screen(), "y/n") {
		t.Fatalf("x n on dead: calls %v, row %q", h.d.calls, h.row("d1"))
	}
	h.press("x", "y")
	if len(h.d.calls) != 2 || h.d.calls[1] != "forget d1" || h.row("d1") != "" {
		t.Fatalf("x y on dead: calls %v, row %q", h.d.calls, h.row("d1"))
	}
	h.wantScreen("forgot d1", "1 agent, 1 live")
}

func TestHelpKeys(t *testing.T) {
	h := newHarness(t, entry("a1", "idle", 1))
	h.wantScreen("? help", "q quit")
	h.press("?")
	h.wantScreen("── keys", "close/forget", "previous match", "history", "search", "next match", "page down")
	h.press("?")
	if strings.Contains(h.screen(), "── keys") {
		t.Error("? again did not close the help")
	}
	h.press("ctrl+c")
	if !h.quit {
		t.Error("ctrl+c did not quit")
	}
}

func TestHistory(t *testing.T) {
	h := newHarness(t, entry("a1", "idle", 3))
	var envs []event.Envelope
	for i := 1; i <= 80; i++ {
		b, _ := json.Marshal(text(false, fmt.Sprintf("line %d", i)))
		envs = append(envs, event.Envelope{Kind: event.AssistantText, Turn: 1, Data: b, AgentID: "a1", Seq: uint64(i)})
	}
	h.d.history["a1"] = envs
	h.press("enter")
	h.wantScreen("history a1", "line 80")
	if strings.Contains(h.screen(), "line 1\n") {
		t.Errorf("the history starts at the bottom, not the top:\n%s", h.screen())
	}
	h.press("g")
	h.wantScreen("line 1\n")
	h.press("G")
	h.wantScreen("line 80")
	h.press("/", "l", "i", "n", "e", " ", "4", "enter")
	h.wantScreen("match 1/11 for \"line 4\"")
	h.press("n")
	h.wantScreen("match 2/11", "line 40")
	h.press("esc")
	if s := h.screen(); strings.Contains(s, "history a1") || !strings.Contains(s, "STATUS") {
		t.Errorf("esc did not leave the history:\n%s", s)
	}
	h.press("q")
	if !h.quit {
		t.Error("q did not quit")
	}
}

// Every size down to 80×24 (and below) draws within the screen, the
// header and the key line kept; narrow screens drop columns.
func TestResize(t *testing.T) {
	h := newHarness(t, entry("a1-with-a-long-id", "idle", 1), entry("d1", "dead", 1))
	h.m.byID["a1-with-a-long-id"].Cwd = "/very/long/path/to/some/deeply/nested/project/directory/here"
	for _, size := range [][2]int{{100, 30}, {80, 24}, {60, 20}, {40, 12}} {
		h.send(tea.WindowSizeMsg{Width: size[0], Height: size[1]})
		lines := strings.Split(h.screen(), "\n")
		if len(lines) != size[1] {
			t.Errorf("%v: %d lines", size, len(lines))
		}
		for _, l := range lines {
			if ansi.StringWidth(l) > size[0] {
				t.Errorf("%v: line too wide: %q", size, l)
			}
		}
		if !strings.HasPrefix(lines[0], "kaimon monitor") || !strings.HasPrefix(lines[1], "ID") {
			t.Errorf("%v: header lost:\n%s", size, strings.Join(lines, "\n"))
		}
	}
	h.send(tea.WindowSizeMsg{Width: 80, Height: 24})
	if s := h.screen(); !strings.Contains(s, "CWD") || !strings.Contains(s, "…") || !strings.Contains(s, "q quit") {
		t.Errorf("80×24:\n%s", s)
	}
	h.send(tea.WindowSizeMsg{Width: 40, Height: 12})
	if s := h.screen(); strings.Contains(s, "IN/OUT") || strings.Contains(s, "CWD") || !strings.Contains(s, "STATUS") {
		t.Errorf("40×12 keeps columns it has no room for:\n%s", s)
	}
}

func TestHelpers(t *testing.T) {
	now := time.Now()
	for d, want := range map[time.Duration]string{0: "now", 3 * time.Second: "3s", 5 * time.Minute: "5m", 2 * time.Hour: "2h", 72 * time.Hour: "3d"} {
		if got := ago(now, now.Add(-d)); got != want {
			t.Errorf("ago(%v) = %q, want %q", d, got, want)
		}
	}
	if got := shortPath("/home/u/src/kaimon", "/home/u", 40); got != "~/src/kaimon" {
		t.Errorf("shortPath = %q", got)
	}
	if got := shortPath("/home/user2/x", "/home/u", 40); got != "/home/user2/x" {
		t.Errorf("shortPath of a sibling of home = %q", got)
	}
	got := shortPath("/srv/projects/a/b/c/d/the-project", "/home/u", 16)
	if ansi.StringWidth(got) != 16 || !strings.HasPrefix(got, "/srv") || !strings.HasSuffix(got, "project") || !strings.Contains(got, "…") {
		t.Errorf("shortPath elided = %q", got)
	}
	// An agent with a worktree shows its branch before its cwd, * when dirty.
	wt := &agent{ListEntry: verbs.ListEntry{AgentStatus: verbs.AgentStatus{Cwd: "/home/u/wt/a1/sub", Worktree: "/home/u/wt/a1", Branch: "kaimon/a1", Dirty: true}}}
	if got := place(wt, "/home/u", 40); got != "[kaimon/a1*] ~/wt/a1/sub" {
		t.Errorf("place of a dirty worktree agent = %q", got)
	}
	wt.Dirty = false
	if got := place(wt, "/home/u", 20); ansi.StringWidth(got) != 20 || !strings.HasPrefix(got, "[kaimon/a1] ") {
		t.Errorf("place of a clean worktree agent, narrow = %q", got)
	}
	if got := place(&agent{ListEntry: verbs.ListEntry{AgentStatus: verbs.AgentStatus{Cwd: "/x"}}}, "/home/u", 40); got != "/x" {
		t.Errorf("place without a worktree = %q", got)
	}
	for n, want := range map[int64]string{950: "950", 12345: "12.3k", 4_100_000: "4.1M"} {
		if got := tokens(n); got != want {
			t.Errorf("tokens(%d) = %q, want %q", n, got, want)
		}
	}
}

// The history wraps anew when the screen narrows.
func TestHistoryResize(t *testing.T) {
	h := newHarness(t, entry("a1", "idle", 1))
	b, _ := json.Marshal(text(false, strings.Repeat("lorem ipsum ", 20)))
	h.d.history["a1"] = []event.Envelope{{Kind: event.AssistantText, Turn: 1, Data: b, AgentID: "a1", Seq: 1}}
	h.press("enter")
	h.send(tea.WindowSizeMsg{Width: 40, Height: 20})
	s := h.screen()
	if strings.Count(s, "lorem") != 20 {
		t.Errorf("the history lost words at 40 columns:\n%s", s)
	}
	for _, l := range strings.Split(s, "\n") {
		if ansi.StringWidth(l) > 40 {
			t.Errorf("line wider than 40: %q", l)
		}
	}
}

// A log that cannot be read is said once, not asked for again and again.
func TestBackfillErrorAskedOnce(t *testing.T) {
	h := newHarness(t)
	h.m.d = &failingHistory{fakeDaemon: h.d}
	h.d.agents = []verbs.ListEntry{entry("a1", "idle", 1)}
	h.send(ConnectedMsg{})
	h.env("a1", event.Status, 1, event.StatusData{Status: "working"})
	h.env("a1", event.Status, 1, event.StatusData{Status: "idle"})
	if n := h.m.d.(*failingHistory).n; n != 1 {
		t.Errorf("the log was asked for %d times, want 1", n)
	}
	h.wantScreen("reading the log of a1: disk on fire")
}

type failingHistory struct {
	*fakeDaemon
	n int
}

func (d *failingHistory) History(context.Context, string) ([]event.Envelope, error) {
	d.n++
	return nil, errors.New("disk on fire")
}

// The columns sized to their content are the ones layout thinks they are.
func TestColumnIndexes(t *testing.T) {
	for i, title := range map[int]string{colID: "ID", colModel: "MODEL", colTokens: "IN/OUT"} {
		if columns[i].title != title {
			t.Errorf("columns[%d] is %q, want %q", i, columns[i].title, title)
		}
	}
}

// TestPendingFromList: the list says which agents wait on a permission
// (what --once shows, with no bus to tell), and a later list that no
// longer says so clears it.
func TestPendingFromList(t *testing.T) {
	w := entry("w1", "working", 1)
	w.PendingPermissions = []verbs.PendingPermission{{RequestID: "r1", Tool: "Bash", Title: "rm -rf build", ExpiresAt: "2026-01-01T00:00:00Z"}}
	m := New(nil, "/home/u")
	m.applyList(listMsg{gen: 1, agents: []verbs.ListEntry{w, entry("i1", "idle", 1)}})
	_, rows := tableLines(m.agents, -1, 200, time.Now(), m.home)
	if len(rows) != 2 || !strings.Contains(ansi.Strip(strings.Join(rows, "\n")), "w1  permission") {
		t.Fatalf("rows with w1 waiting on a permission: %q", rows)
	}
	if p := m.byID["w1"].pending; len(p) != 1 || p[0].req.RequestID != "r1" || p[0].req.ToolCall.Title != "rm -rf build" {
		t.Fatalf("w1's pending from the list: %+v", p)
	}
	w.PendingPermissions = nil
	m.applyList(listMsg{gen: 2, agents: []verbs.ListEntry{w}})
	if s := m.byID["w1"].status(); s != "working" {
		t.Fatalf("w1 answered, the list says; status %q", s)
	}
}

// lineEnvs are n assistant_text envelopes of agent id, "line 1"…, seq 1….
func lineEnvs(id string, n int) []event.Envelope {
	var envs []event.Envelope
	for i := 1; i <= n; i++ {
		b, _ := json.Marshal(text(false, fmt.Sprintf("line %d", i)))
		envs = append(envs, event.Envelope{Kind: event.AssistantText, Turn: 1, Data: b, AgentID: id, Seq: uint64(i)})
	}
	return envs
}

// The history is live: what comes while it is open is added, the view
// following it at the bottom and staying put elsewhere.
func TestHistoryLive(t *testing.T) {
	h := newHarness(t, entry("a1", "idle", 1))
	h.d.history["a1"] = lineEnvs("a1", 80)
	h.seq["a1"] = 80
	h.press("enter")
	h.wantScreen("history a1", "line 80")
	h.env("a1", event.AssistantText, 2, text(false, "fresh news"))
	h.wantScreen("history a1", "line 80", "fresh news")
	// A block streaming shows as it comes, once.
	h.env("a1", event.AssistantText, 2, text(true, "stream"))
	h.env("a1", event.AssistantText, 2, text(true, "ing now"))
	h.wantScreen("streaming now")
	h.env("a1", event.AssistantText, 2, text(false, "streaming now"))
	if n := strings.Count(h.screen(), "streaming now"); n != 1 {
		t.Errorf("the streamed block and its whole copy: %d on screen:\n%s", n, h.screen())
	}
	// Scrolled up, the view keeps its line while more comes.
	h.press("g")
	h.wantScreen("line 1\n")
	h.env("a1", event.AssistantText, 2, text(false, "later news"))
	if s := h.screen(); !strings.Contains(s, "line 1\n") || strings.Contains(s, "later news") {
		t.Errorf("the view moved from the top as an event came:\n%s", s)
	}
	h.press("G")
	h.wantScreen("later news")
	// Another agent's events stay out of it.
	h.send(EnvelopeMsg{Env: event.Envelope{Kind: event.AssistantText, Turn: 1, Seq: 1, AgentID: "b1",
		Data: json.RawMessage(`{"content":{"type":"text","text":"not mine"}}`)}})
	if strings.Contains(h.screen(), "not mine") {
		t.Errorf("another agent's event in a1's history:\n%s", h.screen())
	}
}

// Events that come while the log is read are joined to it, once each.
func TestHistoryLiveWhileLoading(t *testing.T) {
	h := newHarness(t, entry("a1", "idle", 1))
	h.d.history["a1"] = lineEnvs("a1", 3)
	_, cmd := h.m.Update(tea.KeyPressMsg{Code: tea.KeyEnter}) // the read in flight
	h.seq["a1"] = 2
	h.env("a1", event.AssistantText, 1, text(false, "line 3")) // seq 3: in the log too
	h.env("a1", event.AssistantText, 1, text(false, "line 4")) // after the read
	h.run(cmd)
	s := h.screen()
	if strings.Count(s, "line 3") != 1 || !strings.Contains(s, "line 4") || !strings.Contains(s, "line 1") {
		t.Errorf("history joined with what came while it was read:\n%s", s)
	}
}

// / marks every match, moves to the first below the top of the screen
// (else the first), and n/N go to the next and previous.
func TestHistorySearch(t *testing.T) {
	h := newHarness(t, entry("a1", "idle", 1))
	h.d.history["a1"] = lineEnvs("a1", 80)
	h.press("enter", "g")
	h.press("/", "l", "i", "n", "e", " ", "7", "5", "enter")
	h.wantScreen(`match 1/1 for "line 75"`, "line 75")
	raw := h.m.Render()
	if !strings.Contains(raw, stCurMatch.Render("line 75")) {
		t.Errorf("the match is not marked:\n%q", raw)
	}
	// From the bottom, the first match is above: the search wraps to it.
	h.press("G", "/", "l", "i", "n", "e", " ", "1", "enter")
	h.wantScreen(`match 1/11 for "line 1"`, "line 1\n")
	raw = h.m.Render()
	if !strings.Contains(raw, stCurMatch.Render("line 1")) || !strings.Contains(raw, stMatch.Render("line 1")+"0") {
		t.Errorf("the current match and the others are not marked apart:\n%q", raw)
	}
	h.press("N")
	h.wantScreen(`match 11/11 for "line 1"`, "line 19")
	h.press("n")
	h.wantScreen(`match 1/11 for "line 1"`, "line 1\n")
	// A case-insensitive match keeps the text's own case.
	h.press("/", "L", "I", "N", "E", " ", "4", "2", "enter")
	if raw := h.m.Render(); !strings.Contains(raw, stCurMatch.Render("line 42")) {
		t.Errorf("the match of LINE 42 is not marked:\n%q", raw)
	}
	h.press("/", "z", "z", "enter")
	h.wantScreen(`no match for "zz"`)
	if strings.Contains(h.m.Render(), stCurMatch.Render("line 42")) {
		t.Error("the marks of the last query stay after a query without match")
	}
}

// A monitor that starts while a turn streams shows what was streamed
// before it came, joined with the chunks that come after.
func TestFeedMidTurn(t *testing.T) {
	mk := func(seq uint64, kind event.Kind, data any) event.Envelope {
		b, _ := json.Marshal(data)
		return event.Envelope{Kind: kind, Turn: 2, Data: b, AgentID: "w1", Seq: seq}
	}
	d := &fakeDaemon{agents: []verbs.ListEntry{entry("i1", "idle", 1), entry("w1", "working", 2)}, history: map[string][]event.Envelope{
		"w1": {mk(1, event.UserText, text(false, "tell me")), mk(2, event.TurnStarted, struct{}{})},
	}, output: map[string]*verbs.OutputResult{"w1": {AgentID: "w1", Turn: 2, Status: "working", Text: "Once upon a ti"}}}
	h := &harness{t: t, d: d, seq: map[string]uint64{"w1": 2}}
	h.m = New(d, "/home/u")
	h.send(tea.WindowSizeMsg{Width: 100, Height: 30})
	h.send(ConnectedMsg{})
	h.press("j")
	h.wantScreen("> tell me", "Once upon a ti")
	h.env("w1", event.AssistantText, 2, text(true, "me there"))
	h.wantScreen("Once upon a time there")
	// Chunks the bus brought before the answer are not said twice.
	a := h.m.byID["w1"]
	a.open.text = "a time"
	a.fillStream(&verbs.OutputResult{Turn: 2, Text: "Once upon a ti"})
	if a.open.text != "Once upon a time" {
		t.Errorf("joined = %q", a.open.text)
	}
	// The answer is a whole block of the feed: nothing streams.
	a.open = nil
	h.env("w1", event.AssistantText, 2, text(false, "Whole block."))
	a.fillStream(&verbs.OutputResult{Turn: 2, Text: "Whole block."})
	if a.open != nil {
		t.Errorf("a whole block taken for a stream: %+v", a.open)
	}
	// The idle agent's turn is over: agent_output is not asked for it.
	if len(d.calls) != 1 || d.calls[0] != "output w1" {
		t.Errorf("calls = %q, want agent_output for w1 only", d.calls)
	}
}

func TestJoinOverlap(t *testing.T) {
	for _, c := range [][3]string{
		{"Once upon", "", "Once upon"},
		{"Once upon", "pon a time", "Once upon a time"},
		{"Once upon", "Once upon a", "Once upon a"},
		{"abc", "xyz", "abcxyz"},
	} {
		if got := joinOverlap(c[0], c[1]); got != c[2] {
			t.Errorf("joinOverlap(%q, %q) = %q, want %q", c[0], c[1], got, c[2])
		}
	}
}

// The MODEL column is agent_list's, as `kaimon list` shows it: once a turn
// ends, the model the agent named (claude-sonnet-5 for sonnet).
func TestModelColumnIsTheLists(t *testing.T) {
	h := newHarness(t, entry("a1", "idle", 0))
	if r := h.row("a1"); !strings.Contains(r, "sonnet") {
		t.Fatalf("row = %q", r)
	}
	h.d.agents[0].Model = "claude-sonnet-5" // learnt from the agent's init
	h.env("a1", event.Status, 1, event.StatusData{Status: "working"})
	h.env("a1", event.Result, 1, event.ResultData{StopReason: "end_turn"})
	h.env("a1", event.Status, 1, event.StatusData{Status: "idle"})
	if r := h.row("a1"); !strings.Contains(r, "claude-sonnet-5") {
		t.Errorf("row after a turn = %q, want the model agent_list says", r)
	}
}

// i interrupts the selected agent's turn; s types a turn for it, which
// enter sends (esc gives it up, sending nothing); neither acts on a dead
// agent.
func TestInterruptAndSend(t *testing.T) {
	h := newHarness(t, entry("a1", "working", 1), entry("d1", "dead", 1))
	h.press("i")
	h.wantScreen("interrupted a1")
	h.press("s")
	h.wantScreen("turn for a1 (enter sends, esc cancels)")
	h.press("h", "i", "space", "t", "h", "e", "r", "e", "enter")
	h.wantScreen("sent turn 2 to a1")
	h.press("s", "x", "esc")
	acts := func() []string { // the model's reads of output are not acts
		return slices.DeleteFunc(slices.Clone(h.d.calls), func(c string) bool { return strings.HasPrefix(c, "output ") })
	}
	if want := []string{"interrupt a1", `send a1 "hi there"`}; !slices.Equal(acts(), want) {
		t.Fatalf("calls %q, want %q", acts(), want)
	}
	h.press("down", "i")
	h.wantScreen("no live agent selected")
	h.press("s")
	h.wantScreen("no live agent selected")
	if len(acts()) != 2 {
		t.Fatalf("acted on a dead agent: %q", acts())
	}
}

// When the daemon is gone its rows are stale: their last known state with
// a ?, counted as unknown rather than live, until it is back; in a
// monitor of several hosts, only the rows of the host that is gone.
func TestStaleRows(t *testing.T) {
	h := newHarness(t, entry("a1", "working", 1))
	h.wantScreen("1 agent, 1 live")
	h.send(DisconnectedMsg{Err: errors.New("no answer")})
	h.wantScreen("1 agent, 0 live, 1 unknown")
	if r := h.row("a1"); !strings.Contains(r, "working?") {
		t.Errorf("stale row %q", r)
	}
	h.send(ConnectedMsg{})
	h.wantScreen("1 agent, 1 live")
	if r := h.row("a1"); strings.Contains(r, "working?") {
		t.Errorf("row after reconnect %q", r)
	}

	h = newHarness(t, entry("local/a1", "working", 1), entry("h1/b1", "idle", 1))
	h.send(DisconnectedMsg{Host: "h1", Err: errors.New("ssh: no route")})
	h.wantScreen("2 agents, 1 live, 1 unknown", "host h1 unreachable")
	// A monitor of several hosts shows HOST, then the bare id.
	if r := h.row("h1     b1"); !strings.Contains(r, "idle?") {
		t.Errorf("the gone host's row %q:\n%s", r, h.screen())
	}
	if r := h.row("local  a1"); r == "" || strings.Contains(r, "?") {
		t.Errorf("this machine's row %q", r)
	}
}
