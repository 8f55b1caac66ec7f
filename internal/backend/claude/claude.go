package claude

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/tidwall/gjson"

	"github.com/kaimon/kaimon/internal/agentbin"
	"github.com/kaimon/kaimon/internal/backend"
	"github.com/kaimon/kaimon/internal/backend/host"
	"github.com/kaimon/kaimon/internal/event"
	"github.com/kaimon/kaimon/internal/proc"
)

// Timeouts of the backend's exchanges with the CLI.
const (
	// StopGrace is how long Close lets the CLI's group exit on SIGTERM
	// before it is killed.
	StopGrace = host.StopGrace
	// InterruptTimeout bounds the wait for an interrupt's acknowledgement.
	InterruptTimeout = 5 * time.Second
	// SetModelTimeout bounds the wait for a set_model's acknowledgement.
	SetModelTimeout = 10 * time.Second
)

// Backend is one claude CLI process in stream-json mode: one process, many
// turns. It implements backend.Backend.
//
// Events are emitted from the goroutine that reads the CLI's stdout, and
// from Send (a turn's user_text and turn_started), never two at once.
// Sink.Exited is called once, after the last Emit, from the reader
// goroutine; Close waits for it. If Start fails, neither Emit nor Exited is
// called: Start's error is the report.
type Backend struct {
	opts backend.Options
	sink backend.Sink
	// emit is how the reader (handle, skipped) hands on its events:
	// sink.Emit, or EmitBatched once run has the sink flush before each
	// read (backend.BatchSink), and flush (nil without one) that flush.
	// Only the reader's goroutine uses them.
	emit    func(event.Event)
	flush   func()
	bin     string
	args    []string
	env     []string
	logPath string // stderr log, "" without a cache dir

	// life's lock serializes the mapper and every call to sink.Emit, and
	// guards m.
	life host.Life
	m    *Mapper

	// p is the CLI's process once spawned (host.Process is nil-safe).
	p atomic.Pointer[host.Process]

	ctlMu sync.Mutex
	// pending are the waiters for control responses, by request id;
	// nil when there are none (unpendLocked).
	pending   map[string]chan ControlResponse
	ctlClosed bool

	// asks are the CLI's permission requests kaimon is deciding, by the
	// CLI's request id (see permission.go).
	asks      *host.Asks
	mcpConfig string // the generated MCP config, removed at exit
	// forkFrom is the forked transcript, to be copied to forkTo before
	// the CLI starts when the fork works in another cwd than the forked
	// agent (the CLI looks for it under the cwd's project dir); "" when
	// not a fork, or in the same cwd.
	forkFrom, forkTo string

	// infoMu guards what Info and Process report. It is never held while
	// calling the sink, so the sink may call them from Emit and Exited.
	infoMu     sync.Mutex
	sessionID  string
	model      string
	transcript string
	// effort is the effort the agent's model goes with, once a switch
	// (SetModel) named or carried one; before, opts says it.
	effort    string
	effortSet bool

	done      chan struct{} // closed when the reader goroutine has finished
	closeOnce sync.Once
	seq       atomic.Uint64
}

var (
	_ backend.Backend = (*Backend)(nil)
	_ backend.Settler = (*Backend)(nil)
)

// New validates o (through Args) and finds the claude binary: the
// KAIMON_CLAUDE_BIN environment variable, else claude on PATH. A missing
// binary is an error wrapping backend.ErrNotFound. Nothing is started
// until Start.
func New(o backend.Options, sink backend.Sink) (*Backend, error) {
	args, err := Args(&o)
	if err != nil {
		return nil, err
	}
	model, _, _ := ParseModel(o.Model, o.Effort) // validated by Args
	env := o.Env
	if env == nil {
		env = os.Environ()
	}
	if o.Policy != nil && o.Policy.Only {
		// Under only the allowlist is the model's whole tool set. Since
		// 2.1.x the CLI defers MCP tools behind its ToolSearch tool (and
		// a placeholder), which would add tools the list does not name
		// and hide the ones it does: present them directly.
		env = host.SetEnv(env, "ENABLE_TOOL_SEARCH", "false")
	}
	bin, err := findBinary(env)
	if err != nil {
		return nil, err
	}
	var transcript string
	if o.ResumeSession != "" {
		// Without its transcript the CLI would start, then fail the first
		// turn with "No conversation found": refuse now instead.
		path := TranscriptPath(env, o.Cwd, o.ResumeSession)
		transcript = path
		if _, err := os.Stat(path); path == "" || err != nil {
			if path == "" {
				path = "its transcript"
			}
			return nil, fmt.Errorf("cannot resume claude session %s: %s is gone (the claude CLI keeps it under its config dir, for cwd %s); open the agent without --resume for a fresh conversation", o.ResumeSession, path, o.Cwd)
		}
	}
	forkFrom, forkTo, err := forkTranscripts(env, &o)
	if err != nil {
		return nil, err
	}
	b := &Backend{
		forkFrom: forkFrom, forkTo: forkTo,
		opts:  o,
		sink:  sink,
		emit:  sink.Emit,
		bin:   bin,
		args:  args,
		env:   agentEnv(env, o.ID),
		m:     NewMapper(),
		asks:  host.NewAsks(),
		model: model,
		done:  make(chan struct{}),
		// A resumed session is known before its first turn.
		sessionID: o.ResumeSession, transcript: transcript,
	}
	if o.CacheDir != "" {
		b.logPath = o.Files().Log
	}
	return b, nil
}

