package bus

import "fmt"

// maxFrame bounds a frame the subscriber accepts from the publisher: far
// above any envelope (a subscriber's queue holds DefaultQueueBytes), far
// below what would exhaust memory.
const maxFrame = 1 << 30

// frameBound watches the bytes zmq4 reads from a connection and refuses a
// frame whose declared size is over max before zmq4 sees the whole
// header: zmq4 allocates a frame's body at its declared size, so a peer
// that declares 2^62 bytes would panic the reader (makeslice) or exhaust
// memory. It follows the ZMTP 3 stream: the 64-byte greeting, then frames
// of flags, a 1- or 8-byte size, and the body.
type frameBound struct {
	max      uint64
	greeting int    // greeting bytes still to pass
	need     int    // size bytes still to read; 0 at a frame's flags
	inSize   bool   // reading a size
	size     uint64 // the size read so far
	body     uint64 // body bytes still to pass
}

func newFrameBound(max uint64) *frameBound { return &frameBound{max: max, greeting: 64} }

// scan takes the next bytes read; an error means the peer declared an
// oversized frame, and the connection is not to be read further.
func (b *frameBound) scan(p []byte) error {
	for len(p) > 0 {
		switch {
		case b.greeting > 0:
			k := min(b.greeting, len(p))
			b.greeting -= k
			p = p[k:]
		case b.body > 0:
			k := min(b.body, uint64(len(p)))
			b.body -= k
			p = p[k:]
		case !b.inSize:
			b.inSize, b.need, b.size = true, 1, 0
			if p[0]&0x02 != 0 {
				b.need = 8
			}
			p = p[1:]
		default:
			b.size = b.size<<8 | uint64(p[0])
			p = p[1:]
			if b.need--; b.need == 0 {
				if b.size > b.max {
					return fmt.Errorf("event bus peer declared a frame of %d bytes, over the limit of %d", b.size, b.max)
				}
				b.inSize, b.body = false, b.size
			}
		}
	}
	return nil
}
