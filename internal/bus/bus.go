// Package bus is kaimon's event bus: a ZeroMQ PUB socket on which
// kaimon-agentd publishes every envelope of every agent, deltas included, as
// two frames (topic "agent:<id>", then the envelope JSON), with ZeroMQ's
// prefix subscriptions ("agent:" for all agents, "agent:<id>" for one).
// It also holds the subscriber `kaimon tail` uses and an in-process hub for
// the control API's event stream. It only publishes and subscribes: the
// join of an agent's log with the live stream by seq is eventlog.Join, and
// following agents (tail, monitor) is package follow.
//
// # Why the fan-out is our own
//
// go-zeromq/zmq4 v0.17.0's PUB socket writes each message to every
// subscriber in turn from a single goroutine (pubMWriter.sendMsg), and its
// high-water mark is one queue for the whole socket. One subscriber that
// stops reading therefore blocks the write to it, and with it every other
// subscriber, and then the publisher. So this package uses zmq4 only for the
// wire protocol — the ZMTP greeting and handshake (zmq4.Open on a connection
// we accept ourselves) and the framing of outgoing messages — and does the
// fan-out itself: every subscriber has its own goroutine and its own bounded
// queue, Publish only appends to those queues (and, for a subscriber
// nobody is writing to, writes them out itself with one non-blocking
// write) and never blocks, and a queue that is full drops its oldest
// message and counts the drop.
package bus

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"github.com/go-zeromq/zmq4"
	"github.com/go-zeromq/zmq4/security/null"

	"github.com/kaimon/kaimon/internal/apitype"
	"github.com/kaimon/kaimon/internal/event"
	"github.com/kaimon/kaimon/internal/nbio"
)

// DefaultQueueBytes is the default of Options.QueueBytes: room for a
// burst of some 100k deltas (an agent streaming faster than a reader
// reads for a moment), or a few large images.
const DefaultQueueBytes = 32 << 20

// SyncPrefix marks a subscription that asks for a sync marker rather than
// messages: on reading the subscription "kaimon-sync:<nonce>" the publisher
// queues one message with that topic and an empty body to that subscriber
// alone, and records no subscription. Since a subscriber's messages are
// handled in order, the marker's arrival proves that every subscription sent
// before it is in force: that is how `kaimon tail --since` knows it may read
// the log without missing what is published meanwhile.
const SyncPrefix = "kaimon-sync:"

// Options tune a Bus.
type Options struct {
	// QueueBytes bounds each subscriber's queue, in bytes (default
	// DefaultQueueBytes): what is queued costs its size plus a message's
	// overhead (messageOverhead). A message larger than QueueBytes is
	// still queued, alone.
	QueueBytes int
	// Logf logs connection problems; default log.Printf.
	Logf func(format string, args ...any)
}

// Bus is the publisher. Its methods are safe for concurrent use.
type Bus struct {
	opts      Options
	endpoints []string
	lns       []net.Listener

	mu     sync.Mutex
	subs   map[*subscriber]struct{}
	shakes map[net.Conn]struct{} // connections still in the handshake
	closed bool
	list   atomic.Pointer[[]*subscriber] // copy of subs for Publish, no lock

	published atomic.Uint64
	dropped   atomic.Uint64 // including subscribers gone since
	wg        sync.WaitGroup
}

// Listen binds every endpoint ("ipc:///path/to.sock" or "tcp://host:port")
// and starts accepting subscribers.
func Listen(endpoints []string, opts Options) (*Bus, error) {
	if opts.QueueBytes <= 0 {
		opts.QueueBytes = DefaultQueueBytes
	}
	if opts.Logf == nil {
		opts.Logf = log.Printf
	}
	b := &Bus{opts: opts, subs: map[*subscriber]struct{}{}, shakes: map[net.Conn]struct{}{}}
	b.list.Store(&[]*subscriber{})
	for _, ep := range endpoints {
		ln, addr, err := listen(ep)
		if err != nil {
			for _, l := range b.lns {
				l.Close()
			}
			return nil, fmt.Errorf("event bus: %w", err)
		}
		b.lns = append(b.lns, ln)
		b.endpoints = append(b.endpoints, addr)
	}
	for _, ln := range b.lns {
		b.wg.Add(1)
		go b.accept(ln)
	}
	return b, nil
}

// Endpoints are the bound endpoints, with the real port of a tcp ":0".
func (b *Bus) Endpoints() []string { return append([]string(nil), b.endpoints...) }

