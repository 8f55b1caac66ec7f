package host

import (
	"context"
	"fmt"
	"sync"
)

// Asks are the permission requests a backend is deciding for its agent
// (each blocks in Options.Ask, possibly for minutes): each has a context
// that ends when the agent withdraws it, the turn is interrupted, or the
// process is gone. The zero value is not usable; use NewAsks.
type Asks struct {
	ctx  context.Context
	stop context.CancelFunc

	mu  sync.Mutex
	m   map[string]context.CancelFunc
	seq int
}

// NewAsks makes an empty set of pending requests.
func NewAsks() *Asks {
	a := &Asks{m: map[string]context.CancelFunc{}}
	a.ctx, a.stop = context.WithCancel(context.Background())
	return a
}

// Begin registers a request under key ("" for one that is only ever ended
// all at once) and returns its context, derived from parent, and the func
// that forgets it once it is answered.
func (a *Asks) Begin(parent context.Context, key string) (context.Context, func()) {
	ctx, cancel := context.WithCancel(parent)
	stop := context.AfterFunc(a.ctx, cancel)
	if a.ctx.Err() != nil {
		cancel() // at once, not when AfterFunc's goroutine runs
	}
	a.mu.Lock()
	if key == "" {
		a.seq++
		key = fmt.Sprintf("#%d", a.seq)
	}
	a.m[key] = cancel
	a.mu.Unlock()
	return ctx, func() {
		stop()
		cancel()
		a.mu.Lock()
		delete(a.m, key)
		a.mu.Unlock()
	}
}

// Cancel ends the request under key: the agent withdrew it.
func (a *Asks) Cancel(key string) {
	a.mu.Lock()
	cancel := a.m[key]
	a.mu.Unlock()
	if cancel != nil {
		cancel()
	}
}

// CancelAll ends every pending request (an interrupt).
func (a *Asks) CancelAll() {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, cancel := range a.m {
		cancel()
	}
}

// Stop ends every request, and any begun later: the process is gone and
// nobody is left to take an answer.
func (a *Asks) Stop() { a.stop() }

// Stopped says whether Stop was called.
func (a *Asks) Stopped() bool { return a.ctx.Err() != nil }
