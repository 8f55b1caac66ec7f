package codex

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tidwall/gjson"

	"github.com/kaimon/kaimon/internal/agentbin"
	"github.com/kaimon/kaimon/internal/apitype"
	"github.com/kaimon/kaimon/internal/backend"
	"github.com/kaimon/kaimon/internal/backend/host"
	"github.com/kaimon/kaimon/internal/event"
	"github.com/kaimon/kaimon/internal/proc"
	"github.com/kaimon/kaimon/internal/version"
)

// Timeouts of the backend's exchanges with app-server.
const (
	// StopGrace is how long Close lets the group exit on SIGTERM.
	StopGrace = host.StopGrace
	// InterruptTimeout bounds the wait for turn/interrupt's answer.
	InterruptTimeout = 5 * time.Second
	// callTimeout bounds a request that is answered at once (turn/start).
	callTimeout = 30 * time.Second
)

// MaxLine bounds one line of app-server's stdout (a command's whole
// output can be in one item/completed).
var MaxLine = 64 << 20

// prog is the Codex CLI's row of the program table.
var prog = agentbin.Codex

// Backend is one `codex app-server` process with one thread: one process,
// many turns. It implements backend.Backend.
//
// Events are emitted from the goroutine that reads app-server's stdout,
// and from Send (a turn's user_text and turn_started), never two at once
// (life's lock). Sink.Exited is called once, after the last Emit.
type Backend struct {
	opts     backend.Options
	sink     backend.Sink
	bin      string
	env      []string
	logPath  string
	approval string // the thread's approvalPolicy
	sandbox  string // and sandbox mode, from the preset

	// life's lock serializes the mapper and every call to sink.Emit, and
	// guards m.
	life host.Life
	m    *Mapper

	p     atomic.Pointer[host.Process]
	calls calls
	asks  *host.Asks

	// infoMu guards what Info reports and the model the next turn asks
	// for. Never held while calling the sink.
	infoMu  sync.Mutex
	thread  string // the thread's id
	rollout string // its rollout file, Codex's transcript
	model   string // the model the thread runs
	effort  string // the reasoning effort asked for, "" for Codex's
	// switched says SetModel changed model or effort since the last
	// turn/start, which then carries them (Codex keeps a turn's for the
	// turns after it): a turn/start that names them costs Codex ~20 ms.
	switched bool

	done      chan struct{}
	closeOnce sync.Once
}

var _ backend.Backend = (*Backend)(nil)

// ParseModel splits codex:[<model>][/<effort>] into the model ("" for the
// one Codex's config names) and the effort; effort, when not "", is the
// caller's, which wins over the suffix. kaimon's "max" is Codex's
// "xhigh", its highest.
func ParseModel(model, effort string) (name, eff string, err error) {
	rest, ok := strings.CutPrefix(strings.TrimSpace(model), apitype.PrefixCodex)
	if !ok {
		return "", "", fmt.Errorf("model %q is not a codex: model", model)
	}
	name, eff, _ = strings.Cut(rest, "/")
	if effort != "" {
		eff = effort
	}
	if eff == "max" {
		eff = "xhigh"
	}
	if eff != "" && !slices.Contains(Efforts, eff) {
		return "", "", fmt.Errorf("codex takes the reasoning efforts %s, not %q", strings.Join(Efforts, ", "), eff)
	}
	return name, eff, nil
}

// Efforts are Codex's reasoning efforts.
var Efforts = []string{"none", "minimal", "low", "medium", "high", "xhigh"}

// Modes maps kaimon's permission modes to Codex's approval policy and
// sandbox, which the thread starts with. Codex asks (approval requests,
// which the preset or kaimon permit answer) only what the policy sends
// to the user: under untrusted every command it does not know to be
// read-only, and a file change; under on-request what the model asks to
// run outside the sandbox. bypass is never asking with full access, and
// only when the user asked for bypass.
var Modes = map[string][2]string{
	"default":           {"untrusted", "workspace-write"},
	"acceptEdits":       {"untrusted", "workspace-write"},
	"plan":              {"on-request", "read-only"},
	"auto":              {"on-request", "workspace-write"},
	"bypassPermissions": {"never", "danger-full-access"},
}

