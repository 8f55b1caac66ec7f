package bus

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"

	"github.com/kaimon/kaimon/internal/event"
)

// ErrClosed is returned by a local subscription whose hub has closed.
var ErrClosed = errors.New("event hub closed")

// Local is an in-process fan-out of envelopes with the bus's rules (prefix
// topics, a bounded queue per subscription that drops its oldest), for the
// control API's event stream. A subscription is in force as soon as
// Subscribe returns, which is what lets a stream join the log and the live
// events without a gap.
type Local struct {
	opts Options

	mu     sync.Mutex
	subs   map[*LocalSub]struct{}
	closed bool
	list   atomic.Pointer[[]*LocalSub]
}

// NewLocal makes a hub; opts bounds each subscription's queue.
func NewLocal(opts Options) *Local {
	if opts.QueueBytes <= 0 {
		opts.QueueBytes = DefaultQueueBytes
	}
	l := &Local{opts: opts, subs: map[*LocalSub]struct{}{}}
	l.list.Store(&[]*LocalSub{})
	return l
}

// LocalSub is one subscription.
type LocalSub struct {
	l      *Local
	prefix string
	q      *queue[*event.Envelope]
	done   chan struct{}
	once   sync.Once
}

// Subscribe starts a subscription to the topics with this prefix.
func (l *Local) Subscribe(prefix string) *LocalSub {
	s := &LocalSub{l: l, prefix: prefix, q: newQueue[*event.Envelope](l.opts.QueueBytes), done: make(chan struct{})}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		s.once.Do(func() { close(s.done) })
		return s
	}
	l.subs[s] = struct{}{}
	l.storeLocked()
	return s
}

func (l *Local) storeLocked() {
	list := make([]*LocalSub, 0, len(l.subs))
	for s := range l.subs {
		list = append(list, s)
	}
	l.list.Store(&list)
}

// Publish queues envs, in order, for every matching subscription; it
// never blocks, and wakes each subscription once, after the last.
func (l *Local) Publish(envs ...*event.Envelope) {
	subs := *l.list.Load()
	if len(subs) == 0 {
		return
	}
	var small [8]bool
	woken := wokenSet(len(subs), &small)
	for _, env := range envs {
		var e *event.Envelope
		for i, s := range subs {
			if topicHasPrefix(env.AgentID, s.prefix) {
				if e == nil {
					c := *env
					e = &c
				}
				s.q.add(e, localSize(e))
				woken[i] = true
			}
		}
	}
	for i, s := range subs {
		if woken[i] {
			s.q.signal()
		}
	}
}

// Close ends every subscription; Next then returns what is queued, then
// ErrClosed.
func (l *Local) Close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.closed = true
	for s := range l.subs {
		s.once.Do(func() { close(s.done) })
	}
	l.subs = map[*LocalSub]struct{}{}
	l.storeLocked()
}

// Next returns the next envelope, waiting for one.
func (s *LocalSub) Next(ctx context.Context) (*event.Envelope, error) {
	for {
		if e, ok := s.q.pop(); ok {
			return e, nil
		}
		select {
		case <-s.q.wake:
		case <-s.done:
			if e, ok := s.q.pop(); ok {
				return e, nil
			}
			return nil, ErrClosed
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// Dropped is how many envelopes this subscription lost to a full queue.
func (s *LocalSub) Dropped() uint64 {
	_, _, d := s.q.stats()
	return d
}

// Buffered reports whether Next would return without waiting: a reader
// that writes in batches flushes when it would wait.
func (s *LocalSub) Buffered() bool {
	n, _, _ := s.q.stats()
	return n > 0
}

// Close ends the subscription.
func (s *LocalSub) Close() {
	s.l.mu.Lock()
	delete(s.l.subs, s)
	s.l.storeLocked()
	s.l.mu.Unlock()
	s.once.Do(func() { close(s.done) })
}

// localSize is what a queued envelope costs: its data and the rest of it,
// counted as a bus message's overhead is (messageOverhead).
func localSize(e *event.Envelope) int { return len(e.Data) + messageOverhead }
