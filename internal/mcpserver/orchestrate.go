package mcpserver

import (
	"context"
	"encoding/json"
	"io"
	"log"
	"strings"
	"sync"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/kaimon/kaimon/internal/event"
	"github.com/kaimon/kaimon/internal/verbs"
)

// Envelope is one of an agent's envelopes, as Options.Follow hands them on.
type Envelope struct {
	// Agent is the agent's id as the tools take it (HOST/ID for an agent
	// of another host).
	Agent string
	Kind  event.Kind
	Turn  int
	// Data is the envelope's data, valid only during the call.
	Data []byte
}

// orchestrator is what `kaimon mcp` knows of its client between calls,
// and what it does for a client that orchestrates: it asks the person at
// the client to answer permission requests (elicitation), reports a turn
// run as a task that waits on one as input_required and interrupts it at
// tasks/cancel, and serves the agents as resources whose subscribers hear
// of their changes. It learns of the agents from Options.Follow, which
// follows the daemon's bus: nothing polls.
//
// The stdio server has one client session, so what the orchestrator keeps
// (the agents it opened, its tasks, its subscriptions) is that session's.
type orchestrator struct {
	svc    verbs.Service
	o      Options
	srv    *server.MCPServer
	errLog *log.Logger

	// A 2026-07-28 client's (see modern.go): whether the client is one,
	// its subscriptions/listen streams by request id (and those of mcp-go
	// that ended before their acknowledgement was written), its agent_run
	// tasks of the tasks extension by id, and the wire to write to it.
	modern       bool
	listens      map[string]*listen
	endedListens map[string]bool
	mtasks       map[string]*mtask
	rawWrite     func([]byte) error
	lineMax      int // front's longest line read whole; 0: frontLineMax

	ctx context.Context // the serve's: background work ends with it
	wg  sync.WaitGroup

	mu      sync.Mutex
	session server.ClientSession
	own     map[string]bool   // agents opened, or with a turn run, by this session
	tasks   map[string]string // task id → the agent whose turn it runs
	running map[string]string // agent → the task running its turn, if any
	// ends are the errors ("" for none) of turns run as tasks whose
	// calls ended before mcp-go told of their tasks (afterCallTool), in
	// order, per agent.
	ends   map[string][]string
	failed map[string]string // task id → why its turn failed
	asks   map[askKey]*ask
	subs   map[string]bool // subscribed resource URIs
	// agents are the agents listed as resources, each with the
	// generation of the last event that told of it (see syncAgents).
	agents map[string]uint64
	gen    uint64

	rt *rounds // MRTR rounds of a 2026-07-28 client (mrtr.go)
}

func newOrchestrator(ctx context.Context, svc verbs.Service, o Options, errOut io.Writer) *orchestrator {
	return &orchestrator{
		svc: svc, o: o, ctx: ctx,
		errLog:       log.New(errOut, "kaimon mcp: ", log.LstdFlags),
		listens:      map[string]*listen{},
		endedListens: map[string]bool{},
		mtasks:       map[string]*mtask{},
		own:          map[string]bool{},
		tasks:        map[string]string{},
		running:      map[string]string{},
		ends:         map[string][]string{},
		failed:       map[string]string{},
		asks:         map[askKey]*ask{},
		subs:         map[string]bool{},
		agents:       map[string]uint64{},
		rt:           newRounds(o.StateKey, o.StateUsed),
	}
}

