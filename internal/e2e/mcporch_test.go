package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/kaimon/kaimon/internal/event"
	"github.com/kaimon/kaimon/internal/testutil/fakeapi"
	"github.com/kaimon/kaimon/internal/verbs"
)

// orchClient is a real MCP client (mcp-go's, over stdio) of `kaimon mcp`
// as an orchestrator is one: it declares elicitation and tasks, hands
// each elicitation to the test to answer, and keeps every notification.
type orchClient struct {
	t       *testing.T
	c       *client.Client
	ctx     context.Context
	elicits chan *elicited

	mu     sync.Mutex
	notes  []mcp.JSONRPCNotification
	noted  chan struct{} // closed and replaced at each notification
	answer map[string]*mcp.ElicitationResult
}

// elicited is an elicitation the server sent, for the test to answer: a
// result on reply, or none (the client never answers) until the server
// withdraws it.
type elicited struct {
	req   mcp.ElicitationRequest
	reply chan *mcp.ElicitationResult
}

func (a *elicited) permission() (agent, request string) {
	m, _ := a.req.Params.Meta.AdditionalFields["io.kaimon/permission"].(map[string]any)
	agent, _ = m["agent_id"].(string)
	request, _ = m["request_id"].(string)
	return
}

func (o *orchClient) Elicit(ctx context.Context, req mcp.ElicitationRequest) (*mcp.ElicitationResult, error) {
	a := &elicited{req: req, reply: make(chan *mcp.ElicitationResult, 1)}
	select {
	case o.elicits <- a:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	select {
	case r := <-a.reply:
		return r, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// startOrch starts `kaimon mcp` with e's environment and extra arguments,
// and a client that declares caps.
func startOrch(t *testing.T, e *kenv, caps mcp.ClientCapabilities, args ...string) *orchClient {
	t.Helper()
	o := &orchClient{t: t, elicits: make(chan *elicited, 8), noted: make(chan struct{})}
	// The revision the pinned Claude Code speaks (2025-11-25): the next
	// one replaces server requests, resources/subscribe and tasks/result
	// with other mechanisms.
	opts := []client.ClientOption{client.WithClientCapabilities(caps), client.WithProtocolVersion(mcp.ProtocolVersion20251125)}
	if caps.Elicitation != nil {
		opts = append(opts, client.WithElicitationHandler(o))
	}
	argv := append(append(append([]string{"-i"}, e.env...), filepath.Join(binDir, "kaimon"), "mcp"), args...)
	tr := transport.NewStdio("env", nil, argv...)
	c := client.NewClient(tr, opts...)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.OnNotification(func(n mcp.JSONRPCNotification) {
		o.mu.Lock()
		o.notes = append(o.notes, n)
		close(o.noted)
		o.noted = make(chan struct{})
		o.mu.Unlock()
	})
	var init mcp.InitializeRequest
	init.Params.ClientInfo = mcp.Implementation{Name: "kaimon-e2e-orchestrator", Version: "1"}
	init.Params.Capabilities = caps
	if _, err := c.Initialize(ctx, init); err != nil {
		t.Fatal(err)
	}
	o.c, o.ctx = c, ctx
	return o
}

// call calls a tool and returns its result, failing the test on a
// protocol error.
func (o *orchClient) call(tool string, args map[string]any) *mcp.CallToolResult {
	o.t.Helper()
	var req mcp.CallToolRequest
	req.Params.Name, req.Params.Arguments = tool, args
	res, err := o.c.CallTool(o.ctx, req)
	if err != nil {
		o.t.Fatalf("%s %v: %v", tool, args, err)
	}
	return res
}

// structured is a result's structuredContent decoded into out, checked
// against its text (the same JSON).
func (o *orchClient) structured(res *mcp.CallToolResult, out any) {
	o.t.Helper()
	if res.IsError || len(res.Content) != 1 {
		o.t.Fatalf("tool result %+v", res)
	}
	b, err := json.Marshal(res.StructuredContent)
	if err != nil {
		o.t.Fatal(err)
	}
	if err := json.Unmarshal(b, out); err != nil {
		o.t.Fatalf("structuredContent %s: %v", b, err)
	}
	var fromText any
	if err := json.Unmarshal([]byte(res.Content[0].(mcp.TextContent).Text), &fromText); err != nil {
		o.t.Fatalf("text %v: %v", res.Content[0], err)
	}
	var fromStruct any
	json.Unmarshal(b, &fromStruct)
	if fmt.Sprint(fromText) != fmt.Sprint(fromStruct) {
		o.t.Fatalf("structuredContent %s differs from the text %v", b, res.Content[0])
	}
}

func (o *orchClient) open(dir string) string {
	o.t.Helper()
	var r verbs.OpenResult
	o.structured(o.call("agent_open", map[string]any{"cwd": dir}), &r)
	return r.AgentID
}

// nextElicit waits for the server's next elicitation.
func (o *orchClient) nextElicit(what string) *elicited {
	o.t.Helper()
	select {
	case a := <-o.elicits:
		return a
	case <-time.After(60 * time.Second):
		o.t.Fatalf("no elicitation: %s", what)
	}
	return nil
}

// waitNote waits for a notification that match accepts, among all since
// the client started.
func (o *orchClient) waitNote(what string, match func(mcp.JSONRPCNotification) bool) mcp.JSONRPCNotification {
	o.t.Helper()
	deadline := time.After(60 * time.Second)
	for {
		o.mu.Lock()
		for _, n := range o.notes {
			if match(n) {
				o.mu.Unlock()
				return n
			}
		}
		ch := o.noted
		o.mu.Unlock()
		select {
		case <-ch:
		case <-deadline:
			o.t.Fatalf("no notification: %s; got %+v", what, o.notes)
		}
	}
}

// count is how many notifications match.
func (o *orchClient) count(match func(mcp.JSONRPCNotification) bool) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	n := 0
	for _, x := range o.notes {
		if match(x) {
			n++
		}
	}
	return n
}

func method(m string) func(mcp.JSONRPCNotification) bool {
	return func(n mcp.JSONRPCNotification) bool { return n.Method == m }
}

var orchCaps = mcp.ClientCapabilities{
	Elicitation: &mcp.ElicitationCapability{},
	Tasks:       &mcp.TasksCapability{List: &struct{}{}, Cancel: &struct{}{}},
}

// TestMCPElicitation: the real claude CLI under the default preset asks
// permission for a Bash call outside its directory; `kaimon mcp` asks the
// person at the client. Accept allows it, decline denies it, an answer
// that does not fit the schema denies it with an error in the log, a
// client that does not answer meets the request's expiry, and an answer
// given with `kaimon permit` first withdraws the question.
func TestMCPElicitation(t *testing.T) {
	e := newEnv(t, "KAIMON_PERMISSION_TIMEOUT", "6")
	o := startOrch(t, e, orchCaps)
	id := o.open(e.work)
	outside := filepath.Join(e.home, "outside")

	turn := 0
	ask := func(n int) *elicited {
		t.Helper()
		turn++
		o.call("agent_send", map[string]any{"agent_id": id, "text": fmt.Sprintf("run command: touch %s-%d", outside, n)})
		a := o.nextElicit(fmt.Sprintf("turn %d's permission request", turn))
		agent, req := a.permission()
		p := e.pendingPermission(t, id, fmt.Sprintf("%s-%d", outside, n))
		if agent != id || req != p.RequestID || !strings.Contains(a.req.Params.Message, "Agent "+id+" asks to run Bash") ||
			!strings.Contains(a.req.Params.Message, fmt.Sprintf("%s-%d", outside, n)) {
			t.Fatalf("elicitation %+v for permission %+v", a.req.Params, p)
		}
		return a
	}
	ran := func(n int) bool {
		_, err := os.Stat(fmt.Sprintf("%s-%d", outside, n))
		return err == nil
	}

	// Accept: the tool runs.
	ask(1).reply <- &mcp.ElicitationResult{ElicitationResponse: mcp.ElicitationResponse{Action: mcp.ElicitationResponseActionAccept}}
	if out := e.waitDone(t, id, turn); out.Text != "Tool said: (Bash completed with no output). Done." || !ran(1) {
		t.Fatalf("accepted turn = %q, ran %v", out.Text, ran(1))
	}
	ps := e.permissions(t, id)
	if last := ps[len(ps)-1]; last.Decision != "allow" || last.By != event.DecidedByUser {
		t.Fatalf("accepted decision %+v", last)
	}

	// Decline: denied.
	ask(2).reply <- &mcp.ElicitationResult{ElicitationResponse: mcp.ElicitationResponse{Action: mcp.ElicitationResponseActionDecline}}
	if out := e.waitDone(t, id, turn); !strings.Contains(out.Text, "denied") || ran(2) {
		t.Fatalf("declined turn = %q, ran %v", out.Text, ran(2))
	}

	// Content that does not fit: denied, and the log says why.
	ask(3).reply <- &mcp.ElicitationResult{ElicitationResponse: mcp.ElicitationResponse{Action: mcp.ElicitationResponseActionAccept,
		Content: map[string]any{"always": "yes please"}}}
	if out := e.waitDone(t, id, turn); !strings.Contains(out.Text, "does not fit its schema") || ran(3) {
		t.Fatalf("turn answered with bad content = %q, ran %v", out.Text, ran(3))
	}
	if !strings.Contains(e.eventsOf(t, id, event.Error), "does not fit its schema") {
		t.Fatalf("no error event for the bad answer: %s", e.eventsOf(t, id, event.Error))
	}

	// The questions answered at the client are not withdrawn by their
	// own answers' decisions.
	withdrawn := func(n mcp.JSONRPCNotification) bool { return n.Method == string(mcp.MethodNotificationCancelled) }
	if n := o.count(withdrawn); n != 0 {
		t.Fatalf("%d notifications/cancelled for questions the client answered: %+v", n, o.notes)
	}

	// Answered with kaimon permit first: withdrawn.
	a := ask(4)
	_, req := a.permission()
	e.ok("permit", id, req, "allow")
	n := o.waitNote("the withdrawal of the elicitation", func(n mcp.JSONRPCNotification) bool {
		return n.Method == string(mcp.MethodNotificationCancelled) && strings.Contains(fmt.Sprint(n.Params.AdditionalFields["reason"]), req)
	})
	if n.Params.AdditionalFields["requestId"] == nil || !strings.Contains(fmt.Sprint(n.Params.AdditionalFields["reason"]), "allowed by user") {
		t.Fatalf("withdrawal %+v", n.Params)
	}
	if out := e.waitDone(t, id, turn); !ran(4) {
		t.Fatalf("turn answered by kaimon permit = %q", out.Text)
	}

	// Never answered: the request expires, and the question is withdrawn.
	a = ask(5)
	_, req = a.permission()
	o.waitNote("the withdrawal of the expired elicitation", func(n mcp.JSONRPCNotification) bool {
		return n.Method == string(mcp.MethodNotificationCancelled) && strings.Contains(fmt.Sprint(n.Params.AdditionalFields["reason"]), req) &&
			strings.Contains(fmt.Sprint(n.Params.AdditionalFields["reason"]), event.DecidedByTimeout)
	})
	if out := e.waitDone(t, id, turn); !strings.Contains(out.Text, "nobody answered") || ran(5) {
		t.Fatalf("unanswered turn = %q, ran %v", out.Text, ran(5))
	}
}

// TestMCPElicitationOnlyOwn: with the default --elicit own, an agent this
// session neither opened nor ran a turn of is not asked about; with
// --elicit never, not even its own.
func TestMCPElicitationOnlyOwn(t *testing.T) {
	e := newEnv(t, "KAIMON_PERMISSION_TIMEOUT", "60")
	o := startOrch(t, e, orchCaps, "--elicit", "never")
	own := o.open(e.work)
	other := e.ok("open", e.work)
	outside := filepath.Join(e.home, "outside")
	o2 := startOrch(t, e, orchCaps)
	for _, id := range []string{own, other} {
		e.ok("send", id, "run command: touch "+outside+"-"+id)
		p := e.pendingPermission(t, id, outside+"-"+id)
		e.ok("permit", id, p.RequestID, "deny")
		e.waitDone(t, id, 1)
	}
	// o2's own agent is asked about: its question comes after the others
	// would have (each server follows the events in order).
	mine := o2.open(e.work)
	o2.call("agent_send", map[string]any{"agent_id": mine, "text": "run command: touch " + outside + "-" + mine})
	if a := o2.nextElicit("o2's own agent's permission request"); !strings.Contains(a.req.Params.Message, mine) {
		t.Fatalf("o2 asked %+v, not about its own agent %s", a.req.Params, mine)
	}
	select {
	case a := <-o.elicits:
		t.Fatalf("--elicit never asked: %+v", a.req.Params)
	case a := <-o2.elicits:
		t.Fatalf("--elicit own asked about another session's agent: %+v", a.req.Params)
	default:
	}
}

// eventsOf is the data of agent id's logged events of kind, one a line.
func (e *kenv) eventsOf(t *testing.T, id string, kind event.Kind) string {
	b, _ := os.ReadFile(e.paths().Agent(id).Events)
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		var r event.Record
		if json.Unmarshal([]byte(line), &r) == nil && r.Kind == kind {
			out = append(out, string(r.Data))
		}
	}
	return strings.Join(out, "\n")
}

// rawRequest sends a JSON-RPC request as it is, for what mcp-go's client
// has no method for (a task-augmented tools/call, whose result is a task)
// and for bad requests; its result, or its JSON-RPC error.
func (o *orchClient) rawRequest(method string, params any) (json.RawMessage, *mcp.JSONRPCErrorDetails) {
	o.t.Helper()
	rawRequestID++
	resp, err := o.c.GetTransport().SendRequest(o.ctx, transport.JSONRPCRequest{JSONRPC: mcp.JSONRPC_VERSION,
		ID: mcp.NewRequestId(int64(1_000_000 + rawRequestID)), Method: method, Params: params})
	if err != nil {
		o.t.Fatalf("%s: %v", method, err)
	}
	if resp.Error != nil {
		return nil, resp.Error
	}
	return resp.Result, nil
}

var rawRequestID int

// TestMCPTasks runs turns as tasks: one that completes (get, result equal
// to what the blocking call returns), one waiting on a permission request
// (input_required, then completed once answered), one cancelled mid-turn
// (interrupted in the daemon), and the errors of unknown task ids.
func TestMCPTasks(t *testing.T) {
	e := newEnv(t, "KAIMON_PERMISSION_TIMEOUT", "120")
	o := startOrch(t, e, orchCaps)
	id := o.open(e.work)
	runTask := func(text string) string {
		t.Helper()
		res, rerr := o.rawRequest("tools/call", map[string]any{"name": "agent_run", "arguments": map[string]any{"agent_id": id, "text": text},
			"task": map[string]any{"ttl": 600000}})
		var ct mcp.CreateTaskResult
		if rerr != nil || json.Unmarshal(res, &ct) != nil || ct.Task.TaskId == "" || ct.Task.Status != mcp.TaskStatusWorking {
			t.Fatalf("agent_run as a task: %s %+v", res, rerr)
		}
		return ct.Task.TaskId
	}
	get := func(task string) mcp.Task {
		t.Helper()
		r, err := o.c.GetTask(o.ctx, mcp.GetTaskRequest{Params: mcp.GetTaskParams{TaskId: task}})
		if err != nil {
			t.Fatal(err)
		}
		return r.Task
	}

	// Completed: tasks/result is what the blocking call returns.
	task := runTask("say exactly: done as a task")
	r, err := o.c.TaskResult(o.ctx, mcp.TaskResultRequest{Params: mcp.TaskResultParams{TaskId: task}})
	if err != nil {
		t.Fatal(err)
	}
	var rr verbs.RunResult
	o.structured(&mcp.CallToolResult{Content: r.Content, StructuredContent: r.StructuredContent, IsError: r.IsError}, &rr)
	if rr.Text != "done as a task" || get(task).Status != mcp.TaskStatusCompleted {
		t.Fatalf("task result %+v, status %s", r, get(task).Status)
	}
	blocking := o.call("agent_run", map[string]any{"agent_id": id, "text": "say exactly: done as a task"})
	if blocking.Content[0].(mcp.TextContent).Text != r.Content[0].(mcp.TextContent).Text {
		t.Fatalf("blocking result %+v, task result %+v", blocking, r)
	}

	// A permission request waits: input_required, with what it waits for.
	outside := filepath.Join(e.home, "outside")
	task = runTask("run command: touch " + outside)
	p := e.pendingPermission(t, id, outside)
	// The person at the client is asked, in the task's name.
	a := o.nextElicit("the task's permission request")
	if rt, _ := a.req.Params.Meta.AdditionalFields[mcp.RelatedTaskMetaKey].(map[string]any); rt["taskId"] != task {
		t.Fatalf("the elicitation of a task's turn does not name the task %s: %+v", task, a.req.Params.Meta)
	}
	waitFor(t, "input_required", 30*time.Second, func() bool { return get(task).Status == mcp.TaskStatusInputRequired })
	if st := get(task); !strings.Contains(st.StatusMessage, p.RequestID) || !strings.Contains(st.StatusMessage, "Bash") {
		t.Fatalf("input_required task %+v", st)
	}
	l, err := o.c.ListTasks(o.ctx, mcp.ListTasksRequest{})
	if err != nil || len(l.Tasks) != 2 {
		t.Fatalf("tasks/list %+v %v", l, err)
	}
	e.ok("permit", id, p.RequestID, "allow")
	if _, err := o.c.TaskResult(o.ctx, mcp.TaskResultRequest{Params: mcp.TaskResultParams{TaskId: task}}); err != nil || get(task).Status != mcp.TaskStatusCompleted {
		t.Fatalf("answered task: %v %+v", err, get(task))
	}

	// Cancelled mid-turn: the daemon's turn is interrupted.
	task = runTask("please be slow")
	waitFor(t, "the slow turn to stream", 30*time.Second, func() bool {
		var out verbs.OutputResult
		e.okJSON(&out, "output", id, "--which", "full_turn")
		return strings.Contains(out.Text, "chunk1 ")
	})
	c, err := o.c.CancelTask(o.ctx, mcp.CancelTaskRequest{Params: mcp.CancelTaskParams{TaskId: task}})
	if err != nil || c.Task.Status != mcp.TaskStatusCancelled {
		t.Fatalf("tasks/cancel %+v %v", c, err)
	}
	var st verbs.AgentStatus
	waitFor(t, "the cancelled task's turn to end", 30*time.Second, func() bool {
		e.okJSON(&st, "status", id)
		return st.Status == "idle"
	})
	if last := e.eventsOf(t, id, event.Result); !strings.Contains(last[strings.LastIndex(last, "\n")+1:], `"stopReason":"cancelled"`) {
		t.Fatalf("the cancelled task's turn did not end cancelled: %s", last)
	}

	// Failed: the task fails, and its result is the blocking call's error.
	task = runTask("please fail")
	r, err = o.c.TaskResult(o.ctx, mcp.TaskResultRequest{Params: mcp.TaskResultParams{TaskId: task}})
	if err != nil || !r.IsError || !strings.Contains(r.Content[0].(mcp.TextContent).Text, fakeapi.FailMessage) {
		t.Fatalf("failed task's result %+v %v", r, err)
	}
	if st := get(task); st.Status != mcp.TaskStatusFailed || !strings.Contains(st.StatusMessage, fakeapi.FailMessage) {
		t.Fatalf("failed task %+v", st)
	}

	// Unknown ids: JSON-RPC errors that say so.
	for _, m := range []string{"tasks/get", "tasks/result", "tasks/cancel"} {
		if _, rerr := o.rawRequest(m, map[string]any{"taskId": "no-such-task"}); rerr == nil || rerr.Code != mcp.INVALID_PARAMS || !strings.Contains(rerr.Message, "task not found") {
			t.Errorf("%s of an unknown task: %+v", m, rerr)
		}
	}
}

// TestMCPTaskOutlivesClient: a client that goes away with a task running
// leaves the turn running in the daemon, and the agent usable.
func TestMCPTaskOutlivesClient(t *testing.T) {
	e := newEnv(t)
	o := startOrch(t, e, mcp.ClientCapabilities{Tasks: orchCaps.Tasks})
	id := o.open(e.work)
	if _, rerr := o.rawRequest("tools/call", map[string]any{"name": "agent_run", "arguments": map[string]any{"agent_id": id, "text": "please hold"},
		"task": map[string]any{}}); rerr != nil {
		t.Fatal(rerr)
	}
	waitFor(t, "the held turn to start", 30*time.Second, func() bool {
		var out verbs.OutputResult
		e.okJSON(&out, "output", id, "--which", "full_turn")
		return strings.Contains(out.Text, "First half")
	})
	o.c.Close() // closes kaimon mcp's stdin and waits for it to exit
	e.api.Release()
	if out := e.waitDone(t, id, 1); out.Text != "First half, second half." {
		t.Fatalf("the turn of a client gone = %q", out.Text)
	}
	if out := e.ok("run", id, "say exactly: still here"); out != "still here" {
		t.Fatalf("the agent after its client went: %q", out)
	}
}

// TestMCPResources: the agents as resources: list, read, subscribe;
// updated at a turn's end, list_changed at open and close, and errors for
// URIs that name nothing.
func TestMCPResources(t *testing.T) {
	e := newEnv(t)
	o := startOrch(t, e, mcp.ClientCapabilities{})
	id := o.open(e.work)
	listChanged := method(string(mcp.MethodNotificationResourcesListChanged))
	o.waitNote("list_changed at open", listChanged)

	l, err := o.c.ListResources(o.ctx, mcp.ListResourcesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var uris []string
	for _, r := range l.Resources {
		uris = append(uris, r.URI)
	}
	if !strings.Contains(strings.Join(uris, " "), "kaimon://agents") || !strings.Contains(strings.Join(uris, " "), "kaimon://agent/"+id) {
		t.Fatalf("resources %v", uris)
	}
	tl, err := o.c.ListResourceTemplates(o.ctx, mcp.ListResourceTemplatesRequest{})
	if err != nil || len(tl.ResourceTemplates) != 3 {
		t.Fatalf("templates %+v %v", tl, err)
	}

	read := func(uri string) string {
		t.Helper()
		r, err := o.c.ReadResource(o.ctx, mcp.ReadResourceRequest{Params: mcp.ReadResourceParams{URI: uri}})
		if err != nil || len(r.Contents) != 1 {
			t.Fatalf("read %s: %+v %v", uri, r, err)
		}
		return r.Contents[0].(mcp.TextResourceContents).Text
	}
	uri := "kaimon://agent/" + id
	if err := o.c.Subscribe(o.ctx, mcp.SubscribeRequest{Params: mcp.SubscribeParams{URI: uri}}); err != nil {
		t.Fatal(err)
	}
	updated := func(n mcp.JSONRPCNotification) bool {
		return n.Method == string(mcp.MethodNotificationResourceUpdated) && n.Params.AdditionalFields["uri"] == uri
	}
	before := o.count(updated)
	if out := e.ok("run", id, "say exactly: as a resource"); out != "as a resource" {
		t.Fatal(out)
	}
	// working, then the turn's end (its result), then idle.
	waitFor(t, "updates at the turn's start and end", 30*time.Second, func() bool { return o.count(updated) >= before+3 })
	var st verbs.AgentStatus
	if err := json.Unmarshal([]byte(read(uri)), &st); err != nil || st.Turn != 1 || st.Status != "idle" {
		t.Fatalf("status resource %+v %v", st, err)
	}
	if out := read(uri + "/output"); out != "as a resource" {
		t.Fatalf("output resource %q", out)
	}
	events := read(uri + "/events")
	if !strings.Contains(events, `"kind":"result"`) || !strings.Contains(events, `"agent_id":"`+id+`"`) {
		t.Fatalf("events resource %s", events)
	}
	var list verbs.ListResult
	if err := json.Unmarshal([]byte(read("kaimon://agents")), &list); err != nil || len(list.Agents) != 1 || list.Agents[0].AgentID != id {
		t.Fatalf("agents resource %+v %v", list, err)
	}

	before = o.count(listChanged)
	e.ok("close", id)
	waitFor(t, "list_changed at close", 30*time.Second, func() bool { return o.count(listChanged) > before })

	// URIs that name nothing.
	for _, bad := range []string{"kaimon://agent/nope", "kaimon://nothing", "file:///etc/passwd"} {
		if _, rerr := o.rawRequest("resources/read", map[string]any{"uri": bad}); rerr == nil || rerr.Code != mcp.INVALID_REQUEST || !strings.Contains(rerr.Message, bad) {
			t.Errorf("read %s: %+v", bad, rerr)
		}
		if _, rerr := o.rawRequest("resources/subscribe", map[string]any{"uri": bad}); rerr == nil || !strings.Contains(rerr.Message, bad) {
			t.Errorf("subscribe %s: %+v", bad, rerr)
		}
	}
}

// compileSchema compiles a JSON Schema document for validation.
func compileSchema(t testing.TB, name string, doc []byte) *jsonschema.Schema {
	t.Helper()
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(doc))
	if err != nil {
		t.Fatalf("schema %s: %v", name, err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource(name, v); err != nil {
		t.Fatalf("schema %s: %v", name, err)
	}
	s, err := c.Compile(name)
	if err != nil {
		t.Fatalf("schema %s: %v\n%s", name, err, doc)
	}
	return s
}

// TestMCPTypedResults calls every tool of `kaimon mcp` with a real MCP
// client and validates each structuredContent against the outputSchema
// the tool declares in tools/list.
func TestMCPTypedResults(t *testing.T) {
	e := newEnv(t, "KAIMON_PERMISSION_TIMEOUT", "120")
	o := startOrch(t, e, mcp.ClientCapabilities{})
	raw, rerr := o.rawRequest("tools/list", map[string]any{})
	if rerr != nil {
		t.Fatal(rerr)
	}
	var tl struct {
		Tools []struct {
			Name         string          `json:"name"`
			OutputSchema json.RawMessage `json:"outputSchema"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(raw, &tl); err != nil {
		t.Fatal(err)
	}
	schemas := map[string]*jsonschema.Schema{}
	for _, tool := range tl.Tools {
		if len(tool.OutputSchema) == 0 {
			t.Errorf("tool %s declares no outputSchema", tool.Name)
			continue
		}
		schemas[tool.Name] = compileSchema(t, tool.Name+".output.json", tool.OutputSchema)
	}
	called := map[string]bool{}
	check := func(tool string, args map[string]any) *mcp.CallToolResult {
		t.Helper()
		res := o.call(tool, args)
		if res.IsError {
			t.Fatalf("%s %v: %+v", tool, args, res.Content)
		}
		b, _ := json.Marshal(res.StructuredContent)
		inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		if err := schemas[tool].Validate(inst); err != nil {
			t.Errorf("%s's structuredContent does not fit its outputSchema: %v\n%s", tool, err, b)
		}
		called[tool] = true
		return res
	}
	e.gitRepo(t)
	var open verbs.OpenResult
	o.structured(check("agent_open", map[string]any{"cwd": e.work, "worktree": true}), &open)
	id := open.AgentID
	check("agent_run", map[string]any{"agent_id": id, "text": "say exactly: typed"})
	check("agent_output", map[string]any{"agent_id": id, "which": "all", "include_tools": true})
	check("agent_status", map[string]any{"agent_id": id})
	check("agent_diff", map[string]any{"agent_id": id})
	check("agent_set_model", map[string]any{"agent_id": id, "model": "opus"})
	outside := filepath.Join(e.home, "outside")
	check("agent_send", map[string]any{"agent_id": id, "text": "run command: touch " + outside})
	p := e.pendingPermission(t, id, outside)
	check("agent_status", map[string]any{"agent_id": id}) // with pending_permissions
	check("agent_list", nil)
	check("agent_permit", map[string]any{"agent_id": id, "request_id": p.RequestID, "decision": "deny"})
	e.waitDone(t, id, 2)
	check("agent_interrupt", map[string]any{"agent_id": id})
	check("agent_close", map[string]any{"agent_id": id})
	check("agent_status", map[string]any{"agent_id": id}) // dead, with its reason
	check("agent_forget", map[string]any{"agent_ids": []string{id}, "force": true})
	for _, v := range verbs.All {
		if !called[v.Name] {
			t.Errorf("tool %s was not called", v.Name)
		}
	}
}

// TestMCPClaudeOrchestrates: the real claude CLI with kaimon registered
// as its users register it (a stdio server running `kaimon mcp`) opens an
// agent and runs a turn of it through the tools, and gets their results.
func TestMCPClaudeOrchestrates(t *testing.T) {
	e := newEnv(t)
	cfg := filepath.Join(e.home, "orch.json")
	b, _ := json.Marshal(map[string]any{"mcpServers": map[string]any{
		"orch": map[string]any{"type": "stdio", "command": filepath.Join(binDir, "kaimon"), "args": []string{"mcp"}}}})
	if err := os.WriteFile(cfg, b, 0o644); err != nil {
		t.Fatal(err)
	}
	orch := e.ok("open", "--permission", "lab", "--no-recursion-guard", "--allow", "mcp__orch__agent_open", "--allow", "mcp__orch__agent_run", "--mcp-config", cfg, e.work)
	out := e.ok("run", orch, `call tool: mcp__orch__agent_open {"cwd":"`+e.work+`","id":"worker"}`)
	if out != `Tool said: {"agent_id":"worker"}. Done.` {
		t.Fatalf("agent_open through claude = %q", out)
	}
	out = e.ok("run", orch, `call tool: mcp__orch__agent_run {"agent_id":"worker","text":"say exactly: from the orchestrator"}`)
	if out != `Tool said: {"text":"from the orchestrator"}. Done.` {
		t.Fatalf("agent_run through claude = %q", out)
	}
	// The CLI kept each result's structuredContent (its transcript's
	// mcpMeta), not only the text it gave the model.
	var st verbs.AgentStatus
	e.okJSON(&st, "status", orch)
	// The CLI writes its transcript behind the turn: read until both are
	// there, or give up.
	got := map[string]bool{}
	var tr []byte
	waitFor(t, "the structured results in claude's transcript", 15*time.Second, func() bool {
		tr, _ = os.ReadFile(st.Transcript)
		for _, l := range strings.Split(string(tr), "\n") {
			var entry struct {
				MCPMeta struct {
					StructuredContent json.RawMessage `json:"structuredContent"`
				} `json:"mcpMeta"`
			}
			if json.Unmarshal([]byte(l), &entry) == nil && entry.MCPMeta.StructuredContent != nil {
				got[string(entry.MCPMeta.StructuredContent)] = true
			}
		}
		return got[`{"agent_id":"worker"}`] && got[`{"text":"from the orchestrator"}`]
	})
}
