package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kaimon/kaimon/internal/verbs"
)

const (
	// tasksExt is the tasks extension's identifier.
	tasksExt = "io.modelcontextprotocol/tasks"
	// metaSubscriptionID tags each message of a subscriptions/listen
	// stream with the id of its request.
	metaSubscriptionID = "io.modelcontextprotocol/subscriptionId"
)

// rawResult is what the tests read of a 2026-07-28 result.
type rawResult struct {
	ResultType        string          `json:"resultType"`
	StructuredContent json.RawMessage `json:"structuredContent"`
	IsError           bool            `json:"isError"`
	Meta              map[string]any  `json:"_meta"`
}

func decodeRaw(t *testing.T, what string, b json.RawMessage) rawResult {
	t.Helper()
	var r rawResult
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatalf("%s: %v: %s", what, err, b)
	}
	if r.ResultType == "" {
		t.Fatalf("%s: no resultType: %s", what, b)
	}
	return r
}

// subscriptionOf is the subscription id a notification is tagged with.
func subscriptionOf(n rawMessage) string {
	var p struct {
		Meta map[string]json.RawMessage `json:"_meta"`
	}
	_ = json.Unmarshal(n.Params, &p)
	return string(p.Meta[metaSubscriptionID])
}

// A 2026-07-28 client: server/discover lists this server's capabilities,
// every result has resultType, change notifications come only on the
// listen streams that asked for them, tagged with their ids, and nothing
// comes as a server request.
func TestMCPModernDiscoverAndListen(t *testing.T) {
	e := newEnv(t)
	c := startRawMCP(t, e, map[string]any{"roots": map[string]any{"listChanged": true}})

	var d struct {
		ResultType        string   `json:"resultType"`
		SupportedVersions []string `json:"supportedVersions"`
		Capabilities      map[string]json.RawMessage
	}
	if err := json.Unmarshal(c.Discover(), &d); err != nil || d.ResultType != "complete" || d.SupportedVersions[0] != modernProtocol {
		t.Fatalf("discover %+v %v", d, err)
	}
	for _, gone := range []string{"elicitation", "tasks"} {
		if _, ok := d.Capabilities[gone]; ok {
			t.Errorf("discover lists %q among the server's capabilities: %s", gone, d.Capabilities[gone])
		}
	}
	if string(d.Capabilities["resources"]) != `{"subscribe":true,"listChanged":true}` || !strings.Contains(string(d.Capabilities["extensions"]), `"`+tasksExt+`":{}`) {
		t.Errorf("discover capabilities %v", d.Capabilities)
	}
	tl := c.MustCall("tools/list", nil)
	if decodeRaw(t, "tools/list", tl).ResultType != "complete" || strings.Contains(string(tl), "taskSupport") {
		t.Errorf("tools/list: %.300s", tl)
	}

	// The list's stream, then an agent opened.
	list := c.Send("subscriptions/listen", map[string]any{"_meta": c.Meta(), "notifications": map[string]any{
		"resourcesListChanged": true, "resourceSubscriptions": []string{"kaimon://agents"}}})
	acked := func(id string) func(rawMessage) bool {
		return func(n rawMessage) bool {
			return n.Method == "notifications/subscriptions/acknowledged" && subscriptionOf(n) == id
		}
	}
	c.WaitNote("the list stream's acknowledgement", 30*time.Second, acked(list))
	open := decodeRaw(t, "agent_open", c.MustCall("tools/call", map[string]any{"name": "agent_open", "arguments": map[string]any{"cwd": e.work}}))
	var or verbs.OpenResult
	if open.ResultType != "complete" || json.Unmarshal(open.StructuredContent, &or) != nil || or.AgentID == "" {
		t.Fatalf("agent_open %+v", open)
	}
	id := or.AgentID
	listChanged := func(sub string) func(rawMessage) bool {
		return func(n rawMessage) bool {
			return n.Method == "notifications/resources/list_changed" && subscriptionOf(n) == sub
		}
	}
	c.WaitNote("list_changed at open, on the list stream", 30*time.Second, listChanged(list))

	// The agent's stream: its status changes and turn end.
	uri := "kaimon://agent/" + id
	agent := c.Send("subscriptions/listen", map[string]any{"_meta": c.Meta(), "notifications": map[string]any{"resourceSubscriptions": []string{uri}}})
	c.WaitNote("the agent stream's acknowledgement", 30*time.Second, acked(agent))
	updates := func(sub, u string) int {
		c.mu.Lock()
		defer c.mu.Unlock()
		n := 0
		for _, m := range c.Notes {
			var p struct {
				URI string `json:"uri"`
			}
			_ = json.Unmarshal(m.Params, &p)
			if m.Method == "notifications/resources/updated" && subscriptionOf(m) == sub && p.URI == u {
				n++
			}
		}
		return n
	}
	run := decodeRaw(t, "agent_run", c.MustCall("tools/call", map[string]any{"name": "agent_run", "arguments": map[string]any{"agent_id": id, "text": "say exactly: listened"}}))
	var rr verbs.RunResult
	if run.ResultType != "complete" || json.Unmarshal(run.StructuredContent, &rr) != nil || rr.Text != "listened" {
		t.Fatalf("agent_run %+v", run)
	}
	// working, then the turn's end (its result), then idle.
	waitFor(t, "the agent's updates on its stream", 30*time.Second, func() bool { return updates(agent, uri) >= 3 })
	waitFor(t, "the list's updates on its stream", 30*time.Second, func() bool { return updates(list, "kaimon://agents") >= 3 })
	if n := updates(list, uri); n != 0 {
		t.Errorf("the list stream had %d updates of %s, which it did not ask for", n, uri)
	}
	read := decodeRaw(t, "resources/read", c.MustCall("resources/read", map[string]any{"uri": uri}))
	if read.ResultType != "complete" {
		t.Errorf("resources/read %+v", read)
	}
	if _, err := c.Call("resources/subscribe", map[string]any{"uri": uri}); err == nil {
		t.Error("resources/subscribe at 2026-07-28 was taken")
	}
	// A stream's resource that names nothing is refused, saying which.
	if _, err := c.Call("subscriptions/listen", map[string]any{"notifications": map[string]any{"resourceSubscriptions": []string{"kaimon://agent/nope"}}}); err == nil || !strings.Contains(err.Message, "kaimon://agent/nope") {
		t.Errorf("listen to a resource that names nothing: %v", err)
	}

	// The agent's stream cancelled: its request ends, tagged, and no
	// update follows on it.
	if _, err := c.in.Write([]byte(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":` + agent + `}}` + "\n")); err != nil {
		t.Fatal(err)
	}
	if r, err := c.Wait(agent, time.Minute); err != nil || decodeRaw(t, "the agent stream's end", r).Meta[metaSubscriptionID] != strings.Trim(agent, `"`) {
		t.Fatalf("the agent stream's end: %s %v", r, err)
	}
	before, listBefore := updates(agent, uri), updates(list, "kaimon://agents")
	c.MustCall("tools/call", map[string]any{"name": "agent_run", "arguments": map[string]any{"agent_id": id, "text": "say exactly: unheard"}})
	waitFor(t, "the list's updates of the second turn", 30*time.Second, func() bool { return updates(list, "kaimon://agents") >= listBefore+3 })
	if n := updates(agent, uri); n != before {
		t.Errorf("%d updates on the cancelled stream", n-before)
	}

	// Closed: the list changed.
	c.MustCall("tools/call", map[string]any{"name": "agent_close", "arguments": map[string]any{"agent_id": id}})
	closed := 0
	waitFor(t, "list_changed at close", 30*time.Second, func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		closed = 0
		for _, n := range c.Notes {
			if listChanged(list)(n) {
				closed++
			}
		}
		return closed >= 2
	})

	c.mu.Lock()
	defer c.mu.Unlock()
	for _, n := range c.Notes {
		if n.Method != "notifications/progress" && subscriptionOf(n) == "" {
			t.Errorf("a notification on no stream: %s %s", n.Method, n.Params)
		}
	}
	if len(c.Requests) > 0 {
		t.Errorf("server requests to a 2026-07-28 client: %+v", c.Requests)
	}
}

