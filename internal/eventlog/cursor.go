package eventlog

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"os"

	"github.com/kaimon/kaimon/internal/event"
)

// Cursor reads a log forward from where its last read stopped, so that a
// reader who comes back for more (a stream filling a gap, a tail catching
// up) does not read the file from its start each time. Since seq rises
// along the file, a cursor serves any sequence of reads whose bounds rise.
type Cursor struct {
	path string
	f    *os.File
	off  int64
	line int // lines read before off
	// lineUnknown: SkipToEnd moved off without counting the lines before
	// it; line is counted when a Bad needs it.
	lineUnknown bool
	br          *bufio.Reader
	// Bad, if set, hears of each whole line (newline-ended) that is not a
	// record; the cursor goes on past it.
	Bad func(Bad)
}

// NewCursor returns a cursor at the start of the log at path. The file
// need not exist yet.
func NewCursor(path string) *Cursor { return &Cursor{path: path} }

// Read calls fn for each record with after < seq < before (before 0: no
// upper bound), in file order. It stops before the first record with seq
// >= before, so the next read starts there, and at the end of the file; a
// last line still without its newline is left for the next read. Lines that
// do not parse are handed to Bad and skipped. A log that does not exist yet
// reads as empty.
func (c *Cursor) Read(after, before uint64, fn func(*event.Record) error) error {
	if ok, err := c.open(); !ok {
		return err
	}
	if _, err := c.f.Seek(c.off, io.SeekStart); err != nil {
		return err
	}
	c.br.Reset(c.f)
	for {
		line, err := c.br.ReadBytes('\n')
		if err == io.EOF {
			return nil // nothing more, or a line being written
		}
		if err != nil {
			return err
		}
		if len(bytes.TrimSpace(line)) > 0 {
			r, perr := parse(line)
			if perr != nil {
				if c.Bad != nil {
					c.countLines()
					c.Bad(Bad{Line: c.line + 1, Offset: c.off, Err: perr})
				}
			} else {
				if before != 0 && r.Seq >= before {
					return nil
				}
				if r.Seq > after {
					if err := fn(r); err != nil {
						c.off += int64(len(line))
						c.line++
						return err
					}
				}
			}
		}
		c.off += int64(len(line))
		c.line++
	}
}

// open opens the log on the first read; false when it does not exist yet
// (or cannot be opened: err says).
func (c *Cursor) open() (bool, error) {
	if c.f != nil {
		return true, nil
	}
	f, err := os.Open(c.path)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	c.f = f
	c.br = bufio.NewReaderSize(f, 64<<10)
	return true, nil
}

// SkipToEnd moves the cursor past the log's last whole line without
// reading what comes before it, and returns the seq of the last record
// there (ok false when the log holds none yet beyond the cursor). It reads
// the file from its end, so that starting at an agent's end costs the same
// for a long history as for a short one; a read of the whole log to find
// its end was most of what `kaimon run` waited for before sending. A last
// line still without its newline is left for the next read, as Read does;
// lines that do not parse are skipped unreported, as by a Read whose fn
// ignores everything.
func (c *Cursor) SkipToEnd() (last uint64, ok bool, err error) {
	if ok, err := c.open(); !ok {
		return 0, false, err
	}
	st, err := c.f.Stat()
	if err != nil {
		return 0, false, err
	}
	// tail holds the file's bytes [from, size), read backwards in growing
	// chunks: the last line is usually a short status event.
	var tail []byte
	from, chunk := st.Size(), int64(4<<10)
	grow := func() (bool, error) {
		if from <= c.off {
			return false, nil
		}
		n := min(chunk, from-c.off)
		chunk *= 2
		b := make([]byte, int(n)+len(tail))
		if _, err := c.f.ReadAt(b[:n], from-n); err != nil {
			return false, err
		}
		copy(b[n:], tail)
		tail, from = b, from-n
		return true, nil
	}
	// end is just past the last newline: what follows is still being
	// written (or torn), and left for the next read.
	for bytes.LastIndexByte(tail, '\n') < 0 {
		if more, err := grow(); !more {
			return 0, false, err
		}
	}
	end := from + int64(bytes.LastIndexByte(tail, '\n')) + 1
	// The last line that parses holds the highest seq (seq rises along
	// the file); lines that do not are passed over.
	for lineEnd := end; lineEnd > c.off; {
		start := c.off
		for {
			if i := bytes.LastIndexByte(tail[:lineEnd-1-from], '\n'); i >= 0 {
				start = from + int64(i) + 1
				break
			}
			if more, err := grow(); err != nil {
				return 0, false, err
			} else if !more {
				break
			}
		}
		if line := tail[start-from : lineEnd-from]; len(bytes.TrimSpace(line)) > 0 {
			if r, perr := parse(line); perr == nil {
				last, ok = r.Seq, true
				break
			}
		}
		lineEnd = start
	}
	c.off, c.lineUnknown = end, true
	return last, ok, nil
}

// countLines sets line, when SkipToEnd left it unknown, to the number of
// lines before off.
func (c *Cursor) countLines() {
	if !c.lineUnknown {
		return
	}
	c.lineUnknown = false
	c.line = 0
	buf := make([]byte, 64<<10)
	for at := int64(0); at < c.off; {
		n, err := c.f.ReadAt(buf[:min(int64(len(buf)), c.off-at)], at)
		c.line += bytes.Count(buf[:n], []byte{'\n'})
		at += int64(n)
		if err != nil {
			return
		}
	}
}

// Trailing reports what follows the last whole line read: a last line
// without its newline, torn unless someone is still writing it.
func (c *Cursor) Trailing() (Bad, bool) {
	if c.f == nil {
		return Bad{}, false
	}
	st, err := c.f.Stat()
	if err != nil || st.Size() <= c.off {
		return Bad{}, false
	}
	b := make([]byte, min(st.Size()-c.off, 4096))
	n, _ := c.f.ReadAt(b, c.off)
	if bytes.IndexByte(b[:n], '\n') >= 0 || len(bytes.TrimSpace(b[:n])) == 0 {
		return Bad{}, false // more whole lines: a later read has them
	}
	c.countLines()
	return Bad{Line: c.line + 1, Offset: c.off, Torn: true, Err: errors.New("no newline")}, true
}

// Close closes the file.
func (c *Cursor) Close() error {
	if c.f == nil {
		return nil
	}
	return c.f.Close()
}
