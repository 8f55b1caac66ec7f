// Package eventlog keeps the per-agent JSONL event log:
// <cache>/<id>.events.jsonl, one {ts, seq, kind, turn, data} record per
// authoritative event. It is the stable record consumers can tail, and the
// source the daemon continues seq and turn numbering from when a slot is
// reopened or the daemon restarts.
package eventlog

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"

	"github.com/kaimon/kaimon/internal/event"
)

// Path is the log file of agent id under dir.
func Path(dir, id string) string { return filepath.Join(dir, id+".events.jsonl") }

// Writer appends records to one agent's log.
type Writer struct {
	f    *os.File
	path string
	buf  []byte
}

// Tail is what an existing log says about where numbering continues.
type Tail struct {
	LastSeq  uint64
	LastTurn int
	// Unfinished are the turns begun (turn_started) whose result the log
	// lacks, in order: what a daemon that died mid-turn left open.
	Unfinished []int
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
	err := Scan(path, 0, func(r *event.Record) bool {
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
	})
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
	if st, err := f.Stat(); err == nil && st.Size() > 0 {
		if last, err := lastByte(path); err == nil && last != '\n' {
			_, _ = f.Write([]byte{'\n'})
		}
	}
	return &Writer{f: f, path: path}, t, nil
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
func (w *Writer) Append(r *event.Record) error {
	b, err := event.Marshal(r)
	if err != nil {
		return err
	}
	w.buf = append(append(w.buf[:0], b...), '\n')
	_, err = w.f.Write(w.buf)
	return err
}

// Path is the file written.
func (w *Writer) Path() string { return w.path }

// Close closes the file.
func (w *Writer) Close() error { return w.f.Close() }

// Scan calls fn for each record with seq > since, in file order, until fn
// returns false. Lines that do not parse (a torn last line after a crash)
// are skipped, never fatal.
func Scan(path string, since uint64, fn func(*event.Record) bool) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	br := bufio.NewReaderSize(f, 64<<10)
	for {
		line, err := br.ReadBytes('\n')
		if len(bytes.TrimSpace(line)) > 0 {
			var r event.Record
			if json.Unmarshal(line, &r) == nil && r.Seq > since {
				if !fn(&r) {
					return nil
				}
			}
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
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
