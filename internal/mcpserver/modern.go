package mcpserver

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/kaimon/kaimon/internal/event"
	"github.com/kaimon/kaimon/internal/verbs"
	"github.com/kaimon/kaimon/internal/version"
)

// What a client at protocol 2026-07-28 gets from `kaimon mcp` besides the
// tools: server/discover with the capabilities this server has, its
// notifications on subscriptions/listen streams, and agent_run as a task
// of the tasks extension (io.modelcontextprotocol/tasks, SEP-2663).
//
// mcp-go v1.2.1 serves server/discover, resultType, and
// subscriptions/listen's acknowledgement, but on stdio it tags nothing
// with the subscription's id and filters nothing (its stdio session has no
// subscription filter), and its tasks are 2025-11-25's (nested "task",
// tasks/result, no tasks/update). What it does not serve is hooked here:
//   - the discover result (afterDiscover) and tools/list (afterListTools)
//     lose what 2026-07-28 moved: elicitation (a client capability), tasks
//     (now an extension), a tool's execution.taskSupport;
//   - the listen streams are kept here (checkRequest records a request,
//     the wire's acknowledgement starts it, its end stops it), and every
//     change notification reaches them tagged with their id: untagged ones
//     (mcp-go's list_changed) are turned into those on the wire;
//   - the tasks extension's requests (tools/call of agent_run from a client
//     declaring it; tasks/get, tasks/update, tasks/cancel) are taken off
//     the input before mcp-go reads it (front) and answered here.

const (
	// TasksExtension is the tasks extension's identifier.
	TasksExtension = "io.modelcontextprotocol/tasks"
	// metaSubscriptionID tags each message of a subscriptions/listen
	// stream with the id of its request.
	metaSubscriptionID = "io.modelcontextprotocol/subscriptionId"
	// methodTasksUpdate answers a task's inputRequests (the extension's).
	methodTasksUpdate = "tasks/update"
	// methodNotificationTasks is the extension's task status notification.
	methodNotificationTasks = "notifications/tasks"
	// taskPollMs is the polling interval a task suggests.
	taskPollMs = 1000
	// taskKept is how long an ended task is kept (tasks/get finds it)
	// after it ended: then it is forgotten, so that a long session does
	// not keep every task it ran.
	taskKept = time.Hour
	// errMissingCapability is the revision's MissingRequiredClientCapability.
	errMissingCapability = -32021
)

// listen is one subscriptions/listen stream of the client.
type listen struct {
	id          json.RawMessage // its request's id, as the client sent it
	listChanged bool            // resourcesListChanged
	uris        map[string]bool // resourceSubscriptions
	tasks       map[string]bool // taskIds agreed (those known when asked)
	active      bool            // acknowledged: notifications may follow
	// own is a stream served here, not by mcp-go: one with taskIds.
	own bool
	// An own stream's acknowledgement is being written (acking); one
	// cancelled meanwhile ends once it went (cancelled).
	acking, cancelled bool
}

// mtask is agent_run as a task of the extension.
type mtask struct {
	id, agent        string
	status           mcp.TaskStatus
	message          string
	created, updated time.Time
	ended            time.Time // when it ended (completed, failed, cancelled)
	// text is the turn's prompt; turn is the agent's turn that runs it,
	// once it began (its user_text came), 0 before (the prompt may wait
	// behind another caller's turn); turnDone, once that turn ended.
	text     string
	turn     int
	turnDone bool
	// call is the tools/call's params, run again with the answers to an
	// input_required round of it (inputResponses from tasks/update).
	call          map[string]json.RawMessage
	running       bool
	result        json.RawMessage // completed
	rpcErr        json.RawMessage // failed
	inputRequests json.RawMessage // input_required
	requestState  json.RawMessage
}

// modernHooks are the hooks of a 2026-07-28 client's requests mcp-go
// serves.
func (or *orchestrator) modernHooks(h *server.Hooks) {
	h.AddAfterDiscover(func(ctx context.Context, _ any, _ *mcp.DiscoverRequest, r *mcp.DiscoverResult) {
		if r == nil {
			return
		}
		// elicitation is the client's capability (mcp-go lists it for
		// WithElicitation); tasks are the extension's now.
		r.Capabilities.Elicitation = nil
		r.Capabilities.Tasks = nil
		ext := map[string]any{TasksExtension: map[string]any{}}
		for k, v := range r.Capabilities.Extensions {
			ext[k] = v
		}
		r.Capabilities.Extensions = ext
	})
	h.AddAfterListTools(func(ctx context.Context, _ any, _ *mcp.ListToolsRequest, r *mcp.ListToolsResult) {
		if r == nil || !server.IsModernRequest(ctx) {
			return
		}
		// A tool's execution (taskSupport) is not in 2026-07-28: the server
		// decides which calls become tasks.
		for i := range r.Tools {
			r.Tools[i].Execution = nil
		}
	})
	h.AddAfterSubscriptionsListen(func(ctx context.Context, id any, _ *mcp.SubscriptionsListenRequest, _ *mcp.SubscriptionsListenResult) {
		or.endListen(id)
	})
	h.AddOnError(func(ctx context.Context, id any, m mcp.MCPMethod, _ any, _ error) {
		if m == mcp.MethodSubscriptionsListen {
			or.failedListen(id)
		}
	})
}

