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

// BenchmarkValidFloor is the floor the relay is measured against: a bare
// json.Valid pass over the same lines, one core.
func BenchmarkValidFloor(b *testing.B) {
	b.SetBytes(lineBytes(benchLines))
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		for _, l := range benchLines {
			if !json.Valid(l) {
				b.Fatal("invalid line")
			}
		}
	}
	reportLines(b, benchLines)
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

// BenchmarkMapEncode is Mapper.Map plus the encode of each envelope as the
// bus sends it: the target is ≥ 80% of BenchmarkValidFloor's lines/s.
func BenchmarkMapEncode(b *testing.B) {
	b.SetBytes(lineBytes(benchLines))
	b.ReportAllocs()
	m := newBenchMapper()
	var buf []byte
	seq := uint64(0)
	for i := 0; i < b.N; i++ {
		for _, l := range benchLines {
			for _, ev := range m.Map(l).Events {
				seq++
				env := ev.Stamp("9f3a1c20", seq, time.Now().UTC())
				buf = encodeEnvelope(buf[:0], &env)
			}
		}
		m.Push(1, "hi")
	}
	reportLines(b, benchLines)
	b.ReportMetric(float64(len(benchLines)), "lines/op")
}