// prog is the claude CLI's row of the program table: its name on PATH,
// the variable that names it instead, and how to install it.
var prog = agentbin.Claude

// findBinary returns the absolute path of the claude CLI.
func findBinary(env []string) (string, error) {
	if p := host.LookupEnv(env, prog.Env); p != "" {
		path, err := exec.LookPath(p)
		if err != nil && !errors.Is(err, exec.ErrDot) {
			return "", fmt.Errorf("%w: %s=%s is not an executable claude CLI (%v): point it at one, or unset it to use %s on PATH", backend.ErrNotFound, prog.Env, p, err, prog.Bin)
		}
		return filepath.Abs(path)
	}
	path, err := exec.LookPath(prog.Bin)
	if err != nil && !errors.Is(err, exec.ErrDot) {
		return "", fmt.Errorf("%w: the claude CLI is not on PATH: install it with `%s`, or set %s to its path", backend.ErrNotFound, prog.Install, prog.Env)
	}
	return filepath.Abs(path)
}

// agentEnv is env with KAIMON_AGENT_SESSION set to id, so that the agent's
// calls back into kaimon say whose they are.
func agentEnv(env []string, id string) []string {
	return host.SetEnv(env, backend.EnvAgentSession, id)
}

// Argv returns the command line the backend runs: the binary, then Args.
func (b *Backend) Argv() []string { return append([]string{b.bin}, b.args...) }

// Process identifies the CLI's process (the leader of its group), for the
// session manager's pid file. It is the zero Identity before Start.
func (b *Backend) Process() proc.Identity { return b.p.Load().ID() }

// Start spawns the CLI in its own process group, sends it an initialize
// control request and returns once the CLI has answered it: the CLI prints
// nothing else before the first user message. If the process exits first,
// or ctx ends, the process is stopped and Start returns an error.
func (b *Backend) Start(ctx context.Context) error {
	if err := b.life.Begin("claude backend"); err != nil {
		return err
	}

	if err := host.CheckDir(b.opts.Cwd); err != nil {
		return err
	}
	if _, err := os.Stat(b.bin); err != nil {
		return fmt.Errorf("%w: %s: %v: install the claude CLI (`%s`) or set %s", backend.ErrNotFound, b.bin, err, prog.Install, prog.Env)
	}

	if b.opts.Door != nil {
		path, err := writeMCPConfig(&b.opts)
		if err != nil {
			return err
		}
		b.mcpConfig = path
	}
	copied, err := b.copyForked()
	if err != nil {
		b.removeMCPConfig()
		return err
	}
	p, err := host.Spawn(host.Spec{Name: "claude", Bin: b.bin, Args: b.args, Dir: b.opts.Cwd, Env: b.env, LogPath: b.logPath})
	if err != nil {
		b.removeForkCopy(copied)
		return err
	}
	b.p.Store(p)

	ack := b.expect("init-1")
	go b.run(p)

	err = b.writeJSON(controlRequest{Type: "control_request", RequestID: "init-1",
		Request: map[string]any{"subtype": "initialize"}})
	if err != nil {
		// Most likely the CLI is already gone: say why it went.
		select {
		case <-b.done:
			err = b.exitedEarly()
		case <-time.After(host.DrainDelay + time.Second):
			err = fmt.Errorf("writing initialize to claude: %w", err)
		}
	} else {
		select {
		case r, ok := <-ack:
			switch {
			case !ok:
				err = b.exitedEarly()
			case !r.Success:
				err = fmt.Errorf("claude refused to initialize: %s", r.Error)
			}
		case <-b.done:
			err = b.exitedEarly()
		case <-ctx.Done():
			err = fmt.Errorf("claude did not get ready: %w", ctx.Err())
		}
	}
	b.forget("init-1")
	if err == nil && !b.life.MarkReady() {
		err = b.exitedEarly()
	}
	if err != nil {
		p.CloseInput()
		p.Child.Stop(StopGrace)
		<-b.done
		b.removeMCPConfig()
		b.removeForkCopy(copied)
		return err
	}
	return nil
}

