package claude

import (
	"encoding/json"
	"testing"
	"time"
)

// benchLines is a turn of 1000 deltas, the lines of most turns being
// text deltas.
var benchLines = SyntheticTurn(1000)

func lineBytes(lines [][]byte) int64 {
	n := 0
	for _, l := range lines {
		n += len(l)
	}
	return int64(n)
}

// newBenchMapper is a mapper with turn 1 active, as it is mid-turn.
func newBenchMapper() *Mapper {
	m := NewMapper()
	m.Push(1, "hi")
	return m
}

// reportLines reports lines/s over b.N passes over lines.
func reportLines(b *testing.B, lines [][]byte) {
	b.ReportMetric(float64(b.N*len(lines))/b.Elapsed().Seconds(), "lines/s")
}

// BenchmarkMap is the mapper alone over a turn. allocs/op are per turn:
// divide by lines/op for per line.
func BenchmarkMap(b *testing.B) {
	b.SetBytes(lineBytes(benchLines))
	b.ReportAllocs()
	m := newBenchMapper()
	for i := 0; i < b.N; i++ {
		for _, l := range benchLines {
			m.Map(l)
		}
		m.Push(1, "hi") // the result popped it
	}
	reportLines(b, benchLines)
	b.ReportMetric(float64(len(benchLines)), "lines/op")
}

// BenchmarkMapEncode is the claude backend's share of the relay on one
// goroutine, beside its floor over the very same lines: floor is a bare
// json.Valid pass (the least any relay that looks at its input must do);
// map+encode is Mapper.Map plus the encode of each event's envelope as the
// log and the bus get it (event.AppendEnvelope). One op is one line, so
// B/op and allocs/op are per line; lines/s is what scripts/bench.sh sets
// against the floor (target: map+encode ≥ 80% of it, ≤ 1 alloc a line).
// Run with -cpu 1.
func BenchmarkMapEncode(b *testing.B) {
	perLine := lineBytes(benchLines) / int64(len(benchLines))
	b.Run("floor", func(b *testing.B) {
		b.SetBytes(perLine)
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			if !json.Valid(benchLines[i%len(benchLines)]) {
				b.Fatal("invalid line")
			}
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "lines/s")
	})
	b.Run("map+encode", func(b *testing.B) {
		b.SetBytes(perLine)
		b.ReportAllocs()
		m := newBenchMapper()
		var buf []byte
		seq, events := uint64(0), 0
		for i := 0; i < b.N; i++ {
			j := i % len(benchLines)
			if j == 0 && i > 0 {
				m.Push(1, "hi") // the result popped it
			}
			for _, ev := range m.Map(benchLines[j]).Events {
				seq++
				events++
				env := ev.Stamp("9f3a1c20", seq, time.Now().UTC())
				buf = encodeEnvelope(buf[:0], &env)
			}
		}
		if b.N >= len(benchLines) && events < b.N/2 {
			b.Fatalf("%d lines mapped to %d events: the mapper lost them", b.N, events)
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "lines/s")
	})
}
