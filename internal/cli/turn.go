package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http/httptrace"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/kaimon/kaimon/internal/client"
	"github.com/kaimon/kaimon/internal/event"
	"github.com/kaimon/kaimon/internal/fleet"
	"github.com/kaimon/kaimon/internal/render"
	"github.com/kaimon/kaimon/internal/verbs"
)

// Watcher is an agent's events as a turn reads them: a client.Watcher, or
// a test's fake.
type Watcher interface {
	Next() (*event.Envelope, error)
	Close() error
}

// The client's stream is a Watcher (as the fleet's, which is the client's).
var _ Watcher = (*client.Watcher)(nil)

// turnService is what a turn needs of the service: the verbs, and the
// agent's events from its end as it is now (client.EventsFromNow).
type turnService interface {
	verbs.Service
	EventsFromNow(ctx context.Context, id string) (Watcher, error)
}

// eventsOf is cl as a turnService: itself if it is one (a test's fake), a
// service that streams as the client of the daemon and the fleet do (their
// client.Watcher), or one whose stream never opens: the stream is a
// courtesy, and the run goes on without it.
func eventsOf(cl verbs.Service) turnService {
	switch s := cl.(type) {
	case turnService:
		return s
	case interface {
		EventsFromNow(ctx context.Context, id string) (*client.Watcher, error)
	}:
		return watching{cl, func(ctx context.Context, id string) (Watcher, error) {
			w, err := s.EventsFromNow(ctx, id)
			if err != nil {
				return nil, err
			}
			return w, nil
		}}
	}
	return watching{cl, func(context.Context, string) (Watcher, error) {
		return nil, errors.New("this service streams no events")
	}}
}

type watching struct {
	verbs.Service
	from func(ctx context.Context, id string) (Watcher, error)
}

func (w watching) EventsFromNow(ctx context.Context, id string) (Watcher, error) {
	return w.from(ctx, id)
}

// clock is the time a turn waits by: the real one, or a test's fake.
type clock interface {
	Now() time.Time
	After(d time.Duration) <-chan time.Time
}

type realClock struct{}

