// Package local runs local models as agents: ollama:<tag> through
// Ollama's native chat API, and vmlx:<tag> through an OpenAI-compatible
// chat completions API (an MLX server, llama.cpp's server, vLLM, LM
// Studio). There is no agent program: kaimon holds the conversation
// (history.go), streams each model request into events, and runs the tool
// loop itself with a small set of built-in tools confined to the agent's
// cwd (tools.go), under the agent's preset (policy.go).
package local

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kaimon/kaimon/internal/apitype"
	"github.com/kaimon/kaimon/internal/backend"
	"github.com/kaimon/kaimon/internal/backend/host"
	"github.com/kaimon/kaimon/internal/config"
	"github.com/kaimon/kaimon/internal/confine"
	"github.com/kaimon/kaimon/internal/event"
	"github.com/kaimon/kaimon/internal/verbs"
)

// The model prefixes of the two families.
const (
	Ollama = "ollama"
	VMLX   = "vmlx"
)

// IsLocal says whether model names a local model (ollama:<tag>, vmlx:<tag>).
func IsLocal(model string) bool {
	return strings.HasPrefix(model, Ollama+":") || strings.HasPrefix(model, VMLX+":")
}

// ParseModel splits ollama:<tag> or vmlx:<tag>.
func ParseModel(model string) (family, tag string, err error) {
	family, tag, ok := strings.Cut(model, ":")
	if !ok || (family != Ollama && family != VMLX) {
		return "", "", fmt.Errorf("model %q is not ollama:<tag> or vmlx:<tag>", model)
	}
	if strings.TrimSpace(tag) == "" {
		return "", "", fmt.Errorf("model %q names no tag: say which model, e.g. %s:qwen3", model, family)
	}
	return family, tag, nil
}

// InterruptTimeout bounds the wait for an interrupted turn to end; the
// stream and the tool end on the turn's context, so it ends at once.
const InterruptTimeout = 5 * time.Second

// Backend is one local model agent.
type Backend struct {
	o      backend.Options
	sink   backend.Sink
	family string
	api    chatAPI
	gate   *gate
	wd     *workdir
	rounds int
	tools  []toolDef

	// infoMu guards what Info reads: the manager calls Info while it
	// publishes, so it never waits for emitMu.
	infoMu  sync.Mutex
	tag     string
	session string

	// emitMu orders emitting and guards the turn state.
	emitMu    sync.Mutex
	turns     backend.Turns
	hist      *history
	started   bool
	closing   bool
	cancel    context.CancelFunc // the active turn's
	turnEnded chan struct{}
	runCtx    context.Context
	runStop   context.CancelFunc
	wg        sync.WaitGroup
	closeOnce sync.Once
	calls     atomic.Int64 // numbers the calls a server sends without an id
}

// New makes the backend of o.Model, with the model server's settings from
// cfg, the config file as the daemon read it when it started, and from the
// daemon's environment (o.Env): never this process's, which another
// daemon in it (a test's) may not share.
func New(cfg config.Config, o backend.Options, sink backend.Sink) (*Backend, error) {
	family, tag, err := ParseModel(o.Model)
	if err != nil {
		return nil, verbs.BadArg("%v", err)
	}
	getenv := func(k string) string { return host.LookupEnv(o.Env, k) }
	var api chatAPI
	if family == Ollama {
		api = &ollama{base: OllamaURL(getenv, cfg.OllamaURL), think: cfg.OllamaThink, keepAlive: cfg.OllamaKeepAlive}
	} else {
		api = &openAI{base: VMLXURL(getenv, cfg.VMLXURL), apiKey: cfg.VMLXAPIKey}
	}
	b, err := newBackend(o, sink, family, tag, api, cfg.LocalMaxRounds)
	if err != nil {
		return nil, err
	}
	// An unknown tag is refused here, with the open's other bad options,
	// so that it leaves no dead slot behind.
	ctx, cancel := context.WithTimeout(context.Background(), checkTimeout)
	defer cancel()
	if err := b.checkModel(ctx); err != nil {
		b.runStop()
		return nil, err
	}
	return b, nil
}

// checkTimeout bounds the model check at open.
const checkTimeout = 30 * time.Second

// checkModel asks the server whether it has the model.
func (b *Backend) checkModel(ctx context.Context) error {
	if err := b.api.CheckModel(ctx, b.tag); err != nil {
		return fmt.Errorf("%s:%s: %w", b.family, b.tag, err)
	}
	return nil
}