// New validates o and finds the Codex CLI: KAIMON_CODEX_BIN, else codex on
// the agent's PATH. Nothing starts until Start.
func New(o backend.Options, sink backend.Sink) (*Backend, error) {
	if err := o.Check(); err != nil {
		return nil, err
	}
	model, effort, err := ParseModel(o.Model, o.Effort)
	if err != nil {
		return nil, err
	}
	env := o.Env
	if env == nil {
		env = os.Environ()
	}
	bin, err := host.FindProgram(env, prog, "the Codex CLI")
	if err != nil {
		return nil, err
	}
	mode := o.Policy.Mode
	if o.Policy.Bypass() {
		mode = "bypassPermissions"
	}
	pm, ok := Modes[mode]
	if !ok {
		pm = Modes["default"]
	}
	env = host.SetEnv(env, backend.EnvAgentSession, o.ID)
	if o.Door != nil {
		env = host.SetEnv(env, doorTokenEnv, o.Door.Token)
	}
	b := &Backend{
		opts: o, sink: sink, bin: bin,
		env:      env,
		approval: pm[0], sandbox: pm[1],
		m:     NewMapper(),
		asks:  host.NewAsks(),
		model: model, effort: effort,
		done:   make(chan struct{}),
		thread: o.ResumeSession,
	}
	if o.CacheDir != "" {
		b.logPath = o.Files().Log
	}
	return b, nil
}

// Argv is the command line Start runs.
func (b *Backend) Argv() []string { return append([]string{b.bin}, prog.Args...) }

// Process identifies app-server's process, for the pid file.
func (b *Backend) Process() proc.Identity { return b.p.Load().ID() }

// Start spawns app-server in its own process group, initializes it and
// starts the agent's thread (or resumes it, or forks another agent's),
// and returns once a turn can be sent. On failure the process is gone
// and the error is the whole report.
func (b *Backend) Start(ctx context.Context) error {
	if err := b.life.Begin("codex backend"); err != nil {
		return err
	}
	if err := host.CheckDir(b.opts.Cwd); err != nil {
		return err
	}
	p, err := host.Spawn(host.Spec{Name: "codex", Bin: b.bin, Args: prog.Args, Dir: b.opts.Cwd, Env: b.env, LogPath: b.logPath})
	if err != nil {
		return err
	}
	b.p.Store(p)
	go b.run(p)

	err = b.ready(ctx, p)
	if err == nil && !b.life.MarkReady() {
		err = b.exitedEarly()
	}
	if err != nil {
		p.CloseInput()
		p.Child.Stop(StopGrace)
		<-b.done
		return err
	}
	return nil
}

// ready initializes app-server and opens the thread.
func (b *Backend) ready(ctx context.Context, p *host.Process) (err error) {
	call := func(method string, params any) (json.RawMessage, error) {
		r, err := b.calls.call(ctx, p, method, params)
		if errors.Is(err, proc.ErrExited) {
			return nil, b.exitedEarly()
		}
		return r, err
	}
	_, err = call("initialize", map[string]any{"clientInfo": map[string]any{"name": "kaimon", "title": "kaimon", "version": version.String()}})
	if err != nil {
		return err
	}
	if err := p.WriteJSON(notification{Method: "initialized"}); err != nil {
		return fmt.Errorf("writing initialized to codex: %w", err)
	}
	params := map[string]any{"cwd": b.opts.Cwd, "approvalPolicy": b.approval, "sandbox": b.sandbox}
	servers, err := b.mcpServers()
	if err != nil {
		return err
	}
	config := map[string]any{}
	if len(servers) > 0 {
		config["mcp_servers"] = servers
	}
	if b.effort != "" {
		config["model_reasoning_effort"] = b.effort
	}
	if len(config) > 0 {
		params["config"] = config
	}
	if b.model != "" {
		params["model"] = b.model
	}
	method := "thread/start"
	switch {
	case b.opts.ResumeSession != "":
		method, params["threadId"] = "thread/resume", b.opts.ResumeSession
	case b.opts.Fork != nil:
		method, params["threadId"] = "thread/fork", b.opts.Fork.Session
	}
	r, err := call(method, params)
	if err != nil {
		return err
	}
	res := gjson.ParseBytes(r)
	b.infoMu.Lock()
	b.thread, b.rollout = res.Get("thread.id").String(), res.Get("thread.path").String()
	if m := res.Get("model").String(); m != "" {
		b.model = m
	}
	if e := res.Get("reasoningEffort").String(); e != "" && b.effort == "" {
		b.effort = e
	}
	b.infoMu.Unlock()
	if b.thread == "" {
		return fmt.Errorf("codex answered %s without a thread id: %s", method, r)
	}
	return b.checkLogin(call)
}

