package bus

import "sync"

// queue is one subscriber's bounded FIFO. Push never blocks: when the queue
// is full it drops the oldest entries to make room and counts them.
//
// It is bounded in bytes, not in entries: what a subscriber's lag costs
// the daemon is memory, and an agent's burst of small deltas (200k of a
// few hundred bytes) fits in a bound that a count sized for large
// envelopes would cut to a few thousand, dropping most of the burst for a
// subscriber that only needed a moment to catch up. Dropping the oldest rather than the newest keeps what a
// lagging subscriber receives current: the end of a turn (its result) still
// reaches it, and the seq jump tells it what it lost, which the log fills.
type queue[T any] struct {
	mu       sync.Mutex
	buf      []T // ring; len(buf) is the capacity allocated so far
	sizes    []int
	head, n  int
	bytes    int
	maxBytes int
	dropped  uint64
	wake     chan struct{} // has a token when the queue may be non-empty
	drop     func(T)       // if set, called with each entry dropped
}

// shrinkAbove is the ring size a queue keeps once emptied; a larger one
// (grown by a burst) is let go.
const shrinkAbove = 1024

func newQueue[T any](maxBytes int) *queue[T] {
	return &queue[T]{maxBytes: maxBytes, wake: make(chan struct{}, 1)}
}

// push appends v (of size bytes), wakes the consumer, and reports how
// many entries it dropped.
func (q *queue[T]) push(v T, size int) (dropped int) {
	dropped = q.add(v, size)
	q.signal()
	return dropped
}

// add appends v as push does, without waking the consumer: a batch's
// publisher calls signal once after its last add.
func (q *queue[T]) add(v T, size int) (dropped int) {
	q.mu.Lock()
	for q.n > 0 && q.bytes+size > q.maxBytes {
		v, _ := q.popLocked()
		if q.drop != nil {
			q.drop(v)
		}
		dropped++
	}
	if q.n == len(q.buf) {
		q.growLocked()
	}
	i := (q.head + q.n) % len(q.buf)
	q.buf[i], q.sizes[i] = v, size
	q.n++
	q.bytes += size
	q.dropped += uint64(dropped)
	q.mu.Unlock()
	return dropped
}

// signal wakes the consumer, if it waits.
func (q *queue[T]) signal() {
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// growLocked doubles the ring, so idle subscribers stay small.
func (q *queue[T]) growLocked() {
	c := max(2*len(q.buf), 64)
	buf, sizes := make([]T, c), make([]int, c)
	for i := 0; i < q.n; i++ {
		j := (q.head + i) % len(q.buf)
		buf[i], sizes[i] = q.buf[j], q.sizes[j]
	}
	q.buf, q.sizes, q.head = buf, sizes, 0
}

func (q *queue[T]) popLocked() (T, bool) {
	var zero T
	if q.n == 0 {
		return zero, false
	}
	v := q.buf[q.head]
	q.bytes -= q.sizes[q.head]
	q.buf[q.head] = zero // let the message be collected
	q.head = (q.head + 1) % len(q.buf)
	q.n--
	if q.n == 0 && len(q.buf) > shrinkAbove {
		// A burst is over: let its ring go.
		q.buf, q.sizes, q.head = nil, nil, 0
	}
	return v, true
}

// popIf takes the oldest entry if there is one and ok says so.
func (q *queue[T]) popIf(ok func(T) bool) (T, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.n == 0 || !ok(q.buf[q.head]) {
		var zero T
		return zero, false
	}
	return q.popLocked()
}

// pop takes the oldest entry, if any.
func (q *queue[T]) pop() (T, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.popLocked()
}

// stats reports the entries and bytes queued and the drops so far.
func (q *queue[T]) stats() (n, bytes int, dropped uint64) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.n, q.bytes, q.dropped
}

// wokenSet is where a batch's publisher marks which of its n consumers'
// queues it added to, to signal each once after the batch; small keeps
// the common case off the heap.
func wokenSet(n int, small *[8]bool) []bool {
	if n <= len(small) {
		return small[:n]
	}
	return make([]bool, n)
}
