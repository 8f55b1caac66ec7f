package event

import (
	"bytes"
	"encoding/json"
	"fmt"
	"testing"
	"time"
)

var appendStrings = []string{"", "chunk0 ", "a \"quoted\" \\ back", "tab\tnl\nret\rbs\bff\f", "\x00\x01\x1f\x7f",
	"<tool_use_error> & </x>", "héllo wörld ✓ 🎉", "bad \xff utf8 \xc3", "\u2028 and \u2029", "日本語"}

// The hand encoders write what Marshal writes, byte for byte.
func TestAppendMatchesMarshal(t *testing.T) {
	ts := time.Date(2026, 11, 30, 6, 46, 27, 430_001_000, time.UTC)
	for _, s := range appendStrings {
		for _, delta := range []bool{false, true} {
			got := NewText(AssistantText, 3, delta, s)
			want, _ := Marshal(TextData{Delta: delta, Content: Text{Type: "text", Text: s}})
			if !bytes.Equal(got.Data, want) {
				t.Errorf("NewText(%q, %v) = %s, want %s", s, delta, got.Data, want)
			}
		}
		got := NewToolInputDelta(2, "toolu_"+s, s)
		want, _ := Marshal(ToolInputDeltaData{ToolCallID: "toolu_" + s, PartialJSON: s})
		if !bytes.Equal(got.Data, want) {
			t.Errorf("NewToolInputDelta(%q) = %s, want %s", s, got.Data, want)
		}
		for _, ev := range []Event{NewText(Thought, 1, true, s), {Kind: Kind(s), Turn: -4, Data: json.RawMessage("{ \"a\" : [1, 2] }")}, {Kind: Status}} {
			env := ev.Stamp("id-"+s, 1<<40, ts)
			got, err := AppendEnvelope([]byte("x"), &env)
			want, _ := Marshal(&env)
			if err != nil || !bytes.Equal(got[1:], want) {
				t.Errorf("AppendEnvelope = %s (%v), want %s", got, err, want)
			}
			rec := env.Record()
			got, err = AppendRecord(nil, &env)
			want, _ = Marshal(&rec)
			if err != nil || !bytes.Equal(got, want) {
				t.Errorf("AppendRecord = %s (%v), want %s", got, err, want)
			}
		}
	}
	// Data that is not JSON is refused, as Marshal refuses it.
	env := Event{Kind: Error, Data: json.RawMessage(`{"a":`)}.Stamp("x", 1, ts)
	if got, err := AppendEnvelope([]byte("keep"), &env); err == nil || string(got) != "keep" {
		t.Errorf("AppendEnvelope of bad data = %s, %v", got, err)
	}
	if _, err := AppendRecord(nil, &env); err == nil {
		t.Error("AppendRecord of bad data: no error")
	}
}

func FuzzAppendString(f *testing.F) {
	for _, s := range appendStrings {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, _ := Marshal(s)
		if got := AppendString(nil, s); !bytes.Equal(got, want) {
			t.Fatalf("AppendString(%q) = %s, want %s", s, got, want)
		}
	})
}

// appendTime writes what Marshal writes for a time.Time, whether the
// second is the one it formatted last (UTC) or not, and refuses what
// Marshal refuses.
func TestAppendTimeMatchesMarshal(t *testing.T) {
	base := time.Date(2026, 11, 30, 6, 46, 27, 0, time.UTC)
	var times []time.Time
	for _, ns := range []int{0, 1, 10, 430_000_000, 430_001_000, 999_999_999, 100_000_000, 123_456_789} {
		times = append(times, base.Add(time.Duration(ns)), base.Add(time.Duration(ns)), base.Add(time.Second+time.Duration(ns)))
	}
	times = append(times,
		time.Date(0, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(9999, 12, 31, 23, 59, 59, 999_999_999, time.UTC),
		time.Date(1969, 12, 31, 23, 59, 59, 500_000_000, time.UTC), time.Date(1600, 2, 29, 12, 0, 0, 5, time.UTC),
		time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(-1, 12, 31, 23, 59, 59, 0, time.UTC),
		base.In(time.FixedZone("", 0)), base.In(time.FixedZone("X", 5*3600+30*60)).Add(7), base.Local(), time.Time{},
		time.Now(), time.Now().UTC(), base.Add(500*time.Millisecond), base,
	)
	for _, ts := range times {
		want, werr := json.Marshal(ts)
		got, err := appendTime([]byte("x"), ts)
		if (err != nil) != (werr != nil) || err == nil && !bytes.Equal(got[1:], want) {
			t.Errorf("appendTime(%v) = %s, %v; Marshal gives %s, %v", ts, got, err, want, werr)
		}
	}
}

func FuzzAppendTime(f *testing.F) {
	f.Add(int64(1796014000), int64(430_001_000), false)
	f.Add(int64(-62167219200), int64(0), false)
	f.Add(int64(253402300799), int64(999_999_999), true)
	f.Fuzz(func(t *testing.T, sec, ns int64, zone bool) {
		ts := time.Unix(sec, ns).UTC()
		if zone {
			ts = ts.In(time.FixedZone("Z", int(sec%50000)))
		}
		for range 2 { // the second formatted anew, then the one formatted last
			want, werr := json.Marshal(ts)
			got, err := appendTime(nil, ts)
			if (err != nil) != (werr != nil) || err == nil && !bytes.Equal(got, want) {
				t.Fatalf("appendTime(%v) = %s, %v; Marshal gives %s, %v", ts, got, err, want, werr)
			}
		}
	})
}

// Goroutines stamping different seconds at once each get their own: the
// second appendTime keeps is replaced, never written over.
func TestAppendTimeConcurrent(t *testing.T) {
	base := time.Date(2026, 11, 30, 6, 46, 27, 0, time.UTC)
	done := make(chan error)
	for g := range 4 {
		go func() {
			for i := range 500 {
				ts := base.Add(time.Duration(g)*time.Second + time.Duration(i)*time.Microsecond)
				want, _ := json.Marshal(ts)
				if got, err := appendTime(nil, ts); err != nil || !bytes.Equal(got, want) {
					done <- fmt.Errorf("appendTime(%v) = %s, %v; want %s", ts, got, err, want)
					return
				}
			}
			done <- nil
		}()
	}
	for range 4 {
		if err := <-done; err != nil {
			t.Error(err)
		}
	}
}
