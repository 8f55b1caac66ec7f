package cli

import (
	"bytes"
	"context"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kaimon/kaimon/internal/apitype"
	"github.com/kaimon/kaimon/internal/event"
)

// TestPrettyRun: a run renders only what the person did not type and does
// not get on stderr: no echo, turn header, status or result line; and it
// knows the assistant's text block it showed last.
func TestPrettyRun(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	p := newPretty(&out, false, plain)
	p.run = true
	for _, e := range turnEnvelopes("a1", 1) {
		p.print(e)
	}
	want := `I will run a command.
→ Bash {"command":"echo hi"}
← Bash completed: hi
Tool said: 
Tool said: hi. Done.
`
	if out.String() != want {
		t.Fatalf("run rendering:\n%s\nwant:\n%s", out.String(), want)
	}
	if got := p.lastShown("a1"); got != "Tool said: hi. Done." {
		t.Fatalf("lastShown = %q", got)
	}
}

func TestPermissionLines(t *testing.T) {
	t.Parallel()
	ask := &event.PermissionData{RequestID: "p1", ToolCall: event.ToolCall{Title: "Bash", RawInput: []byte(`{"command":"touch /x"}`)},
		ExpiresAt: "2026-01-01T00:00:00Z"}
	want := "? agent a1 asks permission for Bash {\"command\":\"touch /x\"}\n" +
		"  answer: kaimon permit a1 p1 allow   (or deny; waits until 2026-01-01T00:00:00Z)"
	if got := plain.permissionLines("? ", "a1", ask); got != want {
		t.Fatalf("question:\n%s\nwant:\n%s", got, want)
	}
	allowed := &event.PermissionData{RequestID: "p1", ToolCall: event.ToolCall{Title: "Bash"}, Decision: "allow", By: "user"}
	if got := plain.permissionLines("? ", "a1", allowed); got != "✓ permission for Bash allowed (user)" {
		t.Fatalf("allowed: %q", got)
	}
	denied := &event.PermissionData{RequestID: "p1", ToolCall: event.ToolCall{Title: "Bash"}, Decision: "deny", By: "timeout", Message: "nobody answered"}
	if got := plain.permissionLines("? ", "a1", denied); got != "✗ permission for Bash denied (timeout): nobody answered" {
		t.Fatalf("denied: %q", got)
	}
}

// TestSpinnerErasedBeforeText: the spinner is drawn where the cursor is
// (after a line of text that has not ended, too), redrawn in place, and
// erased before the next text is written.
func TestSpinnerErasedBeforeText(t *testing.T) {
	t.Parallel()
	var term bytes.Buffer // stdout and stderr are one terminal
	p := newPretty(&term, false, plain)
	p.run = true
	start := time.Now()
	p.spin = &spinner{w: &term, faint: plain.faint, quiet: start, since: map[string]time.Time{}, asks: map[string]map[string]bool{}}
	p.busy("a1", start)
	delta := func(s string) *event.Envelope {
		ev := event.NewText(event.AssistantText, 1, true, s)
		return &event.Envelope{Kind: ev.Kind, Turn: 1, Data: ev.Data, AgentID: "a1"}
	}
	p.spin.draw(start.Add(100*time.Millisecond), p.col) // not quiet long enough
	if term.Len() != 0 {
		t.Fatalf("spinner drawn before the quiet: %q", term.String())
	}
	p.spin.draw(start.Add(time.Second), p.col)
	p.print(delta("Hello, "))
	p.spin.draw(p.spin.quiet.Add(2*time.Second), p.col)
	p.spin.draw(p.spin.quiet.Add(3*time.Second), p.col)
	p.print(delta("world."))
	ask := event.New(event.Permission, 1, event.PermissionData{RequestID: "p1", ToolCall: event.ToolCall{Title: "Bash"}})
	p.print(&event.Envelope{Kind: ask.Kind, Turn: 1, Data: ask.Data, AgentID: "a1"})
	p.spin.draw(p.spin.quiet.Add(time.Second), p.col)
	p.spin.erase()
	got := term.String()
	for _, part := range []string{
		"\x1b7" + spinFrames[1] + " working 1s\x1b8\x1b[KHello, \x1b7 " + spinFrames[2] + " working ",
		"\x1b8\x1b[K " + spinFrames[3] + " working ",
		"\x1b8\x1b[Kworld.\n? agent a1 asks permission for Bash\n  answer: kaimon permit a1 p1 allow   (or deny)\n\x1b7" + spinFrames[4] + " waiting for permission ",
	} {
		if !strings.Contains(got, part) {
			t.Fatalf("terminal lacks %q:\n%q", part, got)
		}
	}
	if !strings.HasSuffix(got, "\x1b8\x1b[K") {
		t.Fatalf("spinner not erased at the end: %q", got)
	}
}