// rpcRequest is what checkRequest and front read of a request.
type rpcRequest struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params struct {
		URI           string `json:"uri"`
		Name          string `json:"name"`
		TaskID        string `json:"taskId"`
		Notifications struct {
			ResourcesListChanged  bool     `json:"resourcesListChanged"`
			ResourceSubscriptions []string `json:"resourceSubscriptions"`
			TaskIDs               []string `json:"taskIds"`
		} `json:"notifications"`
		Meta struct {
			ProtocolVersion string `json:"io.modelcontextprotocol/protocolVersion"`
			Caps            struct {
				Extensions map[string]json.RawMessage `json:"extensions"`
			} `json:"io.modelcontextprotocol/clientCapabilities"`
		} `json:"_meta"`
		InputResponses json.RawMessage `json:"inputResponses"`
		RequestState   json.RawMessage `json:"requestState"`
		Task           json.RawMessage `json:"task"`
	} `json:"params"`
}

// modern says whether r is of a 2026-07-28 client: a version mcp-go
// serves (IsModernProtocol alone is a string >=, which "2099-01-01" is).
func (r *rpcRequest) modern() bool {
	v := r.Params.Meta.ProtocolVersion
	return mcp.IsModernProtocol(v) && mcp.IsValidProtocolVersion(v)
}

func (r *rpcRequest) tasksExtension() bool {
	_, ok := r.Params.Meta.Caps.Extensions[TasksExtension]
	return ok
}

// sawRequest notes the protocol of the client (a stdio server has one) and
// checks the listen streams it opens: their resource URIs must name
// resources (an error says which does not). A stream mcp-go serves is
// recorded only at its acknowledgement (wire): mcp-go may yet refuse the
// request (its protocol errors fire no OnError hook), and a record made
// here would outlive it.
func (or *orchestrator) sawRequest(ctx context.Context, raw json.RawMessage) error {
	var r rpcRequest
	if json.Unmarshal(raw, &r) != nil {
		return nil
	}
	return or.saw(ctx, &r)
}

func (or *orchestrator) saw(ctx context.Context, r *rpcRequest) error {
	switch {
	case r.Method == string(mcp.MethodInitialize):
		or.mu.Lock()
		or.modern = false
		or.mu.Unlock()
	case r.modern():
		or.mu.Lock()
		or.modern = true
		or.mu.Unlock()
	}
	if r.Method != string(mcp.MethodSubscriptionsListen) || !r.modern() || r.ID == nil {
		return nil
	}
	for _, u := range r.Params.Notifications.ResourceSubscriptions {
		if err := or.checkURI(ctx, u); err != nil {
			return err
		}
	}
	return nil
}

// newListen is a stream's record, of what it takes.
func newListen(id json.RawMessage, listChanged bool, uris []string) *listen {
	l := &listen{id: id, listChanged: listChanged, uris: map[string]bool{}, tasks: map[string]bool{}}
	for _, u := range uris {
		l.uris[u] = true
	}
	return l
}

// idKey is a JSON-RPC id as a map key: its JSON.
func idKey(id any) string {
	if raw, ok := id.(json.RawMessage); ok {
		var v any
		if json.Unmarshal(raw, &v) == nil {
			id = v
		}
	}
	b, _ := json.Marshal(id)
	return string(b)
}

// endListen forgets the stream mcp-go served for request id, which ended
// with a result. Its acknowledgement went before (mcp-go queues it first),
// but may not be on the wire yet: then the stream is noted as ended, and
// its acknowledgement records nothing.
func (or *orchestrator) endListen(id any) {
	key := idKey(id)
	or.mu.Lock()
	if or.listens[key] != nil {
		delete(or.listens, key)
	} else {
		or.endedListens[key] = true
	}
	or.mu.Unlock()
}

