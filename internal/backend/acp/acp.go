// Package acp drives agents that speak the Agent Client Protocol on stdio
// (opencode, claude-agent-acp, gemini-cli): acp:<agent>[:<model>].
//
// The JSON-RPC side is github.com/coder/acp-go-sdk (v0.13: it processes
// notifications in order and makes a response wait for the notifications
// received before it, so a prompt's result never overtakes its last text).
// Kaimon is the ACP client: it answers the agent's fs/* callbacks (confined
// to the cwd, fs.go) and its permission requests (through the session's
// Asker, as the claude backend does), and maps session/update to events
// (mapper.go). How far a preset reaches the agent's own tools depends on
// the agent (policy.go); what it cannot hold is said in an error event at
// spawn.
package acp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	sdk "github.com/coder/acp-go-sdk"

	"github.com/kaimon/kaimon/internal/backend"
	"github.com/kaimon/kaimon/internal/backend/host"
	"github.com/kaimon/kaimon/internal/event"
	"github.com/kaimon/kaimon/internal/policy"
	"github.com/kaimon/kaimon/internal/proc"
	"github.com/kaimon/kaimon/internal/redact"
)

// Timeouts.
const (
	// StopGrace is how long Close lets the agent's group exit on SIGTERM.
	StopGrace = host.StopGrace
	// InterruptTimeout bounds the wait for a cancelled turn to end.
	InterruptTimeout = 5 * time.Second
	// announceWait bounds how long a permission request waits for the
	// announce of its tool call (which names the tool) to be mapped.
	announceWait = 300 * time.Millisecond
)

// Backend is one ACP agent process with one session. It implements
// backend.Backend.
type Backend struct {
	opts    backend.Options
	sink    backend.Sink
	agent   *Agent
	model   string // asked for at open, "" for the agent's default
	pol     *policy.Policy
	bin     string
	env     []string
	logPath string
	jail    *Jail

	// life's lock serializes the mapper and every call to sink.Emit, and
	// guards the state below it.
	life      host.Life
	m         *Mapper
	loading   bool          // session/load replays the old conversation: not events
	lines     *lineWatch    // the agent's stdout as the SDK reads it
	turnEnded chan struct{} // closed and replaced when a turn ends

	// p is the agent's process once spawned (host.Process is nil-safe).
	p atomic.Pointer[host.Process]

	conn      *sdk.ClientSideConnection
	sessionID sdk.SessionId
	// How the session takes a model: the model config option
	// (opencode), session/set_model (gemini-cli, claude-agent-acp), or
	// neither.
	modelConfig bool
	modelMethod bool
	models      []string

	asks    *host.Asks      // permission requests being decided
	runCtx  context.Context // ends when the process is gone
	runStop context.CancelFunc

	infoMu   sync.Mutex
	curModel string
	queues   bool
	// usageNote is the mapper's UsageNote at the last turn's end.
	usageNote string

	done      chan struct{}
	closeOnce sync.Once
	generated []string // files and dirs removed at exit
}

var _ backend.Backend = (*Backend)(nil)

// New validates o and finds the agent's program. Nothing starts until
// Start.
func New(o backend.Options, sink backend.Sink) (*Backend, error) {
	if err := o.Check(); err != nil {
		return nil, err
	}
	pol := o.Policy
	a, model, err := ParseModelIn(o.Model, o.ACPAgents)
	if err != nil {
		return nil, err
	}
	if o.Effort != "" {
		return nil, fmt.Errorf("effort is a claude CLI option; acp:%s takes none (drop --effort)", a.Name)
	}
	if pol.Only && o.MCPConfig != "" {
		return nil, errors.New("only refuses a caller-supplied mcp_config: under only kaimon attaches its own server alone; drop mcp_config or only")
	}
	env := o.Env
	if env == nil {
		env = os.Environ()
	}
	bin, err := a.findBinary(env)
	if err != nil {
		return nil, err
	}
	for _, kv := range a.ProgEnv {
		k, v, _ := strings.Cut(kv, "=")
		env = host.SetEnv(env, k, v)
	}
	b := &Backend{
		opts: o, sink: sink, agent: a, model: model, pol: pol, bin: bin,
		env:       host.SetEnv(env, backend.EnvAgentSession, o.ID),
		m:         newMapperFor(a),
		turnEnded: make(chan struct{}),
		asks:      host.NewAsks(),
		done:      make(chan struct{}),
		curModel:  model,
	}
	b.runCtx, b.runStop = context.WithCancel(context.Background())
	if o.CacheDir != "" {
		b.logPath = o.Files().Log
	}
	return b, nil
}