// agent_run of a client that declares the tasks extension is a task
// (resultType "task"): tasks/get polls it to its result, inline; a listen
// stream of its id hears of its end; tasks/cancel interrupts its turn.
func TestMCPModernTasks(t *testing.T) {
	e := newEnv(t, "KAIMON_PERMISSION_TIMEOUT", "120")
	c := startRawMCP(t, e, map[string]any{"extensions": map[string]any{tasksExt: map[string]any{}}})
	c.Discover()
	var or verbs.OpenResult
	if err := json.Unmarshal(decodeRaw(t, "agent_open", c.MustCall("tools/call", map[string]any{"name": "agent_open", "arguments": map[string]any{"cwd": e.work}})).StructuredContent, &or); err != nil {
		t.Fatal(err)
	}
	id := or.AgentID
	type task struct {
		ResultType     string          `json:"resultType"`
		TaskID         string          `json:"taskId"`
		Status         string          `json:"status"`
		StatusMessage  string          `json:"statusMessage"`
		CreatedAt      string          `json:"createdAt"`
		PollIntervalMs int             `json:"pollIntervalMs"`
		Result         json.RawMessage `json:"result"`
	}
	runTask := func(text string) task {
		t.Helper()
		var tk task
		r := c.MustCall("tools/call", map[string]any{"name": "agent_run", "arguments": map[string]any{"agent_id": id, "text": text}})
		if err := json.Unmarshal(r, &tk); err != nil || tk.ResultType != "task" || tk.TaskID == "" || tk.Status != "working" || tk.CreatedAt == "" || tk.PollIntervalMs <= 0 {
			t.Fatalf("agent_run as a task: %s", r)
		}
		return tk
	}
	get := func(taskID string) task {
		t.Helper()
		var tk task
		r := c.MustCall("tasks/get", map[string]any{"taskId": taskID})
		if err := json.Unmarshal(r, &tk); err != nil || tk.ResultType != "complete" || tk.TaskID != taskID {
			t.Fatalf("tasks/get: %s", r)
		}
		return tk
	}

	tk := runTask("say exactly: done as a task")
	stream := c.Send("subscriptions/listen", map[string]any{"_meta": c.Meta(), "notifications": map[string]any{"taskIds": []string{tk.TaskID, "not-a-task"}}})
	ack := c.WaitNote("the task stream's acknowledgement", 30*time.Second, func(n rawMessage) bool {
		return n.Method == "notifications/subscriptions/acknowledged" && subscriptionOf(n) == stream
	})
	if !strings.Contains(string(ack.Params), `"taskIds":["`+tk.TaskID+`"]`) {
		t.Errorf("acknowledgement %s: not the one task known", ack.Params)
	}
	var done task
	waitFor(t, "the task completed", 60*time.Second, func() bool { done = get(tk.TaskID); return done.Status != "working" })
	var res rawResult
	var rr verbs.RunResult
	if done.Status != "completed" || json.Unmarshal(done.Result, &res) != nil || json.Unmarshal(res.StructuredContent, &rr) != nil || rr.Text != "done as a task" {
		t.Fatalf("completed task %+v", done)
	}
	note := c.WaitNote("notifications/tasks of its end", 30*time.Second, func(n rawMessage) bool {
		return n.Method == "notifications/tasks" && subscriptionOf(n) == stream && strings.Contains(string(n.Params), `"status":"completed"`)
	})
	if !strings.Contains(string(note.Params), `done as a task`) {
		t.Errorf("the task's notification has no result: %s", note.Params)
	}

	// Waiting on a permission, then cancelled: the turn is interrupted and
	// the command does not run.
	outside := filepath.Join(e.home, "outside")
	tk = runTask("run command: touch " + outside)
	p := e.pendingPermission(t, id, outside)
	if st := get(tk.TaskID); st.Status != "working" || !strings.Contains(st.StatusMessage, p.RequestID) {
		t.Errorf("a task waiting on a permission: %+v", st)
	}
	if r := decodeRaw(t, "tasks/cancel", c.MustCall("tasks/cancel", map[string]any{"taskId": tk.TaskID})); r.ResultType != "complete" {
		t.Errorf("tasks/cancel %+v", r)
	}
	if st := get(tk.TaskID); st.Status != "cancelled" {
		t.Errorf("cancelled task %+v", st)
	}
	e.waitDone(t, id, 2)
	if _, err := os.Stat(outside); err == nil {
		t.Error("the cancelled task's command ran")
	}

	// Bad input says what is wrong.
	if _, err := c.Call("tasks/get", map[string]any{"taskId": "nope"}); err == nil || !strings.Contains(err.Message, `"nope"`) {
		t.Errorf("tasks/get of no task: %v", err)
	}
	bare := startRawMCP(t, e, map[string]any{})
	if _, err := bare.Call("subscriptions/listen", map[string]any{"notifications": map[string]any{"taskIds": []string{tk.TaskID}}}); err == nil || err.Code != -32021 {
		t.Errorf("taskIds without the extension: %v", err)
	}
	// Without the extension, agent_run blocks as ever.
	if r := decodeRaw(t, "agent_run without the extension", bare.MustCall("tools/call", map[string]any{"name": "agent_run", "arguments": map[string]any{"agent_id": id, "text": "say exactly: blocking"}})); r.ResultType != "complete" {
		t.Errorf("agent_run without the extension: %+v", r)
	}
}