// failedListen forgets the stream of a request mcp-go refused, after its
// acknowledgement or without one.
func (or *orchestrator) failedListen(id any) {
	or.mu.Lock()
	delete(or.listens, idKey(id))
	or.mu.Unlock()
}

func (or *orchestrator) isModern() bool {
	or.mu.Lock()
	defer or.mu.Unlock()
	return or.modern
}

// notifyListens sends method with params on each acknowledged listen
// stream that want takes, tagged with its id.
func (or *orchestrator) notifyListens(method string, params map[string]any, want func(*listen) bool) {
	or.mu.Lock()
	var ids []json.RawMessage
	for _, l := range or.listens {
		if l.active && want(l) {
			ids = append(ids, l.id)
		}
	}
	or.mu.Unlock()
	for _, id := range ids {
		p := map[string]any{"_meta": map[string]any{metaSubscriptionID: id}}
		for k, v := range params {
			p[k] = v
		}
		or.writeMessage(map[string]any{"jsonrpc": mcp.JSONRPC_VERSION, "method": method, "params": p})
	}
}

func (or *orchestrator) writeMessage(m any) {
	b, err := json.Marshal(m)
	if err != nil || or.rawWrite == nil {
		return
	}
	if err := or.rawWrite(append(b, '\n')); err != nil {
		or.errLog.Printf("writing to the client: %v", err)
	}
}

var (
	ackMethod          = []byte(`"method":"` + mcp.MethodNotificationSubscriptionsAcknowledged + `"`)
	listChangedMethods = [][]byte{
		[]byte(`"method":"` + mcp.MethodNotificationResourcesListChanged + `"`),
		[]byte(`"method":"` + mcp.MethodNotificationToolsListChanged + `"`),
		[]byte(`"method":"` + mcp.MethodNotificationPromptsListChanged + `"`),
	}
	legacyTaskStatus = []byte(`"method":"` + mcp.MethodNotificationTasksStatus + `"`)
)

// wireAction is what becomes of a message mcp-go writes (see wire).
type wireAction int

const (
	wirePass wireAction = iota // written as it is
	wireDrop                   // not written
)

// wire looks at a message mcp-go writes to a 2026-07-28 client: what
// becomes of it; before, what is to run as it is written, under the
// writer's lock (it must not write); after, what is to run once it went
// (or was dropped). A listen stream's acknowledgement gets the task ids agreed
// and starts the stream; an untagged list change goes to the streams that
// asked for it, tagged, and no further.
func (or *orchestrator) wire(p []byte) (act wireAction, before, after func()) {
	if !bytes.Contains(p, []byte(`"notifications/`)) || !or.isModern() {
		return wirePass, nil, nil
	}
	var m struct {
		Method string                     `json:"method"`
		Params map[string]json.RawMessage `json:"params"`
	}
	if bytes.Contains(p, ackMethod) {
		if json.Unmarshal(p, &m) != nil {
			return wirePass, nil, nil
		}
		var meta map[string]json.RawMessage
		var agreed struct {
			ResourcesListChanged  bool     `json:"resourcesListChanged"`
			ResourceSubscriptions []string `json:"resourceSubscriptions"`
		}
		_ = json.Unmarshal(m.Params["_meta"], &meta)
		_ = json.Unmarshal(m.Params["notifications"], &agreed)
		id := meta[metaSubscriptionID]
		key := idKey(id)
		// The stream is what mcp-go agreed to, from its acknowledgement
		// on: recorded as it is written, under the writer's lock, so that
		// a notification of the stream is written after it, and none it
		// should have had is missed (the client may act on the ack at
		// once).
		return wirePass, func() {
			or.mu.Lock()
			defer or.mu.Unlock()
			if or.endedListens[key] {
				delete(or.endedListens, key)
				return
			}
			l := newListen(id, agreed.ResourcesListChanged, agreed.ResourceSubscriptions)
			l.active = true
			or.listens[key] = l
		}, nil
	}
	if bytes.Contains(p, legacyTaskStatus) {
		return wireDrop, nil, nil // 2025-11-25's tasks are not this client's
	}
	for _, lc := range listChangedMethods {
		if !bytes.Contains(p, lc) {
			continue
		}
		if json.Unmarshal(p, &m) != nil {
			return wirePass, nil, nil
		}
		if _, tagged := m.Params["_meta"]; tagged {
			return wirePass, nil, nil
		}
		return wireDrop, nil, func() {
			if m.Method == string(mcp.MethodNotificationResourcesListChanged) {
				or.notifyListens(m.Method, nil, func(l *listen) bool { return l.listChanged })
			}
		}
	}
	return wirePass, nil, nil
}

