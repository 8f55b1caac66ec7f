package claude

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/kaimon/kaimon/internal/apitype"
	"github.com/kaimon/kaimon/internal/backend"
	"github.com/kaimon/kaimon/internal/config"
	"github.com/kaimon/kaimon/internal/event"
	"github.com/kaimon/kaimon/internal/testutil/agents"
	"github.com/kaimon/kaimon/internal/testutil/backendtest"
	"github.com/kaimon/kaimon/internal/testutil/fakeapi"
	"github.com/kaimon/kaimon/internal/verbs"
)

// recSink records what a backend reports, and checks the Sink contract:
// Emit never from two goroutines at once, nothing after Exited, Exited once.
type recSink struct {
	t      *testing.T
	mu     sync.Mutex
	evs    []event.Event
	inEmit bool
	exits  int
	err    error
	exited chan struct{}
}

func newSink(t *testing.T) *recSink { return &recSink{t: t, exited: make(chan struct{})} }

func (s *recSink) Emit(ev event.Event) {
	s.mu.Lock()
	if s.inEmit {
		s.t.Errorf("Emit called concurrently")
	}
	if s.exits > 0 {
		s.t.Errorf("Emit %s %s after Exited", ev.Kind, ev.Data)
	}
	if !json.Valid(ev.Data) {
		s.t.Errorf("Emit %s with invalid JSON %q", ev.Kind, ev.Data)
	}
	s.inEmit = true
	s.evs = append(s.evs, ev)
	s.mu.Unlock()
	time.Sleep(time.Microsecond) // widen the window for a concurrent Emit
	s.mu.Lock()
	s.inEmit = false
	s.mu.Unlock()
}

func (s *recSink) Exited(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.exits++
	if s.exits > 1 {
		s.t.Errorf("Exited called %d times", s.exits)
		return
	}
	s.err = err
	close(s.exited)
}

func (s *recSink) events() []event.Event {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]event.Event(nil), s.evs...)
}

func (s *recSink) turn(n int) []event.Event {
	var out []event.Event
	for _, ev := range s.events() {
		if ev.Turn == n {
			out = append(out, ev)
		}
	}
	return out
}

