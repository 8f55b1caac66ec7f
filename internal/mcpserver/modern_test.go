package mcpserver

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/kaimon/kaimon/internal/event"
	"github.com/kaimon/kaimon/internal/verbs"
)

// stdioClient drives serveStdio in-process with raw JSON-RPC lines, and
// can look at its orchestrator's state.
type stdioClient struct {
	t    *testing.T
	in   *io.PipeWriter
	out  chan map[string]json.RawMessage
	or   *orchestrator
	done chan error
	// early holds the answers read while waiting for another's: mcp-go
	// answers from a pool of workers, in no set order.
	early map[string]map[string]json.RawMessage
}

func startStdio(t *testing.T, setup ...func(*orchestrator)) *stdioClient {
	t.Helper()
	return startStdioWith(t, &fakeSvc{}, setup...)
}

func startStdioWith(t *testing.T, svc verbs.Service, setup ...func(*orchestrator)) *stdioClient {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	c := &stdioClient{t: t, in: inW, out: make(chan map[string]json.RawMessage, 100), done: make(chan error, 1)}
	seen := make(chan *orchestrator, 1)
	o := Options{Follow: func(ctx context.Context, _ func(Envelope)) error { <-ctx.Done(); return nil }}
	go func() {
		c.done <- serveStdio(ctx, svc, o, inR, outW, io.Discard, func(or *orchestrator) {
			for _, f := range setup {
				f(or)
			}
			seen <- or
		})
		outW.Close()
	}()
	go func() {
		defer close(c.out)
		rd := bufio.NewReader(outR)
		for {
			line, err := rd.ReadBytes('\n')
			if err != nil {
				return
			}
			var m map[string]json.RawMessage
			if json.Unmarshal(line, &m) != nil {
				t.Errorf("not JSON-RPC: %q", line)
				continue
			}
			c.out <- m
		}
	}()
	c.or = <-seen
	t.Cleanup(func() {
		inW.Close()
		cancel()
		if err := <-c.done; err != nil {
			t.Errorf("serveStdio: %v", err)
		}
		for range c.out {
		}
	})
	return c
}

// meta is a 2026-07-28 request's _meta, at version, with caps (none: no
// clientCapabilities).
func meta(version string, caps map[string]any) map[string]any {
	m := map[string]any{"io.modelcontextprotocol/protocolVersion": version, "io.modelcontextprotocol/clientInfo": map[string]any{"name": "t", "version": "1"}}
	if caps != nil {
		m["io.modelcontextprotocol/clientCapabilities"] = caps
	}
	return m
}

var tasksCaps = map[string]any{"extensions": map[string]any{TasksExtension: map[string]any{}}}

func request(id any, method string, params map[string]any) string {
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
	return string(b) + "\n"
}

func cancelled(id any) string {
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "method": "notifications/cancelled", "params": map[string]any{"requestId": id}})
	return string(b) + "\n"
}

func (c *stdioClient) write(lines ...string) {
	c.t.Helper()
	if _, err := io.WriteString(c.in, strings.Join(lines, "")); err != nil {
		c.t.Fatal(err)
	}
}

// response is the answer to request id (its JSON), the notifications
// before it passed over and other answers kept for their own call.
func (c *stdioClient) response(id any) map[string]json.RawMessage {
	c.t.Helper()
	want, _ := json.Marshal(id)
	if m, ok := c.early[string(want)]; ok {
		delete(c.early, string(want))
		return m
	}
	deadline := time.After(30 * time.Second)
	for {
		select {
		case m, ok := <-c.out:
			if !ok {
				c.t.Fatalf("the server ended before answering %s", want)
			}
			if _, isNote := m["method"]; isNote || m["id"] == nil {
				continue
			}
			if string(m["id"]) == string(want) {
				return m
			}
			if c.early == nil {
				c.early = map[string]map[string]json.RawMessage{}
			}
			c.early[string(m["id"])] = m
		case <-deadline:
			c.t.Fatalf("no answer to %s", want)
		}
	}
}