// frontLineMax is the longest line front reads whole, to see if it is
// the tasks extension's: those are small. A longer one goes to mcp-go as
// it comes, unread (mcp-go's reader has no limit).
const frontLineMax = 64 << 20

// front takes the tasks extension's requests off in, the client's input,
// and answers them; the rest it hands on to mcp-go, in order. It ends when
// in does, or at stop.
//
// stop ends it at once if it is writing to mcp-go, or if in can be given a
// read deadline (a pipe or socket that is not blocking); otherwise a
// reading of in that does not return (a terminal's stdin) keeps its
// goroutine until in ends: Go cannot interrupt that read, and in is not
// front's to close. ServeStdio's process exits soon after stop, so
// nothing waits on it.
func (or *orchestrator) front(in io.Reader) (r io.Reader, stop func()) {
	pr, pw := io.Pipe()
	max := or.lineMax
	if max <= 0 {
		max = frontLineMax
	}
	go func() {
		rd := bufio.NewReaderSize(in, 64<<10)
		for {
			line, err := readLine(rd, max, pw)
			if line != nil && !or.intercept(bytes.TrimRight(line, "\r\n")) {
				if line[len(line)-1] != '\n' {
					line = append(line, '\n')
				}
				if _, werr := pw.Write(line); werr != nil {
					return
				}
			}
			if err != nil {
				if err == io.EOF {
					err = nil
				}
				pw.CloseWithError(err)
				return
			}
		}
	}()
	return pr, func() {
		pr.Close()
		if d, ok := in.(interface{ SetReadDeadline(time.Time) error }); ok {
			_ = d.SetReadDeadline(time.Now())
		}
	}
}

// readLine reads the next line of rd, '\n' included, in a buffer of its
// own. A line longer than max is written to w as it is read, and its
// line nil. err is rd's (io.EOF at the end) or w's.
func readLine(rd *bufio.Reader, max int, w io.Writer) (line []byte, err error) {
	for {
		chunk, err := rd.ReadSlice('\n')
		if len(line)+len(chunk) > max {
			if _, werr := w.Write(line); werr != nil {
				return nil, werr
			}
			for {
				if _, werr := w.Write(chunk); werr != nil {
					return nil, werr
				}
				if err != bufio.ErrBufferFull {
					return nil, err
				}
				chunk, err = rd.ReadSlice('\n')
			}
		}
		line = append(line, chunk...)
		if err == bufio.ErrBufferFull {
			continue
		}
		if len(line) == 0 {
			line = nil
		}
		return line, err
	}
}

// intercept answers line if it is the tasks extension's, and says so.
func (or *orchestrator) intercept(line []byte) bool {
	if !bytes.Contains(line, []byte(`"io.modelcontextprotocol/protocolVersion"`)) && !bytes.Contains(line, []byte(`"notifications/cancelled"`)) {
		return false
	}
	var r rpcRequest
	if json.Unmarshal(line, &r) != nil {
		return false
	}
	if r.Method == string(mcp.MethodNotificationCancelled) && r.ID == nil {
		var c struct {
			Params struct {
				RequestID json.RawMessage `json:"requestId"`
			} `json:"params"`
		}
		if json.Unmarshal(line, &c) == nil && c.Params.RequestID != nil {
			or.listenCancelled(c.Params.RequestID)
		}
		return false // mcp-go's streams end at it too
	}
	if r.ID == nil || !r.modern() {
		return false
	}
	served := false
	switch r.Method {
	case string(mcp.MethodTasksGet), methodTasksUpdate, string(mcp.MethodTasksCancel):
		served = true
	case string(mcp.MethodToolsCall):
		// 2025-11-25's task param: mcp-go would make a task of that
		// revision, which this client's tasks/get (the extension's, here)
		// does not know.
		served = r.Params.Task != nil || r.Params.Name == runVerb && r.tasksExtension() && r.Params.InputResponses == nil && r.Params.RequestState == nil
	case string(mcp.MethodSubscriptionsListen):
		served = len(r.Params.Notifications.TaskIDs) > 0
	}
	if !served {
		return false
	}
	if e := protocolError(or.ctx, r.ID, line); e != nil {
		or.writeMessage(e)
		return true
	}
	switch r.Method {
	case string(mcp.MethodTasksGet), methodTasksUpdate, string(mcp.MethodTasksCancel):
		go or.taskRequest(&r, line)
		return true
	case string(mcp.MethodToolsCall):
		if r.Params.Task != nil {
			or.writeError(r.ID, mcp.INVALID_PARAMS, "tools/call: params.task is protocol 2025-11-25's; at "+r.Params.Meta.ProtocolVersion+
				" a call becomes a task by the "+TasksExtension+" extension: declare it in the request's clientCapabilities (extensions) and call without params.task (agent_run then answers with a task)", nil)
			return true
		}
		var p struct {
			Params map[string]json.RawMessage `json:"params"`
		}
		if json.Unmarshal(line, &p) != nil {
			return false
		}
		or.createTask(&r, p.Params)
		return true
	case string(mcp.MethodSubscriptionsListen):
		if len(r.Params.Notifications.TaskIDs) == 0 {
			return false
		}
		if !r.tasksExtension() {
			or.writeError(r.ID, errMissingCapability, "subscriptions/listen: taskIds need the "+TasksExtension+" extension in the request's clientCapabilities",
				map[string]any{"requiredCapabilities": map[string]any{"extensions": map[string]any{TasksExtension: map[string]any{}}}})
			return true
		}
		or.listenTasks(&r)
		return true
	}
	return false
}

