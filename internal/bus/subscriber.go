package bus

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"sync"
	"time"
	"unsafe"

	"github.com/go-zeromq/zmq4"
	"github.com/go-zeromq/zmq4/security/null"
)

// Message is one message read from the bus: the topic ("agent:<id>") and
// the envelope JSON.
type Message struct {
	Topic string
	Body  []byte
}

// Subscriber is a ZeroMQ SUB connection to the bus, read by one goroutine.
// It speaks ZMTP through zmq4 on a connection of its own (rather than
// zmq4.NewSub, whose background reconnects and queues would hide a stopped
// daemon from `kaimon tail`).
type Subscriber struct {
	c       net.Conn
	zc      *zmq4.Conn    // for the handshake and sending subscriptions
	r       *bufio.Reader // the connection, read by recv after the handshake
	topic   []byte        // recv's scratch for a topic frame
	pending []Message     // read while waiting for a sync marker
	once    sync.Once

	mu   sync.Mutex
	stop func() bool // unregisters the close on ctx's end
}

// Dial connects to a bus endpoint ("ipc:///path" or "tcp://host:port").
// Cancelling ctx later closes the subscriber.
func Dial(ctx context.Context, endpoint string) (*Subscriber, error) {
	network, addr, err := splitEndpoint(endpoint)
	if err != nil {
		return nil, err
	}
	var d net.Dialer
	c, err := d.DialContext(ctx, network, addr)
	if err != nil {
		return nil, fmt.Errorf("connecting to the event bus at %s: %w", endpoint, err)
	}
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	s, err := handshake(c)
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("event bus handshake at %s: %w", endpoint, err)
	}
	_ = c.SetDeadline(time.Time{})
	// ctx may be done already, and then Close runs at once, concurrently:
	// stop is guarded.
	stop := context.AfterFunc(ctx, func() { s.Close() })
	s.mu.Lock()
	s.stop = stop
	s.mu.Unlock()
	return s, nil
}

// handshake opens a ZMTP SUB session on c.
func handshake(c net.Conn) (*Subscriber, error) {
	rc := &readBufConn{Conn: c, r: bufio.NewReaderSize(c, 64<<10), bound: newFrameBound(maxFrame)}
	zc, err := zmq4.Open(rc, null.Security(), zmq4.Sub, zmq4.SocketIdentity(""), false, nil)
	if err != nil {
		return nil, err
	}
	return &Subscriber{c: c, zc: zc, r: rc.r}, nil
}

// Subscribe adds a prefix subscription ("agent:" for every agent).
func (s *Subscriber) Subscribe(topic string) error {
	return s.zc.SendMsg(zmq4.NewMsg(append([]byte{1}, topic...)))
}

// Unsubscribe cancels one Subscribe of topic.
func (s *Subscriber) Unsubscribe(topic string) error {
	return s.zc.SendMsg(zmq4.NewMsg(append([]byte{0}, topic...)))
}

// Sync waits until the publisher has applied every subscription sent so
// far (see SyncPrefix). Messages that arrive meanwhile are kept for Next.
func (s *Subscriber) Sync(timeout time.Duration) error {
	nonce := make([]byte, 8)
	_, _ = rand.Read(nonce)
	topic := SyncPrefix + hex.EncodeToString(nonce)
	if err := s.Subscribe(topic); err != nil {
		return err
	}
	_ = s.c.SetReadDeadline(time.Now().Add(timeout))
	defer s.c.SetReadDeadline(time.Time{})
	for {
		m, err := s.recv()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				return fmt.Errorf("the event bus did not confirm the subscription within %v", timeout)
			}
			return err
		}
		if m.Topic == topic {
			return nil
		}
		s.pending = append(s.pending, m)
	}
}

// Next returns the next message. It fails once the publisher goes away or
// the subscriber is closed.
func (s *Subscriber) Next() (Message, error) {
	if len(s.pending) > 0 {
		m := s.pending[0]
		s.pending = s.pending[1:]
		return m, nil
	}
	return s.recv()
}

// Buffered reports whether Next has something already read from the
// connection (a message, or the start of one) and so returns without
// waiting for the publisher, but for the rest of a message cut short:
// a reader that batches its output flushes when this is false.
func (s *Subscriber) Buffered() bool {
	return len(s.pending) > 0 || s.r.Buffered() > 0
}

// recv reads the next two-frame message (topic, body), skipping commands
// and messages of other shapes. It parses the frames itself, as the
// publisher's side does (bus.read), rather than with zmq4's RecvMsg, which
// made a Msg, a frame slice and a copy per frame: a subscriber that
// allocates less keeps up with a faster relay (kaimon tail at full speed).
// Topic and body share one allocation.
func (s *Subscriber) recv() (Message, error) {
	for {
		var f frame
		size, err := s.header(&f)
		if err != nil {
			return Message{}, err
		}
		if f.command || !f.more {
			if _, err := s.r.Discard(size); err != nil { // not a message of ours
				return Message{}, err
			}
			continue
		}
		s.topic = slices.Grow(s.topic[:0], size)[:size]
		if _, err := io.ReadFull(s.r, s.topic); err != nil {
			return Message{}, err
		}
		bsize, err := s.header(&f)
		if err != nil {
			return Message{}, err
		}
		if f.more || f.command { // three frames or more: skip the rest
			for {
				if _, err := s.r.Discard(bsize); err != nil {
					return Message{}, err
				}
				if !f.more {
					break
				}
				if bsize, err = s.header(&f); err != nil {
					return Message{}, err
				}
			}
			continue
		}
		buf := make([]byte, len(s.topic)+bsize)
		copy(buf, s.topic)
		if _, err := io.ReadFull(s.r, buf[len(s.topic):]); err != nil {
			return Message{}, err
		}
		return Message{Topic: unsafe.String(unsafe.SliceData(buf), len(s.topic)), Body: buf[len(s.topic):]}, nil
	}
}

// header reads a frame's header into f and returns its size, refusing one
// over maxFrame.
func (s *Subscriber) header(f *frame) (int, error) {
	size, err := readHeader(s.r, f)
	if err == nil && size > maxFrame {
		err = fmt.Errorf("the event bus sent a frame of %d bytes, over the limit of %d", size, uint64(maxFrame))
	}
	return int(size), err
}

// Close disconnects.
func (s *Subscriber) Close() error {
	var err error
	s.once.Do(func() {
		s.mu.Lock()
		stop := s.stop
		s.mu.Unlock()
		if stop != nil {
			stop()
		}
		err = s.c.Close()
	})
	return err
}

// readBufConn reads through a buffer: zmq4 reads each frame's header and
// body with separate small reads. It refuses an oversized frame
// (frameBound).
type readBufConn struct {
	net.Conn
	r     *bufio.Reader
	bound *frameBound
}

func (c *readBufConn) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	if berr := c.bound.scan(p[:n]); berr != nil {
		return 0, berr
	}
	return n, err
}
