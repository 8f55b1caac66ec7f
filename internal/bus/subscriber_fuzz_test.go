package bus

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-zeromq/zmq4"
	"github.com/go-zeromq/zmq4/security/null"
)

// connPair is a connected pair of unix stream sockets: buffered by the
// kernel, so that both ends of a ZMTP handshake can greet at once.
func connPair(t *testing.T) (net.Conn, net.Conn) {
	t.Helper()
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	var cs [2]net.Conn
	for i, fd := range fds {
		f := os.NewFile(uintptr(fd), "pair")
		c, err := net.FileConn(f)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		cs[i] = c
	}
	return cs[0], cs[1]
}

// frame encodes one ZMTP frame.
func zframe(more bool, body string) []byte {
	flags := byte(0)
	if more {
		flags |= 0x01
	}
	if len(body) > 255 {
		b := []byte{flags | 0x02, 0, 0, 0, 0, 0, 0, 0, 0}
		for i, n := 8, len(body); i >= 1; i, n = i-1, n>>8 {
			b[i] = byte(n)
		}
		return append(b, body...)
	}
	return append([]byte{flags, byte(len(body))}, body...)
}

// FuzzSubscriber hands a Subscriber arbitrary bytes from its publisher,
// after a real handshake: the frames of `kaimon tail`'s stream. It must
// not panic nor hang, and every message it returns is a topic and a body
// (two frames).
func FuzzSubscriber(f *testing.F) {
	body := `{"kind":"status","turn":1,"data":{"status":"idle"},"agent_id":"a1","seq":3,"ts":"2026-01-01T00:00:00Z"}`
	f.Add(append(zframe(true, "agent:a1"), zframe(false, body)...))
	f.Add(append(zframe(true, "agent:a1"), zframe(false, string(bytes.Repeat([]byte("x"), 300)))...))
	f.Add(bytes.Join([][]byte{zframe(false, "one"), zframe(true, "a"), zframe(true, "b"), zframe(false, "c")}, nil))
	f.Add([]byte{0x04, 0x05, 0x04, 'P', 'I', 'N', 'G', 0x00})                // a PING command
	f.Add([]byte{0x02, 0, 0, 0, 0, 0, 0, 0x10, 0})                           // a long frame, truncated
	f.Add([]byte{0x03, 0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 'x'}) // a frame of MaxInt64 bytes
	f.Fuzz(func(t *testing.T, in []byte) {
		pc, sc := connPair(t)
		defer pc.Close()
		done := make(chan error, 1)
		go func() {
			_ = pc.SetDeadline(time.Now().Add(5 * time.Second))
			_, err := zmq4.Open(pc, null.Security(), zmq4.Pub, zmq4.SocketIdentity(""), true, nil)
			if err == nil {
				_, err = pc.Write(in)
			}
			pc.(*net.UnixConn).CloseWrite()
			done <- err
		}()
		_ = sc.SetDeadline(time.Now().Add(5 * time.Second))
		s, err := handshake(sc)
		if err != nil {
			t.Fatalf("handshake: %v", err)
		}
		defer s.Close()
		for {
			m, err := s.Next()
			if err != nil {
				var ne net.Error
				if errors.As(err, &ne) && ne.Timeout() {
					t.Fatalf("the subscriber hung on %d bytes", len(in))
				}
				break
			}
			if m.Topic == "" && m.Body == nil {
				t.Fatalf("an empty message")
			}
		}
		if err := <-done; err != nil {
			t.Fatalf("publisher: %v", err)
		}
	})
}

// A peer that greets and then declares a huge handshake command must not
// take the daemon down (zmq4 allocates the size it is told): the bus
// refuses it and serves the next subscriber.
func TestHugeHandshakeFrame(t *testing.T) {
	_, ep := newBus(t, Options{})
	c, err := net.Dial("unix", strings.TrimPrefix(ep, "ipc://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	greeting := make([]byte, 64)
	greeting[0], greeting[9], greeting[10] = 0xff, 0x7f, 3
	copy(greeting[12:], "NULL")
	huge := []byte{0x06, 0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 5, 'R'}
	if _, err := c.Write(append(greeting, huge...)); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.Copy(io.Discard, c); err != nil && !hungUp(err) {
		t.Fatalf("the bus did not hang up: %v", err)
	}
	dial(t, ep, "agent:")
}
