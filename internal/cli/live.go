package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http/httptrace"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/kaimon/kaimon/internal/apitype"
	"github.com/kaimon/kaimon/internal/client"
	"github.com/kaimon/kaimon/internal/event"
	"github.com/kaimon/kaimon/internal/fleet"
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

// runTurn runs one turn of agent id with agent_run, whose return decides
// what stdout gets and the exit code, exactly as without a terminal.
// Beside it, it follows the agent's events from the moment it sends: on a
// terminal (stdout, without --json) to render the turn as it happens, with
// the usage on stderr at the end; otherwise only to tell of permission
// requests on stderr. Ctrl-C interrupts the turn; a second one detaches.
// throwaway (run -C) changes only the words: the caller closes the agent.
func runTurn(c *cli.Context, cl verbs.Service, id, text string, timeout time.Duration, throwaway bool) error {
	stdout, stderr := c.App.Writer, c.App.ErrWriter
	ios := streamsOf(c)
	live := !c.Bool("json") && ios.IsStdoutTTY()
	start := time.Now()
	shown := shownID(c, id) // hints name the agent so that they can be pasted back
	f := &follower{id: shown, text: text, start: start, live: live, errw: stderr,
		p: newPretty(stdout, false, ios.pal), result: make(chan *event.Envelope, 1), done: make(chan struct{})}
	f.p.run = true
	if live {
		f.p.startSpinner(stderr, ios.canSpin())
		f.p.busy(id, start)
	}
	fctx, stopFollow := context.WithCancel(c.Context)
	// The stream starts at the agent's end as it is when the daemon takes
	// the request: none of its history is read. The stream is a courtesy:
	// without it the run goes on.
	open := func() *client.Watcher {
		es, ok := cl.(eventStreamer)
		if !ok {
			return nil
		}
		w, err := es.EventsFromNow(fctx, id)
		if err != nil {
			return nil
		}
		return w
	}
	if live {
		// Rendering needs the turn from its first event: the stream is in
		// force before the turn is sent (one round trip on the socket).
		w := open()
		go f.follow(fctx, func() *client.Watcher { return w })
	} else {
		// Piped, the stream only tells of permission requests: it opens
		// after hintDelay, if the turn is still running then.
		go f.follow(fctx, func() *client.Watcher { return f.openForHints(fctx, cl, open) })
	}
	endFollow := func() {
		stopFollow()
		<-f.done
		f.p.stopSpinner()
	}

	sigs, release := catchInterrupts(c.Context)
	defer release()
	rctx, cancelRun := context.WithCancel(c.Context)
	defer cancelRun()
	type outcome struct {
		res *verbs.RunResult
		err error
	}
	ran := make(chan outcome, 1)
	go func() {
		res, err := cl.Run(rctx, &verbs.RunArgs{AgentID: id, Text: text, Timeout: timeout.Seconds()})
		ran <- outcome{res, err}
	}()
	var out outcome
	interrupted, detached := false, false
	// sent is closed once the interrupt's request is on its way to the
	// daemon (written, or failed): a detach waits for it, so that the
	// interrupt the first Ctrl-C announced is not lost with this process
	// when the second comes at once.
	sent := make(chan struct{})
wait:
	for {
		select {
		case out = <-ran:
			break wait
		case <-sigs:
			if live {
				f.p.pastEcho()
			}
			if interrupted {
				detached = true
				cancelRun()
				continue
			}
			interrupted = true
			again := "Ctrl-C again to leave it running and detach"
			if throwaway {
				again = "Ctrl-C again to close it at once"
			}
			f.p.note(stderr, fmt.Sprintf("kaimon: interrupting the turn of agent %s (%s)", shown, again))
			go func() {
				var once sync.Once
				wrote := func() { once.Do(func() { close(sent) }) }
				defer wrote()
				ictx, cancel := context.WithTimeout(c.Context, 30*time.Second)
				defer cancel()
				ictx = httptrace.WithClientTrace(ictx, &httptrace.ClientTrace{WroteRequest: func(w httptrace.WroteRequestInfo) {
					if w.Err == nil { // a failed write may be retried; the request's end closes sent anyway
						wrote()
					}
				}})
				r, err := cl.Interrupt(ictx, &verbs.InterruptArgs{AgentID: id})
				switch {
				case err != nil:
					f.p.note(stderr, "kaimon: interrupt: "+err.Error())
				case !r.Interrupted:
					f.p.note(stderr, "kaimon: nothing to interrupt; waiting for the turn to end")
				}
			}()
		}
	}
	if detached {
		select {
		case <-sent:
		case <-time.After(detachWait):
		}
		endFollow()
		return &detachedError{id: shown}
	}
	res, err := out.res, out.err
	// The link to the agent's host broke under agent_run: the turn goes
	// on there, and is followed again (relink).
	var relinked *event.Envelope
	if le := (*fleet.LinkError)(nil); errors.As(err, &le) {
		stopFollow()
		<-f.done // the follower's stream broke with the link, or is ended
		rctx, cancelRelink := context.WithCancel(c.Context)
		type relinkOutcome struct {
			res    *verbs.RunResult
			result *event.Envelope
			err    error
		}
		back := make(chan relinkOutcome, 1)
		go func() {
			r, e, err := f.relink(rctx, cl, le, start.Add(timeout), timeout)
			back <- relinkOutcome{r, e, err}
		}()
		select {
		case o := <-back:
			cancelRelink()
			res, relinked, err = o.res, o.result, o.err
		case <-sigs:
			// No interrupt can reach the host while its link is down:
			// Ctrl-C leaves the turn running there, as a detach does.
			cancelRelink()
			<-back
			if live {
				f.p.pastEcho()
			}
			endFollow()
			return &detachedError{id: shown}
		}
	}
	if cause, lost := lostDaemon(err); lost {
		err = &daemonLostError{id: id, err: cause}
	}
	var ve *verbs.Error
	final, hasText := "", false
	switch {
	case err == nil:
		final, hasText = res.Text, true
	case errors.As(err, &ve) && ve.Text != "":
		final, hasText = ve.Text, true
	}
	if !live {
		endFollow()
		if err != nil {
			if hasText && !c.Bool("json") {
				fmt.Fprintln(stdout, final)
			}
			return fail(c, err)
		}
		return emit(c, res, func(w io.Writer) { fmt.Fprintln(w, res.Text) })
	}
	// Live: let the stream catch up with the turn's result (not on a
	// timeout, where the turn goes on), then complete what it showed.
	result := relinked
	if result == nil && (err == nil || ve != nil && ve.Code == verbs.CodeTurnFailed) {
		t := time.NewTimer(resultWait)
		select {
		case result = <-f.result:
		case <-f.done: // the stream ended: with the result, or without
			select {
			case result = <-f.result:
			default:
			}
		case <-t.C:
		}
		t.Stop()
	}
	endFollow()
	// The events name the agent as its daemon does: bare, on another
	// host too.
	_, bare, _ := fleet.SplitID(id)
	if hasText && final != "" && !strings.HasPrefix(f.p.lastShown(bare), final) {
		fmt.Fprintln(stdout, final)
	}
	if result != nil {
		fmt.Fprintln(stderr, usageLine(ios.pal, result, time.Since(start)))
		if err != nil && render.ResultOf(result).StopReason == apitype.StopCancelled {
			// The usage line said it: "■ turn 6 · cancelled". Once is
			// enough, and a cancel is no failure to report (the exit code
			// stays 3: the turn did not complete).
			return &jsonReported{err: err}
		}
	}
	if err != nil {
		return fail(c, err)
	}
	return nil
}

