package cli

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/kaimon/kaimon/internal/apitype"
	"github.com/kaimon/kaimon/internal/event"
	"github.com/kaimon/kaimon/internal/follow"
	"github.com/kaimon/kaimon/internal/verbs"
)

// turnEnvelopes is a tool turn as the bus carries it.
func turnEnvelopes(agent string, turn int) []*event.Envelope {
	evs := []event.Event{
		event.New(event.Status, turn, event.StatusData{Status: "working"}),
		event.NewText(event.UserText, turn, false, "please use a tool"),
		event.New(event.TurnStarted, turn, struct{}{}),
		event.NewText(event.AssistantText, turn, true, "I will run "),
		event.NewText(event.AssistantText, turn, true, "a command."),
		event.NewText(event.AssistantText, turn, false, "I will run a command."),
		event.New(event.ToolUse, turn, event.ToolUseData{Call: event.ToolCall{ToolCallID: "tu1", Title: "Bash", Kind: "execute", Status: "in_progress"}}),
		event.New(event.ToolInputDelta, turn, event.ToolInputDeltaData{ToolCallID: "tu1", PartialJSON: `{"command":`}),
		event.New(event.ToolInputDelta, turn, event.ToolInputDeltaData{ToolCallID: "tu1", PartialJSON: `"echo hi"}`}),
		event.New(event.ToolUse, turn, event.ToolUseData{Call: event.ToolCall{ToolCallID: "tu1", Title: "Bash", Kind: "execute", Status: "in_progress", RawInput: []byte(`{"command":"echo hi"}`)}}),
		event.New(event.ToolResult, turn, map[string]any{"update": map[string]any{"toolCallId": "tu1", "status": "completed",
			"content": []any{map[string]any{"type": "content", "content": map[string]any{"type": "text", "text": "hi"}}}}}),
		event.NewText(event.AssistantText, turn, true, "Tool said: "),
		// A delta lost here: the complete block must show the whole text.
		event.NewText(event.AssistantText, turn, false, "Tool said: hi. Done."),
		event.New(event.Result, turn, event.ResultData{StopReason: apitype.StopEndTurn, Usage: event.UsageFigures{InputTokens: 200, OutputTokens: 40, CacheReadTokens: 20}}),
	}
	var out []*event.Envelope
	for i, ev := range evs {
		out = append(out, &event.Envelope{Kind: ev.Kind, Turn: ev.Turn, Data: ev.Data, AgentID: agent, Seq: uint64(i + 1)})
	}
	return out
}

func TestTailPretty(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	p := newTailPrinter(&tailOptions{Channels: []string{"agent:a1"}, Pretty: true, Out: &out})
	for _, e := range turnEnvelopes("a1", 1) {
		if err := emitEnv(t, p, e); err != nil {
			t.Fatal(err)
		}
	}
	want := `· working
> please use a tool
── turn 1 ──
I will run a command.
→ Bash {"command":"echo hi"}
← Bash completed: hi
Tool said: 
Tool said: hi. Done.
✓ turn 1 end_turn  tokens in 200, out 40, cache read 20, cache write 0
`
	if out.String() != want {
		t.Fatalf("pretty:\n%s\nwant:\n%s", out.String(), want)
	}
	// Several agents: lines carry the agent's id.
	out.Reset()
	p = newTailPrinter(&tailOptions{Channels: []string{"agent:"}, Pretty: true, Out: &out})
	emitEnv(t, p, turnEnvelopes("a1", 1)[2])
	if out.String() != "[a1] ── turn 1 ──\n" {
		t.Fatalf("pretty, several agents: %q", out.String())
	}
}

