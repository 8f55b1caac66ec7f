package eventlog

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/kaimon/kaimon/internal/event"
)

// SkipToEnd ends where a Read that ignores every record ends: at the same
// seq and offset, after which both cursors read the same records and
// report the same bad lines, line numbers included.
func TestSkipToEndIsReadToEnd(t *testing.T) {
	rec := func(seq int, text string) string {
		return fmt.Sprintf(`{"ts":"2026-01-01T00:00:00Z","seq":%d,"kind":"assistant_text","turn":1,"data":{"text":%q}}`+"\n", seq, text)
	}
	long := strings.Repeat("x", 9000) // longer than SkipToEnd's first chunk
	cases := map[string]string{
		"empty":           "",
		"one":             rec(1, "a"),
		"several":         rec(1, "a") + rec(2, "b") + rec(3, "c"),
		"torn last":       rec(1, "a") + rec(2, "b") + `{"ts":"2026-01-01T00:00:00Z","seq":3,"ki`,
		"only torn":       `{"seq":1,"ki`,
		"bad last":        rec(1, "a") + rec(2, "b") + "not json\n",
		"bad lines":       rec(1, "a") + "garbage\n" + rec(2, "b") + "{}\n" + "\n" + "more garbage\n",
		"blank lines":     rec(1, "a") + "\n\n" + rec(2, "b") + "\n",
		"long lines":      rec(1, long) + rec(2, long) + rec(3, long),
		"long bad last":   rec(1, "a") + long + "\n",
		"long torn":       rec(1, "a") + rec(2, "b") + long,
		"no record":       "garbage\n\n{}\n",
		"many":            strings.Repeat(rec(7, long[:300]), 200) + rec(8, "z"),
		"bad then torn":   rec(1, "a") + "bad\n" + `{"seq":2`,
		"long bad middle": rec(1, "a") + long + "\n" + rec(2, "b"),
	}
	more := "bad after\n" + rec(100, "after") + "torn after"
	for name, content := range cases {
		for _, readFirst := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/readFirst=%v", name, readFirst), func(t *testing.T) {
				path := filepath.Join(t.TempDir(), "a.events.jsonl")
				if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
					t.Fatal(err)
				}
				var bads [2][]Bad
				var cur [2]*Cursor
				for i := range cur {
					cur[i] = NewCursor(path)
					cur[i].Bad = func(b Bad) { bads[i] = append(bads[i], b) }
					defer cur[i].Close()
					if readFirst { // the first record only, as a Read bounded by seq 2 would
						if err := cur[i].Read(0, 2, func(*event.Record) error { return nil }); err != nil {
							t.Fatal(err)
						}
					}
				}
				bads[0], bads[1] = nil, nil
				// The reference: a read of the rest that ignores every record.
				var want uint64
				wantOK := false
				bad := cur[0].Bad
				cur[0].Bad = nil
				if err := cur[0].Read(0, 0, func(r *event.Record) error { want, wantOK = r.Seq, true; return nil }); err != nil {
					t.Fatal(err)
				}
				cur[0].Bad = bad
				got, ok, err := cur[1].SkipToEnd()
				if err != nil || got != want || ok != wantOK {
					t.Fatalf("SkipToEnd = %d, %v, %v; a read to the end says %d, %v", got, ok, err, want, wantOK)
				}
				if cur[1].off != cur[0].off {
					t.Fatalf("SkipToEnd stopped at byte %d, a read at %d", cur[1].off, cur[0].off)
				}
				f, _ := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
				f.WriteString(more)
				f.Close()
				var seqs [2][]uint64
				for i := range cur {
					if err := cur[i].Read(0, 0, func(r *event.Record) error { seqs[i] = append(seqs[i], r.Seq); return nil }); err != nil {
						t.Fatal(err)
					}
					if b, ok := cur[i].Trailing(); ok {
						bads[i] = append(bads[i], b)
					}
				}
				if !reflect.DeepEqual(seqs[0], seqs[1]) {
					t.Errorf("read after: %v after SkipToEnd, %v after a read", seqs[1], seqs[0])
				}
				if fmt.Sprint(bads[0]) != fmt.Sprint(bads[1]) {
					t.Errorf("bad lines after: %v after SkipToEnd, %v after a read", bads[1], bads[0])
				}
			})
		}
	}
}

func TestSkipToEndNoLog(t *testing.T) {
	c := NewCursor(filepath.Join(t.TempDir(), "none"))
	if last, ok, err := c.SkipToEnd(); last != 0 || ok || err != nil {
		t.Fatalf("SkipToEnd of no log = %d, %v, %v", last, ok, err)
	}
}