// Process identifies the agent's process, for the pid file.
func (b *Backend) Process() proc.Identity { return b.p.Load().ID() }

// Argv is the command line Start runs.
func (b *Backend) Argv() []string { return append([]string{b.bin}, b.args(b.agent.Args)...) }

// args is the agent's arguments, with the model asked for at open after
// its ModelFlag when it takes one, its tools' permission rules after its
// PermissionFlag, and last the tools the preset denies after its
// ExcludeFlag.
func (b *Backend) args(args []string) []string {
	out := append([]string{}, args...)
	if b.agent.ModelFlag != "" && b.model != "" {
		out = append(out, b.agent.ModelFlag, b.model)
	}
	for _, r := range askRules(b.agent, b.pol) {
		out = append(out, b.agent.PermissionFlag, r)
	}
	ex := excludedTools(b.agent, b.pol)
	switch {
	case b.agent.ExcludeFlag == "" || len(ex) == 0:
	case b.agent.ExcludeEach:
		for _, n := range ex {
			out = append(out, b.agent.ExcludeFlag, n)
		}
	default:
		out = append(append(out, b.agent.ExcludeFlag), ex...)
	}
	return out
}

// newMapperFor is a Mapper that knows the agent's ways (Agent).
func newMapperFor(a *Agent) *Mapper {
	m := NewMapper()
	m.CumulativeUsage, m.TitlesDescribe, m.Notice = a.CumulativeUsage, a.TitlesDescribe, a.Notice
	return m
}

// Start spawns the agent in its own process group and readies its
// session: initialize, session/new (cwd and kaimon's door as an HTTP MCP
// server), the model asked for at open, the session mode of the preset. It
// returns once a turn can be sent. On failure the process is gone and the
// error is the whole report.
func (b *Backend) Start(ctx context.Context) error {
	if err := b.life.Begin("acp backend"); err != nil {
		return err
	}

	if err := host.CheckDir(b.opts.Cwd); err != nil {
		return err
	}
	jail, err := NewJail(b.opts.Cwd)
	if err != nil {
		return fmt.Errorf("agent cwd %q: %w", b.opts.Cwd, err)
	}
	if !b.pol.FS() {
		jail.Allowed = false
		jail.Why = fmt.Sprintf("the %s preset denies the agent's native file tools, so kaimon refuses fs/* (use kaimon's tools)", b.pol.Preset.Name)
	}
	b.jail = jail
	env := b.env
	if b.agent.Route == RouteBridge {
		add, err := writeOpencodeConfig(&b.opts, b.pol, b.model, env)
		if err != nil {
			return err
		}
		b.generated = append(b.generated, b.opts.Files().Opencode)
		for _, kv := range add {
			k, v, _ := strings.Cut(kv, "=")
			env = host.SetEnv(env, k, v)
		}
	}
	if b.agent.Route == RoutePermissionEnv {
		env = permissionEnv(b.agent, b.pol, env)
	}
	if b.agent.Name == "gemini" {
		// One process: no relaunch of itself with a bigger heap.
		env = defaultEnv(env, "GEMINI_CLI_NO_RELAUNCH", "true")
	}
	b.env = env
	err = b.startWith(ctx, b.args(b.agent.Args))
	if err != nil && b.agent.FallbackArgs != nil && b.rejectedArgs() {
		b.retry()
		err = b.startWith(ctx, b.args(b.agent.FallbackArgs))
	}
	if err != nil {
		b.removeGenerated()
		return err
	}
	if msg := Enforcement(b.agent, b.pol); msg != "" {
		b.emit(event.NewError(0, msg, map[string]any{"route": b.agent.Route.String(), "preset": b.pol.Preset.Name}))
	}
	if b.opts.SystemPrompt != "" && b.agent.Route == RoutePermissionOnly {
		b.emit(event.NewError(0, "acp:"+b.agent.Name+" takes no system prompt over ACP: system_prompt is ignored", nil))
	}
	return nil
}