func (b *Bus) accept(ln net.Listener) {
	defer b.wg.Done()
	for {
		c, err := ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			b.opts.Logf("event bus: accept: %v", err)
			time.Sleep(50 * time.Millisecond)
			continue
		}
		b.wg.Add(1)
		go func() {
			defer b.wg.Done()
			b.serve(c)
		}()
	}
}

// message is one published envelope, shared by every queue it is in.
type message struct {
	topic string
	body  []byte
	pong  []byte // a PONG command to send instead (heartbeat answer)

	// An envelope's message (encode) is pooled: buf is the allocation
	// behind topic and body, and refs counts who holds it, each queue
	// it is in and its publisher while it queues it; the last to let go
	// (release) puts it back. A message of another kind has no buf and
	// is left to the GC.
	buf  []byte
	refs atomic.Int32
}

// messages are the pooled messages (issue 12: a message per envelope was
// half of what the relay allocated, and the GC it caused, its preemption
// signals and its page faults, a fifth of the daemon's time in a relay
// profile).
var messages = sync.Pool{New: func() any { return new(message) }}

// maxPooledMessage is the largest buffer a pooled message keeps: a
// streamed delta's envelope is a few hundred bytes, and a rare large one
// (an image, a long tool result) is not worth holding on to.
const maxPooledMessage = 4 << 10

// release lets go of one hold on m: the last puts a pooled message back.
func (m *message) release() {
	if m.buf == nil || m.refs.Add(-1) != 0 {
		return
	}
	m.topic, m.body = "", nil
	if cap(m.buf) > maxPooledMessage {
		m.buf = nil
		return // not back: the GC takes it
	}
	messages.Put(m)
}

// messageOverhead is what a queued message costs besides its topic and
// body: the message itself and its place in the ring.
const messageOverhead = 128

func (m *message) size() int { return len(m.topic) + len(m.body) + messageOverhead }

// Publish queues envs, in order, for every subscriber whose
// subscriptions match their topic. It never blocks on a subscriber. Each
// envelope is encoded once for all of them (event.AppendEnvelope), and
// not at all when nobody subscribed to it; each subscriber's writer is
// woken once, after the last envelope, so that a batch goes out in one
// write.
func (b *Bus) Publish(envs ...*event.Envelope) {
	b.published.Add(uint64(len(envs)))
	subs := *b.list.Load()
	if len(subs) == 0 {
		return
	}
	var small [8]bool
	woken := wokenSet(len(subs), &small)
	for _, env := range envs {
		var m *message
		for i, s := range subs {
			if !s.matchesAgent(env.AgentID) {
				continue
			}
			if m == nil {
				if m = b.encode(env); m == nil {
					break
				}
			}
			m.refs.Add(1) // the queue's
			if n := s.q.add(m, m.size()); n > 0 {
				b.dropped.Add(uint64(n))
			}
			woken[i] = true
		}
		if m != nil {
			m.release() // the publisher's
		}
	}
	for i, s := range subs {
		if woken[i] {
			s.kick()
		}
	}
}

// maxDirect bounds what a publisher writes to a subscriber at once.
const maxDirect = 64 << 10

// kick has what is queued for s written: by the publisher itself, when s
// is idle (nobody writing to it, nothing pending), in one non-blocking
// write of the queued messages; else, or for what that write could not
// send, by s's writer, woken. Writing directly spares a goroutine
// handoff per Publish (a batch: an agent's reader publishes what one read
// of its stdout gave, backend.BatchSink), each a wake of a thread on the
// other core, which made the relay cost twice what a bare reader of the
// agent's pipe costs (issue 12; see docs/perf/history.md). It never blocks: a
// full socket leaves the rest to the writer, as before.
func (s *subscriber) kick() {
	if s.rc == nil || !s.claim(true) {
		s.q.signal()
		return
	}
	// Plain messages only (a PONG is the writer's), and no more than
	// maxDirect in all: a large message (an image) is the writer's too,
	// not copied on the publisher's goroutine.
	buf, sent := s.direct[:0], 0
	for {
		m, ok := s.q.popIf(func(m *message) bool {
			return m.pong == nil && len(buf)+len(m.topic)+len(m.body)+18 <= maxDirect // 18: two frame headers at most
		})
		if !ok {
			break
		}
		buf = appendMessage(buf, m.topic, m.body)
		m.release()
		sent++
	}
	var n int
	var werr error
	if len(buf) > 0 {
		if s.writeFd == nil {
			s.writeFd = s.writeDirect
		}
		s.direct = buf
		err := s.rc.Write(s.writeFd)
		n, werr = s.wn, s.werr
		s.werr = nil
		if err != nil {
			werr = err
		}
		if werr == syscall.EAGAIN {
			n, werr = 0, nil
		}
	}
	if werr != nil {
		s.stop() // the writer sees the connection end; busy stays held
		return
	}
	s.sent.Add(uint64(sent)) // what the write did not take goes out first, from pending
	if n < len(buf) {
		s.pending = append(s.pending[:0], buf[max(n, 0):]...)
	}
	if s.direct = buf[:0]; cap(buf) > maxDirect {
		s.direct = nil // a rare large one is not kept
	}
	if !s.unclaim() {
		s.q.signal() // queued meanwhile, or left pending: the writer's
	}
}