// waitFor polls until some event satisfies pred.
func (s *recSink) waitFor(t *testing.T, what string, d time.Duration, pred func(event.Event) bool) event.Event {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		for _, ev := range s.events() {
			if pred(ev) {
				return ev
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s; events:\n%s", d, what, dump(s.events()))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitResult waits for turn's result and returns its data.
func (s *recSink) waitResult(t *testing.T, turn int, d time.Duration) event.ResultData {
	t.Helper()
	ev := s.waitFor(t, fmt.Sprintf("turn %d's result", turn), d, func(ev event.Event) bool {
		return ev.Kind == event.Result && ev.Turn == turn
	})
	var r event.ResultData
	if err := json.Unmarshal(ev.Data, &r); err != nil {
		t.Fatal(err)
	}
	return r
}

func dump(evs []event.Event) string {
	var b strings.Builder
	for _, ev := range evs {
		fmt.Fprintf(&b, "  %d %s %s\n", ev.Turn, ev.Kind, head(string(ev.Data), 300))
	}
	return b.String()
}

// kinds lists the kinds of evs, "+" marking deltas and "~" announces.
func kinds(evs []event.Event) []string {
	var out []string
	for _, ev := range evs {
		out = append(out, sig(ev))
	}
	return out
}

// authoritativeText is the turn's complete assistant text blocks, joined.
func authoritativeText(evs []event.Event) string {
	var parts []string
	for _, ev := range evs {
		if ev.Kind == event.AssistantText && !gjson.GetBytes(ev.Data, "delta").Bool() {
			parts = append(parts, gjson.GetBytes(ev.Data, "content.text").String())
		}
	}
	return strings.Join(parts, "\n")
}

// realCLI returns the claude CLI to test against, or skips.
func realCLI(t *testing.T) string {
	t.Helper()
	return agents.Claude(t)
}

// cliEnv is the environment that runs the real CLI offline against api.
func cliEnv(t *testing.T, bin, apiURL string) []string {
	return append([]string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + t.TempDir(),
		"KAIMON_CLAUDE_BIN=" + bin,
	}, agents.ClaudeOffline(apiURL, t.TempDir())...)
}

type agent struct {
	b    *Backend
	sink *recSink
	api  *fakeapi.Server
	cwd  string
}

// startAgent starts a Backend on the real CLI against a fresh fake API.
func startAgent(t *testing.T, o backend.Options) *agent {
	t.Helper()
	bin := realCLI(t)
	api := fakeapi.New(t)
	if o.Cwd == "" {
		// A dot and an underscore in the name exercise the transcript
		// path's munging.
		o.Cwd = filepath.Join(t.TempDir(), "my.project_dir")
		if err := os.Mkdir(o.Cwd, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if o.ID == "" {
		o.ID = "test1234"
	}
	o.CacheDir = t.TempDir()
	o.Env = cliEnv(t, bin, api.URL())
	sink := newSink(t)
	b, err := New(backendtest.Resolved(t, o), sink)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := b.Start(ctx); err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		id := b.Process()
		b.Close()
		if err := syscall.Kill(-id.PID, 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("process group %d still there after Close: %v", id.PID, err)
		}
	})
	return &agent{b: b, sink: sink, api: api, cwd: o.Cwd}
}

const turnTimeout = 60 * time.Second

func TestBackendTurns(t *testing.T) {
	a := startAgent(t, backend.Options{OpenArgs: verbs.OpenArgs{Permission: "bypass"}})
	if err := a.b.Send(1, "hello there"); err != nil {
		t.Fatal(err)
	}
	r := a.sink.waitResult(t, 1, turnTimeout)
	if r.StopReason != apitype.StopEndTurn {
		t.Fatalf("turn 1 stopReason %q: %s", r.StopReason, dump(a.sink.turn(1)))
	}
	want := event.UsageFigures{InputTokens: fakeapi.InputTokens, OutputTokens: fakeapi.OutputTokens, CacheReadTokens: fakeapi.CacheReadTokens}
	if r.Usage != want {
		t.Errorf("turn 1 usage %+v, want %+v", r.Usage, want)
	}
	evs := a.sink.turn(1)
	ks := kinds(evs)
	if ks[0] != "user_text" || ks[1] != "turn_started" || ks[len(ks)-2] != "usage" || ks[len(ks)-1] != "result" {
		t.Errorf("turn 1 kinds %v", ks)
	}
	if got := gjson.GetBytes(evs[0].Data, "content.text").String(); got != "hello there" {
		t.Errorf("user_text %q", got)
	}
	text := authoritativeText(evs)
	if !strings.HasPrefix(text, "Hello from fakeapi (request #") {
		t.Errorf("turn 1 text %q", text)
	}
	checkBlocks(t, 1, evs)
	deltas := 0
	for _, k := range ks {
		if k == "assistant_text+" {
			deltas++
		}
	}
	if deltas < 2 {
		t.Errorf("turn 1: %d text deltas, want streaming: %v", deltas, ks)
	}

	info := a.b.Info()
	if info.SessionID == "" || !info.QueuesPrompts || info.Model == "" {
		t.Errorf("info %+v", info)
	}
	// The CLI writes its transcript asynchronously.
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		_, err := os.Stat(info.Transcript)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("transcript %s: %v", info.Transcript, err)
			break
		}
	}

	// A tool turn: under bypass, Bash runs.
	if err := a.b.Send(2, "please use a tool"); err != nil {
		t.Fatal(err)
	}
	if r := a.sink.waitResult(t, 2, turnTimeout); r.StopReason != apitype.StopEndTurn {
		t.Fatalf("turn 2 stopReason %q", r.StopReason)
	}
	evs = a.sink.turn(2)
	checkBlocks(t, 2, evs)
	var sawCall, sawResult bool
	for _, ev := range evs {
		switch ev.Kind {
		case event.ToolUse:
			if in := gjson.GetBytes(ev.Data, "call.rawInput"); in.Exists() {
				sawCall = in.Get("command").String() == "echo hi" &&
					gjson.GetBytes(ev.Data, "call.kind").String() == "execute"
			}
		case event.ToolResult:
			sawResult = gjson.GetBytes(ev.Data, "update.status").String() == "completed" &&
				gjson.GetBytes(ev.Data, "update.content.0.content.text").String() == "hi"
		}
	}
	if !sawCall || !sawResult {
		t.Errorf("turn 2: tool call %v, result %v:\n%s", sawCall, sawResult, dump(evs))
	}
	if got := authoritativeText(evs); !strings.HasSuffix(got, "Tool said: hi. Done.") {
		t.Errorf("turn 2 text %q", got)
	}

	// Two sends in a row: the CLI queues the second until the first's
	// result, and each turn's events carry its own number.
	if err := a.b.Send(3, "first of two"); err != nil {
		t.Fatal(err)
	}
	if err := a.b.Send(4, "second of two"); err != nil {
		t.Fatal(err)
	}
	a.sink.waitResult(t, 4, turnTimeout)
	for turn, text := range map[int]string{3: "first of two", 4: "second of two"} {
		evs := a.sink.turn(turn)
		ks := kinds(evs)
		if len(ks) < 5 || ks[0] != "user_text" || ks[1] != "turn_started" || ks[len(ks)-1] != "result" {
			t.Errorf("turn %d kinds %v", turn, ks)
			continue
		}
		if got := gjson.GetBytes(evs[0].Data, "content.text").String(); got != text {
			t.Errorf("turn %d user_text %q", turn, got)
		}
		if got := authoritativeText(evs); !strings.HasPrefix(got, "Hello from fakeapi") {
			t.Errorf("turn %d text %q", turn, got)
		}
	}
	// Turn 4 opened only when turn 3 ended.
	all := a.sink.events()
	var res3, open4 int
	for i, ev := range all {
		if ev.Kind == event.Result && ev.Turn == 3 {
			res3 = i
		}
		if ev.Kind == event.TurnStarted && ev.Turn == 4 {
			open4 = i
		}
	}
	if open4 < res3 {
		t.Errorf("turn 4 started (#%d) before turn 3's result (#%d)", open4, res3)
	}
	var users []string
	for _, rq := range a.api.Requests() {
		if rq.Stream && rq.LastUserText != "" {
			users = append(users, rq.LastUserText)
		}
	}
	if strings.Join(users, "|") != "hello there|please use a tool|first of two|second of two" {
		t.Errorf("the API saw the turns %q", users)
	}
}