// retry readies the backend for another process after one that failed to
// start: that one's end marked it exited and stopped its permission
// requests and its run context, which would refuse the next one's.
func (b *Backend) retry() {
	b.life.Retry()
	b.asks = host.NewAsks()
	b.runCtx, b.runStop = context.WithCancel(context.Background())
}

// rejectedArgs says whether the last start failed because the program did
// not know its arguments (yargs: "Unknown argument").
func (b *Backend) rejectedArgs() bool {
	return strings.Contains(strings.ToLower(b.p.Load().StderrTail()), "unknown argument")
}

func (b *Backend) emit(ev event.Event) {
	b.life.Lock()
	defer b.life.Unlock()
	if !b.life.Exited() {
		b.sink.Emit(ev)
	}
}

// startWith spawns the program with args and runs the session setup.
func (b *Backend) startWith(ctx context.Context, args []string) error {
	p, err := host.Spawn(host.Spec{Name: "acp:" + b.agent.Name, Bin: b.bin, Args: args, Dir: b.opts.Cwd, Env: b.env, LogPath: b.logPath})
	if err != nil {
		return err
	}
	done := make(chan struct{})
	b.life.Lock() // Close takes both at once
	b.p.Store(p)
	b.done = done
	b.life.Unlock()

	b.lines = &lineWatch{r: p.Stdout, max: SDKMaxLine}
	conn := sdk.NewClientSideConnection(&client{b: b}, p, newRequestFilter(b.lines, b.answerNonStandard))
	conn.SetLogger(slog.New(slog.NewTextHandler(logWriter{prefix: "agent " + b.opts.ID + ": acp: ", redact: b.opts.Redact}, &slog.HandlerOptions{Level: slog.LevelWarn})))
	b.conn = conn
	go b.watch(p, conn, done)

	err = b.setup(ctx)
	if err == nil && !b.life.MarkReady() {
		err = b.exitedEarly()
	}
	if err != nil {
		p.CloseInput()
		p.Child.Stop(StopGrace)
		<-done
		return err
	}
	return nil
}

// setup runs initialize, session/new, the model and the mode.
func (b *Backend) setup(ctx context.Context) error {
	fail := func(what string, err error) error { return b.refused(ctx, what, err) }
	init, err := b.conn.Initialize(ctx, sdk.InitializeRequest{
		ProtocolVersion:    sdk.ProtocolVersionNumber,
		ClientCapabilities: sdk.ClientCapabilities{Fs: sdk.FileSystemCapabilities{ReadTextFile: true, WriteTextFile: true}},
		ClientInfo:         &sdk.Implementation{Name: "kaimon", Version: "1"},
	})
	if err != nil {
		return fail("initialize", err)
	}
	b.infoMu.Lock()
	b.queues = promptQueueing(init.AgentCapabilities.Meta)
	b.infoMu.Unlock()

	servers, err := b.mcpServers(init.AgentCapabilities.McpCapabilities)
	if err != nil {
		return err
	}
	sess, err := b.session(ctx, init.AgentCapabilities, servers)
	if err != nil {
		return err
	}
	cur := ""
	if v := modelOption(sess.ConfigOptions); v != "" {
		b.modelConfig, cur = true, v
		b.models = configValues(sess.ConfigOptions, "model")
	} else if sess.Models != nil {
		b.modelMethod, cur = true, string(sess.Models.CurrentModelId)
		for _, mi := range sess.Models.AvailableModels {
			b.models = append(b.models, string(mi.ModelId))
		}
	}
	b.infoMu.Lock()
	if cur != "" {
		b.curModel = cur
	}
	b.infoMu.Unlock()
	if b.model != "" && b.model != cur && !(b.agent.ModelFlag != "" && !b.modelConfig && !b.modelMethod) {
		// claude-agent-acp ignores a model inside _meta: the model asked
		// for at open is set over the wire, right after session/new.
		if err := b.switchModel(ctx, b.model); err != nil {
			return fmt.Errorf("acp:%s: model %s: %w", b.agent.Name, b.model, err)
		}
	}
	if what, err := ApplyMode(ctx, b.conn, b.sessionID, b.agent, b.pol, sess.Modes, sess.ConfigOptions); err != nil {
		return fail(what, err)
	}
	return nil
}

