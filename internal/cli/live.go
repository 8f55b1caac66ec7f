package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/kaimon/kaimon/internal/client"
	"github.com/kaimon/kaimon/internal/event"
	"github.com/kaimon/kaimon/internal/render"
	"github.com/kaimon/kaimon/internal/verbs"
)

// ExitDetached is kaimon run's exit code when a second Ctrl-C left the
// turn running: 128 + SIGINT, as a shell reports a command Ctrl-C ended.
const ExitDetached = 130

// interrupts routes Main's signals. SIGINT and SIGTERM cancel the
// command's context, as signal.NotifyContext would; but while a command
// catches interrupts (catchInterrupts), SIGINT goes to it instead, so that
// kaimon run can answer Ctrl-C by interrupting the turn, not by leaving.
type interrupts struct {
	cancel context.CancelFunc
	mu     sync.Mutex
	catch  chan os.Signal
}

type interruptsKey struct{}

// notifyContext is the context Main runs a command with; stop releases
// the signals.
func notifyContext(parent context.Context) (ctx context.Context, stop func()) {
	ctx, cancel := context.WithCancel(parent)
	in := &interrupts{cancel: cancel}
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		for {
			select {
			case sig := <-sigs:
				in.deliver(sig)
			case <-done:
				return
			}
		}
	}()
	return context.WithValue(ctx, interruptsKey{}, in), func() {
		signal.Stop(sigs)
		close(done)
		cancel()
	}
}

func (in *interrupts) deliver(sig os.Signal) {
	in.mu.Lock()
	c := in.catch
	in.mu.Unlock()
	if c != nil && sig == os.Interrupt {
		select {
		case c <- sig:
		default: // two pending already say "detach"
		}
		return
	}
	in.cancel()
}

// catchInterrupts sends SIGINT to the returned channel instead of
// cancelling ctx, until release. Without Main's signal routing (Run called
// by a test) the channel never fires.
func catchInterrupts(ctx context.Context) (<-chan os.Signal, func()) {
	in, _ := ctx.Value(interruptsKey{}).(*interrupts)
	if in == nil {
		return nil, func() {}
	}
	c := make(chan os.Signal, 2) // a quick double Ctrl-C is both seen
	in.mu.Lock()
	in.catch = c
	in.mu.Unlock()
	return c, func() {
		in.mu.Lock()
		in.catch = nil
		in.mu.Unlock()
	}
}

// detachedError ends a run that a second Ctrl-C detached from. The agent
// goes on with its turn, but for run -C's, a throwaway: that one is
// closed (closed says whether that worked).
type detachedError struct {
	id        string
	throwaway bool
	closed    bool
}

// detachWait bounds how long a detach waits for the interrupt's request
// to be written.
const detachWait = 3 * time.Second

// codeDetached is the --json error code of a detached run (exit 130).
const codeDetached = "detached"

func (e *detachedError) Error() string {
	switch {
	case e.throwaway && e.closed:
		return fmt.Sprintf("detached: closed agent %s, run -C's throwaway, with its turn", e.id)
	case e.throwaway:
		return fmt.Sprintf("detached: agent %s, run -C's throwaway, could not be closed (kaimon close %s)", e.id, e.id)
	}
	return fmt.Sprintf("detached: agent %s goes on with its turn (kaimon output %s, kaimon interrupt %s)", e.id, e.id, e.id)
}

// daemonLostError ends a run whose daemon went away during the turn (it
// crashed or was killed): the agent was stopped with it, and the next
// daemon lists it dead, resumable with its conversation, as its log says.
// A turn failed so (exit 3), not a daemon that cannot be reached.
type daemonLostError struct {
	id  string
	err error // the broken connection
}

func (e *daemonLostError) Error() string {
	return fmt.Sprintf("kaimon-agentd was lost during the turn of agent %s (the daemon crashed or was killed: its connection ended with %v), "+
		"so the agent was stopped; resume its conversation with `kaimon open --id %s --resume`", e.id, e.err, e.id)
}

// lostDaemon says whether err is the daemon's connection breaking while it
// held a request: it was there to answer, and went away. Not being there
// at all (no socket, refused) is another error.
func lostDaemon(err error) (cause error, ok bool) {
	var down *client.DaemonDownError
	if !errors.As(err, &down) {
		return nil, false
	}
	for _, broken := range []error{io.EOF, io.ErrUnexpectedEOF, syscall.ECONNRESET, syscall.EPIPE} {
		if errors.Is(down.Err, broken) {
			return broken, true
		}
	}
	return nil, false
}

// hintDelay is how long a run whose output is not a terminal goes before
// it opens its stream for permission requests (and asks agent_status for
// those already pending, so none is missed): most turns end quickly and
// never ask, and a person answering a question takes seconds anyway, so
// the common turn is spared the stream, on its critical path or beside it.
const hintDelay = 750 * time.Millisecond

// resultWait bounds how long a run that ended waits for its event stream
// to catch up with the turn's result before it prints what is left.
const resultWait = 5 * time.Second