func TestBackendInterrupt(t *testing.T) {
	a := startAgent(t, backend.Options{})
	if ok, err := a.b.Interrupt(context.Background()); ok || err != nil {
		t.Errorf("interrupt with no turn: %v %v", ok, err)
	}
	if err := a.b.Send(1, "please be slow"); err != nil {
		t.Fatal(err)
	}
	a.sink.waitFor(t, "a streamed chunk", turnTimeout, func(ev event.Event) bool {
		return ev.Kind == event.AssistantText && ev.Turn == 1
	})
	start := time.Now()
	ok, err := a.b.Interrupt(context.Background())
	if !ok || err != nil {
		t.Fatalf("Interrupt = %v, %v", ok, err)
	}
	r := a.sink.waitResult(t, 1, 10*time.Second)
	if r.StopReason != apitype.StopCancelled {
		t.Fatalf("interrupted turn stopReason %q:\n%s", r.StopReason, dump(a.sink.turn(1)))
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("the interrupt took %v", d)
	}
	if err := a.b.Send(2, "hello again"); err != nil {
		t.Fatal(err)
	}
	if r := a.sink.waitResult(t, 2, turnTimeout); r.StopReason != apitype.StopEndTurn {
		t.Fatalf("turn after the interrupt: %q", r.StopReason)
	}
	if got := authoritativeText(a.sink.turn(2)); !strings.HasPrefix(got, "Hello from fakeapi") {
		t.Errorf("turn 2 text %q", got)
	}
}