// ApplyMode sets on session sid of agent a the mode pol stands for, from
// the modes (or the config option of category mode, kilo's way) its
// session/new offered, unless it is current; on failure it says which
// request failed. The benchmark's bare client sets a session up with it
// too, so that both sides run the agent in one mode.
func ApplyMode(ctx context.Context, conn *sdk.ClientSideConnection, sid sdk.SessionId, a *Agent, pol *policy.Policy,
	modes *sdk.SessionModeState, opts []sdk.SessionConfigOption) (string, error) {
	if modes != nil {
		var avail []string
		for _, md := range modes.AvailableModes {
			avail = append(avail, string(md.Id))
		}
		if mode := sessionMode(a, pol, avail); mode != "" && mode != string(modes.CurrentModeId) {
			if _, err := conn.SetSessionMode(ctx, sdk.SetSessionModeRequest{SessionId: sid, ModeId: sdk.SessionModeId(mode)}); err != nil {
				return "session/set_mode " + mode, err
			}
		}
	} else if opt, cur := modeOption(opts); opt != "" {
		if mode := sessionMode(a, pol, configValues(opts, opt)); mode != "" && mode != cur {
			if _, err := conn.SetSessionConfigOption(ctx, sdk.SetSessionConfigOptionRequest{ValueId: &sdk.SetSessionConfigOptionValueId{
				SessionId: sid, ConfigId: sdk.SessionConfigId(opt), Value: sdk.SessionConfigValueId(mode)}}); err != nil {
				return "session/set_config_option " + opt + " " + mode, err
			}
		}
	}
	return "", nil
}

// modeOption is the id and current value of the config option of
// category mode, "" if none.
func modeOption(opts []sdk.SessionConfigOption) (id, cur string) {
	for _, o := range opts {
		if o.Select != nil && o.Select.Category != nil && *o.Select.Category == sdk.SessionConfigOptionCategoryMode {
			return string(o.Select.Id), string(o.Select.CurrentValue)
		}
	}
	return "", ""
}

// setSession records the session id, under infoMu: Info reads it, from
// the session manager, while setup's notifications are still coming.
func (b *Backend) setSession(id sdk.SessionId) {
	b.infoMu.Lock()
	b.sessionID = id
	b.infoMu.Unlock()
}

// refused describes a failed setup request: the agent exited, ran out of
// time, or answered with an error.
func (b *Backend) refused(ctx context.Context, what string, err error) error {
	select {
	case <-b.p.Load().Child.Done():
		return b.exitedEarly()
	default:
	}
	if ctx.Err() != nil {
		return fmt.Errorf("acp:%s did not get ready (%s): %w", b.agent.Name, what, ctx.Err())
	}
	if authRequired(err) {
		return loginError(b.agent, what, err)
	}
	return fmt.Errorf("acp:%s refused %s: %s", b.agent.Name, what, rpcMessage(err))
}

// authCode is ACP's error code for "Authentication required"
// (ErrorCode auth_required).
const authCode = -32000

// authRequired says whether err is the agent asking to be logged in.
func authRequired(err error) bool {
	var re *sdk.RequestError
	return errors.As(err, &re) && re.Code == authCode
}

// loginError is an agent's request to log in, in its own words, with the
// command that logs it in (agentbin's Login).
func loginError(a *Agent, what string, err error) error {
	how := "log it in as its own documentation says"
	if a.Login != "" {
		how = "log it in with `" + a.Login + "`"
	}
	return fmt.Errorf("acp:%s is not logged in (it answered %s with %q): %s, then open it again",
		a.Name, what, rpcMessage(err), how)
}