// checkLogin refuses a Codex that cannot reach a model: one whose
// provider needs an OpenAI login (the built-in one) and that has none,
// which would retry each turn "waiting for network" for minutes. Asked
// after the thread opened: a config Codex cannot load fails thread/start
// first, in Codex's own words (`wire_api = "chat"` is no longer
// supported…), and Codex then reads as the default provider. An API key
// in the environment is left to Codex to use.
func (b *Backend) checkLogin(call func(string, any) (json.RawMessage, error)) error {
	r, err := call("account/read", map[string]any{})
	if err != nil {
		return err
	}
	a := gjson.ParseBytes(r)
	if !a.Get("requiresOpenaiAuth").Bool() || a.Get("account").Type != gjson.Null && a.Get("account").Exists() {
		return nil
	}
	for _, k := range []string{"OPENAI_API_KEY", "CODEX_API_KEY"} {
		if host.LookupEnv(b.env, k) != "" {
			return nil
		}
	}
	home := host.LookupEnv(b.env, "CODEX_HOME")
	if home == "" {
		home = "~/.codex"
	}
	return fmt.Errorf("codex is not logged in, and its model provider needs a login: run `%s` as the user the daemon runs as (CODEX_HOME %s), "+
		"or name a model_provider of your own in %s", prog.Login, home, filepath.Join(home, "config.toml"))
}

// doorTokenEnv is the variable that holds the door's token in
// app-server's environment, which Codex sends as the bearer token of the
// kaimon MCP server: the secret stays out of the protocol and the
// rollout, and Codex's default shell environment policy leaves variables
// named *TOKEN* out of the model's commands.
const doorTokenEnv = "KAIMON_DOOR_TOKEN"

// mcpServers are the thread's MCP servers, in Codex's config form: kaimon's
// door as server kaimon (streamable HTTP, the agent's id in its header and
// its token from doorTokenEnv), then the caller's mcp_config.
func (b *Backend) mcpServers() (map[string]any, error) {
	out := map[string]any{}
	if d := b.opts.Door; d != nil {
		out["kaimon"] = map[string]any{"url": d.URL, "bearer_token_env_var": doorTokenEnv,
			"env_http_headers": map[string]string{backend.HeaderAgent: backend.EnvAgentSession}}
	}
	servers, err := b.opts.CallerMCPServers()
	if err != nil {
		return nil, err
	}
	for name, s := range servers {
		switch {
		case s.Command != "":
			srv := map[string]any{"command": s.Command}
			if len(s.Args) > 0 {
				srv["args"] = s.Args
			}
			if len(s.Env) > 0 {
				srv["env"] = s.Env
			}
			out[name] = srv
		case s.URL != "":
			srv := map[string]any{"url": s.URL}
			if len(s.Headers) > 0 {
				srv["http_headers"] = s.Headers
			}
			out[name] = srv
		}
	}
	return out, nil
}

// exitedEarly describes an app-server that exited before it was ready.
func (b *Backend) exitedEarly() error {
	p := b.p.Load()
	<-p.Child.Done()
	b.life.Lock()
	hungUp := b.life.HungUp()
	b.life.Unlock()
	return p.ExitedEarly(hungUp)
}

// run reads app-server's stdout until it closes, then reports the exit.
func (b *Backend) run(p *host.Process) {
	p.Serve(MaxLine, b.handle, b.skipped, nil, b.life.HangUp)
	b.finish(p)
}

// skipped reports a stdout line over MaxLine that was read past.
func (b *Backend) skipped(size int64) {
	b.life.Lock()
	defer b.life.Unlock()
	if b.life.Live() {
		b.sink.Emit(event.NewError(b.m.Current(), fmt.Sprintf("codex printed a stdout line of %d bytes, over kaimon's limit of %d bytes; kaimon skipped it", size, MaxLine),
			map[string]int64{"bytes": size, "limit": int64(MaxLine)}))
	}
}

// handle takes one line: a response to kaimon, a request of Codex's, or
// a notification, which the mapper maps.
func (b *Backend) handle(line []byte) {
	var msg message
	if err := json.Unmarshal(line, &msg); err != nil {
		return // not the protocol: Codex logs to stderr, but be safe
	}
	switch {
	case msg.Method == "":
		b.calls.deliver(msg)
		return
	case msg.ID != nil:
		b.request(msg)
		return
	case msg.Method == "serverRequest/resolved":
		// Codex withdrew a request (the turn ended): stop asking.
		b.asks.Cancel(gjson.GetBytes(msg.Params, "requestId").Raw)
		return
	}
	var next *backend.Turn
	b.life.Lock()
	if b.life.Live() {
		var evs []event.Event
		if msg.Method == "turn/completed" {
			evs, next = b.m.End(msg.Params)
		} else {
			evs = b.m.Map(msg.Method, msg.Params)
		}
		for _, ev := range evs {
			b.sink.Emit(ev)
		}
	}
	b.life.Unlock()
	if next != nil {
		// Not from this goroutine: turn/start's answer comes through it.
		go b.submit(*next, true)
	}
}

