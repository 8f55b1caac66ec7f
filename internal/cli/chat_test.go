package cli

import (
	"io"
	"strings"
	"testing"

	"github.com/kaimon/kaimon/internal/apitype"
	"github.com/kaimon/kaimon/internal/event"
	"github.com/kaimon/kaimon/internal/verbs"
)

// A chat sends each line typed as a turn and renders its reply, then
// prompts again; an empty line sends nothing; Ctrl-C at the prompt only
// says how to leave; Ctrl-C in a turn interrupts it and the chat goes on;
// Ctrl-D leaves, the agent untouched.
func TestChat(t *testing.T) {
	t.Parallel()
	in, typed := io.Pipe()
	r := startCmd(t, chatCmd(), in, true, false, func(f *fakeTurns) {
		f.status = verbs.AgentStatus{Status: apitype.Idle, Model: "sonnet", Cwd: "/w"}
	}, "a1")
	r.out.waitFor(t, chatPrompt)
	io.WriteString(typed, "\n")
	io.WriteString(typed, "hello\n")
	<-r.svc.runCtx
	for _, e := range []event.Event{event.NewText(event.UserText, 1, false, "hello"), event.NewText(event.AssistantText, 1, false, "Hi there."),
		event.New(event.Result, 1, event.ResultData{StopReason: apitype.StopEndTurn})} {
		r.svc.events <- &event.Envelope{Kind: e.Kind, Turn: 1, Data: e.Data, AgentID: "a1"}
	}
	r.svc.answers <- ran{res: &verbs.RunResult{Text: "Hi there."}}
	r.err.waitFor(t, "✓ turn 1")
	r.out.waitFor(t, "Hi there.\n"+chatPrompt)
	r.ctrlC()
	r.err.waitFor(t, "Ctrl-D leaves the chat")

	io.WriteString(typed, "please hold\n")
	<-r.svc.runCtx
	r.svc.events <- &event.Envelope{Kind: event.UserText, Turn: 2, Data: event.NewText(event.UserText, 2, false, "please hold").Data, AgentID: "a1"}
	r.ctrlC()
	<-r.svc.interrupts
	res := event.New(event.Result, 2, event.ResultData{StopReason: apitype.StopCancelled})
	r.svc.events <- &event.Envelope{Kind: res.Kind, Turn: 2, Data: res.Data, AgentID: "a1"}
	_, err := verbs.RunEnded("a1", 2, apitype.StopCancelled, "", "")
	r.svc.answers <- ran{err: err}
	r.err.waitFor(t, "■ turn 2 · cancelled")

	io.WriteString(typed, "third\n")
	<-r.svc.runCtx
	typed.Close() // Ctrl-D in the middle of the turn: leave it running
	code, out, errs := r.end(t)
	if code != ExitOK {
		t.Fatalf("exit %d, stderr %q", code, errs)
	}
	// The first, the empty line's, after turn 1, after the Ctrl-C at the
	// prompt, after turn 2: the third turn was left running.
	if n := strings.Count(out, chatPrompt); n != 5 {
		t.Errorf("%d prompts, want 5:\n%q", n, out)
	}
	for _, want := range []string{"chat with agent a1 (sonnet in /w)", "interrupting the turn of agent a1 (Ctrl-C again to leave it running and end the chat)", "detached: agent a1 goes on with its turn"} {
		if !strings.Contains(errs, want) {
			t.Errorf("stderr lacks %q:\n%q", want, errs)
		}
	}
	if strings.Contains(errs, "failed") {
		t.Errorf("the cancelled turn told as a failure:\n%q", errs)
	}
	select {
	case a := <-r.svc.interrupts:
		t.Fatalf("Ctrl-D interrupted the turn: %+v", a)
	default:
	}
}

// A chat needs a terminal, and a live agent.
func TestChatRefuses(t *testing.T) {
	t.Parallel()
	r := startCmd(t, chatCmd(), nil, true, false, nil, "a1")
	if code, _, errs := r.end(t); code != ExitError || !strings.Contains(errs, "kaimon chat needs a terminal") {
		t.Fatalf("exit %d, stderr %q", code, errs)
	}
	in, _ := io.Pipe()
	r = startCmd(t, chatCmd(), in, true, false, func(f *fakeTurns) { f.status = verbs.AgentStatus{Status: apitype.Dead, Reason: "closed"} }, "a1")
	if code, _, errs := r.end(t); code != ExitError || !strings.Contains(errs, "kaimon open --id a1 --resume") {
		t.Fatalf("exit %d, stderr %q", code, errs)
	}
}

// Ctrl-D while a question is asked leaves the chat with the question
// told as without a terminal: with the command that answers it, since no
// one answers it here any more; nothing is answered.
func TestChatLeavesWhileAsked(t *testing.T) {
	t.Parallel()
	in, typed := io.Pipe()
	r := startCmd(t, chatCmd(), in, true, false, func(f *fakeTurns) { f.status = verbs.AgentStatus{Status: apitype.Idle} }, "a1")
	r.out.waitFor(t, chatPrompt)
	io.WriteString(typed, "go\n")
	<-r.svc.runCtx
	r.svc.events <- &event.Envelope{Kind: event.UserText, Turn: 1, Data: event.NewText(event.UserText, 1, false, "go").Data, AgentID: "a1"}
	r.svc.events <- permissionEvent(event.PermissionData{RequestID: "r1", ToolCall: event.ToolCall{Title: "Bash"}})
	r.out.waitFor(t, "allow? [y]es")
	typed.Close()
	code, out, errs := r.end(t)
	if code != ExitOK || !strings.Contains(out, verbs.PermitCommand("a1", "r1", apitype.Allow)) || !strings.Contains(errs, "goes on with its turn") {
		t.Fatalf("exit %d\nstdout %q\nstderr %q", code, out, errs)
	}
	select {
	case p := <-r.svc.permits:
		t.Fatalf("answered: %+v", p)
	default:
	}
}