// The claude CLI (2.1.328) with `kaimon mcp` as a stdio MCP server
// negotiates 2026-07-28: server/discover first, no initialize, _meta on
// every request; and it calls agent_open and agent_run. What it sent and
// got is captured by a tee around `kaimon mcp`.
func TestMCPClaudeModernHandshake(t *testing.T) {
	e := newEnv(t)
	wire := filepath.Join(e.home, "wire")
	if err := os.MkdirAll(wire, 0o755); err != nil {
		t.Fatal(err)
	}
	in, out := filepath.Join(wire, "in.jsonl"), filepath.Join(wire, "out.jsonl")
	script := filepath.Join(wire, "kaimon-mcp-tee")
	body := "#!/bin/sh\ntee -a '" + in + "' | '" + filepath.Join(binDir, "kaimon") + "' mcp | tee -a '" + out + "'\n"
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(e.home, "orch.json")
	b, _ := json.Marshal(map[string]any{"mcpServers": map[string]any{"orch": map[string]any{"type": "stdio", "command": script}}})
	if err := os.WriteFile(cfg, b, 0o644); err != nil {
		t.Fatal(err)
	}
	orch := e.ok("open", "--permission", "lab", "--no-recursion-guard", "--allow", "mcp__orch__agent_open", "--allow", "mcp__orch__agent_run", "--mcp-config", cfg, e.work)
	if got := e.ok("run", orch, `call tool: mcp__orch__agent_open {"cwd":"`+e.work+`","id":"worker"}`); got != `Tool said: {"agent_id":"worker"}. Done.` {
		t.Fatalf("agent_open through claude = %q", got)
	}
	if got := e.ok("run", orch, `call tool: mcp__orch__agent_run {"agent_id":"worker","text":"say exactly: from a 2026-07-28 client"}`); got != `Tool said: {"text":"from a 2026-07-28 client"}. Done.` {
		t.Fatalf("agent_run through claude = %q", got)
	}

	type msg struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params struct {
			Name string                     `json:"name"`
			Meta map[string]json.RawMessage `json:"_meta"`
		} `json:"params"`
		Result json.RawMessage `json:"result"`
	}
	lines := func(path string) []msg {
		b, _ := os.ReadFile(path)
		var ms []msg
		for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			var m msg
			if json.Unmarshal([]byte(l), &m) == nil {
				ms = append(ms, m)
			}
		}
		return ms
	}
	sent, got := lines(in), lines(out)
	if len(sent) == 0 || sent[0].Method != "server/discover" || string(sent[0].Params.Meta[metaProtocolVersion]) != `"`+modernProtocol+`"` {
		t.Fatalf("the CLI's first message is not server/discover at %s: %+v", modernProtocol, sent)
	}
	called := map[string]bool{}
	for _, m := range sent {
		if m.Method == "initialize" {
			t.Errorf("the CLI sent initialize after server/discover")
		}
		if m.Method != "" && m.ID != nil && string(m.Params.Meta[metaProtocolVersion]) != `"`+modernProtocol+`"` {
			t.Errorf("request %s %s without the protocol version in _meta", m.ID, m.Method)
		}
		if m.Method == "tools/call" {
			called[m.Params.Name] = true
		}
	}
	if !called["agent_open"] || !called["agent_run"] {
		t.Errorf("tools called: %v", called)
	}
	for _, m := range got {
		if m.Method != "" && m.ID != nil {
			t.Errorf("a server request to the CLI: %s", m.Method)
		}
		if m.Result != nil && !strings.Contains(string(m.Result), `"resultType":`) {
			t.Errorf("a result without resultType: %.200s", m.Result)
		}
	}
	// The handshake as it came, for the record.
	b, _ = os.ReadFile(in)
	for i, l := range strings.SplitN(string(b), "\n", 4)[:3] {
		t.Logf("claude → kaimon mcp %d: %.600s", i+1, l)
	}
	b, _ = os.ReadFile(out)
	t.Logf("kaimon mcp → claude 1: %.600s", strings.SplitN(string(b), "\n", 2)[0])
}