// finish reports the process's exit: once, after everything it printed.
func (b *Backend) finish(p *host.Process) {
	msg := b.life.Ended(p, "closed its stdout")
	p.Child.Stop(proc.LeftoverGrace) // what it left, in its group or outside
	b.asks.Stop()
	b.calls.close()
	b.life.Report(p, b.sink, b.m, msg)
	close(b.done)
}

// Send sends user turn turn: now, if no turn is in flight, else when the
// turns before it have ended (kaimon queues them, as for the claude CLI:
// a turn/start during a turn would steer it rather than follow it).
func (b *Backend) Send(turn int, text string) error {
	active, err := b.life.Push(b.sink, b.m, "codex", turn, text)
	if err != nil || !active {
		return err
	}
	return b.submit(backend.Turn{Number: turn, Text: text}, false)
}

// submit starts turn t, now active, with the model and effort the agent
// has now. If that fails the turn is ended: by the caller when report is
// false (Send returns the error), else here with an error and a result.
// The next queued turn then goes.
func (b *Backend) submit(t backend.Turn, report bool) error {
	b.infoMu.Lock()
	params := map[string]any{"threadId": b.thread, "input": []map[string]any{{"type": "text", "text": t.Text}}}
	switched := b.switched
	if switched {
		params["model"] = b.model
		if b.effort != "" {
			params["effort"] = b.effort
		}
		b.switched = false
	}
	b.infoMu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	r, err := b.calls.call(ctx, b.p.Load(), "turn/start", params)
	if err == nil {
		b.life.Lock()
		if n, ok := b.m.Active(); ok && n == t.Number && b.m.TurnID == "" {
			b.m.TurnID = gjson.GetBytes(r, "turn.id").String()
		}
		b.life.Unlock()
		return nil
	}
	err = fmt.Errorf("starting turn %d: %w", t.Number, err)
	if switched {
		b.infoMu.Lock()
		b.switched = true // for the next turn, then
		b.infoMu.Unlock()
	}
	if next := b.life.Unsent(b.sink, b.m, t, err, report); next != nil {
		go b.submit(*next, true)
	}
	return err
}

