package host

import (
	"errors"
	"sync"

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