// A task's turn outlives its client: `kaimon mcp` exits when its stdin
// closes, not waiting for the turn, and the turn ends in the daemon.
func TestMCPModernTaskOutlivesClient(t *testing.T) {
	e := newEnv(t)
	c := startRawMCP(t, e, map[string]any{"extensions": map[string]any{tasksExt: map[string]any{}}})
	var or verbs.OpenResult
	if err := json.Unmarshal(decodeRaw(t, "agent_open", c.MustCall("tools/call", map[string]any{"name": "agent_open", "arguments": map[string]any{"cwd": e.work}})).StructuredContent, &or); err != nil {
		t.Fatal(err)
	}
	id := or.AgentID
	if r := decodeRaw(t, "agent_run", c.MustCall("tools/call", map[string]any{"name": "agent_run", "arguments": map[string]any{"agent_id": id, "text": "please hold"}})); r.ResultType != "task" {
		t.Fatalf("agent_run %+v", r)
	}
	waitFor(t, "the held turn to start", 30*time.Second, func() bool {
		var out verbs.OutputResult
		e.okJSON(&out, "output", id, "--which", "full_turn")
		return strings.Contains(out.Text, "First half")
	})
	c.in.Close()
	select {
	case <-c.child.Done():
	case <-time.After(time.Minute):
		t.Fatal("kaimon mcp did not exit at the end of its stdin while a task's turn ran")
	}
	e.api.Release()
	if out := e.waitDone(t, id, 1); out.Text != "First half, second half." {
		t.Fatalf("the turn of a client gone = %q", out.Text)
	}
}