// Interrupt asks Codex to end the turn in flight (turn/interrupt); the
// turn then ends with its turn/completed, status interrupted: cancelled.
// The approvals it waits on are withdrawn. False, and no error, if no
// turn was in flight.
func (b *Backend) Interrupt(ctx context.Context) (bool, error) {
	turn, ok := b.life.BeginInterrupt(b.m)
	if !ok {
		return false, nil
	}
	ctx, cancel := context.WithTimeout(ctx, InterruptTimeout)
	defer cancel()
	// Codex's id of the turn comes with turn/start's answer, a moment
	// after the turn was sent.
	var id string
	for {
		b.life.Lock()
		n, ok := b.m.Active()
		id = b.m.TurnID
		b.life.Unlock()
		if !ok || n != turn {
			return true, nil // it ended meanwhile
		}
		if id != "" {
			break
		}
		select {
		case <-ctx.Done():
			return false, fmt.Errorf("codex had not started turn %d when kaimon gave up waiting to interrupt it: %w", turn, ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
	b.infoMu.Lock()
	thread := b.thread
	b.infoMu.Unlock()
	b.asks.CancelAll()
	if _, err := b.calls.call(ctx, b.p.Load(), "turn/interrupt", map[string]any{"threadId": thread, "turnId": id}); err != nil {
		if errors.Is(err, proc.ErrExited) {
			return false, errors.New("codex exited before it acknowledged the interrupt")
		}
		return false, err
	}
	return true, nil
}

// SetModel points the agent's next turns at model (codex:<model>[/<effort>],
// or the model alone): Codex takes the model and effort with each
// turn/start, keeping the thread. An effort not given keeps the agent's.
func (b *Backend) SetModel(ctx context.Context, model string) (bool, error) {
	m := strings.TrimSpace(model)
	if !strings.HasPrefix(m, apitype.PrefixCodex) {
		if _, err := backend.Lookup(m); err == nil && strings.Contains(m, ":") {
			return false, fmt.Errorf("agent_set_model switches models within Codex: %s is another backend's; close this agent and open a new one", m)
		}
		m = apitype.PrefixCodex + m
	}
	name, eff, err := ParseModel(m, "")
	if err != nil {
		return false, err
	}
	if name == "" {
		return false, errors.New("no model named")
	}
	if !b.life.LiveNow() {
		return false, nil
	}
	b.infoMu.Lock()
	b.model, b.switched = name, true
	if eff != "" {
		b.effort = eff
	}
	b.infoMu.Unlock()
	return true, nil
}

// Close stops app-server: stdin closed, then SIGTERM to its group, SIGKILL
// after StopGrace. Turns in flight end cancelled.
func (b *Backend) Close() error {
	b.closeOnce.Do(func() { b.life.Close(b.p.Load, b.done) })
	return nil
}

// Info reports the thread: its id, its rollout file (Codex's transcript)
// and the model, in the codex:<model>[/<effort>] form a resume takes.
func (b *Backend) Info() backend.Info {
	b.infoMu.Lock()
	defer b.infoMu.Unlock()
	model := apitype.PrefixCodex + b.model
	if b.effort != "" {
		model += "/" + b.effort
	}
	return backend.Info{SessionID: b.thread, Transcript: b.rollout, Model: model, QueuesPrompts: true}
}

// request answers a request of Codex's: an approval is asked through the
// session's Asker (on its own goroutine: the answer may take minutes);
// anything else is refused, so that Codex does not wait forever.
func (b *Backend) request(msg message) {
	switch msg.Method {
	case "item/commandExecution/requestApproval", "item/fileChange/requestApproval":
		go b.approve(msg)
	default:
		go b.respond(response{ID: msg.ID, Error: &rpcError{Code: -32601, Message: "kaimon does not handle " + msg.Method}})
	}
}

// approve raises an approval request as a permission request: the call
// Codex announced (its tool_use came first), with the justification
// Codex gives, asked as Bash or Edit. Allowed is accept (for the session
// when always), denied decline (the model is told and the turn goes on),
// withdrawn (an interrupt, the agent gone) cancel.
func (b *Backend) approve(msg message) {
	p := gjson.ParseBytes(msg.Params)
	b.life.Lock()
	call, tool, ok := b.m.Call(p.Get("itemId").String())
	turn := b.m.Current()
	b.life.Unlock()
	if !ok {
		call = event.ToolCall{ToolCallID: p.Get("itemId").String(), Title: p.Get("command").String(), Kind: "execute",
			Status: apitype.ToolPending, Content: []any{}, Locations: []any{}}
		tool = "Bash"
		if msg.Method == "item/fileChange/requestApproval" {
			call.Kind, call.Title, tool = "edit", "edit files", "Edit"
		}
	}
	input := map[string]any{}
	_ = json.Unmarshal(call.RawInput, &input)
	if r := p.Get("reason").String(); r != "" {
		input["justification"] = r
	}
	if g := p.Get("grantRoot").String(); g != "" {
		input["grantRoot"] = g
	}
	call.RawInput = rawObject(input)
	decision := "decline"
	if b.opts.Ask != nil {
		ctx, done := b.asks.Begin(context.Background(), string(msg.ID))
		defer done()
		d := b.opts.Ask(ctx, backend.PermissionRequest{Turn: turn, Tool: tool, Call: call, Accepted: b.acceptedEdit(tool, call)})
		switch {
		case d.By == event.DecidedByCancelled:
			decision = "cancel"
		case d.Allow && d.Always:
			decision = "acceptForSession"
		case d.Allow:
			decision = "accept"
		}
		if ctx.Err() != nil && b.asks.Stopped() {
			return // the process is gone: nobody to answer
		}
	}
	b.respond(response{ID: msg.ID, Result: map[string]string{"decision": decision}})
}

// acceptedEdit says why the preset accepts a file change Codex asks about
// (untrusted asks every one): under acceptEdits, one whose files are all
// inside the agent's cwd.
func (b *Backend) acceptedEdit(tool string, call event.ToolCall) string {
	if tool != "Edit" || b.opts.Policy.Mode != "acceptEdits" || len(call.Locations) == 0 {
		return ""
	}
	for _, l := range call.Locations {
		loc, _ := l.(map[string]any)
		path, _ := loc["path"].(string)
		rel, err := filepath.Rel(b.opts.Cwd, path)
		if path == "" || err != nil || rel == ".." || strings.HasPrefix(rel, "../") || filepath.IsAbs(rel) {
			return ""
		}
	}
	return "acceptEdits: an edit inside the agent's cwd"
}

// respond writes an answer to a request of Codex's.
func (b *Backend) respond(r response) {
	_ = b.p.Load().WriteJSON(r)
}
