package host

import (
	"bytes"
	"io"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/kaimon/kaimon/internal/nbio"
)

// readBufSize is the read buffer of a LineReader: the most one read
// syscall takes from an agent's stdout. A line longer than it is gathered
// in parts (LineReader.gather).
const readBufSize = 64 << 10

// minPart is the least first part of a gathered line (gather).
const minPart = 1 << 10

// readBufs holds the read buffers of the LineReaders not reading now.
// An idle agent (most of them, most of the time: a daemon may host a
// thousand) waits for its stdout without one: the buffer was 64 KiB per
// agent, three quarters of an idle daemon's heap. The pool's buffers that
// stay unused are freed by the GC.
var readBufs = sync.Pool{New: func() any { b := make([]byte, readBufSize); return &b }}

// LineReader reads lines from an agent's stdout, holding a read buffer
// only while there is data to read: it takes one from a pool when the
// pipe is readable, and gives it back when a read finds the pipe empty
// (the lines handed out before are done with by then: each is valid only
// until the next ReadLine). On a pipe the runtime polls (os.Pipe's read
// end) it waits for data with no buffer at all; on another reader
// (tests), it holds one only through each Read.
type LineReader struct {
	src  io.Reader
	rc   syscall.RawConn // src's, when it is a file the runtime polls
	size int             // of buf; readBufSize uses the pool
	buf  *[]byte         // nil while waiting for data
	// holding is buf != nil, for held, which a test calls from another
	// goroutine while this one waits.
	holding atomic.Bool
	r, w    int   // buf[r:w] is read and not yet handed out
	err     error // the reader's error, once buf[r:w] is handed out
	// parts is the line being gathered when it spans reads, n its bytes:
	// never more than the bound in all (gather).
	parts [][]byte
	n     int
	// idle, if set, is called before every read of src (which may wait
	// for the agent), mid-line too: what the lines handed out so far
	// gave is not to wait for the agent's next output.
	idle func()
	// readFd is readPolled, made once; rn and rerr are its read's result.
	readFd func(fd uintptr) bool
	rn     int
	rerr   error
}

// NewLineReader reads lines from r.
func NewLineReader(r io.Reader) *LineReader { return newLineReader(r, readBufSize) }

func newLineReader(r io.Reader, size int) *LineReader {
	lr := &LineReader{src: r, size: size}
	if sc, ok := r.(syscall.Conn); ok {
		if rc, err := sc.SyscallConn(); err == nil {
			lr.rc = rc
		}
	}
	return lr
}

// ReadLine reads one line of at most max bytes (its newline included). A
// longer one is read to its end and discarded, never held whole: line is
// nil and skipped is its size. The line is valid until the next call: a
// line that lies whole in the read buffer is handed out in place, not
// copied (issue 12: the copy of every line was a tenth of the relay's
// CPU). On a reader the runtime does not poll, the buffer's last line is
// copied, so that the buffer goes back to the pool before a Read that may
// wait. err is the reader's (io.EOF at the end), returned with the
// last bytes before it, as bufio's ReadBytes does.
func (lr *LineReader) ReadLine(max int) (line []byte, skipped int64, err error) {
	for {
		if lr.r == lr.w {
			if lr.idle != nil {
				lr.idle()
			}
			if err := lr.fill(); err != nil {
				return lr.joined(), skipped, err
			}
			continue
		}
		frag := (*lr.buf)[lr.r:lr.w]
		i := bytes.IndexByte(frag, '\n')
		end := i >= 0
		if end {
			frag = frag[:i+1]
		}
		lr.r += len(frag)
		if end && lr.n == 0 && skipped == 0 && len(frag) <= max && (lr.r < lr.w || lr.rc != nil) {
			// In place. The buffer's last line too on a polled pipe:
			// the next call's read gives the buffer back before it
			// waits (fill), so a waiting reader still holds none.
			return frag, 0, nil
		}
		if skipped == 0 && lr.n+len(frag) <= max {
			lr.gather(frag, max)
		} else {
			if skipped == 0 {
				// Over the bound: what was gathered goes now, and the
				// rest of the line is counted as it is read, never held.
				skipped = int64(lr.n)
				lr.drop()
			}
			skipped += int64(len(frag))
		}
		if end {
			if lr.r == lr.w {
				lr.release()
			}
			return lr.joined(), skipped, nil
		}
	}
}

