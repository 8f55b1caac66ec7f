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
	br   *bufio.Reader
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
	if c.f == nil {
		f, err := os.Open(c.path)
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		c.f = f
		c.br = bufio.NewReaderSize(f, 64<<10)
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
	return Bad{Line: c.line + 1, Offset: c.off, Torn: true, Err: errors.New("no newline")}, true
}

// Close closes the file.
func (c *Cursor) Close() error {
	if c.f == nil {
		return nil
	}
	return c.f.Close()
}