// Turns sent while one runs each get their own turn and result: the CLI
// itself would merge them into one.
func TestBackendQueuedWhileBusy(t *testing.T) {
	a := startAgent(t, backend.Options{})
	if err := a.b.Send(1, "please be slow"); err != nil {
		t.Fatal(err)
	}
	a.sink.waitFor(t, "a streamed chunk", turnTimeout, func(ev event.Event) bool {
		return ev.Kind == event.AssistantText && ev.Turn == 1
	})
	texts := map[int]string{2: "two", 3: "three", 4: "four"}
	for turn := 2; turn <= 4; turn++ {
		if err := a.b.Send(turn, texts[turn]); err != nil {
			t.Fatal(err)
		}
	}
	if len(a.sink.turn(2)) != 0 {
		t.Errorf("queued turn 2 opened while turn 1 runs: %s", dump(a.sink.turn(2)))
	}
	if ok, err := a.b.Interrupt(context.Background()); !ok || err != nil {
		t.Fatalf("Interrupt = %v, %v", ok, err)
	}
	if r := a.sink.waitResult(t, 1, 10*time.Second); r.StopReason != apitype.StopCancelled {
		t.Errorf("turn 1 %q", r.StopReason)
	}
	for turn := 2; turn <= 4; turn++ {
		if r := a.sink.waitResult(t, turn, turnTimeout); r.StopReason != apitype.StopEndTurn {
			t.Errorf("turn %d %q", turn, r.StopReason)
		}
		evs := a.sink.turn(turn)
		if ks := kinds(evs); ks[0] != "user_text" || gjson.GetBytes(evs[0].Data, "content.text").String() != texts[turn] {
			t.Errorf("turn %d: %s", turn, dump(evs))
		}
	}
	var users []string
	for _, rq := range a.api.Requests() {
		if rq.Stream && rq.LastUserText != "" {
			users = append(users, rq.LastUserText)
		}
	}
	if strings.Join(users, "|") != "please be slow|two|three|four" {
		t.Errorf("the API saw the turns %q", users)
	}
}

// Under only, the CLI loads just the built-in tools allowed_tools names.
func TestBackendOnly(t *testing.T) {
	a := startAgent(t, backend.Options{OpenArgs: verbs.OpenArgs{Only: true, Permission: "bypass", AllowedTools: []string{"Read"}}})
	if err := a.b.Send(1, "please use a tool"); err != nil {
		t.Fatal(err)
	}
	a.sink.waitResult(t, 1, turnTimeout)
	var res event.Event
	for _, ev := range a.sink.turn(1) {
		if ev.Kind == event.ToolResult {
			res = ev
		}
	}
	if gjson.GetBytes(res.Data, "update.status").String() != "failed" ||
		!strings.Contains(gjson.GetBytes(res.Data, "update.content.0.content.text").String(), "No such tool available: Bash") {
		t.Errorf("Bash ran under only with allowed_tools [Read]: %s", dump(a.sink.turn(1)))
	}
}

func TestBackendSetModel(t *testing.T) {
	a := startAgent(t, backend.Options{OpenArgs: verbs.OpenArgs{Model: "sonnet/low"}})
	// The effort goes with the agent: carried to a model without one,
	// changed by a model that names one, and carried on from there.
	// An alias is reported as the id the CLI resolved it to (2.1.328's
	// set_model answer names it): claude-opus-<version>.
	for _, sw := range []struct{ model, want string }{
		{"opus", "claude-opus-*/low"},
		{"sonnet/high", "claude-sonnet-*/high"},
		{"opus", "claude-opus-*/high"},
		{"claude-haiku-4-5/high", "claude-haiku-4-5/high"},
	} {
		ok, err := a.b.SetModel(context.Background(), sw.model)
		if !ok || err != nil {
			t.Fatalf("SetModel(%s) = %v, %v", sw.model, ok, err)
		}
		if got := a.b.Info().Model; !matchModel(sw.want, got) {
			t.Errorf("after SetModel(%s), Info().Model = %q, want %q", sw.model, got, sw.want)
		}
	}
	if err := a.b.Send(1, "which model?"); err != nil {
		t.Fatal(err)
	}
	if r := a.sink.waitResult(t, 1, turnTimeout); r.StopReason != apitype.StopEndTurn {
		t.Fatalf("stopReason %q", r.StopReason)
	}
	var model string
	for _, rq := range a.api.Requests() {
		if rq.Stream && rq.LastUserText == "which model?" {
			model = rq.Model
		}
	}
	if model != "claude-haiku-4-5" {
		t.Errorf("the API saw model %q; requests %+v", model, a.api.Requests())
	}
	if _, err := a.b.SetModel(context.Background(), "sonnet/turbo"); err == nil {
		t.Error("SetModel accepted a bad effort")
	}
}