// forkTranscripts checks that a fork's conversation is there to copy: the
// forked agent's transcript, under its cwd's project dir. It returns it
// and where the CLI will look for it in the fork's cwd, when that differs.
func forkTranscripts(env []string, o *backend.Options) (from, to string, err error) {
	f := o.Fork
	if f == nil {
		return "", "", nil
	}
	from = TranscriptPath(env, f.Cwd, f.Session)
	if _, serr := os.Stat(from); from == "" || serr != nil {
		if from == "" {
			from = "its transcript"
		}
		return "", "", fmt.Errorf("cannot fork agent %s's claude session %s: %s is gone (the claude CLI keeps it under its config dir, for cwd %s)", f.AgentID, f.Session, from, f.Cwd)
	}
	to = TranscriptPath(env, o.Cwd, f.Session)
	if to == from {
		return from, "", nil
	}
	if to == "" {
		// A munged cwd too long to name before the CLI made its dir.
		return "", "", fmt.Errorf("cannot fork agent %s's claude session %s into %s: the claude CLI's project dir for so long a path is not known until it makes one; fork into a shorter path", f.AgentID, f.Session, o.Cwd)
	}
	return from, to, nil
}

// copyForked copies the forked transcript to where the CLI looks for it
// from the fork's cwd; it says whether it made it. A copy an earlier fork
// into the same cwd left is replaced: it is the conversation as it was
// then, and the forked agent may have gone on since.
func (b *Backend) copyForked() (bool, error) {
	if b.forkTo == "" {
		return false, nil
	}
	data, err := os.ReadFile(b.forkFrom)
	if err != nil {
		return false, fmt.Errorf("fork: reading the forked transcript: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(b.forkTo), 0o700); err != nil {
		return false, fmt.Errorf("fork: %w", err)
	}
	tmp := b.forkTo + ".kaimon-fork"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		os.Remove(tmp)
		return false, fmt.Errorf("fork: copying the forked transcript: %w", err)
	}
	if err := os.Rename(tmp, b.forkTo); err != nil {
		os.Remove(tmp)
		return false, fmt.Errorf("fork: copying the forked transcript: %w", err)
	}
	return true, nil
}

// removeForkCopy removes the copy copyForked made, for a start that failed.
func (b *Backend) removeForkCopy(made bool) {
	if made {
		os.Remove(b.forkTo)
	}
}

// exitedEarly describes a CLI that exited before it was ready.
func (b *Backend) exitedEarly() error {
	p := b.p.Load()
	<-p.Child.Done()
	b.life.Lock()
	hungUp := b.life.HungUp()
	b.life.Unlock()
	return p.ExitedEarly(hungUp)
}

// MaxLine bounds one line of the CLI's stdout. Lines can be many megabytes
// (images), so the bound is generous; a longer line is not buffered whole
// but read past and reported, so that a runaway agent cannot take the
// daemon's memory. A variable so that tests can lower it.
var MaxLine = 64 << 20

// run reads the CLI's stdout line by line until it closes, maps each line,
// and then reports the exit. A line over MaxLine is skipped with an error
// event; the turn goes on.
func (b *Backend) run(p *host.Process) {
	if bs, ok := b.sink.(backend.BatchSink); ok {
		b.emit, b.flush = bs.EmitBatched, bs.Flush
	}
	p.Serve(MaxLine, b.handle, b.skipped, b.flush, b.life.HangUp)
	b.finish(p)
}

