package eventlog

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/kaimon/kaimon/internal/event"
)

// FuzzJoin joins a log with live bus bodies, decoded as `kaimon tail`
// decodes them (JSON envelopes; what does not decode is skipped). The log
// holds rising seqs (each byte of steps adds to the last; 0 adds nothing).
// Whatever arrives, the join emits strictly rising seqs, and stays live: an
// envelope one past everything seen is emitted.
func FuzzJoin(f *testing.F) {
	f.Add([]byte{1, 1, 1}, []byte(`{"agent_id":"a","seq":2}`+"\n"+`{"agent_id":"a","seq":5}`), uint8(0), false)
	f.Add([]byte{1, 2, 3}, []byte(`{"agent_id":"a","seq":7,"kind":"assistant_text","data":{"delta":true}}`), uint8(1), true)
	f.Add([]byte{}, []byte(`{"seq":3}`+"\n"+`{"seq":1}`+"\n"+`{"seq":3}`+"\n"+`{"seq":9}`), uint8(0), true)
	f.Add([]byte{5}, []byte(`{"seq":0}`+"\n"+`{"seq":1}`), uint8(0), true)
	f.Add([]byte{1, 1}, []byte("garbage\n{\n"+`{"seq":18446744073709551615}`), uint8(2), false)
	f.Fuzz(func(t *testing.T, steps, live []byte, since uint8, fromLive bool) {
		path := filepath.Join(t.TempDir(), "a.events.jsonl")
		w, _, err := Open(path)
		if err != nil {
			t.Fatal(err)
		}
		var seq uint64
		for _, s := range steps {
			if s == 0 {
				continue
			}
			seq += uint64(s)
			r := event.Record{Seq: seq, Kind: event.Status, Turn: 1, Data: json.RawMessage(`{}`)}
			if err := w.Append(&r); err != nil {
				t.Fatal(err)
			}
		}
		w.Close()
		var got []uint64
		emit := func(e *event.Envelope) error {
			if n := len(got); n > 0 && e.Seq <= got[n-1] {
				t.Fatalf("seq %d emitted after %d", e.Seq, got[n-1])
			}
			got = append(got, e.Seq)
			return nil
		}
		var j *Join
		// take is the caller's part: the envelope after what the log
		// filled, unless a duplicate.
		take := func(j *Join, e *event.Envelope) error {
			fresh, err := j.Live(e.Seq, event.Renumbered(e.Kind, e.Data))
			if fresh {
				err = emit(e)
			}
			return err
		}
		if fromLive {
			j = NewLiveJoin("a", path, emit)
		} else {
			j = NewJoin("a", path, uint64(since), emit)
			if err := j.Replay(); err != nil {
				t.Fatal(err)
			}
		}
		defer j.Close()
		j.Lost = func(_ string, from, to uint64, n int) {
			if from > to || n <= 0 || uint64(n) > to-from+1 {
				t.Fatalf("lost %d of %d..%d", n, from, to)
			}
		}
		// All seen: the log, the live bodies, and for a replay what the
		// caller said it had already (since).
		maxSeq := seq
		if !fromLive {
			maxSeq = max(maxSeq, uint64(since))
		}
		for _, body := range bytes.Split(live, []byte("\n")) {
			var e event.Envelope
			if json.Unmarshal(body, &e) != nil {
				continue
			}
			e.AgentID = "a"
			if err := take(j, &e); err != nil {
				t.Fatal(err)
			}
			maxSeq = max(maxSeq, e.Seq)
		}
		if maxSeq == ^uint64(0) {
			return // no seq follows
		}
		next := &event.Envelope{AgentID: "a", Seq: maxSeq + 1, Kind: event.Status, Data: json.RawMessage(`{}`)}
		if err := take(j, next); err != nil {
			t.Fatal(err)
		}
		if len(got) == 0 || got[len(got)-1] != next.Seq {
			t.Fatalf("seq %d, one past all seen, not emitted: got %v", next.Seq, got)
		}
	})
}