// writeDirect is kick's poller callback: one attempt to write s.direct,
// never a wait for the socket. A method value made once (writeFd), not a
// closure per kick: each was an allocation.
func (s *subscriber) writeDirect(fd uintptr) bool {
	s.wn, s.werr = nbio.Write(fd, s.direct)
	return true
}

// claim takes busy for its caller, if nobody holds it; idle also asks
// that nothing be pending or queued beyond what a publisher may write
// (a publisher claims only an idle subscriber).
func (s *subscriber) claim(idle bool) bool {
	s.q.mu.Lock()
	defer s.q.mu.Unlock()
	if s.busy || idle && s.pending != nil {
		return false
	}
	s.busy = true
	return true
}

// unclaim gives busy up if nothing is queued or pending, and reports
// whether it did; else its holder keeps it (the writer goes on draining)
// or, a publisher, signals the writer, which claims it next.
func (s *subscriber) unclaim() bool {
	s.q.mu.Lock()
	defer s.q.mu.Unlock()
	s.busy = false
	return s.q.n == 0 && len(s.pending) == 0
}

// encode makes env's message, from the pool: its topic and its body in
// one buffer. The caller holds it once (refs 1) and releases it.
func (b *Bus) encode(env *event.Envelope) *message {
	m := messages.Get().(*message)
	need := len(topicPrefix) + len(env.AgentID) + len(env.Data) + len(env.AgentID) + 128
	buf := m.buf[:0]
	if cap(buf) < need {
		buf = make([]byte, 0, max(need, 512))
	}
	buf = append(append(buf, topicPrefix...), env.AgentID...)
	n := len(buf)
	buf, err := event.AppendEnvelope(buf, env)
	if err != nil {
		b.opts.Logf("event bus: encoding an envelope of agent %s: %v", env.AgentID, err)
		return nil // and m to the GC
	}
	m.buf, m.topic, m.body = buf, unsafe.String(&buf[0], n), buf[n:]
	m.refs.Store(1)
	return m
}

// PublishRaw queues a message with topic and body as they are.
func (b *Bus) PublishRaw(topic string, body []byte) {
	b.published.Add(1)
	m := &message{topic: topic, body: body}
	for _, s := range *b.list.Load() {
		if s.matches(topic) {
			s.push(m)
		}
	}
}

// push queues m for s, counting what the queue drops for it.
func (s *subscriber) push(m *message) {
	if n := s.q.push(m, m.size()); n > 0 {
		s.b.dropped.Add(uint64(n))
	}
}

// Topic is the channel of an agent: "agent:<id>".
func Topic(agentID string) string { return topicPrefix + agentID }

// topicPrefix begins every agent's topic.
const topicPrefix = "agent:"

// serve runs one subscriber connection: the ZMTP handshake, then a reader
// of its subscriptions and a writer of its queue, until either ends.
func (b *Bus) serve(c net.Conn) {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		c.Close()
		return
	}
	b.shakes[c] = struct{}{}
	b.mu.Unlock()
	defer func() {
		b.mu.Lock()
		delete(b.shakes, c)
		b.mu.Unlock()
	}()
	peer := peerName(c)
	// The handshake must not stall the accept loop nor hang forever on a
	// peer that says nothing.
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	bc := &bufConn{Conn: c, bound: newFrameBound(maxInbound)}
	zc, err := zmq4.Open(bc, null.Security(), zmq4.Pub, zmq4.SocketIdentity(""), true, nil)
	if err != nil {
		if !hungUp(err) { // a liveness probe dials and hangs up
			b.opts.Logf("event bus: handshake with %s: %v", peer, err)
		}
		c.Close()
		return
	}
	_ = c.SetDeadline(time.Time{})
	s := &subscriber{b: b, c: c, bc: bc, zc: zc, peer: peer, done: make(chan struct{}),
		q: newQueue[*message](b.opts.QueueBytes)}
	s.q.drop = (*message).release
	var out io.Writer = c
	if sc, ok := c.(syscall.Conn); ok {
		if s.rc, _ = sc.SyscallConn(); s.rc != nil {
			out = rawWriter{s.rc}
		}
	}
	bc.w = bufio.NewWriterSize(out, 64<<10)
	s.topics.Store(&[]string{})
	if !b.add(s) {
		c.Close()
		return
	}
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		s.read()
	}()
	s.write()
	b.remove(s)
}

