package follow

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/kaimon/kaimon/internal/apitype"
	"github.com/kaimon/kaimon/internal/event"
	"github.com/kaimon/kaimon/internal/eventlog"
)

var ts = time.Date(2026, 12, 1, 17, 4, 5, 120_300_000, time.UTC)

// texts are strings whose encoding escapes, as event's tests have them.
var texts = []string{"", "chunk0 ", `a "quoted" \ back`, "tab\tnl\n", "\x00\x1f", "<b> & </b>", "héllo ✓ 🎉", "bad \xff utf8", "\u2028", `,"agent_id":"x","seq":1,"ts":"y"}`}

// envelopes of several kinds and shapes, as the daemon stamps them.
func envelopes(agent string) []*event.Envelope {
	var evs []event.Event
	for _, s := range texts {
		evs = append(evs, event.NewText(event.AssistantText, 2, true, s), event.NewText(event.Thought, 2, false, s),
			event.New(event.ToolUse, 2, event.ToolUseData{Call: event.ToolCall{ToolCallID: "tu" + s, Title: s, RawInput: json.RawMessage(`{"agent_id":"not me","seq":9}`)}}))
	}
	evs = append(evs, event.New(event.Result, 2, event.ResultData{StopReason: apitype.StopEndTurn}), event.New(event.Status, 0, event.StatusData{Status: "idle"}))
	var out []*event.Envelope
	for i, ev := range evs {
		env := ev.Stamp(agent, uint64(i+1), ts.Add(time.Duration(i)*time.Millisecond))
		out = append(out, &env)
	}
	return out
}

// What the daemon publishes is what tail printed before it passed bytes
// through (decoded, then encoded again with event.Marshal), byte for
// byte; and parse reads its fields without a decode.
func TestParseReadsTheDaemonsBytes(t *testing.T) {
	for _, env := range envelopes("a1-x") {
		raw, err := event.AppendEnvelope(nil, env)
		if err != nil {
			t.Fatal(err)
		}
		var dec event.Envelope
		if err := json.Unmarshal(raw, &dec); err != nil {
			t.Fatal(err)
		}
		again, err := event.Marshal(&dec)
		if err != nil || !bytes.Equal(again, raw) {
			t.Fatalf("decoded and encoded again:\n%s\nthe bus's bytes:\n%s", again, raw)
		}
		var e Envelope
		agent, ok := parseFast(raw, &e)
		if !ok {
			t.Fatalf("the daemon's encoding is not read by position: %s", raw)
		}
		if string(agent) != env.AgentID || e.Seq != env.Seq || e.Kind != env.Kind || e.Turn != env.Turn || !bytes.Equal(e.Data, env.Data) {
			t.Fatalf("parse %s = %s %d %s %d %s", raw, agent, e.Seq, e.Kind, e.Turn, e.Data)
		}
	}
}

// Other shapes (a field added, as a remote host's envelopes will have, or
// fields in another order, or escapes) are read too, and what is not an
// agent's envelope is refused.
func TestParseOtherShapes(t *testing.T) {
	for _, c := range []struct{ raw, agent string }{
		{`{"kind":"status","turn":1,"data":{"status":"idle"},"agent_id":"a1","seq":7,"ts":"2026-12-01T00:00:00Z","host":"box"}`, "a1"},
		{`{"host":"box","seq":7,"agent_id":"a1","kind":"status","turn":1,"data":{"status":"idle"}}`, "a1"},
		{`{"kind":"st\u0061tus","turn":1,"data":{"status":"idle"},"agent_id":"a1","seq":7,"ts":"2026-12-01T00:00:00Z"}`, "a1"},
		{` {"kind":"status","turn":1,"data":{"status":"idle"},"agent_id":"a1","seq":7,"ts":"x"}`, "a1"},
	} {
		var e Envelope
		agent, ok := parse([]byte(c.raw), &e)
		if !ok || string(agent) != c.agent || e.Seq != 7 || e.Kind != event.Status || e.Turn != 1 || string(e.Data) != `{"status":"idle"}` {
			t.Errorf("parse %s = %q %v %+v", c.raw, agent, ok, e)
		}
	}
	for _, raw := range []string{"", "garbage", `{"kind":"status"}`, `{"agent_id":""}`, `{"agent_id":"a1",`, `[1]`,
		`{"kind":"status","turn":1,"data":{},"agent_id":"a1","seq":99999999999999999999,"ts":"x"`} {
		var e Envelope
		if agent, ok := parse([]byte(raw), &e); ok {
			t.Errorf("parse %q = %q: not an envelope of an agent", raw, agent)
		}
	}
}

// fakeSource hands out bodies, then io.EOF; ready says how many more are
// ready at once.
type fakeSource struct {
	bodies [][]byte
	ready  int // bodies ready now; Next makes the next batch of batch ready
	batch  int
	closed bool
}

func (s *fakeSource) Next() ([]byte, error) {
	if len(s.bodies) == 0 {
		return nil, io.EOF
	}
	if s.ready == 0 {
		s.ready = s.batch
	}
	s.ready--
	b := s.bodies[0]
	s.bodies = s.bodies[1:]
	return b, nil
}

