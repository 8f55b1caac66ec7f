// Package eventlog keeps the per-agent JSONL event log:
// <cache>/<id>.events.jsonl, one {ts, seq, kind, turn, data} record per
// authoritative event. It is the stable record consumers can tail, and the
// source the daemon continues seq and turn numbering from when a slot is
// reopened or the daemon restarts.
//
// Writes: each record is one write of one whole line, so a reader never
// sees two records interleaved. A write that fails or comes up short (a
// full disk, a file size limit) is undone: the file is truncated back to
// the end of the last whole record, and Append returns the error, so the
// log holds whole records or nothing and the next record never lands glued
// onto a torn one. The caller decides what a lost record means (the
// session manager stops the agent: it must not run unlogged).
//
// Durability: Append does not fsync. A record is in the kernel's page cache
// when Append returns, so a crash of the daemon loses nothing; only a crash
// of the machine can lose the last records, and then seq still never
// repeats (the session record keeps a seq ceiling) and a torn tail is
// reported on read. Sync is there for the records worth a disk flush: the
// session manager calls it after each result (a turn's end), once per
// turn, not per event; BenchmarkAppend measures both.
//
// Reads: a line that is not a whole record (a torn last line after a
// crash, or damage) is never fatal and never silently skipped by a reader
// that asks: Scan's Bad callback, Cursor.Bad and Tail.Bad name its line and
// byte offset.
package eventlog

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"

	"github.com/kaimon/kaimon/internal/event"
)

// File is what a Writer writes to: an *os.File opened for appending. Tests
// put in one that fails.
type File interface {
	io.Writer
	Truncate(size int64) error
	Sync() error
	Close() error
}

// Writer appends records to one agent's log.
type Writer struct {
	f    File
	path string
	buf  []byte
	// end is the end of the last whole record: where a failed write is
	// cut back to. torn says the cut itself failed, so the next Append
	// must make it first.
	end  int64
	torn bool
}

// Bad is a line of a log that is not a whole record.
type Bad struct {
	Line   int   // 1-based
	Offset int64 // of the line's first byte
	// Torn: the last line, without its newline (a write cut short by a
	// crash).
	Torn bool
	Err  error // why it does not parse
}

func (b Bad) Error() string {
	if b.Torn {
		return fmt.Sprintf("line %d (byte %d): torn last record (crash?)", b.Line, b.Offset)
	}
	return fmt.Sprintf("line %d (byte %d): not a record: %v", b.Line, b.Offset, b.Err)
}

// Tail is what an existing log says about where numbering continues.
type Tail struct {
	LastSeq  uint64
	LastTurn int
	// Unfinished are the turns begun (turn_started) whose result the log
	// lacks, in order: what a daemon that died mid-turn left open.
	Unfinished []int
	// Bad are the lines that are not whole records.
	Bad []Bad
}

// Open opens (creating) the log at path for appending, and reports the last
// seq and turn already in it.
func Open(path string) (*Writer, Tail, error) { return OpenEach(path, nil) }

// OpenEach is Open that also hands each record already in the log to each
// (when not nil), from the one read Open makes anyway: a reopened agent
// rebuilds what agent_output reads of its earlier turns.
func OpenEach(path string, each func(*event.Record)) (*Writer, Tail, error) {
	var t Tail
	open := map[int]bool{}
	err := ScanBad(path, 0, func(r *event.Record) bool {
		if each != nil {
			each(r)
		}
		t.LastSeq = r.Seq
		if r.Turn > t.LastTurn {
			t.LastTurn = r.Turn
		}
		switch r.Kind {
		case event.TurnStarted:
			open[r.Turn] = true
		case event.Result:
			delete(open, r.Turn)
		}
		return true
	}, func(b Bad) { t.Bad = append(t.Bad, b) })
	for n := range open {
		t.Unfinished = append(t.Unfinished, n)
	}
	slices.Sort(t.Unfinished)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, t, err
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, t, err
	}
	// A crash may have left a torn last line; start ours on a fresh line so
	// only the torn one is lost.
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, t, err
	}
	end := st.Size()
	if end > 0 {
		if last, err := lastByte(path); err == nil && last != '\n' {
			if _, err := f.Write([]byte{'\n'}); err != nil {
				f.Close()
				return nil, t, fmt.Errorf("ending the torn last line of %s: %w", path, err)
			}
			end++
		}
	}
	return &Writer{f: f, path: path, end: end}, t, nil
}

// NewWriter is a Writer appending to f, whose whole records end at end
// (its size). Open is the usual way; tests use this one to put in a file
// that fails.
func NewWriter(f File, path string, end int64) *Writer {
	return &Writer{f: f, path: path, end: end}
}

