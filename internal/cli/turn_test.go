package cli

import (
	"bytes"
	"context"
	"io"
	"net/http/httptrace"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/kaimon/kaimon/internal/apitype"
	"github.com/kaimon/kaimon/internal/client"
	"github.com/kaimon/kaimon/internal/event"
	"github.com/kaimon/kaimon/internal/verbs"
)

// fakeTurns is a service for a turn's tests: agent_run answers what the
// test sends on answers (or its context's end), agent_interrupt tells the
// test and answers at once unless holdInterrupt, and the agent's stream
// gives what the test sends on events. Another verb, unexpected, panics.
type fakeTurns struct {
	verbs.Service
	answers       chan ran
	interrupts    chan *verbs.InterruptArgs
	holdInterrupt chan struct{} // non-nil: agent_interrupt waits for it to close
	runCtx        chan context.Context
	events        chan *event.Envelope
	watched       chan struct{} // a stream opened
	status        verbs.AgentStatus
	closed        chan string // agent_close's ids
	permits       chan *verbs.PermitArgs
}

// syncBuffer is a run's stdout or stderr, read by a test while the run
// writes it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// waitFor waits until the buffer holds s.
func (b *syncBuffer) waitFor(t *testing.T, s string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(b.String(), s) {
		if time.Now().After(deadline) {
			t.Fatalf("waiting for %q in:\n%q", s, b.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func newFakeTurns() *fakeTurns {
	return &fakeTurns{answers: make(chan ran, 1), interrupts: make(chan *verbs.InterruptArgs, 4), runCtx: make(chan context.Context, 1),
		events: make(chan *event.Envelope, 64), watched: make(chan struct{}, 4), closed: make(chan string, 1),
		permits: make(chan *verbs.PermitArgs, 4)}
}

func (f *fakeTurns) Permit(ctx context.Context, a *verbs.PermitArgs) (*verbs.PermitResult, error) {
	f.permits <- a
	return &verbs.PermitResult{}, nil
}

func (f *fakeTurns) Run(ctx context.Context, a *verbs.RunArgs) (*verbs.RunResult, error) {
	// The request is written, as a client's would be before it waits.
	if tr := httptrace.ContextClientTrace(ctx); tr != nil && tr.WroteRequest != nil {
		tr.WroteRequest(httptrace.WroteRequestInfo{})
	}
	f.runCtx <- ctx
	select {
	case r := <-f.answers:
		return r.res, r.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (f *fakeTurns) Interrupt(ctx context.Context, a *verbs.InterruptArgs) (*verbs.InterruptResult, error) {
	f.interrupts <- a
	if f.holdInterrupt != nil {
		<-f.holdInterrupt
	}
	return &verbs.InterruptResult{Interrupted: true}, nil
}

func (f *fakeTurns) Status(ctx context.Context, a *verbs.StatusArgs) (*verbs.AgentStatus, error) {
	st := f.status
	return &st, nil
}

func (f *fakeTurns) Open(ctx context.Context, a *verbs.OpenArgs) (*verbs.OpenResult, error) {
	return &verbs.OpenResult{AgentID: "t1"}, nil
}

func (f *fakeTurns) Close(ctx context.Context, a *verbs.CloseArgs) (*verbs.CloseResult, error) {
	f.closed <- a.AgentID
	return &verbs.CloseResult{}, nil
}

func (f *fakeTurns) EventsFromNow(ctx context.Context, id string) (Watcher, error) {
	f.watched <- struct{}{}
	return &fakeWatcher{events: f.events, closed: make(chan struct{})}, nil
}

type fakeWatcher struct {
	events <-chan *event.Envelope
	once   sync.Once
	closed chan struct{}
}

func (w *fakeWatcher) Next() (*event.Envelope, error) {
	select {
	case e := <-w.events:
		return e, nil
	case <-w.closed:
		return nil, io.EOF
	}
}

func (w *fakeWatcher) Close() error { w.once.Do(func() { close(w.closed) }); return nil }

// fakeClock is a clock that moves only when the test says: each wait
// armed is told on armed, and fires once Advance passes it.
type fakeClock struct {
	mu    sync.Mutex
	now   time.Time
	waits []fakeWait
	armed chan time.Duration
}

type fakeWait struct {
	at time.Time
	c  chan time.Time
}

func newFakeClock() *fakeClock {
	return &fakeClock{now: time.Now(), armed: make(chan time.Duration, 16)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) After(d time.Duration) <-chan time.Time {
	ch := make(chan time.Time, 1)
	c.mu.Lock()
	c.waits = append(c.waits, fakeWait{c.now.Add(d), ch})
	c.mu.Unlock()
	c.armed <- d
	return ch
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	kept := c.waits[:0]
	for _, w := range c.waits {
		if w.at.After(c.now) {
			kept = append(kept, w)
			continue
		}
		w.c <- c.now
	}
	c.waits = kept
}

// waitArmed waits for the turn to arm a wait of d (the ones before it,
// others, are passed over).
func (c *fakeClock) waitArmed(t *testing.T, d time.Duration) {
	t.Helper()
	for got := range c.armed {
		if got == d {
			return
		}
	}
}

// turnRun is one `kaimon run` under test, its end on done.
type turnRun struct {
	svc      *fakeTurns
	clock    *fakeClock
	keys     chan os.Signal
	out, err *syncBuffer
	done     chan int
	states   chan turnState // each the turn's loop is in
}

// startTurn runs `kaimon run` with args against a fake service and clock,
// stdout a terminal when tty, colour as colour; Ctrl-C is r.ctrlC. It runs
// the run command's action in an App of its own with no help or version
// flag: urfave/cli writes what it parses into its global HelpFlag and
// VersionFlag, a race between two whole command lines at once.
func startTurn(t *testing.T, tty, colour bool, args ...string) *turnRun {
	t.Helper()
	return startTurnIn(t, nil, tty, colour, args...)
}

// startTurnIn is startTurn with stdin a terminal that reads in, when in
// is not nil.
func startTurnIn(t *testing.T, in io.Reader, tty, colour bool, args ...string) *turnRun {
	t.Helper()
	return startCmd(t, runCmd(), in, tty, colour, nil, args...)
}

// startCmd is startTurnIn for command cmd, its service set up first by
// setup, when not nil.
func startCmd(t *testing.T, cmd *cli.Command, in io.Reader, tty, colour bool, setup func(*fakeTurns), args ...string) *turnRun {
	t.Helper()
	r := &turnRun{svc: newFakeTurns(), clock: newFakeClock(), keys: make(chan os.Signal, 2),
		out: &syncBuffer{}, err: &syncBuffer{}, done: make(chan int, 1), states: make(chan turnState, 64)}
	if setup != nil {
		setup(r.svc)
	}
	ios := testStreams(r.out, r.err, tty, colour)
	if in != nil {
		ios.In, ios.inTTY = in, true
	}
	f := factory{service: func(c *cli.Context) (verbs.Service, error) { return r.svc, nil }, ios: ios, clock: r.clock, keys: r.keys,
		trace: func(s turnState) { r.states <- s }}
	app := &cli.App{Name: "kaimon", HideHelp: true, HideVersion: true, Flags: cmd.Flags, Action: cmd.Action,
		Metadata: map[string]any{factoryKey: f}, Writer: ios.Out, ErrWriter: ios.ErrOut,
		ExitErrHandler: func(*cli.Context, error) {}}
	go func() {
		code := ExitOK
		if err := app.RunContext(context.Background(), append([]string{"kaimon"}, args...)); err != nil {
			code = report(err, ios.ErrOut)
		}
		r.done <- code
	}()
	return r
}

func (r *turnRun) ctrlC() { r.keys <- syscall.SIGINT }

// end waits for the run's exit code; its streams are read after it.
func (r *turnRun) end(t *testing.T) (code int, stdout, stderr string) {
	t.Helper()
	code = <-r.done
	return code, r.out.String(), r.err.String()
}

// A piped turn that ends prints its final text alone; its stream was
// never opened, since the turn ended before hintDelay.
func TestTurnPipedEnds(t *testing.T) {
	t.Parallel()
	r := startTurn(t, false, false, "a1", "go")
	r.clock.waitArmed(t, hintDelay)
	r.svc.answers <- ran{res: &verbs.RunResult{Text: "done"}}
	if code, out, errs := r.end(t); code != ExitOK || out != "done\n" || errs != "" {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errs)
	}
	if len(r.svc.watched) != 0 {
		t.Fatal("a piped turn shorter than hintDelay opened its stream")
	}
}

// Piped, once hintDelay has passed, the stream opens and the pending
// requests agent_status names are told on stderr, then those the stream
// brings; each once.
func TestTurnPipedHints(t *testing.T) {
	t.Parallel()
	r := startTurn(t, false, false, "a1", "go")
	// Unbuffered: once a send is taken, the event before it is told.
	r.svc.events = make(chan *event.Envelope)
	r.svc.status = verbs.AgentStatus{Status: apitype.Working, PendingPermissions: []verbs.PendingPermission{{RequestID: "r1", Title: "Bash"}}}
	r.clock.waitArmed(t, hintDelay)
	r.clock.Advance(hintDelay)
	<-r.svc.watched
	ask := func(req, tool string) *event.Envelope {
		ev := event.New(event.Permission, 1, event.PermissionData{RequestID: req, ToolCall: event.ToolCall{Title: tool}})
		return &event.Envelope{Kind: ev.Kind, Turn: 1, Data: ev.Data, AgentID: "a1"}
	}
	r.svc.events <- ask("r1", "Bash") // told already, from the status
	r.svc.events <- ask("r2", "Edit")
	r.svc.events <- ask("r2", "Edit") // again: taken, so the first is told
	r.svc.answers <- ran{res: &verbs.RunResult{Text: "done"}}
	code, out, errs := r.end(t)
	if code != ExitOK || out != "done\n" {
		t.Fatalf("exit %d, stdout %q", code, out)
	}
	if strings.Count(errs, "asks permission for Bash") != 1 || !strings.Contains(errs, verbs.PermitCommand("a1", "r1", apitype.Allow)) {
		t.Errorf("r1 not told once: %q", errs)
	}
	if strings.Count(errs, "asks permission for Edit") != 1 {
		t.Errorf("r2 not told once: %q", errs)
	}
}

// The first Ctrl-C interrupts the turn and says how to detach; the turn
// then ends cancelled: its text so far on stdout, exit 3.
func TestTurnCtrlCInterrupts(t *testing.T) {
	t.Parallel()
	r := startTurn(t, false, false, "a1", "go")
	<-r.svc.runCtx
	r.ctrlC()
	if a := <-r.svc.interrupts; a.AgentID != "a1" {
		t.Fatalf("interrupted %q", a.AgentID)
	}
	_, err := verbs.RunEnded("a1", 1, apitype.StopCancelled, "", "half")
	r.svc.answers <- ran{err: err}
	code, out, errs := r.end(t)
	if code != ExitTurnFailed || out != "half\n" {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errs)
	}
	want := "kaimon: interrupting the turn of agent a1 (Ctrl-C again to leave it running and detach)\nkaimon: " + err.Error() + "\n"
	if errs != want {
		t.Fatalf("stderr:\n%q\nwant:\n%q", errs, want)
	}
}

// A second Ctrl-C detaches: agent_run is given up, the turn left running,
// exit 130; run -C's words say it closes its throwaway instead, and it
// does.
func TestTurnCtrlCTwiceDetaches(t *testing.T) {
	t.Parallel()
	for _, oneShot := range []bool{false, true} {
		args, id := []string{"a1", "go"}, "a1"
		if oneShot {
			args, id = []string{"-C", "/w", "go"}, "t1"
		}
		r := startTurn(t, false, false, args...)
		runCtx := <-r.svc.runCtx
		r.ctrlC()
		<-r.svc.interrupts
		r.ctrlC()
		code, out, errs := r.end(t)
		if code != ExitDetached || out != "" || runCtx.Err() == nil {
			t.Fatalf("-C %v: exit %d, stdout %q, agent_run's context %v", oneShot, code, out, runCtx.Err())
		}
		want := "kaimon: interrupting the turn of agent a1 (Ctrl-C again to leave it running and detach)\n" +
			"kaimon: detached: agent a1 goes on with its turn (kaimon output a1, kaimon interrupt a1)\n"
		if oneShot {
			want = "kaimon: interrupting the turn of agent t1 (Ctrl-C again to close it at once)\n" +
				"kaimon: closing agent t1, run -C's throwaway (Ctrl-C again to stop waiting)\n" +
				"kaimon: detached: closed agent t1, run -C's throwaway, with its turn\n"
			if got := <-r.svc.closed; got != id {
				t.Errorf("closed %q", got)
			}
		}
		if errs != want {
			t.Errorf("-C %v: stderr:\n%q\nwant:\n%q", oneShot, errs, want)
		}
	}
}

// A detach waits for the interrupt's request to be written, so that it is
// not lost with the process, but no longer than detachWait.
func TestTurnDetachWaitsForTheInterrupt(t *testing.T) {
	t.Parallel()
	r := startTurn(t, false, false, "a1", "go")
	r.svc.holdInterrupt = make(chan struct{})
	defer close(r.svc.holdInterrupt)
	<-r.svc.runCtx
	r.ctrlC()
	<-r.svc.interrupts
	r.ctrlC()
	for s := range r.states {
		if s == detaching {
			break
		}
		if s == detached {
			t.Fatal("detached without waiting for the interrupt's write or detachWait")
		}
	}
	r.clock.waitArmed(t, detachWait)
	r.clock.Advance(detachWait) // hintDelay passes too: the loop may go round in detaching
	for s := range r.states {
		if s == detached {
			break
		}
		if s != detaching {
			t.Fatalf("after detachWait: %v, want detached", s)
		}
	}
	if code, _, errs := r.end(t); code != ExitDetached || !strings.Contains(errs, "detached: agent a1 goes on") {
		t.Fatalf("exit %d, stderr %q", code, errs)
	}
}

// A daemon that goes away under agent_run ends the turn as lost: exit 3,
// and the words say how to resume the conversation.
func TestTurnDaemonLost(t *testing.T) {
	t.Parallel()
	r := startTurn(t, false, false, "a1", "go")
	r.svc.answers <- ran{err: &client.DaemonDownError{Where: "socket /s", Err: io.ErrUnexpectedEOF}}
	code, out, errs := r.end(t)
	want := "kaimon: kaimon-agentd was lost during the turn of agent a1 (the daemon crashed or was killed: its connection ended with unexpected EOF), " +
		"so the agent was stopped; resume its conversation with `kaimon open --id a1 --resume`\n"
	if code != ExitTurnFailed || out != "" || errs != want {
		t.Fatalf("exit %d, stdout %q, stderr:\n%q\nwant:\n%q", code, out, errs, want)
	}
}

// feed sends turn 1 of agent a1, as turnEnvelopes has it, on r's stream.
func (r *turnRun) feed() {
	for _, e := range turnEnvelopes("a1", 1) {
		r.svc.events <- e
	}
}

// On a terminal the turn renders as its events come (text, a tool call
// and its result), the final text is not printed again, and the usage
// ends it on stderr; in colour, or without.
func TestTurnLiveRenders(t *testing.T) {
	t.Parallel()
	for _, colour := range []bool{false, true} {
		r := startTurn(t, true, colour, "a1", "please use a tool")
		<-r.svc.watched // before the turn is sent
		<-r.svc.runCtx
		r.feed()
		r.svc.answers <- ran{res: &verbs.RunResult{Text: "Tool said: hi. Done."}}
		code, out, errs := r.end(t)
		if code != ExitOK {
			t.Fatalf("colour %v: exit %d, stderr %q", colour, code, errs)
		}
		wantOut := "I will run a command.\n→ Bash {\"command\":\"echo hi\"}\n← Bash completed: hi\nTool said: \nTool said: hi. Done.\n"
		wantErr := "✓ turn 1 · end_turn · tokens in 200, out 40, cache read 20, write 0 · 0s\n"
		if colour {
			wantOut = "I will run a command.\n\x1b[36m→ Bash\x1b[0m {\"command\":\"echo hi\"}\n\x1b[32m← Bash\x1b[0m completed: hi\nTool said: \nTool said: hi. Done.\n"
			wantErr = "\x1b[2m✓ turn 1 · end_turn · tokens in 200, out 40, cache read 20, write 0 · 0s\x1b[22m\n"
		}
		if out != wantOut || errs != wantErr {
			t.Errorf("colour %v:\nstdout %q\nwant   %q\nstderr %q\nwant   %q", colour, out, wantOut, errs, wantErr)
		}
	}
}

// A live turn whose stream does not bring its result waits resultWait for
// it, then prints the final text it did not show, and no usage.
func TestTurnLiveWithoutResult(t *testing.T) {
	t.Parallel()
	r := startTurn(t, true, false, "a1", "go")
	<-r.svc.runCtx
	r.svc.answers <- ran{res: &verbs.RunResult{Text: "the end"}}
	r.clock.waitArmed(t, resultWait)
	r.clock.Advance(resultWait)
	if code, out, errs := r.end(t); code != ExitOK || out != "the end\n" || errs != "" {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errs)
	}
}

// Ctrl-C on a terminal moves past the echoed ^C, and a turn that ends
// cancelled says so once, in its usage line (exit 3, no error after it).
func TestTurnLiveCtrlC(t *testing.T) {
	t.Parallel()
	r := startTurn(t, true, false, "a1", "go")
	<-r.svc.runCtx
	r.ctrlC()
	<-r.svc.interrupts
	res := event.New(event.Result, 1, event.ResultData{StopReason: apitype.StopCancelled})
	for _, e := range []event.Event{event.NewText(event.UserText, 1, false, "go"), res} {
		r.svc.events <- &event.Envelope{Kind: e.Kind, Turn: 1, Data: e.Data, AgentID: "a1"}
	}
	_, err := verbs.RunEnded("a1", 1, apitype.StopCancelled, "", "")
	r.svc.answers <- ran{err: err}
	code, out, errs := r.end(t)
	want := "kaimon: interrupting the turn of agent a1 (Ctrl-C again to leave it running and detach)\n" +
		"■ turn 1 · cancelled · tokens in 0, out 0 · 0s\n"
	if code != ExitTurnFailed || out != "\n" || errs != want {
		t.Fatalf("exit %d, stdout %q, stderr:\n%q\nwant:\n%q", code, out, errs, want)
	}
}

// On a terminal a permission request shows with the exact command that
// answers it, and its answer with who gave it; the turn goes on to its end.
func TestTurnLivePermission(t *testing.T) {
	t.Parallel()
	r := startTurn(t, true, false, "a1", "go")
	<-r.svc.runCtx
	for _, e := range []event.Event{
		event.NewText(event.UserText, 1, false, "go"),
		event.New(event.Permission, 1, event.PermissionData{RequestID: "r1", ToolCall: event.ToolCall{Title: "Bash", RawInput: []byte(`{"command":"touch /x"}`)}}),
		event.New(event.Permission, 1, event.PermissionData{RequestID: "r1", ToolCall: event.ToolCall{Title: "Bash"}, Decision: apitype.Deny, By: "user"}),
		event.NewText(event.AssistantText, 1, false, "Tool said: no."),
		event.New(event.Result, 1, event.ResultData{StopReason: apitype.StopEndTurn}),
	} {
		r.svc.events <- &event.Envelope{Kind: e.Kind, Turn: 1, Data: e.Data, AgentID: "a1"}
	}
	r.svc.answers <- ran{res: &verbs.RunResult{Text: "Tool said: no."}}
	code, out, errs := r.end(t)
	want := "? agent a1 asks permission for Bash {\"command\":\"touch /x\"}\n" +
		"  answer: " + verbs.PermitCommand("a1", "r1", apitype.Allow) + "   (or deny)\n" +
		"✗ permission for Bash denied (user)\n" +
		"Tool said: no.\n"
	if code != ExitOK || out != want || !strings.HasPrefix(errs, "✓ turn 1 · end_turn") {
		t.Fatalf("exit %d, stdout:\n%q\nwant:\n%q\nstderr %q", code, out, want, errs)
	}
}

// permissionEvent is a permission event of agent a1's turn 1.
func permissionEvent(d event.PermissionData) *event.Envelope {
	e := event.New(event.Permission, 1, d)
	return &event.Envelope{Kind: e.Kind, Turn: 1, Data: e.Data, AgentID: "a1"}
}

// On a terminal with stdin a terminal too, a permission request is asked
// where the turn renders: an answer that is none asks again, y allows
// (agent_permit, not always), and the request's outcome follows as the
// stream brings it.
func TestTurnAsksInline(t *testing.T) {
	t.Parallel()
	in, typed := io.Pipe()
	defer typed.Close()
	r := startTurnIn(t, in, true, false, "a1", "go")
	<-r.svc.runCtx
	r.svc.events <- &event.Envelope{Kind: event.UserText, Turn: 1, Data: event.NewText(event.UserText, 1, false, "go").Data, AgentID: "a1"}
	ask := event.PermissionData{RequestID: "r1", ToolCall: event.ToolCall{Title: "Bash", RawInput: []byte(`{"command":"touch /x"}`)}}
	r.svc.events <- permissionEvent(ask)
	question := "? agent a1 asks permission for Bash {\"command\":\"touch /x\"}\n  allow? [y]es / [n]o / [a]lways "
	r.out.waitFor(t, question)
	io.WriteString(typed, "sure\n")
	r.out.waitFor(t, "  answer y, n or a: ")
	io.WriteString(typed, "y\n")
	p := <-r.svc.permits
	if p.AgentID != "a1" || p.RequestID != "r1" || p.Decision != apitype.Allow || p.Always {
		t.Fatalf("permit %+v, want a1 r1 allow once", p)
	}
	ask.Decision, ask.By = apitype.Allow, "user"
	r.svc.events <- permissionEvent(ask)
	for _, e := range []event.Event{event.NewText(event.AssistantText, 1, false, "Done."), event.New(event.Result, 1, event.ResultData{StopReason: apitype.StopEndTurn})} {
		r.svc.events <- &event.Envelope{Kind: e.Kind, Turn: 1, Data: e.Data, AgentID: "a1"}
	}
	r.svc.answers <- ran{res: &verbs.RunResult{Text: "Done."}}
	code, out, errs := r.end(t)
	// The terminal echoes what is typed: the test's pipe does not, so the
	// lines the person typed are missing here.
	want := question + "  answer y, n or a: " + "✓ permission for Bash allowed (user)\nDone.\n"
	if code != ExitOK || out != want {
		t.Fatalf("exit %d, stdout:\n%q\nwant:\n%q\nstderr %q", code, out, want, errs)
	}
}

// A question decided elsewhere (kaimon permit, the monitor, the timeout)
// is no longer asked: its outcome ends the question's line, and the next
// request is asked; a line typed before a question is not its answer;
// "a" allows for good; Ctrl-D (stdin's end) tells the rest as a run
// without a terminal does, with the command that answers them.
func TestTurnAskDecidedElsewhereAndEnds(t *testing.T) {
	t.Parallel()
	in, typed := io.Pipe()
	r := startTurnIn(t, in, true, false, "a1", "go")
	<-r.svc.runCtx
	r.svc.events <- &event.Envelope{Kind: event.UserText, Turn: 1, Data: event.NewText(event.UserText, 1, false, "go").Data, AgentID: "a1"}
	r1 := event.PermissionData{RequestID: "r1", ToolCall: event.ToolCall{Title: "Bash"}}
	r2 := event.PermissionData{RequestID: "r2", ToolCall: event.ToolCall{Title: "Write"}}
	r3 := event.PermissionData{RequestID: "r3", ToolCall: event.ToolCall{Title: "Edit"}, Options: []event.PermissionOption{{OptionID: "ok", Kind: "allow_once"}}}
	r.svc.events <- permissionEvent(r1)
	r.svc.events <- permissionEvent(r2)
	r.svc.events <- permissionEvent(r2) // said again (a relinked stream): asked once
	r.out.waitFor(t, "for Bash\n  allow?")
	r1.Decision, r1.By = apitype.Deny, "timeout"
	r.svc.events <- permissionEvent(r1)
	r.out.waitFor(t, "for Write\n  allow?")
	io.WriteString(typed, "a\n")
	if p := <-r.svc.permits; p.RequestID != "r2" || p.Decision != apitype.Allow || !p.Always {
		t.Fatalf("permit %+v, want r2 allowed always", p)
	}
	io.WriteString(typed, "y\n") // typed ahead: read, and not the next question's answer
	r.svc.events <- permissionEvent(r3)
	r.out.waitFor(t, "for Edit\n  allow? [y]es / [n]o ")
	typed.Close() // Ctrl-D
	r.out.waitFor(t, verbs.PermitCommand("a1", "r3", apitype.Allow))
	r.svc.answers <- ran{res: &verbs.RunResult{Text: "ok"}}
	r.clock.waitArmed(t, resultWait)
	r.clock.Advance(resultWait)
	code, out, _ := r.end(t)
	if code != ExitOK || strings.Count(out, "/ [a]lways") != 2 {
		t.Fatalf("exit %d, stdout:\n%q", code, out)
	}
	if !strings.Contains(out, "allow? [y]es / [n]o / [a]lways \n✗ permission for Bash denied (timeout)\n") {
		t.Fatalf("the outcome does not end the question's line:\n%q", out)
	}
	if n := strings.Count(out, "for Write\n  allow?"); n != 1 {
		t.Fatalf("a request said twice asked %d times:\n%q", n, out)
	}
	if strings.Contains(out, "for Edit\n  allow? [y]es / [n]o / [a]lways") {
		t.Fatalf("always offered where the agent offers no such option:\n%q", out)
	}
	select {
	case p := <-r.svc.permits:
		t.Fatalf("a permit no one gave: %+v", p)
	default:
	}
}

// A turn run by a prefix of its agent's id renders the same: the final
// text the stream showed is not printed again (the events name the agent
// by its whole id).
func TestTurnLiveByPrefix(t *testing.T) {
	t.Parallel()
	r := startTurn(t, true, false, "a", "please use a tool")
	<-r.svc.runCtx
	r.feed()
	r.svc.answers <- ran{res: &verbs.RunResult{Text: "Tool said: hi. Done."}}
	code, out, errs := r.end(t)
	if code != ExitOK || strings.Count(out, "Tool said: hi. Done.") != 1 {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errs)
	}
}