// usageLine is the one-line summary of a turn's result.
func usageLine(pal *palette, e *event.Envelope, elapsed time.Duration) string {
	r := render.ResultOf(e)
	u := r.Usage
	s := fmt.Sprintf("turn %d · %s · tokens in %d, out %d", e.Turn, r.StopReason, u.InputTokens, u.OutputTokens)
	if u.CacheReadTokens+u.CacheCreationTokens > 0 {
		s += fmt.Sprintf(", cache read %d, write %d", u.CacheReadTokens, u.CacheCreationTokens)
	}
	s += " · " + elapsed.Round(100*time.Millisecond).String()
	switch {
	case r.Cancelled:
		return pal.yellow.Sprint("■ " + s) // stopped as asked: not a failure
	case r.Failed:
		return pal.red.Sprint("✗ " + s)
	}
	return pal.faint.Sprint("✓ " + s)
}

// follower follows one run's turn on the agent's event stream.
type follower struct {
	id, text string
	live     bool // render the turn; else only tell of permission requests
	errw     io.Writer
	p        *pretty
	turn     int                  // the run's turn, once its user_text is seen
	agent    string               // its agent's id as its events name it (whole, bare), from then
	result   chan *event.Envelope // the run's turn's result
	stop     context.CancelFunc   // ends follow
	done     chan struct{}        // closed when follow has ended
	told     map[string]bool      // (not live) permission requests told of, by id
	ask      *asker               // live, and asking here: the turn's asker
	// seq is the last seq read: where the turn is followed again from
	// after the link to its host broke (relink).
	seq uint64
	// linkHost is the host whose link broke; progressed says that the
	// try of relink under way reached it.
	linkHost   string
	progressed bool
}

// follow reads the stream open returns (from the agent's end; nil when it
// could not be opened) until ctx ends. The run's turn is the one whose
// user_text is the run's text, from then on: a turn sent while another
// runs waits in a queue, and opens later.
func (f *follower) follow(ctx context.Context, open func() Watcher) {
	defer close(f.done)
	w := open()
	if w == nil {
		return
	}
	stop := context.AfterFunc(ctx, func() { w.Close() })
	defer stop()
	if e, _, _ := f.read(w); e != nil {
		f.result <- e
	}
}

// read reads w until the run's turn's result (returned), the agent's death
// while relink follows the turn (died), or w's error.
func (f *follower) read(w Watcher) (result *event.Envelope, died bool, err error) {
	for {
		e, err := w.Next()
		if err != nil {
			return nil, false, err
		}
		f.seq = max(f.seq, e.Seq)
		// Following a turn again after a link broke, no agent_run
		// answer will say that the agent died: its status does.
		if f.linkHost != "" && f.turn != 0 && isDead(e) {
			return nil, true, nil
		}
		if e.Kind == event.Permission {
			// Whichever turn asks, the run waits on the answer.
			f.permission(e)
			continue
		}
		if f.turn == 0 && e.Kind == event.UserText {
			var d event.TextData
			if json.Unmarshal(e.Data, &d) == nil && d.Content.Text == f.text {
				f.turn, f.agent = e.Turn, e.AgentID
			}
		}
		if f.turn == 0 || e.Turn != f.turn {
			continue
		}
		if f.live {
			f.p.print(e)
		}
		if e.Kind == event.Result {
			return e, false, nil
		}
	}
}

// permission renders a permission event: live, every one; otherwise the
// questions, on stderr.
func (f *follower) permission(e *event.Envelope) {
	if f.ask != nil {
		var d event.PermissionData
		if json.Unmarshal(e.Data, &d) == nil {
			f.ask.take(e, &d)
			return
		}
	}
	if f.live {
		f.p.print(e)
		return
	}
	var d event.PermissionData
	if json.Unmarshal(e.Data, &d) != nil {
		return
	}
	if f.told[d.RequestID] {
		return
	}
	f.tell(d.RequestID)
	if d.Decision == "" {
		fmt.Fprintln(f.errw, f.p.pal.permissionLines("kaimon: ", f.id, &d)) // f.id: qualified on another host
	}
}

func (f *follower) tell(requestID string) {
	if f.told == nil {
		f.told = map[string]bool{}
	}
	f.told[requestID] = true
}

// openForHints is a piped run's stream, once hintDelay has passed with the
// turn still running: the stream opened by open (from the agent's end), and a hint for
// each request agent_status then says is pending (asked before the stream
// began, so not on it; told without the tool's input, which status does
// not carry). A request both pending and on the stream is told once.
func (f *follower) openForHints(ctx context.Context, cl verbs.Service, open func() Watcher) Watcher {
	w := open()
	if st, err := cl.Status(ctx, &verbs.StatusArgs{AgentID: f.id}); err == nil {
		for _, p := range st.PendingPermissions {
			if f.told[p.RequestID] {
				continue
			}
			f.tell(p.RequestID)
			d := event.PermissionData{RequestID: p.RequestID, ToolCall: event.ToolCall{Title: p.Title}, ExpiresAt: p.ExpiresAt}
			fmt.Fprintln(f.errw, f.p.pal.permissionLines("kaimon: ", f.id, &d))
		}
	}
	return w
}
