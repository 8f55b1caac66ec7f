package eventlog

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/kaimon/kaimon/internal/event"
)

// FuzzLog reads a log whose bytes are arbitrary (torn lines, garbage, NUL,
// invalid UTF-8) through Scan, ReadAll, a Cursor and Open. Reading never
// fails but on I/O; it returns exactly the lines that parse with seq >
// since, in file order (the cursor only those ending in a newline); and a
// record appended after Open reads back as the last one.
func FuzzLog(f *testing.F) {
	rec := `{"ts":"2026-01-01T00:00:00Z","seq":%d,"kind":"turn_started","turn":1,"data":{}}`
	good := []byte(`{"ts":"2026-01-01T00:00:00Z","seq":1,"kind":"turn_started","turn":1,"data":{}}
{"ts":"2026-01-01T00:00:01Z","seq":2,"kind":"assistant_text","turn":1,"data":{"text":"hi"}}
{"ts":"2026-01-01T00:00:02Z","seq":3,"kind":"result","turn":1,"data":{"stopReason":"end_turn"}}
`)
	f.Add(good, uint64(0))
	f.Add(good, uint64(2))
	f.Add(append(good, `{"ts":"2026-01-01T00:00:00Z","seq":4,"ki`...), uint64(0))
	f.Add([]byte("garbage\n\x00\x00\n\xff\xfe{\n[]\nnull\n{}\n"), uint64(0))
	f.Add([]byte(`{"seq":-1}`+"\n"+`{"seq":1e3,"turn":"x"}`+"\n"+rec), uint64(0))
	f.Add([]byte(`{"seq":9,"data":{"a":"\ud800"}}`+"\r\n\n"+`{"seq":2,"turn":-5,"data":nul`), uint64(1))
	f.Add([]byte{}, uint64(0))
	f.Fuzz(func(t *testing.T, in []byte, since uint64) {
		path := filepath.Join(t.TempDir(), "a.events.jsonl")
		if err := os.WriteFile(path, in, 0o600); err != nil {
			t.Fatal(err)
		}
		// A record is a line that is a JSON object with a seq and a kind;
		// every other non-blank line is reported bad, never skipped.
		var want, wantDone []event.Record
		nbad := 0
		lines := bytes.SplitAfter(in, []byte("\n"))
		for _, l := range lines {
			if len(bytes.TrimSpace(l)) == 0 {
				continue
			}
			var r event.Record
			if json.Unmarshal(l, &r) != nil || r.Seq == 0 || r.Kind == "" {
				nbad++
				continue
			}
			if r.Seq > since {
				want = append(want, r)
				if bytes.HasSuffix(l, []byte("\n")) {
					wantDone = append(wantDone, r)
				}
			}
		}
		reported := 0
		if err := ScanBad(path, since, func(*event.Record) bool { return true }, func(Bad) { reported++ }); err != nil || reported != nbad {
			t.Fatalf("ScanBad reported %d bad lines (%v), want %d", reported, err, nbad)
		}
		got, err := ReadAll(path, since)
		if err != nil {
			t.Fatalf("ReadAll: %v", err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("ReadAll since %d = %+v, want %+v", since, got, want)
		}
		n := 0
		if err := Scan(path, since, func(*event.Record) bool { n++; return false }); err != nil || n > 1 {
			t.Fatalf("Scan stopped at once: %d calls, %v", n, err)
		}
		c := NewCursor(path)
		var cur []event.Record
		if err := c.Read(since, 0, func(r *event.Record) error { cur = append(cur, *r); return nil }); err != nil {
			t.Fatalf("Cursor.Read: %v", err)
		}
		c.Close()
		if !reflect.DeepEqual(cur, wantDone) {
			t.Fatalf("Cursor.Read after %d = %+v, want %+v", since, cur, wantDone)
		}

		w, tail, err := Open(path)
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		if tail.LastSeq == math.MaxUint64 {
			w.Close()
			return // no seq follows; kaimon never numbers that far
		}
		mine := event.Record{Seq: tail.LastSeq + 1, Kind: event.Status, Turn: tail.LastTurn, Data: json.RawMessage(`{"status":"idle"}`)}
		if err := w.Append(&mine); err != nil {
			t.Fatal(err)
		}
		w.Close()
		all, err := ReadAll(path, 0)
		if err != nil || len(all) == 0 {
			t.Fatalf("after Append: %d records, %v", len(all), err)
		}
		if last := all[len(all)-1]; last.Seq != mine.Seq || last.Kind != mine.Kind || string(last.Data) != string(mine.Data) {
			t.Fatalf("after Append the last record is %+v, want %+v", last, mine)
		}
	})
}