// sessionState is what session/new, session/load and session/resume all
// answer: the session's models, modes and config options.
type sessionState struct {
	ConfigOptions []sdk.SessionConfigOption
	Models        *sdk.SessionModelState
	Modes         *sdk.SessionModeState
}

// session begins the agent's session, or with opts.ResumeSession continues that
// one: session/load where the agent declares loadSession (it replays the
// conversation as session/update notifications, which are not this
// agent's new events and are dropped), else session/resume where declared.
func (b *Backend) session(ctx context.Context, caps sdk.AgentCapabilities, servers []sdk.McpServer) (sessionState, error) {
	fail := func(what string, err error) error { return b.refused(ctx, what, err) }
	var meta map[string]any
	if b.agent.Route == RouteClaudeMeta {
		meta = claudeMeta(b.pol, &b.opts)
	}
	if f := b.opts.Fork; f != nil {
		return b.forkSession(ctx, caps, servers, meta, f)
	}
	id := sdk.SessionId(b.opts.ResumeSession)
	switch {
	case id == "":
		sess, err := b.conn.NewSession(ctx, sdk.NewSessionRequest{Cwd: b.opts.Cwd, McpServers: servers, Meta: meta})
		if err != nil {
			return sessionState{}, fail("session/new", err)
		}
		b.setSession(sess.SessionId)
		return sessionState{sess.ConfigOptions, sess.Models, sess.Modes}, nil
	case caps.LoadSession:
		b.life.Lock()
		b.loading = true
		b.life.Unlock()
		sess, err := b.conn.LoadSession(ctx, sdk.LoadSessionRequest{SessionId: id, Cwd: b.opts.Cwd, McpServers: servers, Meta: meta})
		b.life.Lock()
		b.loading = false
		b.life.Unlock()
		if err != nil {
			return sessionState{}, fail("session/load of session "+string(id), err)
		}
		b.setSession(id)
		return sessionState{sess.ConfigOptions, sess.Models, sess.Modes}, nil
	case caps.SessionCapabilities.Resume != nil:
		sess, err := b.conn.ResumeSession(ctx, sdk.ResumeSessionRequest{SessionId: id, Cwd: b.opts.Cwd, McpServers: servers, Meta: meta})
		if err != nil {
			return sessionState{}, fail("session/resume of session "+string(id), err)
		}
		b.setSession(id)
		return sessionState{sess.ConfigOptions, sess.Models, sess.Modes}, nil
	}
	return sessionState{}, fmt.Errorf("acp:%s cannot resume a session: it declares neither loadSession nor session/resume; open the agent without --resume for a fresh conversation", b.agent.Name)
}

// forkSession begins the agent's session as a fork of f's, with
// session/fork (unstable in ACP, declared as sessionCapabilities.fork): the
// agent copies the conversation and the forked session is left as it was.
// An agent that does not declare it is refused, by name.
func (b *Backend) forkSession(ctx context.Context, caps sdk.AgentCapabilities, servers []sdk.McpServer, meta map[string]any, f *backend.Fork) (sessionState, error) {
	if caps.SessionCapabilities.Fork == nil {
		return sessionState{}, fmt.Errorf("acp:%s does not declare session/fork; it cannot fork a conversation (fork an agent of another kind, or open a fresh one)", b.agent.Name)
	}
	// The unstable request names its own types for what session/new
	// takes and answers: the same JSON.
	var ms []sdk.UnstableMcpServer
	if err := sameJSON(servers, &ms); err != nil {
		return sessionState{}, fmt.Errorf("acp:%s: session/fork: %w", b.agent.Name, err)
	}
	sess, err := b.conn.UnstableForkSession(ctx, sdk.UnstableForkSessionRequest{SessionId: sdk.SessionId(f.Session), Cwd: b.opts.Cwd, McpServers: ms, Meta: meta})
	if err != nil {
		return sessionState{}, b.refused(ctx, "session/fork of session "+f.Session, err)
	}
	st := sessionState{Modes: sess.Modes}
	if err := sameJSON(sess.ConfigOptions, &st.ConfigOptions); err != nil {
		return sessionState{}, fmt.Errorf("acp:%s: session/fork's answer: %w", b.agent.Name, err)
	}
	if sess.Models != nil {
		if err := sameJSON(sess.Models, &st.Models); err != nil {
			return sessionState{}, fmt.Errorf("acp:%s: session/fork's answer: %w", b.agent.Name, err)
		}
	}
	b.setSession(sess.SessionId)
	return st, nil
}