// protocolError is the error mcp-go answers a 2026-07-28 request with
// whose _meta lacks what the revision requires (clientCapabilities), as
// its request handler does before any method (its check is not exported):
// a request the front serves gets the same. A version mcp-go does not
// know is not modern() and reaches mcp-go, which refuses it (-32022);
// the check here is for a caller that did not ask modern(). nil: none.
func protocolError(ctx context.Context, id json.RawMessage, line []byte) any {
	var w struct {
		Params struct {
			Meta *mcp.Meta `json:"_meta"`
		} `json:"params"`
	}
	if json.Unmarshal(line, &w) != nil {
		return nil
	}
	if w.Params.Meta.ClientCapabilities() == nil {
		return map[string]any{"jsonrpc": mcp.JSONRPC_VERSION, "id": id, "error": map[string]any{
			"code": mcp.INVALID_PARAMS, "message": "missing or invalid _meta field " + mcp.MetaKeyClientCapabilities}}
	}
	if v := w.Params.Meta.ProtocolVersion(); !mcp.IsValidProtocolVersion(v) {
		e := mcp.UnsupportedProtocolVersionError{Version: v, Supported: server.SupportedProtocolVersionsFromContext(ctx)}.JSONRPCError()
		e.ID = mcp.NewRequestId(id)
		return e
	}
	return nil
}

// listenTasks serves a subscriptions/listen with taskIds: mcp-go's
// filter has no taskIds, and it would end a stream of only those at once.
// The stream lasts until the client cancels it (notifications/cancelled).
// It is recorded at once, in the input's order, so that a cancellation
// after it finds it; only its resource URIs are checked (the daemon
// asked) and its acknowledgement written in the background.
func (or *orchestrator) listenTasks(r *rpcRequest) {
	n := r.Params.Notifications
	key := idKey(r.ID)
	l := newListen(r.ID, n.ResourcesListChanged, n.ResourceSubscriptions)
	l.own = true
	var agreed []string
	or.mu.Lock()
	for _, t := range n.TaskIDs {
		if or.mtasks[t] != nil && !l.tasks[t] {
			l.tasks[t] = true
			agreed = append(agreed, t)
		}
	}
	or.listens[key] = l
	or.mu.Unlock()
	go func() {
		err := or.saw(or.ctx, r)
		or.mu.Lock()
		if or.listens[key] != l { // cancelled (answered), or its id reused
			or.mu.Unlock()
			return
		}
		if err != nil {
			delete(or.listens, key)
			or.mu.Unlock()
			or.writeError(r.ID, mcp.INVALID_PARAMS, err.Error(), nil)
			return
		}
		l.acking = true
		or.mu.Unlock()
		ack := map[string]any{"taskIds": agreed}
		if n.ResourcesListChanged {
			ack["resourcesListChanged"] = true
		}
		if len(n.ResourceSubscriptions) > 0 {
			ack["resourceSubscriptions"] = n.ResourceSubscriptions
		}
		or.writeMessage(map[string]any{"jsonrpc": mcp.JSONRPC_VERSION, "method": mcp.MethodNotificationSubscriptionsAcknowledged,
			"params": map[string]any{"_meta": map[string]any{metaSubscriptionID: r.ID}, "notifications": ack}})
		or.mu.Lock()
		l.active = true
		cancelled := l.cancelled
		or.mu.Unlock()
		if cancelled {
			or.endOwnListen(l)
		}
	}()
}

