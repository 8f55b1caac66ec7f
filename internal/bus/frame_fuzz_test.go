package bus

import (
	"bufio"
	"bytes"
	"testing"
)

// FuzzReadFrame reads what a subscriber sends the daemon after the
// handshake, as the publisher does: frames, and the commands in them. No
// frame over maxInbound is read; the read ends on the first error. And
// frameBound, fed the same bytes after a greeting, refuses exactly when
// readFrame meets an oversized frame.
func FuzzReadFrame(f *testing.F) {
	f.Add(append(zframe(false, "\x01agent:"), zframe(false, "\x00agent:")...))
	f.Add([]byte{0x04, 0x0e, 9, 'S', 'U', 'B', 'S', 'C', 'R', 'I', 'B', 'E', 'a', 'g', 'e', 'n'})
	f.Add([]byte{0x04, 0x07, 4, 'P', 'I', 'N', 'G', 0, 1})
	f.Add([]byte{0x04, 0x01, 0xff})
	f.Add(bytes.Join([][]byte{zframe(true, "a"), zframe(true, "b"), zframe(false, "c")}, nil))
	f.Add([]byte{0x02, 0, 0, 0, 0, 0, 1, 0, 1})
	f.Fuzz(func(t *testing.T, in []byte) {
		br := bufio.NewReader(bytes.NewReader(in))
		oversized := false
		for {
			fr, err := readFrame(br)
			if err != nil {
				oversized = len(fr.body) == 0 && bytes.Contains([]byte(err.Error()), []byte("a subscriber only sends topics"))
				break
			}
			if len(fr.body) > maxInbound {
				t.Fatalf("a frame of %d bytes read", len(fr.body))
			}
			if fr.command {
				name, body := parseCommand(fr.body)
				if len(name)+len(body) > len(fr.body) {
					t.Fatalf("command %q %q out of a %d-byte frame", name, body, len(fr.body))
				}
			}
		}
		b := newFrameBound(maxInbound)
		if err := b.scan(append(make([]byte, 64), in...)); (err != nil) != oversized {
			t.Fatalf("frameBound: %v; readFrame met an oversized frame: %v", err, oversized)
		}
	})
}