// serverOptions are the MCP server options that turn the orchestration
// on: tasks for agent_run, resources with subscriptions, elicitation, and
// the hooks that tie them to the agents.
func (or *orchestrator) serverOptions() []server.ServerOption {
	h := &server.Hooks{}
	h.AddOnRegisterSession(func(ctx context.Context, s server.ClientSession) {
		or.mu.Lock()
		or.session = s
		or.mu.Unlock()
	})
	h.AddOnRequestInitialization(or.checkRequest)
	h.AddAfterCallTool(or.afterCallTool)
	h.AddAfterGetTask(func(ctx context.Context, _ any, _ *mcp.GetTaskRequest, r *mcp.GetTaskResult) {
		if r != nil {
			or.decorateTask(ctx, &r.Task)
		}
	})
	h.AddAfterListTasks(func(ctx context.Context, _ any, _ *mcp.ListTasksRequest, r *mcp.ListTasksResult) {
		if r != nil {
			for i := range r.Tasks {
				or.decorateTask(ctx, &r.Tasks[i])
			}
		}
	})
	h.AddAfterCancelTask(or.afterCancelTask)
	h.AddAfterSubscribe(func(ctx context.Context, _ any, m *mcp.SubscribeRequest, _ *mcp.EmptyResult) {
		or.mu.Lock()
		or.subs[m.Params.URI] = true
		or.mu.Unlock()
	})
	h.AddAfterUnsubscribe(func(ctx context.Context, _ any, m *mcp.UnsubscribeRequest, _ *mcp.EmptyResult) {
		or.mu.Lock()
		delete(or.subs, m.Params.URI)
		or.mu.Unlock()
	})
	h.AddBeforeListResources(func(ctx context.Context, _ any, _ *mcp.ListResourcesRequest) { or.syncAgents(ctx) })
	or.modernHooks(h)
	return []server.ServerOption{
		server.WithHooks(h),
		server.WithTaskCapabilities(true, true, true),
		server.WithResourceCapabilities(true, true),
		server.WithElicitation(),
	}
}

// starting is told of a call about to run: the agents this session runs
// turns of are its own (--elicit own), from the turn's start.
func (or *orchestrator) starting(args any) {
	var agent string
	switch a := args.(type) {
	case *verbs.RunArgs:
		agent = a.AgentID
	case *verbs.SendArgs:
		agent = a.AgentID
	default:
		return
	}
	or.mu.Lock()
	or.own[agent] = true
	or.mu.Unlock()
}

// ended is told that the call of a turn run as a task ended, with its
// error: no task runs the agent's turn now, and the task failed if the
// turn did. mcp-go starts the call before it tells of the task, so either
// may come first.
func (or *orchestrator) ended(a *verbs.RunArgs, err error) {
	msg := ""
	if err != nil {
		msg = verbs.AsError(err).Message
	}
	or.mu.Lock()
	defer or.mu.Unlock()
	task := or.running[a.AgentID]
	if task == "" {
		or.ends[a.AgentID] = append(or.ends[a.AgentID], msg)
		return
	}
	delete(or.running, a.AgentID)
	if msg != "" {
		or.failed[task] = msg
	}
}

// called is told of each tool call that succeeded: the agents this
// session opens are its own, and a forget changes the list of resources.
func (or *orchestrator) called(res any) {
	switch r := res.(type) {
	case *verbs.OpenResult:
		or.mu.Lock()
		or.own[r.AgentID] = true
		or.mu.Unlock()
	case *verbs.ForgetResult:
		or.forgotten(r.Forgotten)
		or.rt.forget(r.Forgotten...)
	}
}

// afterCallTool records the agent of a turn run as a task: the result of
// a task-augmented agent_run is the task created.
func (or *orchestrator) afterCallTool(ctx context.Context, _ any, m *mcp.CallToolRequest, result any) {
	ct, ok := result.(*mcp.CreateTaskResult)
	if !ok || m.Params.Name != runVerb {
		return
	}
	agent, _ := m.GetArguments()["agent_id"].(string)
	if agent == "" {
		return
	}
	or.mu.Lock()
	defer or.mu.Unlock()
	or.tasks[ct.Task.TaskId] = agent
	if q := or.ends[agent]; len(q) > 0 { // its call ended already
		if q[0] != "" {
			or.failed[ct.Task.TaskId] = q[0]
		}
		if or.ends[agent] = q[1:]; len(q) == 1 {
			delete(or.ends, agent)
		}
		return
	}
	or.running[agent] = ct.Task.TaskId
}

