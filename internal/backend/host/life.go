package host

import (
	"errors"
	"sync"

	"github.com/kaimon/kaimon/internal/apitype"
	"github.com/kaimon/kaimon/internal/backend"
	"github.com/kaimon/kaimon/internal/event"
	"github.com/kaimon/kaimon/internal/proc"
)

// Life is a hosted backend's lifecycle: Start called, ready, the process
// gone (no more Emit), Close called, and whether kaimon stopped it for
// closing its stdout. Its lock is the backend's emit lock too: it
// serializes the backend's mapper and every call to Sink.Emit, so that
// what is emitted and the state it is emitted in never disagree.
//
// The methods that say "lock held" are called between Lock and Unlock;
// the others take the lock themselves.
type Life struct {
	mu      sync.Mutex
	started bool
	ready   bool
	exited  bool
	closing bool
	hungUp  bool
}

func (l *Life) Lock()         { l.mu.Lock() }
func (l *Life) TryLock() bool { return l.mu.TryLock() }
func (l *Life) Unlock()       { l.mu.Unlock() }

// Begin records that Start was called; an error if it was before, or
// after Close. what names the backend in it.
func (l *Life) Begin(what string) error {
	l.Lock()
	defer l.Unlock()
	if l.started || l.closing {
		return errors.New(what + ": Start called twice, or after Close")
	}
	l.started = true
	return nil
}

// MarkReady records that Start succeeded, unless the process is already
// gone: then it returns false, and Start reports how it went.
func (l *Life) MarkReady() bool {
	l.Lock()
	defer l.Unlock()
	if l.exited {
		return false
	}
	l.ready = true
	return true
}

// Retry forgets a process that failed to start (exited, hung up), so
// that Start may try another one.
func (l *Life) Retry() {
	l.Lock()
	l.exited, l.hungUp = false, false
	l.Unlock()
}

// HangUp records that the agent closed its stdout and lived on, unless
// it is being closed anyway (for Process.Watch).
func (l *Life) HangUp() {
	l.Lock()
	l.hungUp = !l.closing
	l.Unlock()
}

// HungUp says whether the agent hung up; lock held.
func (l *Life) HungUp() bool { return l.hungUp }

// Exited says whether the process is gone; lock held.
func (l *Life) Exited() bool { return l.exited }

// Closing says whether Close was called; lock held.
func (l *Life) Closing() bool { return l.closing }

// SetClosing records that Close was called; lock held.
func (l *Life) SetClosing() { l.closing = true }

// Live says whether the agent takes requests: ready, not gone, not
// closing; lock held.
func (l *Life) Live() bool { return l.ready && !l.exited && !l.closing }

// LiveNow is Live, the lock taken.
func (l *Life) LiveNow() bool {
	l.Lock()
	defer l.Unlock()
	return l.Live()
}

// SendErr says why a turn cannot be sent now, nil if it can; lock held.
// what names the agent.
func (l *Life) SendErr(what string) error {
	switch {
	case !l.ready:
		return errors.New(what + " is not started")
	case l.exited || l.closing:
		return proc.ErrExited
	}
	return nil
}

// Exit records that the process is gone and says whether its end is to
// be reported (Start had succeeded); lock held.
func (l *Life) Exit() (report bool) {
	l.exited = true
	return l.ready
}

// Queue is a backend's FIFO of user turns (backend.Turns, or a mapper
// that embeds it) as Push and Unsent need it.
type Queue interface {
	Push(turn int, text string) ([]event.Event, bool)
	Retract(turn int) ([]event.Event, *backend.Turn)
}

// Push records user turn turn in q, under l's lock, and emits its opening
// events when it opens at once: active then says the caller sends it
// now; otherwise it waits its turn in q. An error, and nothing recorded,
// when the agent cannot take a turn (what names it).
func (l *Life) Push(sink backend.Sink, q Queue, what string, turn int, text string) (active bool, err error) {
	l.Lock()
	defer l.Unlock()
	if err := l.SendErr(what); err != nil {
		return false, err
	}
	evs, active := q.Push(turn, text)
	for _, ev := range evs {
		sink.Emit(ev)
	}
	return active, nil
}

// Unsent ends turn t, active in q, which could not be given to the agent
// (err): when report, with an error event and a failed result (else the
// caller returns err, which says it), and it is retracted from q. It
// returns the queued turn that opens in its place, to send, or nil.
func (l *Life) Unsent(sink backend.Sink, q Queue, t backend.Turn, err error, report bool) *backend.Turn {
	l.Lock()
	defer l.Unlock()
	if l.Exited() {
		return nil // the exit report ends it
	}
	if report {
		sink.Emit(event.NewError(t.Number, err.Error(), nil))
		sink.Emit(event.New(event.Result, t.Number, event.ResultData{StopReason: apitype.StopError, Error: err.Error()}))
	}
	evs, next := q.Retract(t.Number)
	for _, ev := range evs {
		sink.Emit(ev)
	}
	return next
}

// Ended says how p, the process whose life l is, ended (Process.Ended).
func (l *Life) Ended(p *Process, hangup string) string {
	l.Lock()
	defer l.Unlock()
	return p.Ended(l.hungUp, hangup)
}

// Report records that p is gone and, when Start had succeeded, reports
// its end: the turns in flight of m end (Process.Report, msg says how it
// ended), then sink.Exited, once, outside the lock.
func (l *Life) Report(p *Process, sink backend.Sink, m Turns, msg string) {
	l.Lock()
	report := l.Exit()
	var err error
	if report {
		err = p.Report(sink, m, l.closing, msg)
	}
	l.Unlock()
	if report {
		sink.Exited(err)
	}
}

// Interruptible is a backend's turn queue as BeginInterrupt needs it
// (backend.Turns).
type Interruptible interface {
	Active() (int, bool)
	MarkInterrupted(turn int)
}

// BeginInterrupt marks the turn in flight of q interrupted, so that its
// end reads as cancelled, and returns it; false when no turn is in flight
// or the agent takes no requests.
func (l *Life) BeginInterrupt(q Interruptible) (int, bool) {
	l.Lock()
	defer l.Unlock()
	turn, ok := q.Active()
	if !ok || !l.Live() {
		return 0, false
	}
	q.MarkInterrupted(turn)
	return turn, true
}

// Close stops the process load returns (nil: none was spawned): Close
// recorded, stdin closed, then SIGTERM to its group and SIGKILL after
// StopGrace; it returns once done, the reader's end, is closed.
func (l *Life) Close(load func() *Process, done <-chan struct{}) {
	l.Lock()
	l.SetClosing()
	p := load()
	l.Unlock()
	if p == nil {
		return
	}
	// Closing stdin alone does not stop a turn in progress.
	p.CloseInput()
	p.Child.Stop(StopGrace)
	<-done
}