// listenCancelled ends a stream served here that notifications/cancelled
// names, with its result, as mcp-go ends its own: at once, or once its
// acknowledgement went.
func (or *orchestrator) listenCancelled(requestID json.RawMessage) {
	key := idKey(requestID)
	or.mu.Lock()
	l := or.listens[key]
	if l == nil || !l.own {
		or.mu.Unlock()
		return
	}
	delete(or.listens, key)
	later := l.acking && !l.active
	l.cancelled = true
	or.mu.Unlock()
	if !later {
		or.endOwnListen(l)
	}
}

func (or *orchestrator) endOwnListen(l *listen) {
	or.writeMessage(map[string]any{"jsonrpc": mcp.JSONRPC_VERSION, "id": l.id, "result": map[string]any{
		"resultType": mcp.ResultTypeComplete, "_meta": map[string]any{metaSubscriptionID: l.id}}})
}

func (or *orchestrator) writeResult(id json.RawMessage, resultType string, result map[string]any) {
	result["resultType"] = resultType
	result["_meta"] = map[string]any{mcp.MetaKeyServerInfo: map[string]any{"name": "kaimon", "version": version.String()}}
	or.writeMessage(map[string]any{"jsonrpc": mcp.JSONRPC_VERSION, "id": id, "result": result})
}

func (or *orchestrator) writeError(id json.RawMessage, code int, msg string, data any) {
	e := map[string]any{"code": code, "message": msg}
	if data != nil {
		e["data"] = data
	}
	or.writeMessage(map[string]any{"jsonrpc": mcp.JSONRPC_VERSION, "id": id, "error": e})
}

// createTask answers agent_run with a task, then runs the call.
func (or *orchestrator) createTask(r *rpcRequest, params map[string]json.RawMessage) {
	var args struct {
		Agent string `json:"agent_id"`
		Text  string `json:"text"`
	}
	_ = json.Unmarshal(params["arguments"], &args)
	now := time.Now().UTC()
	t := &mtask{id: newTaskID(), agent: args.Agent, text: args.Text, status: mcp.TaskStatusWorking, created: now, updated: now, call: params, running: true}
	or.mu.Lock()
	or.pruneTasks(now)
	or.mtasks[t.id] = t
	snap := or.taskJSON(t)
	or.mu.Unlock()
	or.writeResult(r.ID, "task", snap)
	go or.runTask(t, nil, nil)
}

// pruneTasks forgets the tasks that ended taskKept before now; or.mu is
// held. It runs as a task is made: the tasks kept are those that ended
// within taskKept of the last one made, and the live ones.
func (or *orchestrator) pruneTasks(now time.Time) {
	for id, t := range or.mtasks {
		if !t.ended.IsZero() && now.Sub(t.ended) > taskKept {
			delete(or.mtasks, id)
		}
	}
}

// newTaskID is an unguessable task id: the extension has no tasks/list,
// and a task's id is all that names it.
func newTaskID() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return "run-" + hex.EncodeToString(b)
}

// runTask runs the task's call (a round's answers given), outside any
// request: the turn goes on until the daemon ends it, as a blocking
// agent_run's would. Like a 2025-11-25 task's call, it may outlive
// ServeStdio (not waited for: the process exits then, the turn goes on). mcp-go serves the call as it does any tools/call of
// this client, less the tasks extension (no task within) and its progress
// token (the extension has no progress).
func (or *orchestrator) runTask(t *mtask, inputResponses, requestState json.RawMessage) {
	params := map[string]json.RawMessage{}
	or.mu.Lock()
	for k, v := range t.call {
		params[k] = v
	}
	or.mu.Unlock()
	var meta map[string]json.RawMessage
	_ = json.Unmarshal(params["_meta"], &meta)
	delete(meta, "progressToken")
	caps := map[string]json.RawMessage{}
	_ = json.Unmarshal(meta[mcp.MetaKeyClientCapabilities], &caps)
	ext := map[string]json.RawMessage{}
	_ = json.Unmarshal(caps["extensions"], &ext)
	delete(ext, TasksExtension)
	caps["extensions"], _ = json.Marshal(ext)
	meta[mcp.MetaKeyClientCapabilities], _ = json.Marshal(caps)
	params["_meta"], _ = json.Marshal(meta)
	if inputResponses != nil {
		params["inputResponses"] = inputResponses
	}
	if requestState != nil {
		params["requestState"] = requestState
	}
	msg, _ := json.Marshal(map[string]any{"jsonrpc": mcp.JSONRPC_VERSION, "id": "task:" + t.id, "method": mcp.MethodToolsCall, "params": params})
	ctx, _ := or.sessionContext(context.WithoutCancel(or.ctx))
	resp, _ := json.Marshal(or.srv.HandleMessage(ctx, msg))
	var out struct {
		Result json.RawMessage `json:"result"`
		Error  json.RawMessage `json:"error"`
	}
	_ = json.Unmarshal(resp, &out)
	var res struct {
		ResultType    string          `json:"resultType"`
		InputRequests json.RawMessage `json:"inputRequests"`
		RequestState  json.RawMessage `json:"requestState"`
	}
	_ = json.Unmarshal(out.Result, &res)
	or.mu.Lock()
	t.running = false
	if t.status == mcp.TaskStatusCancelled {
		or.mu.Unlock()
		return
	}
	switch {
	case out.Error != nil:
		t.status, t.rpcErr = mcp.TaskStatusFailed, out.Error
	case res.ResultType == string(mcp.ResultTypeInputRequired):
		t.status, t.inputRequests, t.requestState = mcp.TaskStatusInputRequired, res.InputRequests, res.RequestState
	default:
		t.status, t.result = mcp.TaskStatusCompleted, out.Result
	}
	t.updated = time.Now().UTC()
	if t.status != mcp.TaskStatusInputRequired {
		t.ended = t.updated
	}
	or.mu.Unlock()
	or.taskChanged(t)
}

