package follow

import (
	"context"
	"errors"
	"time"

	"github.com/kaimon/kaimon/internal/client"
	"github.com/kaimon/kaimon/internal/verbs"
)

// RemoteOptions says where a remote follow starts and how it waits to
// reconnect.
type RemoteOptions struct {
	// History starts every agent at the start of its log (`tail` with
	// history); without it each starts at the end of its log as it is
	// when Remote is called. An agent opened later starts at its start
	// either way.
	History bool
	// Since is where the consumer already is: per agent, the last seq it
	// has. Those agents start after it.
	Since map[string]uint64
	// Broke, if set, hears of each attempt to reconnect after the stream
	// broke: the error that broke it (or that the last attempt met) and
	// the attempt's number, from 1. A consumer says there that it is
	// reconnecting to that host.
	Broke func(err error, attempt int)
	// Mended, if set, hears that the stream is open again after it broke.
	Mended func()
	// Backoff is how the stream is opened again after it broke; the zero
	// Retry is DefaultBackoff.
	Backoff Retry
}

// DefaultBackoff opens a broken stream again soon, then every 2 s: a
// daemon restarted answers within a second or two, and a host whose link
// is down costs one request every 2 s.
var DefaultBackoff = Retry{Every: 50 * time.Millisecond, Max: 2 * time.Second}

// Remote follows channel ("agent:" for every agent, "agent:ID" for those
// whose ids start with ID) of cl's daemon through its control API (GET
// /v1/events, client.Stream) rather than its event bus: the way to follow
// a daemon on another host, whose socket cl reaches through Dial (ssh),
// where no bus port is open to us. The daemon joins each agent's envelopes
// with its log, so the follower passes them on as they come, bytes as
// received, and reports as Lost what is missing between two seqs of an
// agent (deltas a slow reader or a broken connection lost).
//
// When the connection breaks (the ssh master killed, the daemon
// restarted), the follower reconnects, waiting longer between attempts up
// to its Backoff's Max, until ctx ends, and resumes each agent after the last seq
// it handed on: the consumer sees every authoritative event once, in seq
// order per agent, across any number of breaks. An answer of the daemon
// that refuses the request (a bad channel) ends it instead, as an error
// of the follow.
//
// Remote returns once the first stream is open (so that what happens from
// then on reaches the follower), or with the error that prevented it; the
// follower's Run then goes on until ctx ends or emit fails. An agent that
// appears later, even while the connection is broken, is followed from
// its first event.
func Remote(ctx context.Context, cl *client.Client, channel string, opts RemoteOptions) (*Follower, error) {
	if opts.Backoff.Never() {
		opts.Backoff = DefaultBackoff
	}
	ctx, cancel := context.WithCancel(ctx)
	s := &remoteSource{ctx: ctx, cancel: cancel, cl: cl, opts: opts, last: map[string]*uint64{}}
	for id, seq := range opts.Since {
		s.last[id] = &seq
	}
	s.q = client.StreamQuery{Channel: channel, History: opts.History}
	w, err := cl.Stream(ctx, s.query())
	if err != nil {
		cancel()
		return nil, err
	}
	s.opened(w)
	return New(s), nil
}

// RemoteDial is a Host's Dial for a daemon followed through its control
// API's stream (Remote): another host's through ssh, or this machine's
// when the bus is not wanted (kaimon mcp). clientOf reaches the daemon (a
// fleet's client, whose first exchange may start the daemon there, as any
// command's does); each attempt resumes the agents where Attempt.Since
// says, and tells the merge of the stream's breaks and mends.
func RemoteDial(clientOf func(context.Context) (*client.Client, error), channel string) func(context.Context, Attempt) (*Follower, error) {
	return func(ctx context.Context, a Attempt) (*Follower, error) {
		cl, err := clientOf(ctx)
		if err != nil {
			return nil, err
		}
		return Remote(ctx, cl, channel, RemoteOptions{Since: a.Since, Broke: a.Broke, Mended: a.Mended})
	}
}

// remoteSource is GET /v1/events as a Source that reconnects: it tracks
// the last seq it handed on per agent, resumes after it, and drops what it
// already handed on.
type remoteSource struct {
	ctx    context.Context
	cancel context.CancelFunc
	cl     *client.Client
	opts   RemoteOptions
	q      client.StreamQuery
	w      *client.Watcher // nil while broken
	last   map[string]*uint64
	e      Envelope // parse's scratch
	broke  error    // what broke the stream last
}

// query is the request that resumes where the source is.
func (s *remoteSource) query() client.StreamQuery {
	q := s.q
	q.Since = make(map[string]uint64, len(s.last))
	for id, seq := range s.last {
		q.Since[id] = *seq
	}
	return q
}

func (s *remoteSource) Next() ([]byte, error) {
	for {
		if s.w == nil {
			if err := s.reconnect(); err != nil {
				return nil, err
			}
		}
		raw, err := s.w.NextRaw()
		if err != nil {
			s.w.Close()
			s.w = nil
			if s.ctx.Err() != nil {
				return nil, s.ctx.Err()
			}
			s.broke = err
			continue
		}
		agent, ok := parse(raw, &s.e)
		if !ok || s.e.Seq == 0 {
			return raw, nil // not an agent's event: the follower decides
		}
		p := s.last[string(agent)]
		switch {
		case p == nil:
			seq := s.e.Seq
			s.last[string(agent)] = &seq
		case s.e.Seq <= *p:
			continue // handed on before the break
		default:
			*p = s.e.Seq
		}
		return raw, nil
	}
}

// reconnect opens the stream again after the last seqs handed on, waiting
// between attempts, until ctx ends or the daemon refuses.
func (s *remoteSource) reconnect() error {
	err := s.broke
	for attempt := 1; ; attempt++ {
		if s.opts.Broke != nil {
			s.opts.Broke(err, attempt)
		}
		if !s.opts.Backoff.sleep(s.ctx, attempt) {
			return s.ctx.Err()
		}
		var w *client.Watcher
		w, err = s.cl.Stream(s.ctx, s.query())
		if err == nil {
			s.opened(w)
			if s.opts.Mended != nil {
				s.opts.Mended()
			}
			return nil
		}
		if s.ctx.Err() != nil {
			return s.ctx.Err()
		}
		var ve *verbs.Error
		if errors.As(err, &ve) && ve.HTTPStatus() < 500 {
			return err // the daemon refuses: trying again would not help
		}
	}
}

// opened takes a stream just opened. Each agent the daemon had and the
// source has had nothing of resumes, if the stream breaks, where this one
// started it; any agent the source does not know of then is one that
// appeared since, and all of it is new: later requests ask for the
// history of the agents they do not name.
func (s *remoteSource) opened(w *client.Watcher) {
	s.w = w
	for id, seq := range w.Since {
		if s.last[id] == nil {
			s.last[id] = &seq
		}
	}
	s.q.History = true
}

// lasts is where each agent of the stream is (Follower.Lasts): the last
// seq handed on, or where the stream started it.
func (s *remoteSource) lasts() map[string]uint64 {
	out := make(map[string]uint64, len(s.last))
	for id, seq := range s.last {
		out[id] = *seq
	}
	return out
}

func (s *remoteSource) Ready() bool { return s.w != nil && s.w.Ready() }

// Close ends the stream: the request's context, which the connection's
// reader obeys, so it is safe while Next waits in another goroutine.
func (s *remoteSource) Close() error {
	s.cancel()
	return nil
}