func errorOf(t *testing.T, m map[string]json.RawMessage) (code int, msg string) {
	t.Helper()
	var e struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	}
	if m["error"] == nil || json.Unmarshal(m["error"], &e) != nil {
		t.Fatalf("not an error: %v", m)
	}
	return e.Code, e.Message
}

// records are the listen streams the orchestrator keeps.
func (c *stdioClient) records() string {
	c.or.mu.Lock()
	defer c.or.mu.Unlock()
	return fmt.Sprintf("listens %d, ended %d", len(c.or.listens), len(c.or.endedListens))
}

// A request the front serves (the tasks extension's) whose _meta mcp-go
// would refuse is refused as mcp-go refuses any other: the same error.
func TestFrontChecksProtocol(t *testing.T) {
	c := startStdio(t)
	n := 0
	for _, m := range []map[string]any{
		meta("2026-07-28", nil),       // no clientCapabilities
		meta("2099-01-01", tasksCaps), // a version not known
		meta("2099-01-01", nil),       // both
	} {
		n++
		c.write(request(n, "tools/list", map[string]any{"_meta": m}))
		want := string(c.response(n)["error"])
		if want == "" {
			t.Fatalf("mcp-go took tools/list with _meta %v", m)
		}
		for _, r := range []struct {
			method string
			params map[string]any
		}{
			{"tasks/get", map[string]any{"taskId": "x"}},
			{"tasks/update", map[string]any{"taskId": "x", "inputResponses": map[string]any{}}},
			{"tasks/cancel", map[string]any{"taskId": "x"}},
			{"tools/call", map[string]any{"name": runVerb, "arguments": map[string]any{"agent_id": "a", "text": "t"}}},
			{"subscriptions/listen", map[string]any{"notifications": map[string]any{"taskIds": []string{"x"}}}},
		} {
			n++
			p := map[string]any{"_meta": m}
			for k, v := range r.params {
				p[k] = v
			}
			c.write(request(n, r.method, p))
			if got := string(c.response(n)["error"]); got != want {
				t.Errorf("%s with _meta %v: error %s, want mcp-go's %s", r.method, m, got, want)
			}
		}
	}
	if r := c.records(); r != "listens 0, ended 0" {
		t.Errorf("refused listens left records: %s", r)
	}
	// 2025-11-25's task param at 2026-07-28: refused, saying what to do.
	n++
	c.write(request(n, "tools/call", map[string]any{"_meta": meta("2026-07-28", map[string]any{}), "name": "agent_list", "arguments": map[string]any{}, "task": map[string]any{}}))
	if code, msg := errorOf(t, c.response(n)); code != mcp.INVALID_PARAMS || !strings.Contains(msg, TasksExtension) {
		t.Errorf("tools/call with params.task: %d %s", code, msg)
	}
}

// A subscriptions/listen mcp-go refuses, or ends, leaves no record.
func TestListenRecords(t *testing.T) {
	c := startStdio(t)
	listen := func(id any, m map[string]any, n map[string]any) {
		c.write(request(id, "subscriptions/listen", map[string]any{"_meta": m, "notifications": n}))
	}
	listen(1, meta("2026-07-28", nil), map[string]any{"resourcesListChanged": true})
	if code, _ := errorOf(t, c.response(1)); code != mcp.INVALID_PARAMS {
		t.Errorf("listen without clientCapabilities: code %d", code)
	}
	listen(2, meta("2099-01-01", map[string]any{}), map[string]any{"resourcesListChanged": true})
	errorOf(t, c.response(2))
	listen(3, meta("2026-07-28", map[string]any{}), map[string]any{"resourceSubscriptions": []string{"kaimon://agent/nope"}})
	errorOf(t, c.response(3))
	if r := c.records(); r != "listens 0, ended 0" {
		t.Errorf("refused listens left records: %s", r)
	}
	// One taken, then cancelled: its result, and no record.
	listen(4, meta("2026-07-28", map[string]any{}), map[string]any{"resourcesListChanged": true})
	waitRecords(t, c, "listens 1, ended 0")
	c.write(cancelled(4))
	if c.response(4)["result"] == nil {
		t.Error("the cancelled listen had no result")
	}
	waitRecords(t, c, "listens 0, ended 0")
}