// skipped reports a stdout line over MaxLine that was read past.
func (b *Backend) skipped(size int64) {
	msg := fmt.Sprintf("claude printed a stdout line of %d bytes, over kaimon's limit of %d bytes; kaimon skipped it", size, MaxLine)
	b.lockLife()
	b.emit(event.NewError(b.m.Current(), msg, map[string]int64{"bytes": size, "limit": int64(MaxLine)}))
	b.life.Unlock()
}

// lockLife takes life's lock for the reader. If another goroutine holds
// it (Send, submit), the reader's batch is flushed first: the holder may
// be waiting for room in the agent's queue, which only the drain the
// batch holds can make.
func (b *Backend) lockLife() {
	if !b.life.TryLock() {
		if b.flush != nil {
			b.flush()
		}
		b.life.Lock()
	}
}

// handle maps one line and acts on its side outputs.
func (b *Backend) handle(line []byte) {
	b.lockLife()
	o := b.m.Map(line)
	turn := b.m.Current()
	if o.Init {
		// Before the events: the sink may ask Info while it takes them.
		// The transcript's path is found here, at each turn's init, not
		// in Info, which the session manager calls for every event.
		b.infoMu.Lock()
		sid, transcript := b.sessionID, b.transcript
		b.infoMu.Unlock()
		if sid != b.m.SessionID || transcript == "" {
			sid, transcript = b.m.SessionID, TranscriptPath(b.env, b.opts.Cwd, b.m.SessionID)
		}
		b.infoMu.Lock()
		b.sessionID, b.transcript = sid, transcript
		if b.m.Model != "" {
			b.model = b.m.Model
		}
		b.infoMu.Unlock()
	}
	for _, ev := range o.Events {
		b.emit(ev)
	}
	b.life.Unlock()
	if o.Control != nil {
		b.deliver(*o.Control)
	}
	if o.Next != nil {
		// The CLI is free: hand it the next queued turn. Not from this
		// goroutine: a write must never hold up the reader.
		go b.submit(*o.Next, true)
	}
	if o.Cancel != "" {
		b.cancelAsk(o.Cancel)
	}
	switch {
	case o.Request == nil:
	case o.Request.Subtype == "can_use_tool" && b.opts.Ask != nil:
		// The answer may take minutes (agent_permit): not from this
		// goroutine, which must never be held up.
		b.startAsk(*o.Request, turn)
	default:
		// Answer anyway, so that the CLI does not wait forever. Not from
		// this goroutine: a write must never hold up the reader.
		go b.writeJSON(controlResponse{Type: "control_response", Response: controlResponseBody{
			Subtype: "error", RequestID: o.Request.RequestID,
			Error: "kaimon does not handle control request " + o.Request.Subtype,
		}})
	}
}

// finish reports the process's exit: once, after everything it printed.
func (b *Backend) finish(p *host.Process) {
	msg := b.life.Ended(p, "closed its stdout")
	// The leader is gone; so must be anything it left, in its group or
	// outside, which may take the grace to exit on SIGTERM (a tool
	// cleaning up).
	p.Child.Stop(proc.LeftoverGrace)
	// Nobody is left to take an answer to a permission request.
	b.asks.Stop()
	b.removeMCPConfig()

	b.ctlMu.Lock()
	b.ctlClosed = true
	for id, ch := range b.pending {
		close(ch)
		delete(b.pending, id)
	}
	b.ctlMu.Unlock()

	b.life.Report(p, b.sink, b.m, msg)
	close(b.done)
}

// Send sends user turn turn. If no turn is in flight, it is written to the
// CLI now and its user_text and turn_started are emitted; otherwise it is
// queued, and written (and opened) when the previous turn's result arrives.
// Kaimon queues rather than the CLI because the CLI merges all the messages
// queued during a turn into one turn.
func (b *Backend) Send(turn int, text string) error {
	// Pushed before the write: the CLI's answer must find the turn.
	active, err := b.life.Push(b.sink, b.m, "claude", turn, text)
	if err != nil || !active {
		return err
	}
	return b.submit(Turn{Number: turn, Text: text}, false)
}

// submit writes turn t, now active, to the CLI. If that fails the turn is
// ended: by the caller when report is false (Send returns the error), else
// here with an error and a result. The next queued turn then goes.
func (b *Backend) submit(t Turn, report bool) error {
	err := b.writeJSON(userMessage{
		Type:    "user",
		Message: userContent{Role: "user", Content: []event.Text{{Type: "text", Text: t.Text}}},
	})
	if err == nil {
		return nil
	}
	err = fmt.Errorf("writing turn %d to claude: %w", t.Number, err)
	if next := b.life.Unsent(b.sink, b.m, t, err, report); next != nil {
		go b.submit(*next, true)
	}
	return err
}