func TestBackendFailingTurn(t *testing.T) {
	a := startAgent(t, backend.Options{})
	if err := a.b.Send(1, "please fail"); err != nil {
		t.Fatal(err)
	}
	r := a.sink.waitResult(t, 1, turnTimeout)
	if r.StopReason != apitype.StopError || r.Error == "" {
		t.Fatalf("result %+v:\n%s", r, dump(a.sink.turn(1)))
	}
	var errEv event.ErrorData
	for _, ev := range a.sink.turn(1) {
		if ev.Kind == event.Error {
			_ = json.Unmarshal(ev.Data, &errEv)
		}
	}
	if errEv.Message != r.Error {
		t.Errorf("error event %+v, result error %q", errEv, r.Error)
	}
	// The agent lives on.
	if err := a.b.Send(2, "hello"); err != nil {
		t.Fatal(err)
	}
	if r := a.sink.waitResult(t, 2, turnTimeout); r.StopReason != apitype.StopEndTurn {
		t.Errorf("turn after a failure: %q", r.StopReason)
	}
}

func TestBackendCloseLeavesNoProcess(t *testing.T) {
	a := startAgent(t, backend.Options{})
	id := a.b.Process()
	if id.PID == 0 || !id.Alive() {
		t.Fatalf("process %+v not alive", id)
	}
	if err := a.b.Send(1, "please be slow"); err != nil {
		t.Fatal(err)
	}
	a.sink.waitFor(t, "a streamed chunk", turnTimeout, func(ev event.Event) bool {
		return ev.Kind == event.AssistantText && ev.Turn == 1
	})
	start := time.Now()
	if err := a.b.Close(); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > StopGrace+2*time.Second {
		t.Errorf("Close took %v", d)
	}
	select {
	case <-a.sink.exited:
	default:
		t.Fatal("Close returned before Exited")
	}
	if a.sink.err != nil {
		t.Errorf("Exited(%v) after Close, want nil", a.sink.err)
	}
	if id.Alive() {
		t.Errorf("process %d still alive", id.PID)
	}
	if err := syscall.Kill(-id.PID, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("process group %d still there: %v", id.PID, err)
	}
	evs := a.sink.turn(1)
	if last := evs[len(evs)-1]; last.Kind != event.Result || apitype.StopReason(gjson.GetBytes(last.Data, "stopReason").String()) != apitype.StopCancelled {
		t.Errorf("turn in flight at Close ended with %s %s", last.Kind, last.Data)
	}
	if err := a.b.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if err := a.b.Send(2, "too late"); err == nil {
		t.Error("Send after Close succeeded")
	}
}

func TestBackendProcessDies(t *testing.T) {
	a := startAgent(t, backend.Options{})
	if err := a.b.Send(1, "please be slow"); err != nil {
		t.Fatal(err)
	}
	if err := a.b.Send(2, "queued"); err != nil {
		t.Fatal(err)
	}
	a.sink.waitFor(t, "a streamed chunk", turnTimeout, func(ev event.Event) bool {
		return ev.Kind == event.AssistantText && ev.Turn == 1
	})
	id := a.b.Process()
	if err := syscall.Kill(-id.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	select {
	case <-a.sink.exited:
	case <-time.After(10 * time.Second):
		t.Fatal("no Exited after the process was killed")
	}
	if a.sink.err == nil || !strings.HasPrefix(a.sink.err.Error(), "claude was killed by signal 9 (killed)") {
		t.Errorf("Exited(%v)", a.sink.err)
	}
	var errEv event.Event
	for _, ev := range a.sink.events() {
		if ev.Kind == event.Error {
			errEv = ev
		}
	}
	if gjson.GetBytes(errEv.Data, "data.exitCode").Int() != -1 || !strings.HasPrefix(gjson.GetBytes(errEv.Data, "message").String(), "claude was killed") {
		t.Errorf("error event %s", errEv.Data)
	}
	for _, turn := range []int{1, 2} {
		if r := a.sink.waitResult(t, turn, time.Second); r.StopReason != apitype.StopError {
			t.Errorf("turn %d ended %q", turn, r.StopReason)
		}
	}
	if ok, _ := a.b.Interrupt(context.Background()); ok {
		t.Error("interrupt of a dead agent")
	}
}

// fakeCLI writes a shell script standing in for claude.
func fakeCLI(t *testing.T, script string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "claude")
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"+script), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestStartFailsWhenTheCLIExits(t *testing.T) {
	bin := fakeCLI(t, "echo 'boom: no config' >&2\nexit 3\n")
	sink := newSink(t)
	cache := t.TempDir()
	b, err := New(backendtest.Resolved(t, backend.Options{OpenArgs: verbs.OpenArgs{ID: "x1", Cwd: t.TempDir()}, CacheDir: cache, Env: []string{"KAIMON_CLAUDE_BIN=" + bin}}), sink)
	if err != nil {
		t.Fatal(err)
	}
	err = b.Start(context.Background())
	if err == nil || !strings.Contains(err.Error(), "exit code 3") || !strings.Contains(err.Error(), "boom: no config") {
		t.Fatalf("Start = %v", err)
	}
	if len(sink.events()) != 0 || sink.exits != 0 {
		t.Errorf("a failed Start reported %d events, %d exits", len(sink.events()), sink.exits)
	}
	if log, _ := os.ReadFile(config.Paths{CacheDir: cache}.Agent("x1").Log); !strings.Contains(string(log), "boom") {
		t.Errorf("stderr log %q", log)
	}
	b.Close()
}