func TestUsageLine(t *testing.T) {
	t.Parallel()
	ev := event.New(event.Result, 2, event.ResultData{StopReason: "end_turn", Usage: event.UsageFigures{InputTokens: 100, OutputTokens: 20}})
	e := &event.Envelope{Kind: ev.Kind, Turn: 2, Data: ev.Data}
	if got := usageLine(plain, e, 1234*time.Millisecond); got != "✓ turn 2 · end_turn · tokens in 100, out 20 · 1.2s" {
		t.Fatalf("usage line %q", got)
	}
	// A cancel (Ctrl-C) is not marked as a failure; an error is.
	for stop, want := range map[apitype.StopReason]string{
		apitype.StopCancelled: "■ turn 2 · cancelled · tokens in 100, out 20 · 1.2s",
		apitype.StopError:     "✗ turn 2 · error · tokens in 100, out 20 · 1.2s",
	} {
		ev := event.New(event.Result, 2, event.ResultData{StopReason: stop, Usage: event.UsageFigures{InputTokens: 100, OutputTokens: 20}})
		e := &event.Envelope{Kind: ev.Kind, Turn: 2, Data: ev.Data}
		if got := usageLine(plain, e, 1234*time.Millisecond); got != want {
			t.Errorf("usage line %q, want %q", got, want)
		}
	}
}

// TestCatchInterrupts: SIGINT cancels Main's context, except while a
// command catches it; SIGTERM cancels it always.
func TestCatchInterrupts(t *testing.T) {
	// within fails the test, rather than hang it, when c does not fire.
	within := func(what string, c <-chan struct{}) {
		t.Helper()
		select {
		case <-c:
		case <-time.After(30 * time.Second):
			t.Fatal(what + " did not come")
		}
	}
	ctx, stop := notifyContext(context.Background())
	defer stop()
	sigs, release := catchInterrupts(ctx)
	if err := syscall.Kill(syscall.Getpid(), syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case <-sigs:
	case <-time.After(30 * time.Second):
		t.Fatal("the caught SIGINT did not come")
	}
	if ctx.Err() != nil {
		t.Fatal("a caught SIGINT cancelled the context")
	}
	release()
	if err := syscall.Kill(syscall.Getpid(), syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	within("the cancel by SIGINT", ctx.Done())

	ctx, stop2 := notifyContext(context.Background())
	defer stop2()
	_, release = catchInterrupts(ctx)
	defer release()
	if err := syscall.Kill(syscall.Getpid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	within("the cancel by SIGTERM (which is not caught)", ctx.Done())
}

// TestSpinnerFitsTheLine: a spinner that would wrap past the terminal's
// right margin is not drawn (its erasing would miss the wrapped part).
func TestSpinnerFitsTheLine(t *testing.T) {
	t.Parallel()
	var term bytes.Buffer
	start := time.Now()
	s := &spinner{w: &term, faint: plain.faint, width: func() int { return 40 }, quiet: start, since: map[string]time.Time{"a1": start}, asks: map[string]map[string]bool{}}
	s.draw(start.Add(time.Second), 30) // " ⠙ working 1s" is 13 columns: no room after 30 of 40
	if term.Len() != 0 {
		t.Fatalf("drawn past the margin: %q", term.String())
	}
	s.draw(start.Add(time.Second), 80) // at the margin of the second row
	if term.Len() != 0 {
		t.Fatalf("drawn at the margin: %q", term.String())
	}
	s.draw(start.Add(time.Second), 45) // column 5 of the second row
	if !strings.Contains(term.String(), "working 1s") {
		t.Fatalf("not drawn where it fits: %q", term.String())
	}
}

func TestAdvance(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		col  int
		s    string
		want int
	}{
		{0, "hello", 5},
		{3, "ab\ncd", 2},
		{0, "\x1b[2mthinking: \x1b[22mhm", 12},
		{4, "\x1b7 ⠙ working\x1b8\x1b[K", 14},
		{7, "x\r", 0},
	} {
		if got := advance(c.col, c.s); got != c.want {
			t.Errorf("advance(%d, %q) = %d, want %d", c.col, c.s, got, c.want)
		}
	}
}
