package session

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/kaimon/kaimon/internal/apitype"
	"github.com/kaimon/kaimon/internal/backend"
	"github.com/kaimon/kaimon/internal/config"
	"github.com/kaimon/kaimon/internal/event"
	"github.com/kaimon/kaimon/internal/eventlog"
	"github.com/kaimon/kaimon/internal/verbs"
)

// scripted is a test double of a backend: it answers each turn with the
// events the test scripts, so the manager's own rules (FSM, numbering,
// usage, retention, waiting) are tested without a vendor. The real claude
// backend is tested against the real CLI in its own package and in e2e.
type scripted struct {
	sink   backend.Sink
	mu     sync.Mutex
	hold   bool // do not answer turns until released
	held   []int
	closed bool
	// startErr is what Start returns.
	startErr error
}

func (s *scripted) Start(ctx context.Context) error { return s.startErr }

func (s *scripted) Send(turn int, text string) error {
	s.sink.Emit(event.NewText(event.UserText, turn, false, text))
	s.sink.Emit(event.New(event.TurnStarted, turn, struct{}{}))
	s.mu.Lock()
	if s.hold {
		s.held = append(s.held, turn)
		s.mu.Unlock()
		s.sink.Emit(event.NewText(event.AssistantText, turn, true, "part"))
		return nil
	}
	s.mu.Unlock()
	s.answer(turn, text)
	return nil
}

func (s *scripted) answer(turn int, text string) {
	if strings.HasPrefix(text, "fail") {
		s.sink.Emit(event.New(event.Result, turn, event.ResultData{StopReason: apitype.StopError, Error: "scripted failure"}))
		return
	}
	if strings.HasPrefix(text, "cancel") { // as an interrupted turn ends
		s.sink.Emit(event.New(event.Result, turn, event.ResultData{StopReason: apitype.StopCancelled}))
		return
	}
	s.sink.Emit(event.NewText(event.AssistantText, turn, true, "re: "))
	s.sink.Emit(event.NewText(event.AssistantText, turn, false, "re: "+text))
	s.sink.Emit(event.New(event.Result, turn, event.ResultData{StopReason: apitype.StopEndTurn,
		Usage: event.UsageFigures{InputTokens: 100, OutputTokens: 20, CacheReadTokens: 10}}))
}

func (s *scripted) release() {
	s.mu.Lock()
	held := s.held
	s.held, s.hold = nil, false
	s.mu.Unlock()
	for _, n := range held {
		s.answer(n, "released")
	}
}

func (s *scripted) Interrupt(ctx context.Context) (bool, error) { return false, nil }
func (s *scripted) SetModel(ctx context.Context, m string) (bool, error) {
	return false, errors.New("refused")
}
func (s *scripted) Close() error {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.sink.Exited(nil)
	return nil
}
func (s *scripted) Info() backend.Info { return backend.Info{SessionID: "sess", QueuesPrompts: true} }

type rig struct {
	m     *Manager
	mu    sync.Mutex
	last  *scripted
	paths config.Paths
}