func TestStartTimesOut(t *testing.T) {
	// A CLI that never answers initialize: Start gives up with ctx and
	// leaves no process.
	bin := fakeCLI(t, "exec sleep 60\n")
	b, err := New(backendtest.Resolved(t, backend.Options{OpenArgs: verbs.OpenArgs{ID: "x2", Cwd: t.TempDir()}, CacheDir: t.TempDir(), Env: []string{"KAIMON_CLAUDE_BIN=" + bin}}), newSink(t))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	err = b.Start(ctx)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Start = %v", err)
	}
	id := b.Process()
	if id.Alive() || syscall.Kill(-id.PID, 0) == nil {
		t.Errorf("process %d left behind", id.PID)
	}
}

func TestMissingBinary(t *testing.T) {
	_, err := New(backendtest.Resolved(t, backend.Options{OpenArgs: verbs.OpenArgs{Cwd: t.TempDir()}, Env: []string{"KAIMON_CLAUDE_BIN=/nonexistent/claude"}}), newSink(t))
	if !errors.Is(err, backend.ErrNotFound) || !strings.Contains(err.Error(), "KAIMON_CLAUDE_BIN") {
		t.Errorf("New = %v", err)
	}
	t.Setenv("PATH", t.TempDir())
	_, err = New(backendtest.Resolved(t, backend.Options{OpenArgs: verbs.OpenArgs{Cwd: t.TempDir()}, Env: []string{"HOME=/x"}}), newSink(t))
	if !errors.Is(err, backend.ErrNotFound) || !strings.Contains(err.Error(), "@anthropic-ai/claude-code") {
		t.Errorf("New = %v", err)
	}
	// Bad options fail before the binary is looked for.
	if _, err := New(backendtest.Resolved(t, backend.Options{OpenArgs: verbs.OpenArgs{Model: "sonnet/turbo"}}), newSink(t)); err == nil || errors.Is(err, backend.ErrNotFound) {
		t.Errorf("New with a bad effort = %v", err)
	}
}

func TestTranscriptPath(t *testing.T) {
	for _, tc := range []struct {
		env       []string
		cwd, want string
	}{
		{[]string{"HOME=/home/u"}, "/home/u/my.proj_x", "/home/u/.claude/projects/-home-u-my-proj-x/s1.jsonl"},
		{[]string{"HOME=/home/u", "CLAUDE_CONFIG_DIR=/cfg"}, "/work/a.b/c d/\u00e9\U0001F600", "/cfg/projects/-work-a-b-c-d----/s1.jsonl"},
	} {
		if got := TranscriptPath(tc.env, tc.cwd, "s1"); got != tc.want {
			t.Errorf("TranscriptPath(%v, %q) = %q, want %q", tc.env, tc.cwd, got, tc.want)
		}
	}
	// A long path: the CLI cuts the name and adds a hash; found by glob.
	home := t.TempDir()
	cwd := "/" + strings.Repeat("abcdefghij", 25)
	if got := TranscriptPath([]string{"HOME=" + home}, cwd, "s2"); got != "" {
		t.Errorf("long path before the CLI made it: %q", got)
	}
	dir := filepath.Join(home, ".claude", "projects", "-"+strings.Repeat("abcdefghij", 20)[:199]+"-osl2qs")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "s2.jsonl"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if got := TranscriptPath([]string{"HOME=" + home}, cwd, "s2"); got != filepath.Join(dir, "s2.jsonl") {
		t.Errorf("long path: %q", got)
	}
}

