package claude

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/kaimon/kaimon/internal/event"
	"github.com/kaimon/kaimon/internal/testutil/fakeclaude"
)

// BenchmarkMapEncode measures the claude backend's share of the relay on
// one goroutine: the stdout lines of a realistic turn (fakeclaude: 5000
// text deltas, a tool call, its result, a closing text, the result) are
// mapped (Mapper.Map) and each event is stamped into an envelope and
// encoded as the bus encodes it (event.Marshal), and beside it, over the
// very same lines, the floor: json.Valid, the least any relay that looks at
// its input must do. One op is one line, so B/op and allocs/op are per
// line; lines/s is the figure scripts/bench.sh sets against the floor.
// Run with -cpu 1.
func BenchmarkMapEncode(b *testing.B) {
	lines := fakeclaude.Lines(5000)
	size := 0
	for _, l := range lines {
		size += len(l)
	}
	perLine := int64(size / len(lines))
	b.Run("floor", func(b *testing.B) {
		b.SetBytes(perLine)
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			if !json.Valid(lines[i%len(lines)]) {
				b.Fatal("invalid line")
			}
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "lines/s")
	})
	b.Run("map+encode", func(b *testing.B) {
		b.SetBytes(perLine)
		b.ReportAllocs()
		m := NewMapper()
		turn, events, want := 0, 0, 0
		var seq uint64
		ts := time.Now().UTC()
		for i := 0; i < b.N; i++ {
			j := i % len(lines)
			if j == 0 {
				if events != want {
					b.Fatalf("turn %d: %d events, want %d", turn, events, want)
				}
				turn++
				evs, _ := m.Push(turn, "stream 5000 chunks")
				// The manager's status events are not the mapper's.
				events, want = len(evs), 5000+fakeclaude.FixedEvents-2
			}
			o := m.Map(lines[j])
			for _, ev := range o.Events {
				seq++
				env := event.Envelope{Kind: ev.Kind, Turn: ev.Turn, Data: ev.Data, AgentID: "9f3a1c20", Seq: seq, TS: ts}
				if _, err := event.Marshal(&env); err != nil {
					b.Fatal(err)
				}
				if ev.Turn != turn {
					b.Fatalf("event of turn %d in turn %d", ev.Turn, turn)
				}
			}
			events += len(o.Events)
		}
		b.StopTimer()
		// Finish the turn under way, so that its count is checked too.
		for j := b.N % len(lines); j > 0 && j < len(lines); j++ {
			events += len(m.Map(lines[j]).Events)
		}
		if events != want {
			b.Fatalf("turn %d: %d events, want %d", turn, events, want)
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "lines/s")
	})
}