func newRig(t testing.TB, deadKept int) *rig {
	t.Helper()
	dir := t.TempDir()
	r := &rig{paths: config.Paths{CacheDir: dir + "/cache", SockDir: dir + "/sock", ConfigFile: dir + "/c.json", WorktreeDir: dir + "/worktrees"}}
	cfg := config.Defaults()
	cfg.DeadKept = deadKept
	m, err := New(r.paths, cfg, nil, func(o backend.Options, sink backend.Sink) (backend.Backend, error) {
		// Every backend refuses options without the policy resolved at
		// open; so does this one, so that every open here checks it.
		if err := o.Check(); err != nil {
			t.Errorf("the manager made a backend: %v", err)
			return nil, err
		}
		if o.Model == "missing" {
			return nil, verbs.Errorf(verbs.CodeUnavailable, "no such program")
		}
		if o.Model == "nobin" {
			return nil, fmt.Errorf("%w: nobin is not on PATH", backend.ErrNotFound)
		}
		if o.Model == "fulldisk" {
			return nil, fmt.Errorf("writing its config: %w", &os.PathError{Op: "write", Path: "/cache/x.json", Err: syscall.ENOSPC})
		}
		s := &scripted{sink: sink}
		if o.Model == "fulldisk-at-start" {
			s.startErr = fmt.Errorf("writing the agent's MCP config: %w", &os.PathError{Op: "write", Path: "/cache/x-mcp.json", Err: syscall.ENOSPC})
		}
		r.mu.Lock()
		r.last = s
		r.mu.Unlock()
		return s, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	r.m = m
	t.Cleanup(m.Shutdown)
	return r
}

var bg = context.Background()

// decoded gives args the table's defaults, as verbs.Decode does for every
// caller of the daemon.
func decoded[A any](a *A) *A {
	for _, v := range verbs.All {
		if _, ok := v.NewArgs().(*A); ok {
			v.ApplyDefaults(a)
		}
	}
	return a
}

func (r *rig) open(t testing.TB, id string) string {
	t.Helper()
	res, err := r.m.Open(bg, &verbs.OpenArgs{Cwd: t.TempDir(), ID: id})
	if err != nil {
		t.Fatal(err)
	}
	return res.AgentID
}

func TestFSMAndUsage(t *testing.T) {
	r := newRig(t, 10)
	id := r.open(t, "")
	res, err := r.m.Run(bg, decoded(&verbs.RunArgs{AgentID: id, Text: "one"}))
	if err != nil || res.Text != "re: one" {
		t.Fatalf("run = %+v %v", res, err)
	}
	r.m.Run(bg, decoded(&verbs.RunArgs{AgentID: id, Text: "two"}))
	st, _ := r.m.Status(bg, &verbs.StatusArgs{AgentID: id})
	if st.Status != apitype.Idle || st.Turn != 2 || st.Usage.InputTokens != 200 || st.Usage.CacheReadTokens != 20 || st.SessionID != "sess" {
		t.Fatalf("status = %+v", st)
	}
	// The log holds the status walk in FSM order, and no deltas.
	var statuses []string
	err = eventlog.Scan(st.EventLog, 0, func(rec *event.Record) bool {
		if rec.Kind == event.Status {
			statuses = append(statuses, string(rec.Data))
		}
		if !event.Authoritative(rec.Kind, rec.Data) {
			t.Errorf("delta in log: %s", rec.Data)
		}
		return true
	})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"status":"starting"} {"status":"idle"} {"status":"working"} {"status":"idle"} {"status":"working"} {"status":"idle"}`
	if got := strings.Join(statuses, " "); got != want {
		t.Errorf("status walk:\n got %s\nwant %s", got, want)
	}
	// A failed turn: turn_failed, and the agent is idle again.
	_, err = r.m.Run(bg, decoded(&verbs.RunArgs{AgentID: id, Text: "fail now"}))
	var ve *verbs.Error
	if !errors.As(err, &ve) || ve.Code != verbs.CodeTurnFailed || !strings.Contains(ve.Message, "scripted failure") {
		t.Fatalf("failed run err = %v", err)
	}
	// A cancelled turn: turn_failed still (it did not complete), but said
	// as the cancel it is, not as a failure.
	_, err = r.m.Run(bg, decoded(&verbs.RunArgs{AgentID: id, Text: "cancel it"}))
	if !errors.As(err, &ve) || ve.Code != verbs.CodeTurnFailed || ve.Message != "agent "+id+" turn 4 was cancelled (interrupted)" {
		t.Fatalf("cancelled run err = %v", err)
	}
	// A refused model switch is false, not an error.
	sm, err := r.m.SetModel(bg, &verbs.SetModelArgs{AgentID: id, Model: "opus"})
	if err != nil || sm.Switched {
		t.Fatalf("set_model = %+v %v", sm, err)
	}
}

func TestTransitionTable(t *testing.T) {
	for _, c := range []struct {
		from, to apitype.AgentState
		ok       bool
	}{
		{"", apitype.Starting, true}, {apitype.Starting, apitype.Idle, true}, {apitype.Idle, apitype.Working, true}, {apitype.Working, apitype.Idle, true},
		{apitype.Working, apitype.Dead, true}, {apitype.Dead, apitype.Starting, true}, {apitype.Idle, apitype.Starting, false}, {apitype.Dead, apitype.Idle, false},
		{apitype.Starting, apitype.Working, false}, {apitype.Dead, apitype.Working, false},
	} {
		if allowed(c.from, c.to) != c.ok {
			t.Errorf("%q → %q allowed = %v", c.from, c.to, !c.ok)
		}
	}
}

// The FSM moves an agent through apitype.AgentStates and nothing else:
// every state has its row, every target is a state, and each state can be
// reached from an agent not yet started.
func TestTransitionTableCoversAgentStates(t *testing.T) {
	for from, tos := range transitions {
		if from != "" && !from.Valid() {
			t.Errorf("the FSM has a row for %q, which is not one of apitype.AgentStates %v", from, apitype.AgentStates)
		}
		for _, to := range tos {
			if !to.Valid() {
				t.Errorf("the FSM moves %q to %q, which is not one of apitype.AgentStates %v", from, to, apitype.AgentStates)
			}
		}
	}
	reached := map[apitype.AgentState]bool{}
	var walk func(apitype.AgentState)
	walk = func(s apitype.AgentState) {
		for _, to := range transitions[s] {
			if !reached[to] {
				reached[to] = true
				walk(to)
			}
		}
	}
	walk("")
	for _, s := range apitype.AgentStates {
		if _, ok := transitions[s]; !ok {
			t.Errorf("the FSM has no row for state %q", s)
		}
		if !reached[s] {
			t.Errorf("the FSM never reaches state %q", s)
		}
	}
}

func TestRunTimeoutReturnsPartialAndAgentLivesOn(t *testing.T) {
	r := newRig(t, 10)
	id := r.open(t, "")
	r.last.hold = true
	_, err := r.m.Run(bg, decoded(&verbs.RunArgs{AgentID: id, Text: "slow", Timeout: 0.05}))
	var ve *verbs.Error
	if !errors.As(err, &ve) || ve.Code != verbs.CodeTimeout || ve.Text != "part" {
		t.Fatalf("timeout err = %#v", err)
	}
	out, _ := r.m.Output(bg, decoded(&verbs.OutputArgs{AgentID: id}))
	if out.Done || out.Text != "part" || out.Status != apitype.Working {
		t.Fatalf("output while working = %+v", out)
	}
	// A second send while the first is in flight is numbered, and the
	// agent stays working until both results are in.
	s, err := r.m.Send(bg, &verbs.SendArgs{AgentID: id, Text: "queued"})
	if err != nil || s.Turn != 2 {
		t.Fatalf("send = %+v %v", s, err)
	}
	r.last.release()
	// Both results published, on disk included: agent_status itself
	// does not wait for a result's fsync (flushToSync).
	ag, _ := r.m.get(id)
	ag.flush()
	st, _ := r.m.Status(bg, &verbs.StatusArgs{AgentID: id})
	if st.Status != apitype.Idle {
		t.Fatalf("after both results: %s", st.Status)
	}
}

func TestDeadRetentionAndReopen(t *testing.T) {
	r := newRig(t, 2)
	var ids []string
	for i := 0; i < 3; i++ {
		id := r.open(t, "")
		r.m.Run(bg, decoded(&verbs.RunArgs{AgentID: id, Text: "hi"}))
		if c, _ := r.m.Close(bg, &verbs.CloseArgs{AgentID: id}); !c.Closed {
			t.Fatal("close returned false")
		}
		ids = append(ids, id)
	}
	l, _ := r.m.List(bg, &verbs.ListArgs{})
	if len(l.Agents) != 2 || l.Agents[0].AgentID != ids[1] || l.Agents[1].AgentID != ids[2] {
		t.Fatalf("list keeps %+v, want the newest 2 dead", l.Agents)
	}
	// The dropped one still reads from its log.
	out, err := r.m.Output(bg, decoded(&verbs.OutputArgs{AgentID: ids[0]}))
	if err != nil || out.Text != "re: hi" || out.Status != apitype.Dead || !out.Done {
		t.Fatalf("output of a dropped agent = %+v %v", out, err)
	}
	// Reopen a dead id: same slot, seq and turn continue from the log.
	st, _ := r.m.Status(bg, &verbs.StatusArgs{AgentID: ids[2]})
	before, _ := eventlog.ReadAll(st.EventLog, 0)
	r.open(t, ids[2])
	s, err := r.m.Send(bg, &verbs.SendArgs{AgentID: ids[2], Text: "again"})
	if err != nil || s.Turn != 2 {
		t.Fatalf("send after reopen = %+v %v", s, err)
	}
	after, _ := eventlog.ReadAll(st.EventLog, before[len(before)-1].Seq)
	if len(after) == 0 || after[0].Seq != before[len(before)-1].Seq+1 {
		t.Fatalf("seq after reopen starts at %v, want %d", after, before[len(before)-1].Seq+1)
	}
	// A live id cannot be opened twice; a dead agent refuses turns.
	if _, err := r.m.Open(bg, &verbs.OpenArgs{Cwd: t.TempDir(), ID: ids[2]}); err == nil || !strings.Contains(err.Error(), "already open") {
		t.Fatalf("double open err = %v", err)
	}
	if _, err := r.m.Send(bg, &verbs.SendArgs{AgentID: ids[1], Text: "x"}); err == nil || !strings.Contains(err.Error(), "is dead") ||
		!strings.Contains(err.Error(), "kaimon open --id "+ids[1]+" --resume") {
		t.Fatalf("send to dead err = %v", err)
	}
}

func TestOpenErrors(t *testing.T) {
	r := newRig(t, 10)
	cases := []struct {
		a    verbs.OpenArgs
		code string
		want string
	}{
		{verbs.OpenArgs{Cwd: "/nonexistent/dir"}, verbs.CodeBadArgument, "does not exist"},
		{verbs.OpenArgs{Cwd: t.TempDir(), Permission: "yolo"}, verbs.CodeBadArgument, "unknown permission preset"},
		{verbs.OpenArgs{Cwd: t.TempDir(), ID: "a/b"}, verbs.CodeBadArgument, "must be 1-64"},
		// Its stderr log would be the daemon's own agentd.log.
		{verbs.OpenArgs{Cwd: t.TempDir(), ID: "agentd"}, verbs.CodeBadArgument, `id "agentd" is reserved`},
		{verbs.OpenArgs{Cwd: t.TempDir(), Model: "missing"}, verbs.CodeUnavailable, "no such program"},
		// A backend's own refusal (its program missing, say) is a bad
		// argument, refused before anything is written.
		{verbs.OpenArgs{Cwd: t.TempDir(), Model: "nobin", ID: "named"}, verbs.CodeBadArgument, "nobin is not on PATH"},
		// Unless the disk is why: a full one is not the caller's to fix
		// by asking otherwise.
		{verbs.OpenArgs{Cwd: t.TempDir(), Model: "fulldisk"}, verbs.CodeStorage, "agent_open: the disk is full: writing its config: write /cache/x.json: no space left on device: free some space"},
		// The daemon's directory is not the caller's.
		{verbs.OpenArgs{Cwd: "project"}, verbs.CodeBadArgument, `cwd "project" is a relative path`},
		{verbs.OpenArgs{Cwd: t.TempDir(), MCPConfig: "mcp.json"}, verbs.CodeBadArgument, `mcp_config "mcp.json" is a relative path`},
		// Other hosts are the clients' to reach (kaimon --host, kaimon
		// mcp), not a daemon's.
		{verbs.OpenArgs{Cwd: t.TempDir(), Host: "h1"}, verbs.CodeBadArgument, `host "h1": this daemon opens agents on its own machine only`},
		{verbs.OpenArgs{Cwd: t.TempDir(), Host: verbs.HostAny}, verbs.CodeBadArgument, "on its own machine only"},
	}
	for _, c := range cases {
		_, err := r.m.Open(bg, &c.a)
		var ve *verbs.Error
		if !errors.As(err, &ve) || ve.Code != c.code || !strings.Contains(ve.Message, c.want) {
			t.Errorf("open %+v: err = %v, want %s containing %q", c.a, err, c.code, c.want)
		}
	}
	// A refused open leaves nothing: no slot, no record, no log.
	l, _ := r.m.List(bg, &verbs.ListArgs{})
	if len(l.Agents) != 0 {
		t.Fatalf("after refused opens: %+v", l.Agents)
	}
	if files := cacheFiles(t, r.paths.CacheDir); len(files) != 0 {
		t.Fatalf("after refused opens the cache dir holds %v", files)
	}
}

// A backend that cannot write its files when it starts fails the open
// with storage: neither the agent program (unavailable) nor the caller
// is why.
func TestOpenStartOnFullDisk(t *testing.T) {
	r := newRig(t, 10)
	_, err := r.m.Open(bg, decoded(&verbs.OpenArgs{Cwd: t.TempDir(), Model: "fulldisk-at-start"}))
	var ve *verbs.Error
	if !errors.As(err, &ve) || ve.Code != verbs.CodeStorage || !strings.HasPrefix(ve.Message, "agent_open: the disk is full: writing the agent's MCP config") {
		t.Fatalf("open whose start meets a full disk: %v, want storage saying the disk is full", err)
	}
}

// The reserved ids are exactly those whose files would be the daemon's.
func TestReservedIDs(t *testing.T) {
	if got := reservedIDs(config.Paths{CacheDir: "/c"}); strings.Join(got, " ") != "agentd" {
		t.Errorf("reserved ids %v, want [agentd]", got)
	}
}

// The id scan knows every kind of agent file: an id with only a local
// agent's conversation, or only an opencode config home, is an id; a file
// outside the cache dir, or of no agent, is not.
func TestAgentIDsOf(t *testing.T) {
	got := agentIDsOf("/c", []string{"/c/h.history.jsonl", "/c/o-opencode", "/c/e.events.jsonl", "/d/x.log", "/c/notes.txt", "/c/-bad.log"})
	if strings.Join(got, " ") != "e h o" {
		t.Errorf("ids %v, want [e h o]", got)
	}
}

// Waiters wake on events, not on a poll: a run returns as soon as the
// result is published.
func TestRunWakesOnResult(t *testing.T) {
	r := newRig(t, 10)
	id := r.open(t, "")
	r.last.hold = true
	done := make(chan error, 1)
	go func() {
		_, err := r.m.Run(bg, decoded(&verbs.RunArgs{AgentID: id, Text: "x", Timeout: 30}))
		done <- err
	}()
	time.Sleep(20 * time.Millisecond)
	r.last.release()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("run did not return after the result")
	}
}

// The agent's book keeps the last turn: agent_output reads the earlier
// ones from the log, each the same as when it was kept.
func TestOutputOfEarlierTurnsFromTheLog(t *testing.T) {
	r := newRig(t, 10)
	id := r.open(t, "")
	for i := 1; i <= 5; i++ {
		if _, err := r.m.Run(bg, decoded(&verbs.RunArgs{AgentID: id, Text: fmt.Sprint("t", i)})); err != nil {
			t.Fatal(err)
		}
	}
	ag, err := r.m.get(id)
	if err != nil {
		t.Fatal(err)
	}
	ag.mu.Lock()
	kept := len(ag.book.turns)
	ag.mu.Unlock()
	if kept != 1 {
		t.Errorf("the book keeps %d turns, want 1", kept)
	}
	out := func(turn int, which string) *verbs.OutputResult {
		t.Helper()
		res, err := r.m.Output(bg, decoded(&verbs.OutputArgs{AgentID: id, Turn: turn, Which: which}))
		if err != nil {
			t.Fatalf("output turn %d %s: %v", turn, which, err)
		}
		return res
	}
	if o := out(2, "last_message"); o.Text != "re: t2" || !o.Done || o.Turn != 2 || o.Usage.InputTokens != 100 || o.Status != apitype.Idle || o.LogErrors != nil {
		t.Errorf("turn 2 = %+v", o)
	}
	if o := out(3, "full_turn"); o.Text != "re: t3" || !o.Done {
		t.Errorf("turn 3 full = %+v", o)
	}
	if o := out(0, "last_message"); o.Text != "re: t5" || o.Turn != 5 {
		t.Errorf("latest = %+v", o)
	}
	var want []string
	for i := 1; i <= 5; i++ {
		want = append(want, fmt.Sprintf("— turn %d —\nre: t%d", i, i))
	}
	if o := out(0, "all"); o.Text != strings.Join(want, "\n\n") || o.Turn != 5 || !o.Done {
		t.Errorf("all = %+v", o)
	}
	if _, err := r.m.Output(bg, decoded(&verbs.OutputArgs{AgentID: id, Turn: 9})); err == nil {
		t.Error("turn 9 found")
	}

	// agent_run of a turn that another ended after: whether the book
	// still has it when Run looks or it is read from the log, the answer
	// is the same.
	for i := 0; i < 5; i++ {
		r.mu.Lock()
		s := r.last
		r.mu.Unlock()
		s.mu.Lock()
		s.hold = true
		s.mu.Unlock()
		ran := make(chan error, 1)
		go func() {
			res, err := r.m.Run(bg, decoded(&verbs.RunArgs{AgentID: id, Text: "held"}))
			if err == nil && res.Text != "re: released" {
				err = fmt.Errorf("run = %q", res.Text)
			}
			ran <- err
		}()
		for {
			s.mu.Lock()
			n := len(s.held)
			s.mu.Unlock()
			if n == 1 {
				break
			}
			time.Sleep(time.Millisecond)
		}
		if _, err := r.m.Send(bg, &verbs.SendArgs{AgentID: id, Text: "next"}); err != nil {
			t.Fatal(err)
		}
		s.release()
		if err := <-ran; err != nil {
			t.Fatal(err)
		}
	}
}

// A slot a forget is at is not reopened meanwhile: a resume would start
// in the worktree the forget is removing.
func TestOpenRefusedWhileForgetting(t *testing.T) {
	r := newRig(t, 0)
	r.m.mu.Lock()
	r.m.forgetting = map[string]bool{"f1": true}
	r.m.mu.Unlock()
	if _, err := r.m.Open(bg, &verbs.OpenArgs{Cwd: t.TempDir(), ID: "f1"}); err == nil || !strings.Contains(err.Error(), "agent f1 is being forgotten") {
		t.Fatalf("open during a forget: %v", err)
	}
	r.m.mu.Lock()
	delete(r.m.forgetting, "f1")
	r.m.mu.Unlock()
	r.open(t, "f1")
}

// TestOutputTakesTheTurnUnderTheLock: what agent_output reads of a turn
// (done, usage) is taken while the agent's lock is held, not read later
// from the live record the turn's end goes on to change: CI's race
// detector saw Output read it as the result was booked. The record
// output hands back keeps what the turn was when output looked.
func TestOutputTakesTheTurnUnderTheLock(t *testing.T) {
	r := newRig(t, 10)
	id := r.open(t, "")
	r.last.mu.Lock()
	r.last.hold = true
	r.last.mu.Unlock()
	if _, err := r.m.Send(bg, &verbs.SendArgs{AgentID: id, Text: "held"}); err != nil {
		t.Fatal(err)
	}
	ag, err := r.m.get(id)
	if err != nil {
		t.Fatal(err)
	}
	ag.flush()
	_, rec, n, _, _, _ := ag.output(0, verbs.WhichLastMessage, false)
	if rec == nil || rec.done || n != 1 {
		t.Fatalf("turn in flight: %+v turn %d", rec, n)
	}
	r.last.release()
	if res, err := r.m.Run(bg, decoded(&verbs.RunArgs{AgentID: id, Text: "next"})); err != nil || res.Text != "re: next" {
		t.Fatalf("next turn: %+v %v", res, err)
	}
	if o, err := r.m.Output(bg, decoded(&verbs.OutputArgs{AgentID: id, Turn: 1})); err != nil || !o.Done {
		t.Fatalf("turn 1 after its end: %+v %v", o, err)
	}
	if rec.done || rec.usage != (event.UsageFigures{}) {
		t.Fatalf("the record output handed back changed after it: %+v", rec)
	}
}
