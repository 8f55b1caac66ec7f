package eventlog

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kaimon/kaimon/internal/event"
)

func env(agent string, seq uint64, text string) *event.Envelope {
	return &event.Envelope{Kind: event.AssistantText, Turn: 1, AgentID: agent, Seq: seq, TS: time.Now().UTC(),
		Data: json.RawMessage(fmt.Sprintf(`{"delta":true,"content":{"type":"text","text":%q}}`, text))}
}

// logRecords appends authoritative records with these seqs to the log.
func logRecords(t *testing.T, w *Writer, seqs ...uint64) {
	t.Helper()
	for _, s := range seqs {
		e := env("a", s, "x")
		e.Data = []byte(`{"delta":false,"content":{"type":"text","text":"x"}}`)
		r := e.Record()
		if err := w.Append(&r); err != nil {
			t.Fatal(err)
		}
	}
}

type joinRig struct {
	j    *Join
	got  []uint64
	lost []string
}

func newJoinRig(t *testing.T, path string, since uint64, live bool) *joinRig {
	r := &joinRig{}
	emit := func(e *event.Envelope) error {
		if e.AgentID != "a" {
			return fmt.Errorf("agent %q", e.AgentID)
		}
		r.got = append(r.got, e.Seq)
		return nil
	}
	if live {
		r.j = NewLiveJoin("a", path, emit)
	} else {
		r.j = NewJoin("a", path, since, emit)
	}
	r.j.Lost = func(agent string, from, to uint64, n int) {
		r.lost = append(r.lost, fmt.Sprintf("%d-%d:%d", from, to, n))
	}
	t.Cleanup(func() { r.j.Close() })
	return r
}

func (r *joinRig) live(t *testing.T, seqs ...uint64) {
	t.Helper()
	for _, s := range seqs {
		fresh, err := r.j.Live(s, false)
		if err != nil {
			t.Fatal(err)
		}
		if fresh {
			r.got = append(r.got, s)
		}
	}
}

// The log and the live stream join by seq: no duplicate where they
// overlap, gaps filled from the log, lost deltas reported only once live.
func TestJoin(t *testing.T) {
	path := filepath.Join(t.TempDir(), "a.events.jsonl")
	w, _, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	logRecords(t, w, 1, 2, 5) // 3, 4 were deltas

	// Overlap: live begins before the replay ends.
	r := newJoinRig(t, path, 0, false)
	if err := r.j.Replay(); err != nil {
		t.Fatal(err)
	}
	r.live(t, 4, 5, 6, 7)
	if want := []uint64{1, 2, 5, 6, 7}; !slices.Equal(r.got, want) || r.lost != nil {
		t.Fatalf("overlap: got %v lost %v, want %v", r.got, r.lost, want)
	}

	// --since: the log after 1; an authoritative event logged after the
	// replay but published before the subscription took hold (8) is
	// filled when live begins at 9, and the deltas before that are not a
	// loss.
	r = newJoinRig(t, path, 1, false)
	if err := r.j.Replay(); err != nil {
		t.Fatal(err)
	}
	logRecords(t, w, 8, 10, 12)
	r.live(t, 9, 10)
	// A later jump: 12 is in the log, 11 and 13 were deltas, lost.
	r.live(t, 14)
	if want := []uint64{2, 5, 8, 9, 10, 12, 14}; !slices.Equal(r.got, want) {
		t.Fatalf("since 1: got %v, want %v", r.got, want)
	}
	if want := []string{"11-13:2"}; !slices.Equal(r.lost, want) {
		t.Fatalf("lost = %v, want %v", r.lost, want)
	}

	// Live only: history is not replayed; later gaps still fill.
	r = newJoinRig(t, path, 0, true)
	r.live(t, 9, 9, 10, 13)
	if want := []uint64{9, 10, 12, 13}; !slices.Equal(r.got, want) || len(r.lost) != 1 {
		t.Fatalf("live: got %v lost %v, want %v", r.got, r.lost, want)
	}

	// A log that does not exist yet reads as empty.
	r = newJoinRig(t, filepath.Join(t.TempDir(), "none.events.jsonl"), 0, false)
	if err := r.j.Replay(); err != nil || r.got != nil {
		t.Fatalf("no log: %v %v", r.got, err)
	}
	r.live(t, 3)
	if !slices.Equal(r.got, []uint64{3}) {
		t.Fatalf("no log, live: %v", r.got)
	}
}