// Interrupt asks the CLI to cancel the turn in flight. The turn then ends
// with the CLI's result, stopReason cancelled. It reports false, and no
// error, if no turn was in flight; an error if the CLI refused, went away,
// or did not acknowledge within InterruptTimeout (the turn may run on).
func (b *Backend) Interrupt(ctx context.Context) (bool, error) {
	if _, ok := b.life.BeginInterrupt(b.m); !ok {
		return false, nil
	}
	r, err := b.control(ctx, "interrupt", map[string]any{"subtype": "interrupt"}, InterruptTimeout)
	switch {
	case errors.Is(err, proc.ErrExited):
		return false, errors.New("claude exited before it acknowledged the interrupt")
	case err != nil:
		return false, err
	case r == nil && ctx.Err() != nil:
		return false, fmt.Errorf("gave up waiting for claude to acknowledge the interrupt: %w", ctx.Err())
	case r == nil:
		return false, fmt.Errorf("claude did not acknowledge the interrupt within %v", InterruptTimeout)
	}
	if !r.Success {
		return false, fmt.Errorf("claude refused to interrupt: %s", r.Error)
	}
	return true, nil
}

// SetModel repoints the live CLI at model, keeping its conversation. It
// reports true only when the CLI acknowledged the switch. The effort goes
// with the agent, not the model: a model without a suffix keeps the one
// the agent had (sonnet/high → opus is opus/high), and one with a suffix
// changes it. The CLI's effort is fixed at spawn, so what changes is what
// Info reports and the record keeps for a resume, which spawns with it.
func (b *Backend) SetModel(ctx context.Context, model string) (bool, error) {
	name, eff, err := ParseModel(model, "")
	if err != nil {
		return false, err
	}
	if eff == "" {
		b.infoMu.Lock()
		eff = b.effort
		if !b.effortSet {
			_, eff, _ = ParseModel(b.opts.Model, b.opts.Effort)
		}
		b.infoMu.Unlock()
	}
	if !b.life.LiveNow() {
		return false, nil
	}
	r, err := b.control(ctx, "set-model", map[string]any{"subtype": "set_model", "model": name}, SetModelTimeout)
	if err != nil || r == nil {
		return false, err
	}
	if !r.Success {
		return false, fmt.Errorf("claude refused to switch to model %s: %s", name, r.Error)
	}
	// Since 2.1.328 the answer names the model the alias resolved to
	// (haiku → claude-haiku-5-5), as system/init does at spawn.
	if m := gjson.GetBytes(r.Payload, "model").String(); m != "" {
		name = m
	}
	b.infoMu.Lock()
	b.model, b.effort, b.effortSet = name, eff, true
	if eff != "" {
		b.model += "/" + eff
	}
	b.infoMu.Unlock()
	return true, nil
}

// control sends a control request and waits for its response. It returns
// nil and no error when ctx or timeout ends the wait first, and an error
// when the request cannot be written or the process exits.
func (b *Backend) control(ctx context.Context, prefix string, req map[string]any, timeout time.Duration) (*ControlResponse, error) {
	id := fmt.Sprintf("%s-%d", prefix, b.seq.Add(1))
	ch := b.expect(id)
	defer b.forget(id)
	if err := b.writeJSON(controlRequest{Type: "control_request", RequestID: id, Request: req}); err != nil {
		return nil, fmt.Errorf("writing %s request to claude: %w", prefix, err)
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case r, ok := <-ch:
		if !ok {
			return nil, proc.ErrExited
		}
		return &r, nil
	case <-ctx.Done():
		return nil, nil
	case <-t.C:
		return nil, nil
	}
}

// expect registers a waiter for the control response to request id. The
// channel is closed if the process exits first.
func (b *Backend) expect(id string) chan ControlResponse {
	ch := make(chan ControlResponse, 1)
	b.ctlMu.Lock()
	if b.ctlClosed {
		close(ch)
	} else {
		if b.pending == nil {
			b.pending = map[string]chan ControlResponse{}
		}
		b.pending[id] = ch
	}
	b.ctlMu.Unlock()
	return ch
}

func (b *Backend) forget(id string) {
	b.ctlMu.Lock()
	b.unpendLocked(id)
	b.ctlMu.Unlock()
}