// taskEnvelope follows the turns of the tasks' agents: a task's turn is
// the one whose user_text (sent as the turn begins) is its prompt, the
// first such after the task was made; its result ends it.
func (or *orchestrator) taskEnvelope(e Envelope) {
	if e.Kind != event.UserText && e.Kind != event.Result {
		return
	}
	var d event.TextData
	if e.Kind == event.UserText && json.Unmarshal(e.Data, &d) != nil {
		return
	}
	or.mu.Lock()
	defer or.mu.Unlock()
	var first *mtask
	for _, t := range or.mtasks {
		// A task cancelled before its turn began still takes its
		// user_text, which another task of the same prompt must not.
		if t.agent != e.Agent {
			continue
		}
		switch {
		case e.Kind == event.Result && t.turn == e.Turn:
			t.turnDone = true
		case e.Kind == event.UserText && t.turn == 0 && t.text == d.Content.Text && (first == nil || t.created.Before(first.created)):
			first = t
		}
	}
	if first != nil {
		first.turn = e.Turn
	}
}

// taskJSON is t as tasks/get and notifications/tasks give it (a
// DetailedTask); or.mu is held.
func (or *orchestrator) taskJSON(t *mtask) map[string]any {
	// ttlMs is how long from its creation the task is kept: not known
	// (null) until it ends, then taskKept past its end.
	var ttl any
	if !t.ended.IsZero() {
		ttl = t.ended.Add(taskKept).Sub(t.created).Milliseconds()
	}
	m := map[string]any{
		"taskId": t.id, "status": t.status,
		"createdAt": t.created.Format(time.RFC3339Nano), "lastUpdatedAt": t.updated.Format(time.RFC3339Nano),
		"ttlMs": ttl, "pollIntervalMs": taskPollMs,
	}
	if t.message != "" {
		m["statusMessage"] = t.message
	}
	switch t.status {
	case mcp.TaskStatusCompleted:
		m["result"] = t.result
	case mcp.TaskStatusFailed:
		m["error"] = t.rpcErr
	case mcp.TaskStatusInputRequired:
		m["inputRequests"] = t.inputRequests
	}
	return m
}

// taskChanged tells the listen streams that follow t of its state.
func (or *orchestrator) taskChanged(t *mtask) {
	or.mu.Lock()
	snap := or.taskJSON(t)
	or.mu.Unlock()
	or.notifyListens(methodNotificationTasks, snap, func(l *listen) bool { return l.tasks[t.id] })
}

