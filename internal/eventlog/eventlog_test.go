package eventlog

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/kaimon/kaimon/internal/config"
	"github.com/kaimon/kaimon/internal/event"
)

func TestAppendScanAndTornLine(t *testing.T) {
	path := config.Paths{CacheDir: t.TempDir()}.Agent("a1").Events
	w, tail, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if tail.LastSeq != 0 || tail.LastTurn != 0 || tail.Unfinished != nil {
		t.Fatalf("new log tail = %+v", tail)
	}
	for i := 1; i <= 3; i++ {
		ev := event.NewText(event.AssistantText, i, false, "x")
		r := event.Record{TS: time.Now(), Seq: uint64(i), Kind: ev.Kind, Turn: ev.Turn, Data: ev.Data}
		if err := w.Append(&r); err != nil {
			t.Fatal(err)
		}
	}
	w.Close()
	// A crash tears the last line.
	f, _ := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString(`{"ts":"2026-01-01T00:00:00Z","seq":4,"ki`)
	f.Close()

	recs, err := ReadAll(path, 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 2 || recs[0].Seq != 2 || recs[1].Seq != 3 {
		t.Fatalf("ReadAll since 1 = %+v", recs)
	}
	// Reopening continues numbering and starts on a fresh line.
	w, tail, err = Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if tail.LastSeq != 3 || tail.LastTurn != 3 {
		t.Fatalf("tail = %+v, want seq 3 turn 3", tail)
	}
	r := event.Record{Seq: 4, Kind: event.Status, Turn: 3, Data: []byte(`{"status":"idle"}`)}
	if err := w.Append(&r); err != nil {
		t.Fatal(err)
	}
	w.Close()
	recs, _ = ReadAll(path, 0)
	if len(recs) != 4 || recs[3].Kind != event.Status {
		t.Fatalf("after reopen: %d records, last %+v", len(recs), recs[len(recs)-1])
	}
	if _, err := ReadAll(filepath.Join(t.TempDir(), "none"), 0); !os.IsNotExist(err) {
		t.Errorf("missing log: err = %v", err)
	}
}

// TestUnfinishedTurns: the tail names the turns begun without a result,
// which is what a daemon that died mid-turn leaves.
func TestUnfinishedTurns(t *testing.T) {
	path := config.Paths{CacheDir: t.TempDir()}.Agent("a1").Events
	w, _, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	seq := uint64(0)
	add := func(kind event.Kind, turn int) {
		seq++
		r := event.Record{Seq: seq, Kind: kind, Turn: turn, Data: []byte(`{}`)}
		if err := w.Append(&r); err != nil {
			t.Fatal(err)
		}
	}
	add(event.TurnStarted, 1)
	add(event.Result, 1)
	add(event.TurnStarted, 2)
	add(event.TurnStarted, 3)
	add(event.Result, 3)
	add(event.TurnStarted, 4)
	w.Close()
	_, tail, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(tail.Unfinished) != "[2 4]" || tail.LastTurn != 4 || tail.LastSeq != 6 {
		t.Fatalf("tail = %+v, want turns 2 and 4 unfinished", tail)
	}
}

// ScanBadTo reads what the writer had written at its Size, not what it
// wrote after, nor a record being written (a torn tail past the size).
func TestScanBadTo(t *testing.T) {
	path := config.Paths{CacheDir: t.TempDir()}.Agent("a1").Events
	w, _, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	appendN := func(from, to int) {
		for i := from; i <= to; i++ {
			r := event.Record{TS: time.Now(), Seq: uint64(i), Kind: event.Status, Turn: 1, Data: []byte(`{"status":"idle"}`)}
			if err := w.Append(&r); err != nil {
				t.Fatal(err)
			}
		}
	}
	appendN(1, 2)
	size := w.Size()
	appendN(3, 4)
	f, _ := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString(`{"ts":"2026-01-01T00:00:00Z","seq":5,"ki`)
	f.Close()
	scan := func(end int64) (seqs []uint64, bad int) {
		err := ScanBadTo(path, end, 0, func(r *event.Record) bool { seqs = append(seqs, r.Seq); return true }, func(Bad) { bad++ })
		if err != nil {
			t.Fatal(err)
		}
		return seqs, bad
	}
	if seqs, bad := scan(size); fmt.Sprint(seqs) != "[1 2]" || bad != 0 {
		t.Errorf("to the size then: %v, %d bad; want [1 2], 0", seqs, bad)
	}
	if seqs, bad := scan(w.Size()); fmt.Sprint(seqs) != "[1 2 3 4]" || bad != 0 {
		t.Errorf("to the size now: %v, %d bad; want [1 2 3 4], 0", seqs, bad)
	}
	if seqs, bad := scan(-1); fmt.Sprint(seqs) != "[1 2 3 4]" || bad != 1 {
		t.Errorf("all of it: %v, %d bad; want [1 2 3 4], 1", seqs, bad)
	}
}