// sameJSON copies from into to, a type of the same JSON.
func sameJSON(from, to any) error {
	data, err := json.Marshal(from)
	if err != nil {
		return err
	}
	return json.Unmarshal(data, to)
}

// promptQueueing reads _meta.claudeCode.promptQueueing of the agent's
// capabilities.
func promptQueueing(meta map[string]any) bool {
	cc, _ := meta["claudeCode"].(map[string]any)
	q, _ := cc["promptQueueing"].(bool)
	return q
}

func configValues(opts []sdk.SessionConfigOption, id string) []string {
	var out []string
	for _, o := range opts {
		if o.Select == nil || string(o.Select.Id) != id {
			continue
		}
		if u := o.Select.Options.Ungrouped; u != nil {
			for _, v := range *u {
				out = append(out, string(v.Value))
			}
		}
		if g := o.Select.Options.Grouped; g != nil {
			for _, grp := range *g {
				for _, v := range grp.Options {
					out = append(out, string(v.Value))
				}
			}
		}
	}
	return out
}

// switchModel sets the session's model the way session/new offered it.
func (b *Backend) switchModel(ctx context.Context, model string) error {
	var err error
	switch {
	case b.modelConfig:
		_, err = b.conn.SetSessionConfigOption(ctx, sdk.SetSessionConfigOptionRequest{ValueId: &sdk.SetSessionConfigOptionValueId{
			SessionId: b.sessionID, ConfigId: "model", Value: sdk.SessionConfigValueId(model)}})
	case b.modelMethod:
		_, err = b.conn.UnstableSetSessionModel(ctx, sdk.UnstableSetSessionModelRequest{SessionId: b.sessionID, ModelId: sdk.UnstableModelId(model)})
	case b.agent.ModelFlag != "":
		return fmt.Errorf("acp:%s offers no model selection over ACP: it takes its model at open (%s); close it and open acp:%s:%s", b.agent.Name, b.agent.ModelFlag, b.agent.Name, model)
	default:
		return fmt.Errorf("acp:%s offers no model selection over ACP", b.agent.Name)
	}
	if err != nil {
		msg := rpcMessage(err)
		if len(b.models) > 0 && !contains(b.models, model) {
			msg += " (it offers " + strings.Join(b.models, ", ") + ")"
		}
		return errors.New(msg)
	}
	b.infoMu.Lock()
	b.curModel = model
	b.infoMu.Unlock()
	return nil
}

// rpcMessage is a JSON-RPC error's message (and data) for people.
func rpcMessage(err error) string {
	var re *sdk.RequestError
	if errors.As(err, &re) {
		msg := re.Message
		if d, ok := re.Data.(map[string]any); ok {
			if e, ok := d["error"].(string); ok && e != "" {
				msg += ": " + e
			} else if e, ok := d["details"].(string); ok && e != "" {
				msg += ": " + e
			}
		}
		return msg
	}
	return err.Error()
}

// watch waits for the process and its stdout (here, the JSON-RPC
// stream), then reports the exit (see host.Process.Watch).
func (b *Backend) watch(p *host.Process, conn *sdk.ClientSideConnection, done chan struct{}) {
	p.Watch(conn.Done(), b.life.HangUp)
	b.finish(p, done)
}