func (b *Bus) add(s *subscriber) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return false
	}
	delete(b.shakes, s.c) // from now on Close drains it
	b.subs[s] = struct{}{}
	b.storeListLocked()
	return true
}

func (b *Bus) remove(s *subscriber) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.subs, s)
	b.storeListLocked()
}

func (b *Bus) storeListLocked() {
	l := make([]*subscriber, 0, len(b.subs))
	for s := range b.subs {
		l = append(l, s)
	}
	b.list.Store(&l)
}

// Close stops accepting, gives every subscriber up to a second to receive
// what is queued for it (the final status events of the agents closed
// before), then closes every connection and waits for its goroutines.
func (b *Bus) Close() error {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil
	}
	b.closed = true
	subs := make([]*subscriber, 0, len(b.subs))
	for s := range b.subs {
		subs = append(subs, s)
	}
	for c := range b.shakes {
		c.Close() // a handshake is not waited for
	}
	b.mu.Unlock()
	for _, ln := range b.lns {
		ln.Close()
	}
	deadline := time.Now().Add(time.Second)
	for _, s := range subs {
		_ = s.c.SetWriteDeadline(deadline)
		s.stop()
	}
	b.wg.Wait()
	return nil
}

// Stats reports the counters now.
func (b *Bus) Stats() apitype.BusStats {
	st := apitype.BusStats{Endpoints: b.Endpoints(), Published: b.published.Load(), Dropped: b.dropped.Load(),
		QueueBytes: b.opts.QueueBytes, Connections: []apitype.SubscriberStats{}}
	for _, s := range *b.list.Load() {
		n, bytes, dropped := s.q.stats()
		st.Connections = append(st.Connections, apitype.SubscriberStats{Peer: s.peer, Topics: append([]string{}, *s.topics.Load()...),
			Queued: n, QueuedBytes: bytes, Sent: s.sent.Load(), Dropped: dropped})
	}
	slices.SortFunc(st.Connections, func(a, b apitype.SubscriberStats) int { return strings.Compare(a.Peer, b.Peer) })
	st.Subscribers = len(st.Connections)
	return st
}

// subscriber is one connected SUB peer.
type subscriber struct {
	b    *Bus
	c    net.Conn
	bc   *bufConn
	zc   *zmq4.Conn
	peer string
	q    *queue[*message]

	// topics is the set of subscribed prefixes, replaced (never changed)
	// by the reader, so Publish matches without a lock.
	topics atomic.Pointer[[]string]
	sent   atomic.Uint64

	// rc is c's raw connection, for a publisher's direct write (nil: c
	// has none, and only the writer writes). Whoever writes to c holds
	// busy, which q.mu guards: the writer goroutine while it drains, or
	// a publisher that found the subscriber idle (kick). direct is a
	// publisher's frame buffer, and pending what its write could not
	// send, which the writer sends first; both belong to busy's holder.
	rc      syscall.RawConn
	busy    bool
	direct  []byte
	pending []byte
	// writeFd is writeDirect, made once; wn and werr are its write's
	// result (busy's holder's too).
	writeFd func(fd uintptr) bool
	wn      int
	werr    error

	stopOnce sync.Once
	done     chan struct{}
}

// matches is ZeroMQ's rule: a message goes to a subscriber that has a
// subscription which is a prefix of its topic ("" matches everything).
// matchesAgent is matches(Topic(id)), without building the topic.
func (s *subscriber) matchesAgent(id string) bool {
	for _, t := range *s.topics.Load() {
		if topicHasPrefix(id, t) {
			return true
		}
	}
	return false
}

// topicHasPrefix reports whether Topic(id) begins with t.
func topicHasPrefix(id, t string) bool {
	if len(t) <= len(topicPrefix) {
		return topicPrefix[:len(t)] == t
	}
	return t[:len(topicPrefix)] == topicPrefix && strings.HasPrefix(id, t[len(topicPrefix):])
}