func (s *fakeSource) Ready() bool  { return s.ready > 0 }
func (s *fakeSource) Close() error { s.closed = true; return nil }

// A follower joins live bytes with the log: the log's envelopes come
// encoded as the daemon encodes them, the live ones as they came, each
// once and in order, and the deltas lost are reported.
func TestFollowerJoinsAndPassesBytes(t *testing.T) {
	dir := t.TempDir()
	envs := envelopes("a1")
	// The log holds the authoritative ones; the source drops 3..6.
	w, _, err := eventlog.Open(filepath.Join(dir, "a1.events.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var want [][]byte
	src := &fakeSource{batch: 4}
	for _, env := range envs {
		raw, _ := event.AppendEnvelope(nil, env)
		auth := event.Authoritative(env.Kind, env.Data)
		if auth {
			r := env.Record()
			if err := w.Append(&r); err != nil {
				t.Fatal(err)
			}
		}
		dropped := env.Seq >= 3 && env.Seq <= 6
		if !dropped || auth {
			want = append(want, raw)
		}
		if !dropped || env.Seq == 6 {
			src.bodies = append(src.bodies, raw)
		}
		if env.Seq == 2 { // a duplicate, and what is no envelope
			src.bodies = append(src.bodies, raw, []byte("garbage"))
		}
	}
	w.Close()
	// Another agent whose id starts with a1, for Only.
	other, _ := event.AppendEnvelope(nil, envelopes("a1b")[0])
	src.bodies = append(src.bodies[:1], append([][]byte{other}, src.bodies[1:]...)...)

	f := New(src)
	f.Log = func(agent string) string { return filepath.Join(dir, agent+".events.jsonl") }
	f.Only = "a1"
	var lost []string
	f.Lost = func(agent string, from, to uint64, n int) {
		lost = append(lost, fmt.Sprintf("%s %d-%d %d", agent, from, to, n))
	}
	idles := 0
	f.Idle = func() error { idles++; return nil }
	var got [][]byte
	err = f.Run(t.Context(), func(e *Envelope) error {
		var dec event.Envelope
		if err := json.Unmarshal(e.Raw, &dec); err != nil || dec.AgentID != e.Agent || dec.Seq != e.Seq || dec.Kind != e.Kind || dec.Turn != e.Turn || !bytes.Equal(dec.Data, e.Data) {
			t.Fatalf("envelope %+v does not say what its bytes say: %s", e, e.Raw)
		}
		got = append(got, slices.Clone(e.Raw))
		return nil
	})
	var se *SourceError
	if !errors.As(err, &se) || !errors.Is(err, io.EOF) {
		t.Fatalf("Run ended with %v, want the source's EOF", err)
	}
	if len(got) != len(want) {
		t.Fatalf("got %d envelopes, want %d", len(got), len(want))
	}
	for i := range want {
		if !bytes.Equal(got[i], want[i]) {
			t.Fatalf("envelope %d:\n%s\nwant\n%s", i, got[i], want[i])
		}
	}
	if len(lost) != 1 || lost[0] != "a1 4-4 1" { // the one dropped delta: the log fills the rest
		t.Fatalf("lost = %q", lost)
	}
	if idles == 0 || idles >= len(got) {
		t.Fatalf("Idle called %d times for %d envelopes in batches of 4", idles, len(got))
	}
	f.Close()
	if !src.closed {
		t.Fatal("Close left the source open")
	}
}

// Replay emits the log after a seq, then Run goes on from it; without a
// Log, envelopes are handed on as they come (a source that joins itself).
func TestFollowerReplayAndNoLog(t *testing.T) {
	dir := t.TempDir()
	envs := envelopes("a1")
	w, _, _ := eventlog.Open(filepath.Join(dir, "a1.events.jsonl"))
	for _, env := range envs[:10] {
		r := env.Record()
		w.Append(&r)
	}
	w.Close()
	src := &fakeSource{batch: 1}
	for _, env := range envs[8:12] {
		raw, _ := event.AppendEnvelope(nil, env)
		src.bodies = append(src.bodies, raw)
	}
	f := New(src)
	f.Log = func(agent string) string { return filepath.Join(dir, agent+".events.jsonl") }
	var seqs []uint64
	emit := func(e *Envelope) error { seqs = append(seqs, e.Seq); return nil }
	if err := f.Replay("a1", 6, emit); err != nil {
		t.Fatal(err)
	}
	f.Run(t.Context(), emit)
	if !slices.Equal(seqs, []uint64{7, 8, 9, 10, 11, 12}) {
		t.Fatalf("replay after 6, then live 9..12: %v", seqs)
	}

	src = &fakeSource{batch: 1}
	for _, env := range append(envs[8:12:12], envs[8:10]...) {
		raw, _ := event.AppendEnvelope(nil, env)
		src.bodies = append(src.bodies, raw)
	}
	seqs = nil
	if err := New(src).Run(t.Context(), emit); !errors.Is(err, io.EOF) {
		t.Fatal(err)
	}
	if !slices.Equal(seqs, []uint64{9, 10, 11, 12, 9, 10}) {
		t.Fatalf("without a log: %v", seqs)
	}
	if err := New(src).Replay("a1", 0, emit); err == nil {
		t.Fatal("Replay without a log: no error")
	}
}

// Without a log the source joined already: what is missing between two
// seqs of an agent is reported as lost, and nothing before its first.
func TestFollowerNoLogLost(t *testing.T) {
	envs := envelopes("a1")
	src := &fakeSource{batch: 1}
	for _, i := range []int{2, 3, 6, 7, 3} {
		raw, _ := event.AppendEnvelope(nil, envs[i])
		src.bodies = append(src.bodies, raw)
	}
	f := New(src)
	var lost []string
	f.Lost = func(agent string, from, to uint64, n int) {
		lost = append(lost, fmt.Sprintf("%s %d-%d %d", agent, from, to, n))
	}
	var seqs []uint64
	if err := f.Run(t.Context(), func(e *Envelope) error { seqs = append(seqs, e.Seq); return nil }); !errors.Is(err, io.EOF) {
		t.Fatal(err)
	}
	if fmt.Sprint(seqs) != "[3 4 7 8 4]" || fmt.Sprint(lost) != "[a1 5-6 2]" {
		t.Fatalf("handed on %v, lost %v; want [3 4 7 8 4] and [a1 5-6 2]", seqs, lost)
	}
}

// Without a log too, a jump in seq after an agent's daemon was lost is no
// loss: the new daemon numbers on from the record's ceiling, and marks the
// first envelope it publishes (its error saying the daemon was lost); the
// agent's next life begins with the status "starting". A gap after it is
// a loss.
func TestFollowerNoLogRenumberedIsNotALoss(t *testing.T) {
	var bodies [][]byte
	for _, e := range []struct {
		seq uint64
		ev  event.Event
	}{
		{1, event.New(event.Status, 1, event.StatusData{Status: "working"})},
		{2, event.NewText(event.AssistantText, 1, true, "a")},
		// The daemon is killed; the next one ends the agent, from the ceiling.
		{65537, event.NewError(1, "kaimon-agentd was lost", map[string]any{"reason": "daemon crashed", event.RenumberedKey: true})},
		{65538, event.New(event.Result, 1, event.ResultData{StopReason: apitype.StopError})},
		{65539, event.New(event.Status, 1, event.StatusData{Status: "dead"})},
		{65540, event.New(event.Status, 1, event.StatusData{Status: "starting"})}, // --resume
		{65542, event.NewText(event.AssistantText, 2, true, "b")},
	} {
		env := e.ev.Stamp("a1", e.seq, ts)
		raw, _ := event.AppendEnvelope(nil, &env)
		bodies = append(bodies, raw)
	}
	f := New(&fakeSource{batch: 1, bodies: bodies})
	var lost []string
	f.Lost = func(agent string, from, to uint64, n int) {
		lost = append(lost, fmt.Sprintf("%s %d-%d %d", agent, from, to, n))
	}
	if err := f.Run(t.Context(), func(e *Envelope) error { return nil }); !errors.Is(err, io.EOF) {
		t.Fatal(err)
	}
	if fmt.Sprint(lost) != "[a1 65541-65541 1]" {
		t.Fatalf("lost %v; want only [a1 65541-65541 1]", lost)
	}
}

// Skip starts an agent at its log's end without holding the log open;
// its live envelopes then come after that seq, and a gap after it is
// filled from the log.
func TestFollowerSkip(t *testing.T) {
	dir := t.TempDir()
	envs := envelopes("a1")
	w, _, _ := eventlog.Open(filepath.Join(dir, "a1.events.jsonl"))
	for _, env := range envs[:6] {
		r := env.Record()
		w.Append(&r)
	}
	src := &fakeSource{batch: 1}
	for _, i := range []int{4, 5, 8} {
		raw, _ := event.AppendEnvelope(nil, envs[i])
		src.bodies = append(src.bodies, raw)
	}
	f := New(src)
	f.Log = func(agent string) string { return filepath.Join(dir, agent+".events.jsonl") }
	last, err := f.Skip("a1")
	if err != nil || last != 6 {
		t.Fatalf("Skip = %d, %v; want the log's last seq 6", last, err)
	}
	if len(f.joins) != 0 {
		t.Fatalf("Skip opened %d joins; want none before the agent's first live envelope", len(f.joins))
	}
	// Written after Skip: the gap before live seq 9 is filled from the log.
	for _, env := range envs[6:8] {
		r := env.Record()
		w.Append(&r)
	}
	w.Close()
	var seqs []uint64
	if err := f.Run(t.Context(), func(e *Envelope) error { seqs = append(seqs, e.Seq); return nil }); !errors.Is(err, io.EOF) {
		t.Fatal(err)
	}
	if !slices.Equal(seqs, []uint64{7, 8, 9}) {
		t.Fatalf("after Skip at 6, live 5, 6, 9: %v, want [7 8 9]", seqs)
	}
	f.Close()
}