// waitRecords waits for the orchestrator's records to be want: an
// acknowledgement's or an end's record is made once it is on the wire.
func waitRecords(t *testing.T, c *stdioClient, want string) {
	t.Helper()
	for i := 0; c.records() != want; i++ {
		if i == 3000 {
			t.Fatalf("records: %s, want %s", c.records(), want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A taskIds stream cancelled right after it was asked for ends (its
// result), whether its acknowledgement went or not; an id used again is
// a stream of its own.
func TestTaskListenCancelledAtOnce(t *testing.T) {
	c := startStdio(t)
	m := meta("2026-07-28", tasksCaps)
	for i := 0; i < 20; i++ {
		// Its resource check asks the daemon (the fake): the cancellation
		// comes while it does.
		c.write(request(7, "subscriptions/listen", map[string]any{"_meta": m, "notifications": map[string]any{
			"taskIds": []string{"none"}, "resourceSubscriptions": []string{AgentsURI}}}), cancelled(7))
		if r := c.response(7); r["result"] == nil {
			t.Fatalf("round %d: the cancelled stream's answer: %v", i, r)
		}
		if r := c.records(); r != "listens 0, ended 0" {
			t.Fatalf("round %d: records %s after the stream's end", i, r)
		}
	}
}

// An ended task is kept taskKept after its end, and says so in ttlMs; a
// live one is kept however old.
func TestTasksPruned(t *testing.T) {
	or := newOrchestrator(context.Background(), &fakeSvc{}, Options{}, io.Discard)
	now := time.Now()
	old := now.Add(-3 * taskKept)
	for id, ended := range map[string]time.Time{"live": {}, "recent": now.Add(-taskKept / 2), "stale": now.Add(-taskKept - time.Minute)} {
		or.mtasks[id] = &mtask{id: id, status: mcp.TaskStatusCompleted, created: old, updated: old, ended: ended}
	}
	or.mtasks["live"].status = mcp.TaskStatusWorking
	or.mu.Lock()
	or.pruneTasks(now)
	var ids []string
	for id := range or.mtasks {
		ids = append(ids, id)
	}
	kept := strings.Join(sorted(ids), " ")
	live, recent := or.taskJSON(or.mtasks["live"]), or.taskJSON(or.mtasks["recent"])
	or.mu.Unlock()
	if kept != "live recent" {
		t.Errorf("kept %s", kept)
	}
	if live["ttlMs"] != nil || recent["ttlMs"] != or.mtasks["recent"].ended.Add(taskKept).Sub(old).Milliseconds() {
		t.Errorf("ttlMs: live %v, recent %v", live["ttlMs"], recent["ttlMs"])
	}
}

// A line longer than front reads whole goes to mcp-go as it is, and the
// session goes on; one as long, or shorter, is still front's to serve.
func TestFrontLongLine(t *testing.T) {
	const max = 4 << 10
	c := startStdio(t, func(or *orchestrator) { or.lineMax = max })
	m := meta("2026-07-28", tasksCaps)
	pad := strings.Repeat("x", 300<<10) // past the reader's buffer too
	c.write(request(1, "tools/list", map[string]any{"_meta": m, "pad": pad}))
	if r := c.response(1); r["result"] == nil {
		t.Fatalf("a long tools/list: %s", r["error"])
	}
	// A tasks/get as long goes to mcp-go too, whose answer is not front's.
	c.write(request(2, "tasks/get", map[string]any{"_meta": m, "taskId": "x", "pad": pad}))
	if _, msg := errorOf(t, c.response(2)); strings.Contains(msg, "kaimon mcp") {
		t.Errorf("front served a line longer than it reads: %s", msg)
	}
	// Just short enough: front's.
	short := request(3, "tasks/get", map[string]any{"_meta": m, "taskId": "x"})
	short = request(3, "tasks/get", map[string]any{"_meta": m, "taskId": "x", "pad": strings.Repeat("y", max-len(short)-len(`,"pad":""`))})
	if len(short) != max {
		t.Fatalf("the short line is %d bytes, not %d", len(short), max)
	}
	c.write(short, request(4, "tools/list", map[string]any{"_meta": m}))
	if _, msg := errorOf(t, c.response(3)); !strings.Contains(msg, "no task \"x\" in this kaimon mcp") {
		t.Errorf("a line of the longest front reads: %s", msg)
	}
	if r := c.response(4); r["result"] == nil {
		t.Fatalf("tools/list after: %s", r["error"])
	}
}

// turnSvc's turns run until the test ends; it records the interrupts.
type turnSvc struct {
	*fakeSvc
	release    chan struct{}
	interrupts chan string
}

func (s *turnSvc) Run(ctx context.Context, a *verbs.RunArgs) (*verbs.RunResult, error) {
	<-s.release
	return &verbs.RunResult{Text: "reply"}, nil
}

func (s *turnSvc) Interrupt(ctx context.Context, a *verbs.InterruptArgs) (*verbs.InterruptResult, error) {
	s.interrupts <- a.AgentID
	return &verbs.InterruptResult{}, nil
}

// tasks/cancel interrupts the agent's turn only when it is the task's:
// not before it began (queued behind another caller's), nor after it
// ended; the task's statusMessage says which.
func TestTaskCancelOwnTurn(t *testing.T) {
	svc := &turnSvc{fakeSvc: &fakeSvc{}, release: make(chan struct{}), interrupts: make(chan string, 10)}
	c := startStdioWith(t, svc)
	t.Cleanup(func() { close(svc.release) })
	m := meta("2026-07-28", tasksCaps)
	n := 0
	run := func(text string) string {
		n++
		c.write(request(n, "tools/call", map[string]any{"_meta": m, "name": runVerb, "arguments": map[string]any{"agent_id": "ab12", "text": text}}))
		var tk struct {
			TaskID string `json:"taskId"`
		}
		if r := c.response(n); json.Unmarshal(r["result"], &tk) != nil || tk.TaskID == "" {
			t.Fatalf("agent_run as a task: %s %s", r["result"], r["error"])
		}
		return tk.TaskID
	}
	cancel := func(id string) string {
		n++
		c.write(request(n, "tasks/cancel", map[string]any{"_meta": m, "taskId": id}))
		if r := c.response(n); r["error"] != nil {
			t.Fatalf("tasks/cancel: %s", r["error"])
		}
		n++
		c.write(request(n, "tasks/get", map[string]any{"_meta": m, "taskId": id}))
		var tk struct {
			Status, StatusMessage string
		}
		if r := c.response(n); json.Unmarshal(r["result"], &tk) != nil || tk.Status != "cancelled" {
			t.Fatalf("tasks/get of the cancelled task: %s %s", r["result"], r["error"])
		}
		return tk.StatusMessage
	}
	text := func(s string) []byte {
		b, _ := json.Marshal(event.TextData{Content: event.Text{Type: "text", Text: s}})
		return b
	}
	interrupted := func() bool {
		select {
		case <-svc.interrupts:
			return true
		default:
			return false
		}
	}

	queued := run("queued")
	if msg := cancel(queued); interrupted() || !strings.Contains(msg, "before its turn began") {
		t.Errorf("a task cancelled before its turn began: interrupted %v, %q", interrupted(), msg)
	}
	mine := run("mine")
	c.or.envelope(Envelope{Agent: "ab12", Kind: event.UserText, Turn: 5, Data: text("mine")})
	if msg := cancel(mine); !interrupted() || !strings.Contains(msg, "turn 5, this task's, was interrupted") {
		t.Errorf("a task cancelled in its turn: %q", msg)
	}
	done := run("done")
	c.or.envelope(Envelope{Agent: "ab12", Kind: event.UserText, Turn: 6, Data: text("done")})
	c.or.envelope(Envelope{Agent: "ab12", Kind: event.Result, Turn: 6, Data: []byte(`{}`)})
	if msg := cancel(done); interrupted() || !strings.Contains(msg, "after its turn") {
		t.Errorf("a task cancelled after its turn: %q", msg)
	}
}