func (s *subscriber) matches(topic string) bool {
	for _, t := range *s.topics.Load() {
		if strings.HasPrefix(topic, t) {
			return true
		}
	}
	return false
}

func (s *subscriber) stop() { s.stopOnce.Do(func() { close(s.done) }) }

// write sends the queue, in order, flushing whenever it runs empty. After
// the handshake only it and a publisher that claimed the subscriber idle
// (kick) write to the connection, one at a time (busy).
func (s *subscriber) write() {
	defer s.c.Close()
	for {
		select {
		case <-s.q.wake:
		case <-s.done:
			// What is queued goes out before the hang-up; a publisher
			// writing now is done within a write, or never (a dead
			// connection holds busy), so it is waited for a little.
			for range 100 {
				if s.claim(false) {
					s.drain(true)
					break
				}
				time.Sleep(time.Millisecond)
			}
			return
		}
		if !s.claim(false) {
			continue // a publisher writes; it wakes us if it leaves any
		}
		if err := s.drain(false); err != nil {
			return
		}
	}
}

// drain writes what a publisher left pending and everything queued, then
// flushes, and gives busy up once nothing is left (held is whether to
// keep it: at the end). An error leaves busy held: nobody else may write
// to a connection that failed.
func (s *subscriber) drain(held bool) error {
	for {
		if s.pending != nil {
			_, err := s.bc.w.Write(s.pending)
			s.pending = nil
			if err != nil {
				s.stop()
				return err
			}
		}
		m, ok := s.q.pop()
		if !ok {
			if err := s.bc.w.Flush(); err != nil {
				s.stop()
				return err
			}
			if held || s.unclaim() {
				return nil
			}
			if !s.claim(false) {
				return nil // a publisher took it between the two: its turn
			}
			continue
		}
		var err error
		if m.pong != nil {
			err = s.zc.SendCmd(zmq4.CmdPong, m.pong)
		} else {
			err = writeMessage(s.bc.w, m.topic, m.body)
			m.release() // written: in the bufio buffer or sent
			s.sent.Add(1)
		}
		if err != nil {
			s.stop()
			return err
		}
	}
}

// read applies the subscriber's subscriptions until the connection ends.
//
// It parses the incoming ZMTP frames itself rather than with zmq4's
// Conn.RecvMsg, which answers a PING by writing a PONG from the reading
// goroutine: that write could land between the frames the writer is
// sending. Here a PING's PONG is queued for the writer instead.
func (s *subscriber) read() {
	defer s.stop()
	br := bufio.NewReaderSize(s.c, 4096)
	counts := map[string]int{} // ZeroMQ counts repeated subscriptions
	apply := func(sub bool, topic string) {
		if sub && strings.HasPrefix(topic, SyncPrefix) {
			s.push(&message{topic: topic, body: []byte{}})
			return
		}
		if sub {
			counts[topic]++
		} else if counts[topic] > 1 {
			counts[topic]--
		} else {
			delete(counts, topic)
		}
		l := make([]string, 0, len(counts))
		for t := range counts {
			l = append(l, t)
		}
		slices.Sort(l)
		s.topics.Store(&l)
	}
	for {
		f, err := readFrame(br)
		if err != nil {
			if !hungUp(err) {
				select {
				case <-s.done:
				default:
					s.b.opts.Logf("event bus: subscriber %s: %v", s.peer, err)
				}
			}
			return
		}
		switch {
		case f.command:
			name, body := parseCommand(f.body)
			switch name {
			case zmq4.CmdSubscribe: // ZMTP 3.1 peers (we greet as 3.0, so rare)
				apply(true, string(body))
			case zmq4.CmdCancel:
				apply(false, string(body))
			case zmq4.CmdPing:
				if len(body) >= 2 {
					s.push(&message{pong: append([]byte{}, body[2:]...)})
				}
			}
		case f.more:
			// A multi-frame message is no subscription: skip it whole.
			for f.more {
				if f, err = readFrame(br); err != nil {
					return
				}
			}
		case len(f.body) > 0 && (f.body[0] == 1 || f.body[0] == 0):
			apply(f.body[0] == 1, string(f.body[1:]))
		}
	}
}