// decorateTask gives a task the states mcp-go's tasks do not know:
// input_required for a working task whose agent waits on a permission
// request (the daemon knows the requests), with what it waits for; and
// failed for one whose turn failed (mcp-go completes a task whose tool
// result is an error, which tasks/result still gives as the blocking call
// would).
func (or *orchestrator) decorateTask(ctx context.Context, t *mcp.Task) {
	or.mu.Lock()
	agent, why := or.tasks[t.TaskId], or.failed[t.TaskId]
	or.mu.Unlock()
	if t.Status == mcp.TaskStatusCompleted && why != "" {
		t.Status, t.StatusMessage = mcp.TaskStatusFailed, why
		return
	}
	if t.Status != mcp.TaskStatusWorking || agent == "" {
		return
	}
	st, err := or.svc.Status(ctx, &verbs.StatusArgs{AgentID: agent})
	if err != nil || len(st.PendingPermissions) == 0 {
		return
	}
	p := st.PendingPermissions[0]
	t.Status = mcp.TaskStatusInputRequired
	how := "agent_permit with request_id " + p.RequestID
	if _, session := or.sessionContext(ctx); session != nil && clientElicits(session) && or.elicits(agent) {
		how = "answer the elicitation, or " + how
	}
	t.StatusMessage = waitingMessage(agent, p, how)
}

// afterCancelTask interrupts the turn of a task cancelled by tasks/cancel
// (mcp-go has ended the call; the daemon's turn goes on until told). A
// client that goes away does not cancel its tasks this way: their turns
// go on in the daemon.
func (or *orchestrator) afterCancelTask(ctx context.Context, _ any, m *mcp.CancelTaskRequest, _ *mcp.CancelTaskResult) {
	or.mu.Lock()
	agent := or.tasks[m.Params.TaskId]
	or.mu.Unlock()
	if agent == "" {
		return
	}
	if _, err := or.svc.Interrupt(ctx, &verbs.InterruptArgs{AgentID: agent}); err != nil {
		or.errLog.Printf("tasks/cancel of task %s: interrupting agent %s: %v", m.Params.TaskId, agent, err)
	}
}

// checkRequest refuses a read of, or a subscription to, a resource that
// does not exist, with an error that says so: mcp-go acknowledges any
// subscription (its stdio session cannot refuse one), and answers a
// handler's error as an internal error (-32603). Refused here, it is
// -32600 (the code mcp-go's hook has; the protocol's for a resource not
// found, -32002, is out of reach).
func (or *orchestrator) checkRequest(ctx context.Context, _ any, message any) error {
	raw, ok := message.(json.RawMessage)
	if !ok {
		return nil
	}
	// The client's protocol, and its listen streams (modern.go).
	if err := or.sawRequest(ctx, raw); err != nil {
		return err
	}
	var m struct {
		Method string `json:"method"`
		Params struct {
			URI string `json:"uri"`
		} `json:"params"`
	}
	if json.Unmarshal(raw, &m) != nil {
		return nil
	}
	if mm := mcp.MCPMethod(m.Method); mm != mcp.MethodResourcesSubscribe && mm != mcp.MethodResourcesRead {
		return nil
	}
	return or.checkURI(ctx, m.Params.URI)
}

// sessionContext is ctx with the client's session, for a request of the
// server's own to it, and the session (nil before the client connects).
func (or *orchestrator) sessionContext(ctx context.Context) (context.Context, server.ClientSession) {
	or.mu.Lock()
	s := or.session
	or.mu.Unlock()
	if s == nil {
		return ctx, nil
	}
	return or.srv.WithContext(ctx, s), s
}

// run follows the agents until the serve ends.
func (or *orchestrator) run() {
	if or.o.Follow == nil {
		return
	}
	or.syncAgents(or.ctx)
	or.wg.Add(1)
	go func() {
		defer or.wg.Done()
		err := or.o.Follow(or.ctx, or.envelope)
		if err != nil && or.ctx.Err() == nil {
			or.errLog.Printf("following the agents' events stopped: %v; permission requests, task states and resource updates are no longer reported", err)
		}
	}()
}

// wait waits for the background work, once the serve's ctx has ended.
func (or *orchestrator) wait() { or.wg.Wait() }

// envelope is each envelope followed.
func (or *orchestrator) envelope(e Envelope) {
	or.rt.envelope(e)
	or.taskEnvelope(e) // the turns of agent_run tasks (modern.go)
	switch e.Kind {
	case event.Permission:
		or.permission(e)
	case event.Status:
		var d event.StatusData
		if json.Unmarshal(e.Data, &d) == nil {
			or.status(e.Agent, d.Status)
		}
	case event.Result:
		or.updated(e.Agent)
	}
}

// oneLine shortens s to n runes on one line.
func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}