// A jump in seq after an agent's daemon was lost (the next daemon numbers
// on from the ceiling the record reserved, and marks the first envelope
// it publishes, event.Renumbered) is not reported as lost: those seqs
// were never issued. A gap after it still is.
func TestJoinRenumberedIsNotALoss(t *testing.T) {
	path := filepath.Join(t.TempDir(), "a.events.jsonl")
	w, _, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	appendEv := func(seq uint64, ev event.Event) {
		r := event.Record{Seq: seq, Kind: ev.Kind, Turn: ev.Turn, Data: ev.Data}
		if err := w.Append(&r); err != nil {
			t.Fatal(err)
		}
	}
	logRecords(t, w, 1, 2)

	r := newJoinRig(t, path, 0, false)
	if err := r.j.Replay(); err != nil {
		t.Fatal(err)
	}
	r.live(t, 3, 4) // deltas; then the daemon is killed
	// The next daemon ends the agent from the ceiling; the reader missed
	// that live, and the resume's first envelopes, and one delta (65541).
	appendEv(65537, event.NewError(1, "lost", map[string]any{"reason": "daemon crashed", event.RenumberedKey: true}))
	appendEv(65538, event.New(event.Status, 1, event.StatusData{Status: "dead"}))
	appendEv(65539, event.New(event.Status, 1, event.StatusData{Status: "starting"}))
	logRecords(t, w, 65540)
	r.live(t, 65542)
	if want := []uint64{1, 2, 3, 4, 65537, 65538, 65539, 65540, 65542}; !slices.Equal(r.got, want) {
		t.Fatalf("got %v, want %v", r.got, want)
	}
	if want := []string{"65541-65541:1"}; !slices.Equal(r.lost, want) {
		t.Fatalf("filled from the log: lost = %v, want %v (the jump is no loss)", r.lost, want)
	}

	// A renumbered envelope arriving live: no loss either.
	r.lost = nil
	fresh, err := r.j.Live(131073, true)
	if err != nil || !fresh {
		t.Fatalf("live: fresh %v err %v", fresh, err)
	}
	if r.lost != nil {
		t.Fatalf("live: lost = %v, want none (the jump is no loss)", r.lost)
	}
}

// A cursor leaves a line still being written for the next read.
func TestCursorTornLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "a.events.jsonl")
	if err := os.WriteFile(path, []byte(`{"seq":1,"kind":"status","turn":0,"data":{}}`+"\n"+`{"seq":2,"ki`), 0o600); err != nil {
		t.Fatal(err)
	}
	c := NewCursor(path)
	defer c.Close()
	var got []uint64
	read := func() {
		if err := c.Read(0, 0, func(r *event.Record) error { got = append(got, r.Seq); return nil }); err != nil {
			t.Fatal(err)
		}
	}
	read()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(`nd":"status","turn":0,"data":{}}` + "\n" + "garbage\n" + `{"seq":3,"kind":"status","turn":0,"data":{}}` + "\n")
	f.Close()
	read()
	if !slices.Equal(got, []uint64{1, 2, 3}) {
		t.Fatalf("got %v", got)
	}
}

// TestJoinReportsBadLines: a damaged line is reported with its line and
// byte offset, not skipped unseen, and the records around it still join;
// Torn names a last line cut short.
func TestJoinReportsBadLines(t *testing.T) {
	path := filepath.Join(t.TempDir(), "a.events.jsonl")
	w, _, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	logRecords(t, w, 1)
	w.Close()
	st, _ := os.Stat(path)
	f, _ := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString("{\"seq\":2,\"kind\n")
	f.Close()
	w, _, _ = Open(path)
	logRecords(t, w, 3)
	w.Close()
	f, _ = os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString(`{"seq":4,"ki`)
	f.Close()

	r := newJoinRig(t, path, 0, false)
	var bad []string
	r.j.Bad = func(agent string, b Bad) {
		bad = append(bad, fmt.Sprintf("%s %d %d %v", agent, b.Line, b.Offset, b.Torn))
	}
	if err := r.j.Replay(); err != nil {
		t.Fatal(err)
	}
	r.j.Torn()
	if want := []uint64{1, 3}; !slices.Equal(r.got, want) {
		t.Fatalf("got %v, want %v", r.got, want)
	}
	if want := []string{fmt.Sprintf("a 2 %d false", st.Size()), "a 4"}; len(bad) != 2 || bad[0] != want[0] || !strings.HasPrefix(bad[1], "a 4 ") || !strings.HasSuffix(bad[1], " true") {
		t.Fatalf("bad = %q, want %q…", bad, want)
	}
}
