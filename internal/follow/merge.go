package follow

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/kaimon/kaimon/internal/eventlog"
)

// Merge follows many hosts into one consumer: `kaimon tail --all-hosts`,
// the monitor and `kaimon mcp` each follow this machine's daemon and every
// configured host's, and differ only in how they reach a host (the bus,
// or GET /v1/events through ssh), in how long they wait for one that went
// away, and in what they print. Those are the Host's; the merging — one
// goroutine a host, one lock around everything handed to the consumer,
// rejoining a host that was lost and resuming each of its agents where it
// was, ending every host's follow on the consumer's first error — is
// Merge's.

// Retry is how a host that went away is tried again: the waits between
// attempts, and whether an attempt may start the host's daemon. Its zero
// value is never: the host's stream ends there.
type Retry struct {
	// Every is the wait before the first attempt; each next wait doubles,
	// up to Max (a Max at most Every: every Every, a steady poll).
	Every, Max time.Duration
	// Start lets an attempt start this machine's daemon (Attempt.Start):
	// a tail that the person just asked for may start it; once it was
	// stopped, a tail is no reason to start it again. (Another host's
	// daemon is started by its ssh dial-stdio whenever it is reached, as
	// for any command: RemoteDial does not read it.)
	Start bool
}

// Never reports whether r tries nothing.
func (r Retry) Never() bool { return r.Every <= 0 }

// Wait is the wait before attempt n (from 1).
func (r Retry) Wait(n int) time.Duration {
	w := r.Every
	for i := 1; i < n && w < r.Max; i++ {
		w *= 2
	}
	if r.Max > r.Every {
		w = min(w, r.Max)
	}
	return w
}