func lastByte(path string) (byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil || st.Size() == 0 {
		return 0, err
	}
	b := make([]byte, 1)
	_, err = f.ReadAt(b, st.Size()-1)
	return b[0], err
}

// Append writes one record as one line, in a single write, so that a
// concurrent reader sees whole lines or a torn last one, never interleaving.
// It writes the whole record or nothing: a write that fails or comes up
// short is cut back to the end of the last whole record, and the error
// returned. (A reader may glimpse the torn part before the cut: it is the
// last line, without its newline, which a Cursor leaves alone.)
func (w *Writer) Append(r *event.Record) error {
	b, err := event.Marshal(r)
	if err != nil {
		return err
	}
	w.buf = append(append(w.buf[:0], b...), '\n')
	return w.write()
}

// AppendEnvelope is Append of e's record, encoded by hand into the
// writer's buffer (event.AppendRecord: the same bytes, without Marshal's
// reflection and without re-compacting data this process encoded). It is
// the session manager's path, once per authoritative event.
func (w *Writer) AppendEnvelope(e *event.Envelope) error {
	b, err := event.AppendRecord(w.buf[:0], e)
	if err != nil {
		return err
	}
	w.buf = append(b, '\n')
	return w.write()
}

// write writes w.buf, one whole line, or nothing (see Append).
func (w *Writer) write() error {
	if w.torn {
		if err := w.f.Truncate(w.end); err != nil {
			return fmt.Errorf("writing event log %s: still cannot cut the torn record of an earlier failed write: %w", w.path, err)
		}
		w.torn = false
	}
	n, err := w.f.Write(w.buf)
	if err == nil && n == len(w.buf) {
		w.end += int64(n)
		return nil
	}
	if err == nil {
		err = io.ErrShortWrite
	}
	if terr := w.f.Truncate(w.end); terr != nil {
		w.torn = true
		return fmt.Errorf("writing event log %s: %w (and cutting the torn record failed: %v)", w.path, err, terr)
	}
	return fmt.Errorf("writing event log %s: %w", w.path, err)
}

// Sync flushes the log to disk (fsync).
func (w *Writer) Sync() error {
	if err := w.f.Sync(); err != nil {
		return fmt.Errorf("syncing event log %s: %w", w.path, err)
	}
	return nil
}

// Path is the file written.
func (w *Writer) Path() string { return w.path }

// Size is the end of the last whole record written: what a reader may
// scan (ScanBadTo) without meeting a record being written.
func (w *Writer) Size() int64 { return w.end }

// Close closes the file.
func (w *Writer) Close() error { return w.f.Close() }

// Scan calls fn for each record with seq > since, in file order, until fn
// returns false. Lines that do not parse (a torn last line after a crash)
// are skipped, never fatal; ScanBad reports them.
func Scan(path string, since uint64, fn func(*event.Record) bool) error {
	return ScanBad(path, since, fn, nil)
}

// ScanBad is Scan that hands each line that is not a whole record to bad
// (when not nil), whatever its seq would have been.
func ScanBad(path string, since uint64, fn func(*event.Record) bool, bad func(Bad)) error {
	return ScanBadTo(path, -1, since, fn, bad)
}

// ScanBadTo is ScanBad of the log's first end bytes (all of it when end is
// negative): with end a Writer's Size, the records it had written then,
// whatever it appends while the scan reads.
func ScanBadTo(path string, end int64, since uint64, fn func(*event.Record) bool, bad func(Bad)) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	var r io.Reader = f
	if end >= 0 {
		r = io.LimitReader(f, end)
	}
	br := bufio.NewReaderSize(r, 64<<10)
	var off int64
	for n := 1; ; n++ {
		line, err := br.ReadBytes('\n')
		if len(bytes.TrimSpace(line)) > 0 {
			r, perr := parse(line)
			switch {
			case perr != nil:
				if bad != nil {
					bad(Bad{Line: n, Offset: off, Torn: err == io.EOF, Err: perr})
				}
			case r.Seq > since:
				if !fn(r) {
					return nil
				}
			}
		}
		off += int64(len(line))
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// parse reads one line as a record. A line that is JSON but no record
// (no seq, or no kind) is as bad as one that is not JSON.
func parse(line []byte) (*event.Record, error) {
	var r event.Record
	if err := json.Unmarshal(line, &r); err != nil {
		return nil, err
	}
	if r.Seq == 0 || r.Kind == "" {
		return nil, errors.New("no seq or kind")
	}
	return &r, nil
}

// ReadAll returns every record with seq > since.
func ReadAll(path string, since uint64) ([]event.Record, error) {
	var out []event.Record
	err := Scan(path, since, func(r *event.Record) bool {
		out = append(out, *r)
		return true
	})
	return out, err
}