// unpendLocked removes id's waiter; the map goes with the last one, so
// that an idle agent (between control requests, most of its life) holds
// none: a map keeps its table after its entries are deleted.
func (b *Backend) unpendLocked(id string) {
	delete(b.pending, id)
	if len(b.pending) == 0 {
		b.pending = nil
	}
}

func (b *Backend) deliver(r ControlResponse) {
	b.ctlMu.Lock()
	ch, ok := b.pending[r.RequestID]
	b.unpendLocked(r.RequestID)
	b.ctlMu.Unlock()
	if ok {
		ch <- r // buffered, one response per id
	}
}

// writeJSON writes v as one line on the CLI's stdin.
func (b *Backend) writeJSON(v any) error { return b.p.Load().WriteJSON(v) }

// Close stops the CLI: stdin closed, then SIGTERM to its process group,
// then SIGKILL after StopGrace. It returns once the reader has finished and
// Exited(nil) has been reported. Turns still in flight end with stopReason
// cancelled. Close may be called more than once.
func (b *Backend) Close() error {
	b.closeOnce.Do(func() { b.life.Close(b.p.Load, b.done) })
	return nil
}

// Info reports the session: the CLI's session id (known from the first
// turn on), its transcript, and the model in use.
func (b *Backend) Info() backend.Info {
	b.infoMu.Lock()
	defer b.infoMu.Unlock()
	return backend.Info{SessionID: b.sessionID, Transcript: b.transcript, Model: b.model, QueuesPrompts: true}
}

// TranscriptPath is where the claude CLI keeps the transcript of session id
// run in cwd: <config dir>/projects/<munged cwd>/<id>.jsonl, the config dir
// being $CLAUDE_CONFIG_DIR, else $HOME/.claude, as env sets them. The CLI
// munges the (symlink-free) cwd by turning every character but ASCII
// letters and digits into '-' ('/' and '.' included); a munged name longer
// than 200 characters is cut and suffixed with a hash of the path, which is
// found by globbing, so such a transcript is "" until the CLI created it.
func TranscriptPath(env []string, cwd, id string) string {
	dir := host.LookupEnv(env, "CLAUDE_CONFIG_DIR")
	if dir == "" {
		home := host.LookupEnv(env, "HOME")
		if home == "" {
			home, _ = os.UserHomeDir()
		}
		dir = filepath.Join(home, ".claude")
	}
	if abs, err := filepath.Abs(cwd); err == nil {
		cwd = abs
	}
	if real, err := filepath.EvalSymlinks(cwd); err == nil {
		cwd = real
	}
	munged := mungePath(cwd)
	if len(munged) <= maxMunged {
		return filepath.Join(dir, "projects", munged, id+".jsonl")
	}
	matches, _ := filepath.Glob(filepath.Join(dir, "projects", munged[:maxMunged]+"-*", id+".jsonl"))
	if len(matches) == 0 {
		return ""
	}
	return matches[0]
}

// maxMunged is the longest project directory name the CLI uses unhashed.
const maxMunged = 200

// mungePath is the CLI's replace(/[^a-zA-Z0-9]/g, "-"), which works on
// UTF-16 code units: a character outside the BMP becomes two dashes.
func mungePath(p string) string {
	var b strings.Builder
	for _, r := range p {
		switch {
		case r < utf8.RuneSelf && (r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9'):
			b.WriteRune(r)
		case r > 0xFFFF:
			b.WriteString("--")
		default:
			b.WriteByte('-')
		}
	}
	return b.String()
}

// Wire forms of what kaimon writes on the CLI's stdin.
type (
	userMessage struct {
		Type            string      `json:"type"`
		Message         userContent `json:"message"`
		ParentToolUseID *string     `json:"parent_tool_use_id"`
		SessionID       string      `json:"session_id"`
	}
	userContent struct {
		Role    string       `json:"role"`
		Content []event.Text `json:"content"`
	}
	controlRequest struct {
		Type      string         `json:"type"`
		RequestID string         `json:"request_id"`
		Request   map[string]any `json:"request"`
	}
	controlResponse struct {
		Type     string              `json:"type"`
		Response controlResponseBody `json:"response"`
	}
	controlResponseBody struct {
		Subtype   string `json:"subtype"`
		RequestID string `json:"request_id"`
		Error     string `json:"error,omitempty"`
		Response  any    `json:"response,omitempty"`
	}
)