// A task's turn that meets a permission request, for a client that takes
// elicitation forms too: the task goes input_required with the call's
// MRTR round as its inputRequests (on tasks/get and its stream), an answer
// to no request asked is ignored, and tasks/update's accept lets the
// command run and the task complete.
func TestMCPModernTaskRound(t *testing.T) {
	e := newEnv(t, "KAIMON_PERMISSION_TIMEOUT", "120")
	c := startRawMCP(t, e, map[string]any{"elicitation": map[string]any{"form": map[string]any{}}, "extensions": map[string]any{tasksExt: map[string]any{}}})
	var or verbs.OpenResult
	if err := json.Unmarshal(decodeRaw(t, "agent_open", c.MustCall("tools/call", map[string]any{"name": "agent_open", "arguments": map[string]any{"cwd": e.work}})).StructuredContent, &or); err != nil {
		t.Fatal(err)
	}
	outside := filepath.Join(e.home, "outside")
	type task struct {
		TaskID        string                     `json:"taskId"`
		Status        string                     `json:"status"`
		InputRequests map[string]rawInputRequest `json:"inputRequests"`
		Result        json.RawMessage            `json:"result"`
	}
	var tk task
	if r := c.MustCall("tools/call", map[string]any{"name": "agent_run", "arguments": map[string]any{"agent_id": or.AgentID, "text": "run command: touch " + outside}}); json.Unmarshal(r, &tk) != nil || tk.TaskID == "" {
		t.Fatalf("agent_run: %s", r)
	}
	id := tk.TaskID
	stream := c.Send("subscriptions/listen", map[string]any{"_meta": c.Meta(), "notifications": map[string]any{"taskIds": []string{id}}})
	get := func() task {
		t.Helper()
		var g task
		if r := c.MustCall("tasks/get", map[string]any{"taskId": id}); json.Unmarshal(r, &g) != nil {
			t.Fatalf("tasks/get: %s", r)
		}
		return g
	}
	waitFor(t, "input_required", 60*time.Second, func() bool { tk = get(); return tk.Status != "working" })
	if tk.Status != "input_required" || len(tk.InputRequests) != 1 {
		t.Fatalf("the task at its permission request: %+v", tk)
	}
	var key string
	for k, r := range tk.InputRequests {
		if key = k; r.Method != "elicitation/create" || r.Params.Mode != "form" || !strings.Contains(r.Params.Message, outside) {
			t.Fatalf("the task's input request %s: %+v", k, r)
		}
	}
	c.WaitNote("notifications/tasks of input_required", 30*time.Second, func(n rawMessage) bool {
		return n.Method == "notifications/tasks" && subscriptionOf(n) == stream && strings.Contains(string(n.Params), `"status":"input_required"`)
	})
	c.MustCall("tasks/update", map[string]any{"taskId": id, "inputResponses": map[string]any{"not-asked": map[string]any{"action": "accept"}}})
	if g := get(); g.Status != "input_required" {
		t.Fatalf("an answer to nothing asked moved the task: %+v", g)
	}
	if _, err := os.Stat(outside); err == nil {
		t.Fatal("the command ran before its answer")
	}
	c.MustCall("tasks/update", map[string]any{"taskId": id, "inputResponses": map[string]any{key: map[string]any{"action": "accept", "content": map[string]any{}}}})
	waitFor(t, "the task completed", 60*time.Second, func() bool { tk = get(); return tk.Status != "working" && tk.Status != "input_required" })
	if _, err := os.Stat(outside); tk.Status != "completed" || err != nil {
		t.Fatalf("the answered task %+v; the command's file: %v", tk, err)
	}
}