func newBackend(o backend.Options, sink backend.Sink, family, tag string, api chatAPI, rounds int) (*Backend, error) {
	if o.Effort != "" {
		return nil, verbs.BadArg("effort is a claude CLI option; %s: models take none (drop --effort)", family)
	}
	if o.MCPConfig != "" {
		return nil, verbs.BadArg("mcp_config is for agents with an MCP client; %s: models have none (drop --mcp-config)", family)
	}
	g, err := newGate(&o)
	if err != nil {
		return nil, verbs.BadArg("%v", err)
	}
	root, err := confine.New(o.Cwd)
	if err != nil {
		return nil, verbs.BadArg("cwd: %v", err)
	}
	if rounds <= 0 {
		rounds = config.DefaultLocalMaxRounds
	}
	b := &Backend{o: o, sink: sink, family: family, api: api, gate: g, rounds: rounds,
		wd: &workdir{root: root, env: o.Env}, tag: tag, turnEnded: make(chan struct{})}
	b.tools = g.offeredTools()
	b.runCtx, b.runStop = context.WithCancel(context.Background())
	return b, nil
}

// Start begins the conversation, or with Options.ResumeSession reloads the one of
// that session, or with Options.Fork begins a new one from a copy of the
// forked agent's. (New checked the model.)
func (b *Backend) Start(ctx context.Context) error {
	path := b.o.Files().History
	var h *history
	var err error
	session := b.o.ResumeSession
	switch f := b.o.Fork; {
	case session != "":
		h, err = loadHistory(path, session, b.family)
	case f != nil:
		// A new session whose file begins with a copy of the forked
		// agent's conversation, read as a resume reads it.
		session = newSession(b.family)
		from := config.Paths{CacheDir: b.o.CacheDir}.Agent(f.AgentID).History
		h, err = forkHistory(path, session, from, f.Session, b.family)
	default:
		session = newSession(b.family)
		h, err = createHistory(path, session, b.family)
	}
	if err != nil {
		b.runStop()
		return err
	}
	b.infoMu.Lock()
	b.session = session
	b.infoMu.Unlock()
	b.emitMu.Lock()
	b.hist, b.started = h, true
	if len(b.tools) == 0 {
		// Not an error: said once, so the preset does not read as
		// leaving the model tools it does not have.
		b.sink.Emit(event.NewError(0, fmt.Sprintf("%s:%s is offered no tools under this agent's preset (%s): it can only answer in text", b.family, b.tag, b.o.Permission), nil))
	}
	b.emitMu.Unlock()
	return nil
}

func newSession(family string) string {
	r := make([]byte, 8)
	_, _ = rand.Read(r)
	return family + "-" + hex.EncodeToString(r)
}

// Info implements backend.Backend. The session id names the conversation
// file, which is also the transcript.
func (b *Backend) Info() backend.Info {
	b.infoMu.Lock()
	defer b.infoMu.Unlock()
	info := backend.Info{SessionID: b.session, Model: b.family + ":" + b.tag, QueuesPrompts: true}
	if b.session != "" {
		info.Transcript = b.o.Files().History
	}
	return info
}

func (b *Backend) model() string {
	b.infoMu.Lock()
	defer b.infoMu.Unlock()
	return b.tag
}

// Send queues turn; it runs when the turns before it have ended (kaimon
// holds the conversation, so a turn sent mid-turn waits its turn rather
// than cutting into the reply: queues_prompts is true).
func (b *Backend) Send(turn int, text string) error {
	b.emitMu.Lock()
	switch {
	case !b.started:
		b.emitMu.Unlock()
		return errors.New("the agent is not started")
	case b.closing:
		b.emitMu.Unlock()
		return errors.New("the agent is closed")
	}
	evs, active := b.turns.Push(turn, text)
	for _, ev := range evs {
		b.sink.Emit(ev)
	}
	if active {
		b.startTurnLocked(backend.Turn{Number: turn, Text: text})
	}
	b.emitMu.Unlock()
	return nil
}

// startTurnLocked runs turn t in a goroutine of its own; emitMu held.
func (b *Backend) startTurnLocked(t backend.Turn) {
	ctx, cancel := context.WithCancel(b.runCtx)
	b.cancel = cancel
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		defer cancel()
		b.runTurn(ctx, t)
	}()
}