func (realClock) Now() time.Time                         { return time.Now() }
func (realClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// turnState is where a turn on the command line is; a turn moves through
// them on its events (agent_run's answer, the stream's result), keys
// (Ctrl-C) and time (the clock's), one at a time, in turn.loop:
//
//	running      answer        → ended, catchingUp (live), relinking (the link broke)
//	running      Ctrl-C        → interrupting (agent_interrupt sent)
//	running      leave         → detaching (agent_run's request waited for)
//	interrupting answer        → as from running
//	interrupting Ctrl-C, leave → detaching (agent_run given up)
//	detaching    written       → detached (the interrupt's request is on its way)
//	detaching    detachWait    → detached
//	relinking    relinked      → ended, catchingUp (live)
//	relinking    Ctrl-C        → detached
//	catchingUp   result, end of stream, resultWait → ended
//
// While running or interrupting, a turn that asks its permission requests
// here (asker) also takes them, the person's answers and agent_permit's
// outcomes, without changing state.
//
// A piped turn's hintDelay opens its stream in whichever state it comes.
type turnState int

const (
	// running: agent_run is waited on.
	running turnState = iota
	// interrupting: a Ctrl-C sent agent_interrupt; agent_run is waited
	// on still, and a second Ctrl-C detaches.
	interrupting
	// detaching: a second Ctrl-C gave up agent_run; the interrupt the
	// first announced is waited on until its request is written (or
	// detachWait), so that it is not lost with this process.
	detaching
	// relinking: the link to the agent's host broke under agent_run; the
	// turn is followed there again (relink). Ctrl-C detaches: no
	// interrupt can reach the host while its link is down.
	relinking
	// catchingUp: agent_run answered; a live rendering waits for its
	// stream to reach the turn's result (or resultWait), to complete what
	// it showed.
	catchingUp
	// detached and ended are the turn's ends: left running, or answered.
	detached
	ended
)

var turnStateNames = [...]string{"running", "interrupting", "detaching", "relinking", "catchingUp", "detached", "ended"}

func (s turnState) String() string { return turnStateNames[s] }

// ran is agent_run's answer; relinked relink's, with the turn's result.
type ran struct {
	res *verbs.RunResult
	err error
}

type relinked struct {
	ran
	result *event.Envelope
}

// turn is one turn of `kaimon run` on its way: what it is, where it is
// (state), and the channels its events come on.
type turn struct {
	ctx       context.Context
	svc       turnService
	cl        verbs.Service // as given: relink asks it for more than svc has
	ios       *IOStreams
	clock     clock
	keys      <-chan os.Signal // Ctrl-C
	id, shown string           // shown: as hints name it, to be pasted back
	text      string
	timeout   time.Duration
	throwaway bool // run -C: the words of a second Ctrl-C
	live      bool // render the turn (stdout a terminal, no --json)
	// ask asks the turn's permission requests here (live, and stdin a
	// terminal); nil: they are told with the command that answers them.
	ask *asker
	// leave, when closed, leaves the turn running, as a detach without an
	// interrupt: a chat's Ctrl-D (stdin's end).
	leave <-chan struct{}
	// trace, when not nil, is told each state the loop is in (a test's
	// window on the machine).
	trace func(turnState)

	state turnState
	start time.Time
	f     *follower

	cancelRun    context.CancelFunc
	runs         sync.WaitGroup // agent_run's call, waited for at the end
	answers      chan ran       // agent_run's
	sent         chan struct{}  // closed once the interrupt's request is written, or failed
	runWritten   chan struct{}  // closed once agent_run's request is written, or its call ended
	cancelRelink context.CancelFunc
	relinks      chan relinked
	hint         <-chan time.Time // piped: when the stream opens for hints
	hinted       chan struct{}    // closed then, for the follower
	due          <-chan time.Time // detaching's or catchingUp's bound

	// The answer: agent_run's (or relink's), and the stream's result.
	res    *verbs.RunResult
	err    error
	result *event.Envelope
}

// runTurn runs one turn of agent id with agent_run, whose return decides
// what stdout gets and the exit code, exactly as without a terminal.
// Beside it, it follows the agent's events from the moment it sends: on a
// terminal (stdout, without --json) to render the turn as it happens, with
// the usage on stderr at the end; otherwise only to tell of permission
// requests on stderr. Ctrl-C interrupts the turn; a second one detaches.
// throwaway (run -C) changes only the words: the caller closes the agent.
func runTurn(c *cli.Context, cl verbs.Service, id, text string, timeout time.Duration, throwaway bool) error {
	t := newTurn(c, cl, id, text, timeout)
	t.throwaway = throwaway
	// Ctrl-C is the turn's from when it is sent; before (a live stream
	// opening), it ends kaimon as anywhere else.
	return t.run(c, func() (<-chan os.Signal, func()) { return keysOf(c) })
}

// keysOf catches the command's Ctrl-Cs (catchInterrupts) until release;
// a test's factory gives its own keys instead.
func keysOf(c *cli.Context) (keys <-chan os.Signal, release func()) {
	if f, _ := c.App.Metadata[factoryKey].(factory); f.keys != nil {
		return f.keys, func() {}
	}
	return catchInterrupts(c.Context)
}

// newTurn is a turn of agent id with text, not started.
func newTurn(c *cli.Context, cl verbs.Service, id, text string, timeout time.Duration) *turn {
	f, _ := c.App.Metadata[factoryKey].(factory)
	t := &turn{ctx: c.Context, svc: eventsOf(cl), cl: cl, ios: streamsOf(c), clock: f.clock, trace: f.trace,
		id: id, shown: shownID(c, id), text: text, timeout: timeout}
	if t.clock == nil {
		t.clock = realClock{}
	}
	t.live = !c.Bool("json") && t.ios.IsStdoutTTY()
	return t
}

// run runs the turn to its end; catch gives its Ctrl-Cs, taken once the
// stream is open.
func (t *turn) run(c *cli.Context, catch func() (<-chan os.Signal, func())) error {
	t.follow()
	keys, release := catch()
	defer release()
	t.keys = keys
	t.send()
	t.loop()
	return t.finish(c)
}

// follow starts the follower: live, on a stream in force before the turn
// is sent; piped, on one that opens after hintDelay.
func (t *turn) follow() {
	stdout, stderr := t.ios.Out, t.ios.ErrOut
	t.start = t.clock.Now()
	t.f = &follower{id: t.shown, text: t.text, live: t.live, errw: stderr,
		p: newPretty(stdout, false, t.ios.pal), result: make(chan *event.Envelope, 1), done: make(chan struct{})}
	t.f.p.run = true
	if t.live && t.ios.IsStdinTTY() {
		t.ask = newAsker(t.ctx, t.svc, t.id, t.shown, t.ios, t.f.p, &t.runs)
		t.f.ask = t.ask
	}
	fctx, stopFollow := context.WithCancel(t.ctx)
	t.f.stop = stopFollow
	// The stream starts at the agent's end as it is when the daemon takes
	// the request: none of its history is read. The stream is a courtesy:
	// without it the run goes on.
	open := func() Watcher {
		w, err := t.svc.EventsFromNow(fctx, t.id)
		if err != nil {
			return nil
		}
		return w
	}
	if t.live {
		t.f.p.startSpinner(stderr, t.ios.canSpin())
		t.f.p.busy(t.id, t.start)
		// Rendering needs the turn from its first event: the stream is in
		// force before the turn is sent (one round trip on the socket).
		w := open()
		go t.f.follow(fctx, func() Watcher { return w })
	} else {
		// Piped, the stream only tells of permission requests: it opens
		// after hintDelay, if the turn is still running then.
		t.hint = t.clock.After(hintDelay)
		t.hinted = make(chan struct{})
		go t.f.follow(fctx, func() Watcher {
			select {
			case <-fctx.Done():
				return nil
			case <-t.hinted:
			}
			return t.f.openForHints(fctx, t.svc, open)
		})
	}
}

// send starts agent_run, in state running.
func (t *turn) send() {
	rctx, cancel := context.WithCancel(t.ctx)
	t.cancelRun = cancel
	t.answers = make(chan ran, 1)
	// runWritten is closed once agent_run's request is written (or its
	// call ended): a chat left at once waits for it, so that the turn it
	// says goes on is not cancelled with this process.
	t.runWritten = make(chan struct{})
	var once sync.Once
	wrote := func() { once.Do(func() { close(t.runWritten) }) }
	rctx = httptrace.WithClientTrace(rctx, &httptrace.ClientTrace{WroteRequest: func(w httptrace.WroteRequestInfo) {
		if w.Err == nil {
			wrote()
		}
	}})
	t.runs.Add(1)
	go func() {
		defer t.runs.Done()
		res, err := t.svc.Run(rctx, &verbs.RunArgs{AgentID: t.id, Text: t.text, Timeout: t.timeout.Seconds()})
		wrote()
		t.answers <- ran{res, err}
	}()
	t.state = running
}

// loop takes the turn's events one at a time until it is detached or
// ended; what each state waits on is the channels left non-nil for it.
func (t *turn) loop() {
	defer func() {
		t.cancelRun()
		t.runs.Wait()
	}()
	for {
		if t.trace != nil {
			t.trace(t.state)
		}
		if t.state == detached || t.state == ended {
			return
		}
		var (
			answers <-chan ran
			keys    <-chan os.Signal
			sent    <-chan struct{}
			relinks <-chan relinked
			result  <-chan *event.Envelope
			done    <-chan struct{}
			asks    <-chan *event.PermissionData
			lines   <-chan inputLine
			permits <-chan error
			leave   <-chan struct{}
		)
		switch t.state {
		case running, interrupting:
			answers, keys, leave = t.answers, t.keys, t.leave
			if t.ask != nil {
				asks, lines, permits = t.ask.asks, t.ask.lines(), t.ask.permits
			}
		case detaching:
			sent = t.sent
		case relinking:
			relinks, keys = t.relinks, t.keys
		case catchingUp:
			result, done = t.f.result, t.f.done
		}
		select {
		case a := <-answers:
			t.answered(a)
		case <-keys:
			t.ctrlC()
		case <-sent:
			t.state = detached
		case r := <-relinks:
			t.cancelRelink()
			t.res, t.err, t.result = r.res, r.err, r.result
			t.caughtUp()
		case e := <-result:
			t.result, t.state = e, ended
		case <-done: // the stream ended: with the result, or without
			select {
			case t.result = <-t.f.result:
			default:
			}
			t.state = ended
		case <-t.due:
			// detaching: the interrupt's request is not written yet, and
			// is given up; catchingUp: the stream is, and what is left of
			// the turn is printed without it.
			if t.state == detaching {
				t.state = detached
			} else {
				t.state = ended
			}
		case <-t.hint:
			t.hint = nil
			close(t.hinted)
		case d := <-asks:
			t.ask.got(d)
		case l, ok := <-lines:
			t.ask.answer(l, ok)
		case err := <-permits:
			t.ask.permitted(err)
		case <-leave:
			t.leave = nil
			if t.ask != nil && t.ask.asking != nil {
				t.ask.answer(inputLine{}, false) // the question asked: told with its permit line
			}
			if t.state == interrupting {
				t.ctrlC() // an interrupt is on its way: as a second Ctrl-C
				break
			}
			// No interrupt is on its way, but the turn's own request may
			// not be written yet: it is waited for as an interrupt's is,
			// then given up (the daemon runs the turn on).
			t.sent = t.runWritten
			t.due = t.clock.After(detachWait)
			t.state = detaching
		}
	}
}

// answered takes agent_run's answer.
func (t *turn) answered(a ran) {
	t.res, t.err = a.res, a.err
	// The link to the agent's host broke under agent_run: the turn goes
	// on there, and is followed again (relink).
	if le := (*fleet.LinkError)(nil); errors.As(t.err, &le) {
		t.f.stop()
		<-t.f.done // the follower's stream broke with the link, or is ended
		rctx, cancel := context.WithCancel(t.ctx)
		t.cancelRelink = cancel
		t.relinks = make(chan relinked, 1)
		go func() {
			r, e, err := t.f.relink(rctx, t.cl, le, t.start.Add(t.timeout), t.timeout)
			t.relinks <- relinked{ran{r, err}, e}
		}()
		t.state = relinking
		return
	}
	t.caughtUp()
}

// caughtUp moves on from an answer: live, to let the stream catch up with
// the turn's result (not on a timeout, where the turn goes on, and not
// when relink read the result already), else to the end.
func (t *turn) caughtUp() {
	var ve *verbs.Error
	if t.live && t.result == nil && (t.err == nil || errors.As(t.err, &ve) && ve.Code == verbs.CodeTurnFailed) {
		t.due = t.clock.After(resultWait)
		t.state = catchingUp
		return
	}
	t.state = ended
}

// ctrlC takes a Ctrl-C: the first interrupts the turn, the second
// detaches; while the host's link is down, the first does.
func (t *turn) ctrlC() {
	switch t.state {
	case running:
		if t.live {
			t.f.p.pastEcho()
		}
		again := "Ctrl-C again to leave it running and detach"
		switch {
		case t.throwaway:
			again = "Ctrl-C again to close it at once"
		case t.leave != nil: // a chat's turn: detaching ends the chat
			again = "Ctrl-C again to leave it running and end the chat"
		}
		t.f.p.note(t.ios.ErrOut, fmt.Sprintf("kaimon: interrupting the turn of agent %s (%s)", t.shown, again))
		t.interrupt()
		t.state = interrupting
	case interrupting:
		if t.live {
			t.f.p.pastEcho()
		}
		t.cancelRun()
		t.due = t.clock.After(detachWait)
		t.state = detaching
	case relinking:
		t.cancelRelink()
		<-t.relinks
		if t.live {
			t.f.p.pastEcho()
		}
		t.state = detached
	}
}

// interrupt sends agent_interrupt, and closes sent once its request is
// written (or the call ends): a detach waits for that, so that the
// interrupt the first Ctrl-C announced is not lost with this process when
// the second comes at once.
func (t *turn) interrupt() {
	t.sent = make(chan struct{})
	go func() {
		var once sync.Once
		wrote := func() { once.Do(func() { close(t.sent) }) }
		defer wrote()
		ictx, cancel := context.WithTimeout(t.ctx, 30*time.Second)
		defer cancel()
		ictx = httptrace.WithClientTrace(ictx, &httptrace.ClientTrace{WroteRequest: func(w httptrace.WroteRequestInfo) {
			if w.Err == nil { // a failed write may be retried; the request's end closes sent anyway
				wrote()
			}
		}})
		r, err := t.svc.Interrupt(ictx, &verbs.InterruptArgs{AgentID: t.id})
		switch {
		case err != nil:
			t.f.p.note(t.ios.ErrOut, "kaimon: interrupt: "+err.Error())
		case !r.Interrupted:
			t.f.p.note(t.ios.ErrOut, "kaimon: nothing to interrupt; waiting for the turn to end")
		}
	}()
}

// endFollow stops the follower and the spinner.
func (t *turn) endFollow() {
	t.f.stop()
	<-t.f.done
	t.f.p.stopSpinner()
}

// finish prints what the turn's end leaves and returns run's error.
func (t *turn) finish(c *cli.Context) error {
	stdout, stderr := t.ios.Out, t.ios.ErrOut
	t.endFollow()
	if t.state == detached {
		return &detachedError{id: t.shown}
	}
	res, err := t.res, t.err
	if cause, lost := lostDaemon(err); lost {
		err = &daemonLostError{id: t.id, err: cause}
	}
	var ve *verbs.Error
	final, hasText := "", false
	switch {
	case err == nil:
		final, hasText = res.Text, true
	case errors.As(err, &ve) && ve.Text != "":
		final, hasText = ve.Text, true
	}
	if !t.live {
		if err != nil {
			if hasText && !c.Bool("json") {
				fmt.Fprintln(stdout, final)
			}
			return fail(c, err)
		}
		return emit(c, res, func(w io.Writer) { fmt.Fprintln(w, res.Text) })
	}
	// Live: complete what the stream showed. The events name the agent as
	// its daemon does: whole (a prefix named it, maybe), and bare on
	// another host too; the follower read that name off the turn's events.
	if hasText && final != "" && !strings.HasPrefix(t.f.p.lastShown(t.f.agent), final) {
		fmt.Fprintln(stdout, final)
	}
	if t.result != nil {
		fmt.Fprintln(stderr, usageLine(t.ios.pal, t.result, t.clock.Now().Sub(t.start)))
		if err != nil && render.ResultOf(t.result).Cancelled {
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
