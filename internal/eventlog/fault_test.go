package eventlog

import (
	"errors"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kaimon/kaimon/internal/config"
	"github.com/kaimon/kaimon/internal/event"
)

// fullFile is a log file on a disk with room left bytes: a write past
// that writes what fits and fails with ENOSPC, as write(2) does.
type fullFile struct {
	*os.File
	room int
}

func (f *fullFile) Write(b []byte) (int, error) {
	if len(b) <= f.room {
		f.room -= len(b)
		return f.File.Write(b)
	}
	n, _ := f.File.Write(b[:f.room])
	f.room = 0
	return n, syscall.ENOSPC
}

func rec(seq uint64, text string) *event.Record {
	ev := event.NewText(event.AssistantText, 1, false, text)
	return &event.Record{TS: time.Now(), Seq: seq, Kind: ev.Kind, Turn: ev.Turn, Data: ev.Data}
}

// TestAppendWholeOrNothing: a write the disk cuts short leaves the log at
// the end of the last whole record, returns the error, and once there is
// room again the next record lands on a line of its own.
func TestAppendWholeOrNothing(t *testing.T) {
	path := config.Paths{CacheDir: t.TempDir()}.Agent("a1").Events
	w, _, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Append(rec(1, "first")); err != nil {
		t.Fatal(err)
	}
	w.Close()
	good, _ := os.ReadFile(path)

	w, _, err = Open(path)
	if err != nil {
		t.Fatal(err)
	}
	ff := &fullFile{File: w.f.(*os.File), room: 10}
	w.f = ff
	err = w.Append(rec(2, strings.Repeat("x", 100)))
	if !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("Append on a full disk: err = %v, want ENOSPC", err)
	}
	if now, _ := os.ReadFile(path); string(now) != string(good) {
		t.Fatalf("after the failed write the log is\n%q\nwant\n%q", now, good)
	}
	ff.room = 1 << 20 // space is freed
	if err := w.Append(rec(3, "third")); err != nil {
		t.Fatal(err)
	}
	w.Close()
	var bad []Bad
	var seqs []uint64
	if err := ScanBad(path, 0, func(r *event.Record) bool { seqs = append(seqs, r.Seq); return true }, func(b Bad) { bad = append(bad, b) }); err != nil {
		t.Fatal(err)
	}
	if len(bad) != 0 || len(seqs) != 2 || seqs[0] != 1 || seqs[1] != 3 {
		t.Fatalf("log reads seqs %v, bad lines %v; want [1 3] and none", seqs, bad)
	}
}

// failTruncFile fails its first truncate too, as a dying disk might.
type failTruncFile struct {
	fullFile
	truncFails int
}

func (f *failTruncFile) Truncate(n int64) error {
	if f.truncFails > 0 {
		f.truncFails--
		return syscall.EIO
	}
	return f.File.Truncate(n)
}

// TestAppendCutFailsFirst: when even the cut fails, the next Append makes
// it before writing, so no record is glued onto the torn one.
func TestAppendCutFailsFirst(t *testing.T) {
	path := config.Paths{CacheDir: t.TempDir()}.Agent("a1").Events
	w, _, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	ff := &failTruncFile{fullFile: fullFile{File: w.f.(*os.File), room: 150}, truncFails: 1}
	w.f = ff
	if err := w.Append(rec(1, "first")); err != nil {
		t.Fatal(err)
	}
	if err := w.Append(rec(2, strings.Repeat("x", 200))); err == nil || !strings.Contains(err.Error(), "cutting the torn record failed") {
		t.Fatalf("err = %v", err)
	}
	ff.room = 1 << 20
	if err := w.Append(rec(3, "third")); err != nil {
		t.Fatal(err)
	}
	w.Close()
	recs, _ := ReadAll(path, 0)
	if len(recs) != 2 || recs[1].Seq != 3 {
		t.Fatalf("records %+v, want seqs 1 and 3", recs)
	}
}

// TestScanReportsBadLines: a damaged line in the middle and a torn last
// line are both named, with line and byte offset; the records around them
// still read.
func TestScanReportsBadLines(t *testing.T) {
	path := config.Paths{CacheDir: t.TempDir()}.Agent("a1").Events
	w, _, _ := Open(path)
	w.Append(rec(1, "a"))
	w.Close()
	st, _ := os.Stat(path)
	f, _ := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString("{\"seq\":2,\"ki{\"seq\":3}\n")
	f.Close()
	w, tail, _ := Open(path)
	if len(tail.Bad) != 1 || tail.Bad[0].Line != 2 || tail.Bad[0].Offset != st.Size() || tail.Bad[0].Torn {
		t.Fatalf("tail.Bad = %+v, want line 2 at byte %d", tail.Bad, st.Size())
	}
	w.Append(rec(4, "d"))
	w.Close()
	f, _ = os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString(`{"ts":"2026-01-01T00:00:00Z","seq":5,"ki`)
	f.Close()
	var bad []Bad
	var n int
	ScanBad(path, 0, func(*event.Record) bool { n++; return true }, func(b Bad) { bad = append(bad, b) })
	if n != 2 || len(bad) != 2 || bad[1].Line != 4 || !bad[1].Torn || !strings.Contains(bad[1].Error(), "torn last record") {
		t.Fatalf("%d records, bad %v", n, bad)
	}
	c := NewCursor(path)
	defer c.Close()
	var cbad []Bad
	c.Bad = func(b Bad) { cbad = append(cbad, b) }
	c.Read(0, 0, func(*event.Record) error { return nil })
	// The cursor leaves a last line without its newline alone: it may be
	// being written.
	if len(cbad) != 1 || cbad[0].Line != 2 || cbad[0].Offset != st.Size() {
		t.Fatalf("cursor bad = %v", cbad)
	}
}

// BenchmarkAppend: one record of a typical assistant text, with and
// without an fsync after it, by Append (Marshal) and by AppendEnvelope
// (the session manager's path); go test -bench Append ./internal/eventlog.
func BenchmarkAppend(b *testing.B) {
	for _, c := range []struct {
		sync, env bool
	}{{false, false}, {true, false}, {false, true}} {
		sync := c.sync
		name := "nosync"
		if sync {
			name = "fsync"
		}
		if c.env {
			name = "envelope-nosync"
		}
		b.Run(name, func(b *testing.B) {
			w, _, err := Open(config.Paths{CacheDir: b.TempDir()}.Agent("a1").Events)
			if err != nil {
				b.Fatal(err)
			}
			defer w.Close()
			r := rec(1, strings.Repeat("some words of a reply ", 20))
			env := event.NewText(event.AssistantText, 1, false, strings.Repeat("some words of a reply ", 20)).Stamp("a1", 1, time.Now())
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				r.Seq = uint64(i + 1)
				env.Seq = r.Seq
				var err error
				if c.env {
					err = w.AppendEnvelope(&env)
				} else {
					err = w.Append(r)
				}
				if err != nil {
					b.Fatal(err)
				}
				if sync {
					if err := w.Sync(); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}