// emit sends one event; emitMu not held.
func (b *Backend) emit(evs ...event.Event) {
	b.emitMu.Lock()
	defer b.emitMu.Unlock()
	if b.closing {
		return
	}
	for _, ev := range evs {
		b.sink.Emit(ev)
	}
}

// addMessage appends m to the conversation.
func (b *Backend) addMessage(m Message) error {
	b.emitMu.Lock()
	defer b.emitMu.Unlock()
	if b.hist == nil {
		return errors.New("the conversation is closed")
	}
	return b.hist.add(m)
}

func (b *Backend) messages() []Message {
	b.emitMu.Lock()
	defer b.emitMu.Unlock()
	if b.hist == nil {
		return nil
	}
	return b.hist.messages(b.o.SystemPrompt)
}

// runTurn is one turn: the user's message, then model rounds until the
// model answers without calling a tool, the rounds run out, the request
// fails, or the turn is interrupted.
func (b *Backend) runTurn(ctx context.Context, t backend.Turn) {
	var usage event.UsageFigures
	stop, failure := apitype.StopEndTurn, ""
	if err := b.addMessage(Message{Role: "user", Content: t.Text}); err != nil {
		stop, failure = apitype.StopError, err.Error()
	}
	for round := 1; failure == "" && stop != apitype.StopCancelled; round++ {
		if round > b.rounds {
			stop, failure = apitype.StopError, fmt.Sprintf("the turn needed more than %d model requests (local_max_rounds in the config file): kaimon stopped its tool loop", b.rounds)
			b.emit(event.NewError(t.Number, failure, map[string]any{"rounds": b.rounds}))
			break
		}
		s := &roundSink{b: b, turn: t.Number}
		res, err := b.api.Chat(ctx, chatRequest{Model: b.model(), Messages: b.messages(), Tools: b.tools}, s)
		usage = usage.Add(res.Usage)
		if err != nil {
			s.close()
			why := "the turn was interrupted"
			if ctx.Err() != nil {
				stop = apitype.StopCancelled
			} else {
				stop, failure = apitype.StopError, fmt.Sprintf("%s:%s: %v", b.family, b.model(), err)
				b.emit(event.NewError(t.Number, failure, nil))
				why = "the model's reply broke off"
			}
			// A call announced before the reply ended is not left open.
			s.abandon(why)
			break
		}
		s.close()
		for i := range res.Calls {
			res.Calls[i].ID = s.id(i, t.Number)
		}
		if err := b.addMessage(Message{Role: "assistant", Content: res.Content, Thinking: res.Thinking, Calls: res.Calls}); err != nil {
			stop, failure = apitype.StopError, err.Error()
			break
		}
		for _, c := range res.Calls {
			b.emit(event.New(event.ToolUse, t.Number, event.ToolUseData{Call: toolCall(c, true)}))
		}
		if len(res.Calls) == 0 {
			stop = stopReason(res.Stop)
			break
		}
		for _, c := range res.Calls {
			var text string
			var ok bool
			if ctx.Err() != nil {
				text, ok = "not run: the turn was interrupted", false
			} else {
				text, ok = b.call(ctx, t.Number, c)
			}
			status := apitype.ToolCompleted
			if !ok {
				status = apitype.ToolFailed
			}
			b.emit(event.New(event.ToolResult, t.Number, event.ToolResultData{Update: event.ToolResultUpdate{
				ToolCallID: c.ID, Status: status,
				Content: []any{contentBlock{Type: "content", Content: event.Text{Type: "text", Text: text}}}}}))
			if err := b.addMessage(Message{Role: "tool", Content: text, ToolCallID: c.ID, ToolName: c.Name}); err != nil {
				stop, failure = apitype.StopError, err.Error()
				break
			}
		}
		if ctx.Err() != nil {
			stop = apitype.StopCancelled
		}
	}
	b.endTurn(t.Number, stop, failure, usage)
}