// sleep waits before attempt n, or until ctx ends (false).
func (r Retry) sleep(ctx context.Context, n int) bool {
	t := time.NewTimer(r.Wait(n))
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// Host is one host of a Merge.
type Host struct {
	// Name names the host to the Sink.
	Name string
	// Dial reaches the host and starts its follower, in force when it
	// returns: whatever happens from then on reaches it. Its error is
	// what the Sink is told (an Unreachable note), so it names the host
	// as the consumer wants it named.
	Dial func(ctx context.Context, a Attempt) (*Follower, error)
	// Unreachable is how a host that could not be reached is tried
	// again; its Start is also the first attempt's. Never: such a host
	// is left out (told as Ended).
	Unreachable Retry
	// Gone is how a host whose source went away (its daemon stopped, or
	// refused the stream) is tried again. Never: its stream ends there.
	Gone Retry
}

// Attempt is what one call of Host.Dial is told.
type Attempt struct {
	// N counts the attempts since the host was lost; 0 is the merge's
	// first.
	N int
	// Start says the attempt may start the host's daemon.
	Start bool
	// Since is, after the host was followed and lost, the seq each agent
	// was at (nil before). A follower with a Log is replayed from there
	// by Merge, before anything live; one without (Remote) must start
	// there itself: RemoteOptions.Since.
	Since map[string]uint64
	// Broke and Mended are for the follower's own reconnection
	// (RemoteOptions.Broke and .Mended): the Sink hears of them as Broke
	// and Connected notes.
	Broke  func(err error, attempt int)
	Mended func()
}

// NoteKind says what a Note tells.
type NoteKind int

const (
	// Connected: the host is followed. After says what it was after
	// (Unreachable, Gone or Broke), or is Connected at the first.
	Connected NoteKind = iota
	// Unreachable: the host could not be reached (Err); it is tried
	// again as its Unreachable says.
	Unreachable
	// Broke: the host's stream broke (Err) and its follower reconnects
	// by itself; Attempt counts its attempts, from 1.
	Broke
	// Gone: the host's source went away (Err); it is tried again as its
	// Gone says, each agent resumed where it was.
	Gone
	// Ended: the host's follow ended for good (Err): it went away and is
	// not tried again.
	Ended
	// LogError: Agent's log could not be read to fill a gap of its
	// stream (Err); its stream goes on from there.
	LogError
)

// Note is news of a host's connection, for the consumer to tell.
type Note struct {
	Host    string
	Kind    NoteKind
	After   NoteKind // with Connected
	Err     error
	Attempt int    // with Broke
	Agent   string // with LogError
}

// Sink is what a Merge hands on. Merge calls its functions one at a time
// (under one lock), so that a consumer that writes one output needs no
// lock of its own and its lines never interleave. Emit is required; the
// others may be nil.
type Sink struct {
	// Emit receives each host's envelopes, each agent's in seq order. Its
	// error ends every host's follow, and Merge returns it.
	Emit func(host string, e *Envelope) error
	// Note hears of the hosts' connections.
	Note func(n Note)
	// Lost and Bad are the followers' (Follower.Lost, Follower.Bad), with
	// their host.
	Lost func(host, agent string, from, to uint64, n int)
	Bad  func(host, agent string, b eventlog.Bad)
	// Idle is called whenever a host's source has nothing ready: the
	// moment to flush. Its error ends the merge, as Emit's.
	Idle func() error
	// NeedOne ends the merge at once, with every host's error, when no
	// host answers its first attempt: a command whose output would stay
	// empty says why rather than waiting.
	NeedOne bool
}

// ErrEnded is Merge's error when every host's follow ended for good.
var ErrEnded = errors.New("every host's stream ended")

// Merge follows hosts, reached in parallel, into s until ctx ends (nil),
// s fails (its error), NeedOne finds no host answering (their errors
// joined), or every host's follow ended (ErrEnded). Each host is followed
// as soon as it answers, whatever the others do; a host lost — not
// reached, or its source gone — is tried again in the background as its
// Retry says while the others go on.
func Merge(ctx context.Context, hosts []Host, s Sink) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	m := &merge{s: s, cancel: cancel}
	// goOn is closed once the hosts may be followed: at once, or with
	// NeedOne, when one host has answered. Until then a host that did not
	// answer says nothing: the merge may yet give up.
	goOn := make(chan struct{})
	type first struct {
		i   int
		err error
	}
	firsts := make(chan first, len(hosts))
	var wg sync.WaitGroup
	for i, h := range hosts {
		wg.Go(func() {
			fw, err := m.dial(ctx, h, Attempt{Start: h.Unreachable.Start})
			firsts <- first{i, err}
			select {
			case <-goOn:
			case <-ctx.Done():
				if fw != nil {
					fw.Close()
				}
				return
			}
			m.follow(ctx, h, fw, err)
		})
	}
	if !s.NeedOne || len(hosts) == 0 {
		close(goOn)
	} else {
		errs := make([]error, len(hosts))
		failed := 0
		for range hosts {
			f := <-firsts
			if f.err == nil {
				break
			}
			errs[f.i] = f.err
			failed++
		}
		if failed == len(hosts) {
			cancel()
			wg.Wait()
			return errors.Join(errs...) // in the hosts' order
		}
		close(goOn)
	}
	wg.Wait()
	switch {
	case m.err != nil:
		return m.err
	case ctx.Err() != nil:
		return nil // ended from outside: a normal end
	}
	return ErrEnded
}

type merge struct {
	mu     sync.Mutex
	s      Sink
	cancel context.CancelFunc
	err    error // the consumer's first error, which ends every host's follow
}

// sinkError is an error of the consumer's, which ends the merge, as
// opposed to one of a host.
type sinkError struct{ err error }

func (e *sinkError) Error() string { return e.err.Error() }
func (e *sinkError) Unwrap() error { return e.err }