// writeMessage writes a two-frame ZMTP 3 message (topic, body) to w, as
// zmq4's Conn.SendMsg does under NULL security (flags, a 1- or 8-byte
// size, the body), without its allocations per message.
func writeMessage(w *bufio.Writer, topic string, body []byte) error {
	writeHeader(w, true, len(topic))
	w.WriteString(topic)
	writeHeader(w, false, len(body))
	_, err := w.Write(body)
	return err
}

// appendMessage is writeMessage into buf.
func appendMessage(buf []byte, topic string, body []byte) []byte {
	buf = append(appendHeader(buf, true, len(topic)), topic...)
	return append(appendHeader(buf, false, len(body)), body...)
}

// writeHeader writes a frame's flags and size (byte by byte: a header
// array handed to Write would escape, an allocation per frame).
func writeHeader(w *bufio.Writer, more bool, size int) {
	var h [9]byte
	for _, c := range appendHeader(h[:0], more, size) {
		w.WriteByte(c)
	}
}

// appendHeader appends a frame's flags and size to buf.
func appendHeader(buf []byte, more bool, size int) []byte {
	var flags byte
	if more {
		flags = 0x01
	}
	if size <= 255 {
		return append(buf, flags, byte(size))
	}
	buf = append(buf, flags|0x02)
	for shift := 56; shift >= 0; shift -= 8 {
		buf = append(buf, byte(uint64(size)>>shift))
	}
	return buf
}

// hungUp reports an error that only says the peer went away.
func hungUp(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

type frame struct {
	more, command bool
	body          []byte
}

// maxInbound bounds what a subscriber may send us in one frame: a topic.
const maxInbound = 64 << 10

// readFrame reads one ZMTP 3 frame from a subscriber: flags, a 1- or
// 8-byte size, the body.
func readFrame(r *bufio.Reader) (frame, error) {
	var f frame
	size, err := readHeader(r, &f)
	if err != nil {
		return f, err
	}
	if size > maxInbound {
		return f, fmt.Errorf("frame of %d bytes from a subscriber: a subscriber only sends topics", size)
	}
	f.body = make([]byte, size)
	_, err = io.ReadFull(r, f.body)
	return f, err
}

// readHeader reads a frame's flags into f and returns its size.
func readHeader(r *bufio.Reader, f *frame) (uint64, error) {
	flags, err := r.ReadByte()
	if err != nil {
		return 0, err
	}
	f.more, f.command = flags&0x01 != 0, flags&0x04 != 0
	if flags&0x02 == 0 {
		x, err := r.ReadByte()
		return uint64(x), err
	}
	var size uint64
	for range 8 {
		x, err := r.ReadByte()
		if err != nil {
			return 0, err
		}
		size = size<<8 | uint64(x)
	}
	return size, nil
}

// parseCommand splits a ZMTP command body into its name and data.
func parseCommand(b []byte) (string, []byte) {
	if len(b) == 0 || int(b[0]) > len(b)-1 {
		return "", nil
	}
	n := int(b[0])
	return string(b[1 : 1+n]), b[1+n:]
}

// rawWriter writes to a connection as net.Conn's Write does (all of p,
// waiting in the runtime's poller while the socket is full, within the
// connection's write deadline), but each write(2) without entering the
// scheduler's syscall state (package nbio): the subscriber's writer
// writes after every wake, and each such entry after the daemon was idle
// woke the runtime's sysmon thread.
type rawWriter struct{ rc syscall.RawConn }

func (w rawWriter) Write(p []byte) (int, error) {
	done := 0
	var werr error
	write := func(fd uintptr) bool {
		var n int
		n, werr = nbio.Write(fd, p[done:])
		if n > 0 {
			done += n
		}
		return werr != syscall.EAGAIN && (werr != nil || done == len(p))
	}
	for done < len(p) {
		if err := w.rc.Write(write); err != nil {
			return done, err
		}
		if werr != nil {
			return done, werr
		}
	}
	return done, nil
}

// bufConn lets zmq4 write through a buffer once the handshake is done (w
// set), so that a burst of messages goes out in few system calls. What
// zmq4 reads in the handshake is held to maxInbound (frameBound): a peer
// must not make the daemon allocate what it declares.
type bufConn struct {
	net.Conn
	w     *bufio.Writer
	bound *frameBound
}

func (c *bufConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if berr := c.bound.scan(p[:n]); berr != nil {
		return 0, berr
	}
	return n, err
}

func (c *bufConn) Write(p []byte) (int, error) {
	if c.w != nil {
		return c.w.Write(p)
	}
	return c.Conn.Write(p)
}