// eventStreamer is a service that streams an agent's events, as the
// client of the daemon does; a test's fake service need not.
type eventStreamer interface {
	EventsFromNow(ctx context.Context, id string) (*client.Watcher, error)
}

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
	case r.StopReason == apitype.StopCancelled:
		return pal.yellow.Sprint("■ " + s) // stopped as asked: not a failure
	case r.Failed:
		return pal.red.Sprint("✗ " + s)
	}
	return pal.faint.Sprint("✓ " + s)
}

// follower follows one run's turn on the agent's event stream.
type follower struct {
	id, text string
	start    time.Time // when the run sent, for the elapsed time
	live     bool      // render the turn; else only tell of permission requests
	errw     io.Writer
	p        *pretty
	turn     int                  // the run's turn, once its user_text is seen
	result   chan *event.Envelope // the run's turn's result
	done     chan struct{}
	told     map[string]bool // (not live) permission requests told of, by id
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
func (f *follower) follow(ctx context.Context, open func() *client.Watcher) {
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
func (f *follower) read(w *client.Watcher) (result *event.Envelope, died bool, err error) {
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
				f.turn = e.Turn
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

// openForHints is a piped run's stream: after hintDelay, if the turn still
// runs, the stream opened by open (from the agent's end), and a hint for
// each request agent_status then says is pending (asked before the stream
// began, so not on it; told without the tool's input, which status does
// not carry). A request both pending and on the stream is told once.
func (f *follower) openForHints(ctx context.Context, cl verbs.Service, open func() *client.Watcher) *client.Watcher {
	t := time.NewTimer(hintDelay)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return nil
	case <-t.C:
	}
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