// dial makes attempt a at host h, and hooks the follower to the sink.
func (m *merge) dial(ctx context.Context, h Host, a Attempt) (*Follower, error) {
	a.Broke = func(err error, attempt int) { m.note(Note{Host: h.Name, Kind: Broke, Err: err, Attempt: attempt}) }
	a.Mended = func() { m.note(Note{Host: h.Name, Kind: Connected, After: Broke}) }
	fw, err := h.Dial(ctx, a)
	if err != nil {
		return nil, err
	}
	if m.s.Lost != nil {
		fw.Lost = func(agent string, from, to uint64, n int) {
			m.locked(func() { m.s.Lost(h.Name, agent, from, to, n) })
		}
	}
	if m.s.Bad != nil {
		fw.Bad = func(agent string, b eventlog.Bad) { m.locked(func() { m.s.Bad(h.Name, agent, b) }) }
	}
	if m.s.Idle != nil {
		fw.Idle = func() error {
			m.mu.Lock()
			defer m.mu.Unlock()
			if err := m.s.Idle(); err != nil {
				return &sinkError{err}
			}
			return nil
		}
	}
	// One host's unreadable log must not end the others' streams; the
	// consumer's failure while the log filled a gap does end them.
	fw.LogError = func(agent string, err error) error {
		if errors.As(err, new(*sinkError)) {
			return err
		}
		m.note(Note{Host: h.Name, Kind: LogError, Agent: agent, Err: err})
		return nil
	}
	return fw, nil
}

// follow follows host h (fw, or the error of its first attempt) until
// ctx ends or h's follow ends for good.
func (m *merge) follow(ctx context.Context, h Host, fw *Follower, err error) {
	after := Connected
	var since map[string]uint64
	for {
		var retry Retry
		if err == nil {
			m.note(Note{Host: h.Name, Kind: Connected, After: after})
			err = m.run(ctx, h, fw, since)
			since = fw.Lasts() // before Close, which lets the joins go
			fw.Close()
			var se *SourceError
			switch {
			case ctx.Err() != nil:
				return
			case !errors.As(err, &se):
				m.fail(err)
				return
			case h.Gone.Never():
				m.note(Note{Host: h.Name, Kind: Ended, Err: se.Err})
				return
			}
			m.note(Note{Host: h.Name, Kind: Gone, Err: se.Err})
			retry, after = h.Gone, Gone
		} else {
			if ctx.Err() != nil {
				return
			}
			if h.Unreachable.Never() {
				m.note(Note{Host: h.Name, Kind: Ended, Err: err})
				return
			}
			m.note(Note{Host: h.Name, Kind: Unreachable, Err: err})
			retry, after = h.Unreachable, Unreachable
		}
		// Attempts after the first of a loss are not told: a host down
		// for an hour is one note, not one a minute.
		for n := 1; ; n++ {
			if !retry.sleep(ctx, n) {
				return
			}
			if fw, err = m.dial(ctx, h, Attempt{N: n, Start: retry.Start, Since: since}); err == nil {
				break
			}
		}
	}
}

// run hands fw's envelopes to the sink: first, for a follower with a log
// rejoined after a loss, each agent's log after where it was (since),
// then the live stream.
func (m *merge) run(ctx context.Context, h Host, fw *Follower, since map[string]uint64) error {
	emit := func(e *Envelope) error {
		m.mu.Lock()
		defer m.mu.Unlock()
		if err := m.s.Emit(h.Name, e); err != nil {
			return &sinkError{err}
		}
		return nil
	}
	if fw.Log != nil && since != nil {
		// Rejoined: an agent first seen live now appeared while the host
		// was away, and all of its log is new to the consumer.
		fw.FromStart = true
		for agent, seq := range since {
			err := fw.Replay(agent, seq, emit)
			switch {
			case ctx.Err() != nil:
				return ctx.Err()
			case errors.As(err, new(*sinkError)):
				return err
			case err != nil:
				m.note(Note{Host: h.Name, Kind: LogError, Agent: agent, Err: err})
			}
		}
	}
	return fw.Run(ctx, emit)
}

// fail ends every host's follow with err, the consumer's first error.
func (m *merge) fail(err error) {
	var se *sinkError
	if errors.As(err, &se) {
		err = se.err
	}
	m.mu.Lock()
	if m.err == nil {
		m.err = err
	}
	m.mu.Unlock()
	m.cancel()
}

func (m *merge) note(n Note) {
	if m.s.Note != nil {
		m.locked(func() { m.s.Note(n) })
	}
}

func (m *merge) locked(f func()) {
	m.mu.Lock()
	defer m.mu.Unlock()
	f()
}
