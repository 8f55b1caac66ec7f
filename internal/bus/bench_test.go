package bus

import (
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/kaimon/kaimon/internal/event"
)

// BenchmarkBusThroughput measures the bus alone: envelopes the size of a
// streamed chunk published in-process and read back, decoded, by
// subscribers on the ipc socket. The publisher is paced to the slowest
// subscriber (bursts smaller than a queue), so nothing is dropped and
// env/s is what gets through end to end. p50-µs and p99-µs are the
// publish→receive latency seen by the first subscriber under that load
// (an envelope waits behind the rest of its burst of 1000); see
// BenchmarkBusLatency for one envelope at a time.
func BenchmarkBusThroughput(b *testing.B) {
	for _, subs := range []int{1, 4} {
		b.Run(fmt.Sprintf("subscribers=%d", subs), func(b *testing.B) {
			bs, ep := newBus(b, Options{})
			type reader struct {
				mu   sync.Mutex
				cond *sync.Cond
				last uint64
				lat  []time.Duration
			}
			readers := make([]*reader, subs)
			for i := range readers {
				r := &reader{}
				r.cond = sync.NewCond(&r.mu)
				readers[i] = r
				s := dial(b, ep, "agent:")
				go func() {
					for {
						m, err := s.Next()
						if err != nil {
							return
						}
						now := time.Now()
						var e event.Envelope
						if json.Unmarshal(m.Body, &e) != nil {
							continue
						}
						r.mu.Lock()
						r.last = e.Seq
						if i == 0 {
							r.lat = append(r.lat, now.Sub(e.TS))
						}
						r.cond.Broadcast()
						r.mu.Unlock()
					}
				}()
			}
			wait := func(seq uint64) {
				for _, r := range readers {
					r.mu.Lock()
					for r.last < seq {
						r.cond.Wait()
					}
					r.mu.Unlock()
				}
			}
			data := json.RawMessage(`{"delta":true,"content":{"type":"text","text":"tok1234 "}}`)
			b.ResetTimer()
			for i := 1; i <= b.N; i++ {
				bs.Publish(&event.Envelope{Kind: event.AssistantText, Turn: 1, Data: data, AgentID: "9f3a1c20", Seq: uint64(i), TS: time.Now().UTC()})
				if i%1000 == 0 {
					wait(uint64(i))
				}
			}
			wait(uint64(b.N))
			b.StopTimer()
			if d := bs.Stats().Dropped; d != 0 {
				b.Fatalf("dropped %d", d)
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "env/s")
			lat := readers[0].lat
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
		})
	}
}

// BenchmarkBusLatency measures one envelope at a time, published and read
// back by one subscriber on the ipc socket: ns/op is the round trip with
// nothing else queued, p50-µs and p99-µs the publish→receive latency.
func BenchmarkBusLatency(b *testing.B) {
	bs, ep := newBus(b, Options{})
	s := dial(b, ep, "agent:")
	data := json.RawMessage(`{"delta":true,"content":{"type":"text","text":"tok1234 "}}`)
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 1; i <= b.N; i++ {
		bs.Publish(&event.Envelope{Kind: event.AssistantText, Turn: 1, Data: data, AgentID: "9f3a1c20", Seq: uint64(i), TS: time.Now().UTC()})
		m, err := s.Next()
		if err != nil {
			b.Fatal(err)
		}
		now := time.Now()
		var e event.Envelope
		if err := json.Unmarshal(m.Body, &e); err != nil || e.Seq != uint64(i) {
			b.Fatalf("got seq %d (%v), want %d", e.Seq, err, i)
		}
		lat = append(lat, now.Sub(e.TS))
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
}