// endTurn emits the turn's usage and result and starts the next queued
// turn.
func (b *Backend) endTurn(turn int, stop apitype.StopReason, failure string, usage event.UsageFigures) {
	b.emitMu.Lock()
	defer b.emitMu.Unlock()
	if b.closing {
		return // Close ends every turn in flight
	}
	var syncErr error
	if b.hist != nil {
		syncErr = b.hist.sync()
	}
	if syncErr != nil && failure == "" {
		stop, failure = apitype.StopError, "conversation file: "+syncErr.Error()
	}
	if stop == apitype.StopCancelled && failure == "" {
		failure = "interrupted"
	}
	b.sink.Emit(event.New(event.Usage, turn, event.UsageData{Usage: usage}))
	b.sink.Emit(event.New(event.Result, turn, event.ResultData{StopReason: stop, Usage: usage, Error: failure}))
	_, evs, next := b.turns.Pop()
	close(b.turnEnded)
	b.turnEnded = make(chan struct{})
	b.cancel = nil
	for _, ev := range evs {
		b.sink.Emit(ev)
	}
	if next != nil {
		b.startTurnLocked(*next)
	}
}

// contentBlock is ACP's tool call content of type "content".
type contentBlock struct {
	Type    string     `json:"type"`
	Content event.Text `json:"content"`
}

// stopReason maps Ollama's done_reason and OpenAI's finish_reason.
func stopReason(s string) apitype.StopReason {
	switch s {
	case "length":
		return apitype.StopMaxTokens
	case "content_filter":
		return apitype.StopRefusal
	default: // stop, tool_calls, load, unload, ""
		return apitype.StopEndTurn
	}
}

// toolCall is the ACP tool call of c: the announce (no input) or the
// authoritative copy.
func toolCall(c ToolCall, full bool) event.ToolCall {
	kind := "other"
	if d, ok := toolByName(c.Name); ok {
		kind = d.Kind
	}
	tc := event.ToolCall{ToolCallID: c.ID, Title: c.Name, Kind: kind, Status: apitype.ToolInProgress, Content: []any{}, Locations: []any{}}
	if full {
		tc.RawInput = c.Arguments
		if len(tc.RawInput) == 0 {
			tc.RawInput = json.RawMessage("{}")
		}
	}
	return tc
}

// call runs one tool call under the preset; the text is what the model
// reads back.
func (b *Backend) call(ctx context.Context, turn int, c ToolCall) (string, bool) {
	def, known := toolByName(c.Name)
	if !known {
		return fmt.Sprintf("unknown tool %q: the tools are %s", c.Name, sortedNames(b.tools)), false
	}
	offered := false
	for _, t := range b.tools {
		offered = offered || t.Name == def.Name
	}
	if !offered {
		return fmt.Sprintf("%s is not available to this agent (its preset does not offer it)", c.Name), false
	}
	a, err := parseArgs(c.Arguments)
	if err != nil {
		return err.Error(), false
	}
	if err := b.wd.checkPaths(def, a); err != nil {
		return "refused: " + err.Error(), false
	}
	if ok, why := b.gate.allow(ctx, turn, def, toolCall(c, true)); !ok {
		if why == "" {
			why = "permission denied"
		}
		return "refused: " + why, false
	}
	text, err := b.wd.run(ctx, def, a)
	if err != nil {
		if text != "" {
			return text + "\n" + err.Error(), false
		}
		return err.Error(), false
	}
	return text, true
}

// roundSink turns one round's stream into events: text and thought deltas,
// each block's authoritative copy when the next block begins (or the
// stream ends), and tool calls announced as they begin, with their
// argument fragments as tool_input_delta.
type roundSink struct {
	b        *Backend
	turn     int
	open     event.Kind // the block streaming: AssistantText, Thought or ""
	buf      strings.Builder
	ids      map[int]string
	announce map[int]bool
}

func (s *roundSink) delta(kind event.Kind, text string) {
	if s.open != kind {
		s.flush()
		s.open = kind
	}
	s.buf.WriteString(text)
	s.b.emit(event.NewText(kind, s.turn, true, text))
}

// flush emits the open block's authoritative copy.
func (s *roundSink) flush() {
	if s.open != "" && s.buf.Len() > 0 {
		s.b.emit(event.NewText(s.open, s.turn, false, s.buf.String()))
	}
	s.open = ""
	s.buf.Reset()
}

func (s *roundSink) text(t string)    { s.delta(event.AssistantText, t) }
func (s *roundSink) thought(t string) { s.delta(event.Thought, t) }

func (s *roundSink) toolStart(i int, id, name string) {
	s.flush()
	if s.ids == nil {
		s.ids, s.announce = map[int]string{}, map[int]bool{}
	}
	if id == "" {
		id = fmt.Sprintf("call_%d_%d", s.turn, s.b.calls.Add(1))
	}
	s.ids[i] = id
	s.announce[i] = true
	s.b.emit(event.New(event.ToolUse, s.turn, event.ToolUseData{Call: toolCall(ToolCall{ID: id, Name: name}, false)}))
}