// finish reports the process's exit: once, after everything it printed.
func (b *Backend) finish(p *host.Process, done chan struct{}) {
	msg := b.life.Ended(p, "closed its stdout (or broke the JSON-RPC stream)")
	if b.lines.overlong() {
		msg = fmt.Sprintf("acp:%s printed a stdout line of %d bytes or more, over the ACP SDK's limit, which ends the JSON-RPC stream; kaimon stopped it (%s)", b.agent.Name, SDKMaxLine, p.Child.ExitDescription())
	}
	// The leader is gone; so must be its group and what it left outside,
	// which may take the grace to exit on SIGTERM (a tool cleaning up).
	p.Child.Stop(proc.LeftoverGrace)
	b.runStop()
	b.asks.Stop()
	p.CloseInput()

	b.life.Lock()
	report := b.life.Exit()
	var exitErr error
	if report {
		exitErr = p.Report(b.sink, b.m, b.life.Closing(), msg)
		b.signalTurnEnd()
	}
	b.life.Unlock()
	if report {
		b.removeGenerated()
		b.sink.Exited(exitErr)
	}
	close(done)
}

func (b *Backend) removeGenerated() {
	for _, p := range b.generated {
		os.RemoveAll(p)
	}
}

// signalTurnEnd wakes Interrupt's wait; life's lock held.
func (b *Backend) signalTurnEnd() {
	close(b.turnEnded)
	b.turnEnded = make(chan struct{})
}

func (b *Backend) exitedEarly() error { return b.p.Load().ExitedEarly(false) }

// Send sends turn, or queues it behind the turn in flight: kaimon sends
// one prompt at a time (see Mapper), whatever the agent declares.
func (b *Backend) Send(turn int, text string) error {
	active, err := b.life.Push(b.sink, b.m, "acp agent", turn, text)
	if err != nil {
		return err
	}
	if active {
		go b.prompt(Turn{Number: turn, Text: text})
	}
	return nil
}

// prompt runs one session/prompt to its response and ends the turn; then
// the next queued turn goes.
func (b *Backend) prompt(t Turn) {
	resp, err := b.conn.Prompt(b.runCtx, sdk.PromptRequest{SessionId: b.sessionID, Prompt: []sdk.ContentBlock{sdk.TextBlock(t.Text)}})
	if err != nil && b.runCtx.Err() != nil {
		return // the process is gone: finish reports the turn
	}
	b.life.Lock()
	if b.life.Exited() {
		b.life.Unlock()
		return
	}
	var evs []event.Event
	var next *Turn
	if err != nil {
		select {
		case <-b.conn.Done():
			// The agent went away mid-turn: finish says how.
			b.life.Unlock()
			return
		default:
		}
		evs, next = b.m.Fail(fmt.Sprintf("acp:%s failed turn %d: %s", b.agent.Name, t.Number, rpcMessage(err)), nil)
	} else {
		evs, next = b.m.End(resp)
		note := b.m.UsageNote()
		b.infoMu.Lock()
		b.usageNote = note
		b.infoMu.Unlock()
	}
	for _, ev := range evs {
		b.sink.Emit(ev)
	}
	b.signalTurnEnd()
	b.life.Unlock()
	if next != nil {
		b.prompt(*next)
	}
}

// Interrupt sends session/cancel for the turn in flight, denies the
// permission requests it waits on (ACP: answered "cancelled"), and waits
// for the turn to end. False, and no error, if no turn was in flight; an
// error if the turn did not end within InterruptTimeout (it may run on).
func (b *Backend) Interrupt(ctx context.Context) (bool, error) {
	b.life.Lock()
	turn, ok := b.m.Active()
	if !ok || !b.life.Live() {
		b.life.Unlock()
		return false, nil
	}
	b.m.MarkInterrupted(turn)
	ended := b.turnEnded
	b.life.Unlock()
	if err := b.conn.Cancel(ctx, sdk.CancelNotification{SessionId: b.sessionID}); err != nil {
		return false, fmt.Errorf("session/cancel: %s", rpcMessage(err))
	}
	b.cancelAsks()
	t := time.NewTimer(InterruptTimeout)
	defer t.Stop()
	select {
	case <-ended:
		return true, nil
	case <-t.C:
		return false, fmt.Errorf("acp:%s did not end the turn within %v of session/cancel", b.agent.Name, InterruptTimeout)
	case <-ctx.Done():
		return false, fmt.Errorf("gave up waiting for acp:%s to end the cancelled turn: %w", b.agent.Name, ctx.Err())
	}
}