func TestTailFiltersAndUntilResult(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	o := &tailOptions{Channels: []string{"agent:a1"}, Out: &out, NoDeltas: true, Kinds: map[event.Kind]bool{event.AssistantText: true, event.Result: true}, UntilResult: true, Turn: 2}
	p := newTailPrinter(o)
	for _, e := range append(turnEnvelopes("a1", 1), turnEnvelopes("a1", 2)...) {
		if err := emitEnv(t, p, e); err != nil {
			if !errors.Is(err, errTailDone) || e.Turn != 2 || e.Kind != event.Result {
				t.Fatalf("stopped at turn %d %s: %v", e.Turn, e.Kind, err)
			}
			break
		}
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 3 || !strings.Contains(lines[0], `"I will run a command."`) || !strings.Contains(lines[2], `"kind":"result","turn":2`) {
		t.Fatalf("filtered output:\n%s", out.String())
	}

	// A failed turn, and an agent dying in its turn, end with exit 3.
	fail := &event.Envelope{Kind: event.Result, Turn: 1, AgentID: "a1", Data: []byte(`{"stopReason":"error","error":"boom"}`)}
	p = newTailPrinter(&tailOptions{Out: &out, UntilResult: true})
	var ve *verbs.Error
	if err := emitEnv(t, p, fail); !errors.As(err, &ve) || ve.Code != verbs.CodeTurnFailed || !strings.Contains(ve.Message, "boom") {
		t.Fatalf("failed turn: %v", err)
	}
	p = newTailPrinter(&tailOptions{Out: &out, UntilResult: true})
	emitEnv(t, p, turnEnvelopes("a1", 1)[2])
	dead := &event.Envelope{Kind: event.Status, Turn: 1, AgentID: "a1", Data: []byte(`{"status":"dead"}`)}
	if err := emitEnv(t, p, dead); !errors.As(err, &ve) || !strings.Contains(ve.Message, "died during turn 1") {
		t.Fatalf("death in the turn: %v", err)
	}
	if exitFor(ve) != ExitTurnFailed {
		t.Fatal("a failed turn is not exit 3")
	}
}

// --until-result on an agent that is dead ends once the replay is read:
// 3 when the awaited result is not there, judged by the newest of the
// replay's last status and the daemon's answer.
func TestTailDeadAgentEnds(t *testing.T) {
	t.Parallel()
	status := func(s string, turn int) *event.Envelope {
		return &event.Envelope{Kind: event.Status, Turn: turn, AgentID: "a1", Data: []byte(`{"status":"` + s + `"}`)}
	}
	replay := func(p *tailPrinter, envs ...*event.Envelope) {
		t.Helper()
		for _, e := range envs {
			if err := emitEnv(t, p, e); err != nil {
				t.Fatalf("replay stopped at %s: %v", e.Kind, err)
			}
		}
	}
	newP := func(turn int, replay bool) *tailPrinter {
		p := newTailPrinter(&tailOptions{Channels: []string{"agent:a1"}, Out: io.Discard, UntilResult: true, Turn: turn, Replay: replay})
		p.only = "a1"
		return p
	}
	turn1 := turnEnvelopes("a1", 1)
	for _, c := range []struct {
		name   string
		turn   int
		replay bool
		log    []*event.Envelope
		st     verbs.AgentStatus
		want   string // "" to go on live
	}{
		{"a turn beyond a dead agent's last", 3, true, append(turn1, status("dead", 1)), verbs.AgentStatus{Status: "dead", Turn: 1}, "its last turn was 1, turn 3 will never come"},
		{"no result at all", 0, true, []*event.Envelope{status("idle", 0), status("dead", 0)}, verbs.AgentStatus{Status: "dead"}, "is dead: no result will come"},
		{"died after the daemon answered", 2, true, append(turn1, status("dead", 1)), verbs.AgentStatus{Status: "idle", Turn: 1}, "turn 2 will never come"},
		{"reopened after the daemon answered", 2, true, append(turn1, status("dead", 1), status("starting", 1)), verbs.AgentStatus{Status: "dead", Turn: 1}, ""},
		{"live and waiting for its turn", 2, true, turn1, verbs.AgentStatus{Status: "idle", Turn: 1}, ""},
		{"dead with no replay", 1, false, nil, verbs.AgentStatus{Status: "dead", Turn: 1}, "add --from-start"},
	} {
		p := newP(c.turn, c.replay)
		replay(p, c.log...)
		err := p.settle(&c.st)
		var ve *verbs.Error
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v; want to go on live", c.name, err)
		case c.want != "" && (!errors.As(err, &ve) || exitFor(err) != ExitTurnFailed || !strings.Contains(ve.Message, c.want)):
			t.Errorf("%s: %v; want exit 3 and %q", c.name, err, c.want)
		}
	}

	// Once live, a death of the agent ends the wait for a later turn too;
	// in the replay it does not (a reopen may follow).
	p := newP(2, true)
	replay(p, append(turn1, status("dead", 1), status("starting", 1), status("idle", 1))...)
	if err := p.settle(&verbs.AgentStatus{Status: "idle", Turn: 1}); err != nil {
		t.Fatal(err)
	}
	p.live = true
	var ve *verbs.Error
	if err := emitEnv(t, p, status("dead", 1)); !errors.As(err, &ve) || !strings.Contains(ve.Message, "turn 2 will never come") {
		t.Fatalf("a live death: %v", err)
	}
	// Without --until-result nothing ends.
	p = newTailPrinter(&tailOptions{Channels: []string{"agent:a1"}, Out: io.Discard, Replay: true})
	p.only = "a1"
	replay(p, status("dead", 0))
	if err := p.settle(&verbs.AgentStatus{Status: "dead"}); err != nil {
		t.Fatal(err)
	}
}

func TestTailUsage(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"tail", "--since", "3"}, "exactly one channel agent:ID"},
		{[]string{"tail", "agent:a", "--since", "3", "--from-start"}, "contradict"},
		{[]string{"tail", "agent:a", "agent:b", "--from-start"}, "exactly one channel"},
		{[]string{"tail", "--kinds", "result,nope"}, `unknown kind "nope"`},
		{[]string{"tail", "--turn", "0"}, "--turn must be"},
		{[]string{"tail", "topic:x"}, "agent channels are"},
		{[]string{"tail", "--wait", "--until-result"}, "--wait waits for one agent"},
	} {
		var so, se bytes.Buffer
		code := Run(context.Background(), append([]string{"kaimon"}, c.args...), nil, &so, &se)
		if code != ExitUsage || !strings.Contains(se.String(), c.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", c.args, code, se.String(), c.want)
		}
	}
}

// emitEnv hands e to p as the follower would: encoded as the daemon
// encodes it.
func emitEnv(t *testing.T, p *tailPrinter, e *event.Envelope) error {
	t.Helper()
	fe, err := follow.Encode(e)
	if err != nil {
		t.Fatal(err)
	}
	err = p.emit(fe)
	if ferr := p.flush(); err == nil {
		err = ferr
	}
	return err
}