// taskRequest answers tasks/get, tasks/update and tasks/cancel.
func (or *orchestrator) taskRequest(r *rpcRequest, line []byte) {
	or.mu.Lock()
	t := or.mtasks[r.Params.TaskID]
	or.mu.Unlock()
	if t == nil {
		or.writeError(r.ID, mcp.INVALID_PARAMS, fmt.Sprintf("%s: no task %q in this kaimon mcp: its tasks are those its agent_run calls returned, each until %v after it ended (%s)", r.Method, r.Params.TaskID, taskKept, or.taskIDs()), nil)
		return
	}
	switch r.Method {
	case string(mcp.MethodTasksGet):
		msg := ""
		or.mu.Lock()
		working, agent := t.status == mcp.TaskStatusWorking, t.agent
		or.mu.Unlock()
		if working {
			msg = or.waitsFor(or.ctx, agent)
		}
		or.mu.Lock()
		snap := or.taskJSON(t)
		or.mu.Unlock()
		if msg != "" {
			snap["statusMessage"] = msg
		}
		or.writeResult(r.ID, string(mcp.ResultTypeComplete), snap)
	case methodTasksUpdate:
		var p struct {
			Params struct {
				InputResponses map[string]json.RawMessage `json:"inputResponses"`
			} `json:"params"`
		}
		_ = json.Unmarshal(line, &p)
		or.mu.Lock()
		var asked map[string]json.RawMessage
		_ = json.Unmarshal(t.inputRequests, &asked)
		answers := map[string]json.RawMessage{}
		// Answers that reach nothing (the task is not input_required, or
		// no key it asked) are acknowledged all the same, not refused: the
		// extension says to "acknowledge with an empty result" and "ignore
		// responses for unknown or already-satisfied keys"
		// (docs/extensions/tasks/overview.mdx), so that a client may send
		// an update again, e.g. when its first ack was lost. tasks/get
		// says what the task is at.
		for k, v := range p.Params.InputResponses {
			if _, ok := asked[k]; ok {
				answers[k] = v
			}
		}
		retry := t.status == mcp.TaskStatusInputRequired && !t.running && len(answers) > 0
		var state json.RawMessage
		if retry {
			state = t.requestState
			t.status, t.running, t.inputRequests, t.requestState = mcp.TaskStatusWorking, true, nil, nil
			t.updated = time.Now().UTC()
		}
		or.mu.Unlock()
		or.writeResult(r.ID, string(mcp.ResultTypeComplete), map[string]any{})
		if retry {
			b, _ := json.Marshal(answers)
			or.taskChanged(t)
			go or.runTask(t, b, state)
		}
	case string(mcp.MethodTasksCancel):
		or.mu.Lock()
		live := t.status == mcp.TaskStatusWorking || t.status == mcp.TaskStatusInputRequired
		// Only the task's own turn is interrupted: one the agent runs for
		// another caller, with the task's prompt queued behind it, is not.
		interrupt := live && t.agent != "" && t.turn != 0 && !t.turnDone
		if live {
			t.status, t.updated = mcp.TaskStatusCancelled, time.Now().UTC()
			t.ended = t.updated
			switch {
			case interrupt:
				t.message = fmt.Sprintf("cancelled by tasks/cancel: agent %s's turn %d, this task's, was interrupted", t.agent, t.turn)
			case t.turn != 0:
				t.message = fmt.Sprintf("cancelled by tasks/cancel after its turn (agent %s's turn %d) ended: nothing was interrupted", t.agent, t.turn)
			default:
				t.message = fmt.Sprintf("cancelled by tasks/cancel before its turn began: agent %s's turn, another caller's, was left alone; "+
					"this task's prompt, if the agent queued it, still runs after that turn (agent_interrupt stops it then)", t.agent)
			}
		}
		agent := t.agent
		or.mu.Unlock()
		if interrupt {
			if _, err := or.svc.Interrupt(or.ctx, &verbs.InterruptArgs{AgentID: agent}); err != nil {
				or.errLog.Printf("tasks/cancel of task %s: interrupting agent %s: %v", t.id, agent, err)
			}
		}
		or.writeResult(r.ID, string(mcp.ResultTypeComplete), map[string]any{})
		if live {
			or.taskChanged(t)
		}
	}
}

func (or *orchestrator) taskIDs() string {
	or.mu.Lock()
	defer or.mu.Unlock()
	var ids []string
	for id := range or.mtasks {
		ids = append(ids, id)
	}
	if len(ids) == 0 {
		return "none yet"
	}
	sort.Strings(ids)
	return fmt.Sprint(ids)
}

// waitsFor says what a working task's agent waits for: a permission
// request, answered with agent_permit; "" for none.
func (or *orchestrator) waitsFor(ctx context.Context, agent string) string {
	if agent == "" {
		return ""
	}
	st, err := or.svc.Status(ctx, &verbs.StatusArgs{AgentID: agent})
	if err != nil || len(st.PendingPermissions) == 0 {
		return ""
	}
	p := st.PendingPermissions[0]
	return waitingMessage(agent, p, "agent_permit with request_id "+p.RequestID)
}

// waitingMessage is a task's statusMessage while its agent waits on
// permission request p, answered how: one sentence for both revisions'
// tasks.
func waitingMessage(agent string, p verbs.PendingPermission, how string) string {
	what := p.Tool
	if p.Title != "" && p.Title != p.Tool {
		what += " (" + p.Title + ")"
	}
	return fmt.Sprintf("agent %s waits for permission to run %s: %s (denied if unanswered by %s)", agent, what, how, p.ExpiresAt)
}