// SetModel repoints the live session at model, keeping its conversation:
// session/set_config_option {configId: model} or session/set_model, as the
// agent offered at session/new. model is the agent's own id, or
// acp:<agent>:<id> of the same agent. False, with the reason as the error,
// when the agent refuses.
func (b *Backend) SetModel(ctx context.Context, model string) (bool, error) {
	id := strings.TrimSpace(model)
	if IsACP(id) {
		a, m, err := ParseModelIn(id, b.opts.ACPAgents)
		if err != nil {
			return false, err
		}
		if a.Name != b.agent.Name {
			return false, fmt.Errorf("agent_set_model switches models within one ACP agent: this agent is acp:%s, not acp:%s; close it and open a new one", b.agent.Name, a.Name)
		}
		id = m
	}
	if id == "" {
		return false, errors.New("no model named")
	}
	if !b.life.LiveNow() {
		return false, nil
	}
	if err := b.switchModel(ctx, id); err != nil {
		return false, fmt.Errorf("acp:%s refused model %s: %w", b.agent.Name, id, err)
	}
	return true, nil
}

// Close stops the agent: stdin closed, SIGTERM to the agent (its group
// then winds down by itself), SIGKILL to what is left after StopGrace
// (claude-agent-acp does not exit on stdin close).
func (b *Backend) Close() error {
	b.closeOnce.Do(func() {
		b.life.Lock()
		b.life.SetClosing()
		p, done := b.p.Load(), b.done
		b.life.Unlock()
		if p == nil {
			return
		}
		p.CloseInput()
		// The leader first: claude-agent-acp's claude CLI writes the
		// session's transcript (which a resume loads) a moment after a
		// turn, and a SIGTERM of its own loses what is unwritten; told by
		// its input ending, it writes it and exits.
		p.Child.StopLeaderFirst(StopGrace)
		<-done
	})
	return nil
}

// Info reports the session.
func (b *Backend) Info() backend.Info {
	b.infoMu.Lock()
	defer b.infoMu.Unlock()
	model := Prefix + b.agent.Name
	if b.curModel != "" {
		model += ":" + b.curModel
	}
	return backend.Info{SessionID: string(b.sessionID), Model: model, QueuesPrompts: b.queues, UsageNote: b.usageNote}
}

// logWriter sends the SDK's diagnostics to the daemon's log, redacted:
// they quote lines of the agent's that the SDK could not read.
type logWriter struct {
	prefix string
	redact *redact.Redactor
}

func (w logWriter) Write(p []byte) (int, error) {
	log.Print(w.prefix + w.redact.String(strings.TrimRight(string(p), "\n")))
	return len(p), nil
}

var _ io.Writer = logWriter{}

// SDKMaxLine is the acp-go-sdk's bound on one JSON-RPC line (its
// bufio.Scanner's buffer): a longer line ends the connection, with a cause
// the SDK does not expose. kaimon watches the stream for it so that the
// agent's end can say why.
const SDKMaxLine = 10 << 20

// lineWatch passes an agent's stdout through and notes a line the SDK
// cannot take: max bytes or more before its newline (the newline must fit
// in the Scanner's buffer too). It holds none of it.
type lineWatch struct {
	r    io.Reader
	max  int64
	cur  int64 // bytes of the current line so far
	over atomic.Bool
}

func (w *lineWatch) Read(p []byte) (int, error) {
	n, err := w.r.Read(p)
	for rest := p[:n]; len(rest) > 0; {
		i := bytes.IndexByte(rest, '\n')
		if i < 0 {
			w.cur += int64(len(rest))
			break
		}
		w.cur += int64(i)
		if w.cur >= w.max {
			w.over.Store(true)
		}
		w.cur, rest = 0, rest[i+1:]
	}
	if w.cur >= w.max {
		w.over.Store(true)
	}
	return n, err
}

// overlong says whether a line over max went by.
func (w *lineWatch) overlong() bool { return w != nil && w.over.Load() }