func (s *roundSink) toolArgs(i int, frag string) {
	if !s.announce[i] {
		return
	}
	s.b.emit(event.New(event.ToolInputDelta, s.turn, event.ToolInputDeltaData{ToolCallID: s.ids[i], PartialJSON: frag}))
}

// abandon fails the calls announced in a reply that did not complete: they
// will not run.
func (s *roundSink) abandon(why string) {
	idx := make([]int, 0, len(s.ids))
	for i := range s.ids {
		idx = append(idx, i)
	}
	sort.Ints(idx)
	for _, i := range idx {
		s.b.emit(event.New(event.ToolResult, s.turn, event.ToolResultData{Update: event.ToolResultUpdate{
			ToolCallID: s.ids[i], Status: apitype.ToolFailed,
			Content: []any{contentBlock{Type: "content", Content: event.Text{Type: "text", Text: "not run: " + why}}}}}))
	}
}

// close ends the stream: the open block's authoritative copy.
func (s *roundSink) close() { s.flush() }

// id is call i's id: the one announced, else a new one.
func (s *roundSink) id(i, turn int) string {
	if id := s.ids[i]; id != "" {
		return id
	}
	return fmt.Sprintf("call_%d_%d", turn, s.b.calls.Add(1))
}

// Interrupt cancels the turn in flight: its model request and any tool
// running (the context ends both at once), and waits for it to end with a
// cancelled result. False if no turn was in flight.
func (b *Backend) Interrupt(ctx context.Context) (bool, error) {
	b.emitMu.Lock()
	turn, ok := b.turns.Active()
	if !ok || b.closing || b.cancel == nil {
		b.emitMu.Unlock()
		return false, nil
	}
	b.turns.MarkInterrupted(turn)
	cancel, ended := b.cancel, b.turnEnded
	b.emitMu.Unlock()
	cancel()
	t := time.NewTimer(InterruptTimeout)
	defer t.Stop()
	select {
	case <-ended:
		return true, nil
	case <-t.C:
		return false, fmt.Errorf("%s:%s did not end the turn within %v of its cancellation", b.family, b.model(), InterruptTimeout)
	case <-ctx.Done():
		return false, ctx.Err()
	}
}

// SetModel repoints the agent at another tag of the same server, keeping
// the conversation; the next model request uses it. model is a tag or
// <family>:<tag> of this agent's family. The server must have the model.
func (b *Backend) SetModel(ctx context.Context, model string) (bool, error) {
	model = strings.TrimSpace(model)
	tag := model
	if p, ok := backend.PrefixOf(model); ok {
		if p.Backend != b.family {
			return false, fmt.Errorf("agent_set_model switches between models of one server: this agent is %s:, not %s; close it and open a new one", b.family, p.Prefix)
		}
		tag = model[len(p.Prefix):]
	}
	if tag == "" {
		return false, errors.New("no model named")
	}
	if err := b.api.CheckModel(ctx, tag); err != nil {
		return false, fmt.Errorf("%s:%s: %w", b.family, tag, err)
	}
	b.infoMu.Lock()
	b.tag = tag
	b.infoMu.Unlock()
	return true, nil
}

// Close ends the turn in flight and every queued one (cancelled: the agent
// was closed), stops a running tool's process group, and keeps the
// conversation on disk for a resume.
func (b *Backend) Close() error {
	b.closeOnce.Do(func() {
		// closing first: the turn in flight then emits nothing more, and
		// its end is reported below with the queued ones.
		b.emitMu.Lock()
		started := b.started
		b.closing = true
		b.emitMu.Unlock()
		b.runStop()
		b.wg.Wait()
		b.emitMu.Lock()
		var err error
		if b.hist != nil {
			err = b.hist.close()
			b.hist = nil
		}
		if started {
			for _, ev := range b.turns.Abort(apitype.StopCancelled, "the agent was closed") {
				b.sink.Emit(ev)
			}
		}
		b.emitMu.Unlock()
		if started {
			if err != nil {
				err = fmt.Errorf("conversation file: %w", err)
			}
			b.sink.Exited(err)
		}
	})
	return nil
}

var _ backend.Backend = (*Backend)(nil)