// gather adds frag to the line being gathered, which stays within limit
// (the caller checks). The parts double the line so far, each cut to what
// the bound leaves, and are never copied as the line grows: append's
// growth held a line over the bound up to twice the bound, and copied it
// at each doubling, while the line was still being read (issue 18: a
// 300 MB line took the daemon to 154–238 MB of RSS with a 64 MiB bound).
// A line over the bound so costs at most the bound, dropped at once.
// The first part is sized by the first fragment (twice it, at least
// minPart), not by the read buffer: most lines gathered are an ordinary
// line cut by the end of a read, and a 64 KiB part for each, zeroed and
// soon garbage, was a tenth of what a bursting agent's reader allocated
// (issue 18).
func (lr *LineReader) gather(frag []byte, limit int) {
	for len(frag) > 0 {
		k := len(lr.parts)
		if k == 0 || len(lr.parts[k-1]) == cap(lr.parts[k-1]) {
			size := max(lr.n, readBufSize)
			if k == 0 {
				size = max(2*len(frag), minPart)
			}
			size = min(size, limit-lr.n)
			lr.parts = append(lr.parts, make([]byte, 0, size))
			k++
		}
		p := &lr.parts[k-1]
		c := min(len(frag), cap(*p)-len(*p))
		*p = append(*p, frag[:c]...)
		frag = frag[c:]
		lr.n += c
	}
}

// joined hands out the gathered line, nil if none, and lets its parts go.
// A line in one part is handed out as it is; one in several is copied
// once into one slice, as a line within the bound must be contiguous.
func (lr *LineReader) joined() []byte {
	var line []byte
	switch len(lr.parts) {
	case 0:
	case 1:
		line = lr.parts[0]
	default:
		line = make([]byte, 0, lr.n)
		for _, p := range lr.parts {
			line = append(line, p...)
		}
	}
	lr.drop()
	return line
}

// drop lets the gathered parts go.
func (lr *LineReader) drop() { lr.parts, lr.n = nil, 0 }

// held says whether the reader holds a read buffer.
func (lr *LineReader) held() bool { return lr.holding.Load() }

// release gives the read buffer back; every byte read must be handed out.
func (lr *LineReader) release() {
	if lr.buf == nil {
		return
	}
	if lr.size == readBufSize {
		readBufs.Put(lr.buf)
	}
	lr.buf, lr.r, lr.w = nil, 0, 0
	lr.holding.Store(false)
}

func (lr *LineReader) take() {
	if lr.buf != nil {
		return
	}
	if lr.size == readBufSize {
		lr.buf = readBufs.Get().(*[]byte)
	} else {
		b := make([]byte, lr.size)
		lr.buf = &b
	}
	lr.holding.Store(true)
}

// fill reads into the emptied buffer; it returns the reader's error once
// nothing read is left.
func (lr *LineReader) fill() error {
	if lr.err != nil {
		lr.release()
		return lr.err
	}
	lr.r, lr.w = 0, 0
	if lr.rc == nil {
		lr.take()
		for range 100 { // as bufio: a reader that keeps reading nothing is broken
			n, err := lr.src.Read(*lr.buf)
			lr.w, lr.err = n, err
			if n > 0 {
				return nil
			}
			if err != nil {
				lr.release()
				return err
			}
		}
		lr.release()
		lr.err = io.ErrNoProgress
		return lr.err
	}
	// The read is made in the poller's callback: it takes a buffer only
	// when it is called, and gives it back before waiting when there was
	// nothing to read, so a waiting reader holds none.
	if lr.readFd == nil {
		lr.readFd = lr.readPolled
	}
	err := lr.rc.Read(lr.readFd)
	n, rerr := lr.rn, lr.rerr
	lr.rerr = nil
	switch {
	case err != nil: // closed under us (a straggler cut off)
		rerr = err
	case rerr != nil:
		rerr = &readError{err: rerr}
	case n == 0:
		rerr = io.EOF
	}
	if rerr != nil {
		lr.release()
		lr.err = rerr
		return rerr
	}
	lr.w = n
	return nil
}

// readPolled is the poller's callback of fill: one read(2) into a
// buffer taken for it, given back when there was nothing to read. It is
// a method value made once (readFd), not a closure per read: each was an
// allocation.
func (lr *LineReader) readPolled(fd uintptr) bool {
	lr.take()
	lr.rn, lr.rerr = nbio.Read(fd, *lr.buf)
	if lr.rerr == syscall.EAGAIN {
		lr.release()
		return false
	}
	return true
}

// readError is a failed read(2) of the agent's stdout.
type readError struct{ err error }

func (e *readError) Error() string { return "reading the agent's stdout: " + e.err.Error() }
func (e *readError) Unwrap() error { return e.err }