func TestAgentEnv(t *testing.T) {
	got := agentEnv([]string{"A=1", "KAIMON_AGENT_SESSION=old"}, "new")
	if strings.Join(got, " ") != "A=1 KAIMON_AGENT_SESSION=new" {
		t.Errorf("agentEnv = %q", got)
	}
}

// standinInit is a fake CLI's answer to the initialize request.
const standinInit = `read -r line
echo '{"type":"control_response","response":{"subtype":"success","request_id":"init-1","response":{}}}'
`

// startStandin starts a backend on a fake CLI that answers initialize and
// then runs script, and sends it turn 1; the backend is closed at the end
// of the test.
func startStandin(t *testing.T, id, script string) (*Backend, *recSink) {
	t.Helper()
	bin := fakeCLI(t, standinInit+script)
	sink := newSink(t)
	b, err := New(backendtest.Resolved(t, backend.Options{OpenArgs: verbs.OpenArgs{ID: id, Cwd: t.TempDir()}, CacheDir: t.TempDir(), Env: []string{"KAIMON_CLAUDE_BIN=" + bin}}), sink)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	if err := b.Send(1, "hello"); err != nil {
		t.Fatal(err)
	}
	return b, sink
}

// A CLI that closes its stdout on the first turn and lives on, with a
// child of its own: its whole group is stopped, the turn fails and the
// exit report says why.
func TestCLIClosesStdout(t *testing.T) {
	b, sink := startStandin(t, "x3", "read -r line\nexec >&-\nsleep 600 &\nexec sleep 600\n")
	select {
	case <-sink.exited:
	case <-time.After(30 * time.Second):
		t.Fatal("no Exited after the CLI closed its stdout")
	}
	if sink.err == nil || !strings.HasPrefix(sink.err.Error(), "claude closed its stdout but kept running, so kaimon stopped it") {
		t.Fatalf("Exited(%v)", sink.err)
	}
	if r := sink.waitResult(t, 1, time.Second); r.StopReason != apitype.StopError {
		t.Errorf("turn 1 ended %q", r.StopReason)
	}
	// The grandchild, killed too, is reaped by init in its own time.
	id := b.Process()
	for deadline := time.Now().Add(10 * time.Second); syscall.Kill(-id.PID, 0) == nil; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("process group %d left behind", id.PID)
		}
	}
}

// A CLI that never acknowledges an interrupt makes Interrupt an error.
func TestInterruptNotAcknowledged(t *testing.T) {
	b, _ := startStandin(t, "x4", "while read -r line; do :; done\n")
	ok, err := b.Interrupt(context.Background())
	if ok || err == nil || !strings.Contains(err.Error(), "did not acknowledge the interrupt") {
		t.Fatalf("Interrupt = %v, %v", ok, err)
	}
}

// A stdout line over MaxLine is read past, not buffered: an error event
// names its size and the turn goes on to its result.
func TestOverlongLineSkipped(t *testing.T) {
	old := MaxLine
	MaxLine = 1 << 20
	t.Cleanup(func() { MaxLine = old })
	const size = 3<<20 + 1 // with its newline
	_, sink := startStandin(t, "x5", `read -r line
head -c 3145728 /dev/zero | tr '\0' a
echo
echo '{"type":"result","subtype":"success","is_error":false,"stop_reason":"end_turn"}'
while read -r line; do :; done
`)
	if r := sink.waitResult(t, 1, 30*time.Second); r.StopReason != apitype.StopEndTurn {
		t.Fatalf("turn 1 ended %q:\n%s", r.StopReason, dump(sink.turn(1)))
	}
	var found bool
	for _, ev := range sink.turn(1) {
		var e event.ErrorData
		if ev.Kind == event.Error && json.Unmarshal(ev.Data, &e) == nil && strings.Contains(e.Message, fmt.Sprintf("line of %d bytes", size)) {
			found = true
		}
	}
	if !found {
		t.Fatalf("no error event naming the skipped line's size:\n%s", dump(sink.turn(1)))
	}
}

// matchModel matches a model against a pattern whose one * stands for a
// version without a slash ("claude-opus-*/low").
func matchModel(pattern, model string) bool {
	pre, post, wild := strings.Cut(pattern, "*")
	if !wild {
		return model == pattern
	}
	mid, ok := strings.CutPrefix(model, pre)
	if !ok {
		return false
	}
	mid, ok = strings.CutSuffix(mid, post)
	return ok && mid != "" && !strings.Contains(mid, "/")
}
