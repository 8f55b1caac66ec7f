package session

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/kaimon/kaimon/internal/backend"
	"github.com/kaimon/kaimon/internal/backend/claude"
	"github.com/kaimon/kaimon/internal/bus"
)

// BenchmarkRelay is the agent's line → subscriber path in process: each
// stream-json line of a claude turn is mapped (claude.Mapper), and its
// events go through the agent's sink as the claude backend hands them on
// (stamp, book, event log, fan-out) to the real ZeroMQ bus, where one SUB
// subscriber on the ipc socket reads them back (taking only the seq). The
// feeder waits for the subscriber every 1000 lines (less than a queue),
// so nothing is dropped and lines/s is end to end. lines/cpu-s is lines
// per second of the whole process's CPU time (rusage), subscriber
// included: the per-core figure the target (≥ 60% of
// claude.BenchmarkValidFloor's lines/s) is about.
// relayRig is an open agent of the scripted backend, whose sink the
// benchmark feeds, with the real bus and one SUB subscriber of its topic.
type relayRig struct {
	sink backend.Sink
	ag   *Agent
	bus  *bus.Bus
	mu   sync.Mutex
	cond *sync.Cond
	last uint64    // the last seq the subscriber received
	at   time.Time // when
}

func newRelayRig(b *testing.B, env ...string) *relayRig {
	r := newRig(b, 10)
	r.m.env = env
	id := r.open(b, "relay")
	r.mu.Lock()
	sink := r.last.sink
	r.mu.Unlock()

	dir, err := os.MkdirTemp("", "kr")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { os.RemoveAll(dir) })
	ep := "ipc://" + filepath.Join(dir, "events.sock")
	bs, err := bus.Listen([]string{ep}, bus.Options{Logf: b.Logf})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { bs.Close() })
	r.m.AddPublisher(bs)
	sub, err := bus.Dial(context.Background(), ep)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { sub.Close() })
	if err := sub.Subscribe(bus.Topic(id)); err != nil {
		b.Fatal(err)
	}
	if err := sub.Sync(10 * time.Second); err != nil {
		b.Fatal(err)
	}
	rr := &relayRig{sink: sink, ag: sink.(*Agent), bus: bs}
	rr.cond = sync.NewCond(&rr.mu)
	go func() {
		for {
			m, err := sub.Next()
			if err != nil {
				return
			}
			// Only the seq: what the subscriber does is not kaimon's cost.
			seq := gjson.GetBytes(m.Body, "seq").Uint()
			now := time.Now()
			rr.mu.Lock()
			rr.last, rr.at = seq, now
			rr.cond.Broadcast()
			rr.mu.Unlock()
		}
	}()
	return rr
}

// wait waits for the subscriber to have received seq, and says when it
// did.
func (rr *relayRig) wait(seq uint64) time.Time {
	rr.mu.Lock()
	defer rr.mu.Unlock()
	for rr.last < seq {
		rr.cond.Wait()
	}
	return rr.at
}

// seq is the last seq stamped, once everything emitted is.
func (rr *relayRig) seq() uint64 {
	rr.ag.flush()
	rr.ag.mu.Lock()
	defer rr.ag.mu.Unlock()
	return rr.ag.seq
}

func BenchmarkRelay(b *testing.B) { benchRelay(b) }

// BenchmarkRelayRedacted is BenchmarkRelay of an agent with a credential
// in its environment, as most have: every event passes its redactor
// (publishRedacted), every delta is looked at for the start of a secret.
func BenchmarkRelayRedacted(b *testing.B) {
	benchRelay(b, "ANTHROPIC_API_KEY=sk-ant-bench-0123456789abcdefghij", "GITHUB_TOKEN=ghp_bench0123456789")
}

func benchRelay(b *testing.B, env ...string) {
	rr := newRelayRig(b, env...)
	sink, bs, wait, seq := rr.sink, rr.bus, func(s uint64) { rr.wait(s) }, rr.seq
	lines := claude.SyntheticTurn(1000)
	m := claude.NewMapper()
	turn := 1000 // past the rig's turns
	before := cpu()
	b.ResetTimer()
	n := 0
	for i := 0; i < b.N; i++ {
		turn++
		evs, _ := m.Push(turn, "hi")
		for _, ev := range evs {
			sink.Emit(ev)
		}
		for _, l := range lines {
			for _, ev := range m.Map(l).Events {
				sink.Emit(ev)
			}
			if n++; n%1000 == 0 {
				wait(seq())
			}
		}
	}
	wait(seq())
	b.StopTimer()
	used := cpu() - before
	if d := bs.Stats().Dropped; d != 0 {
		b.Fatalf("the bus dropped %d", d)
	}
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "lines/s")
	b.ReportMetric(float64(n)/used.Seconds(), "lines/cpu-s")
}

// BenchmarkRelayLatency feeds the relay one line at a time and waits for
// its events to reach the subscriber: p50/p99/p999 are the latency from
// the line's arrival (before Map) to the subscriber's receipt of its last
// event, over every line that yields events, nothing else in flight.
// Stalls on the agent's path (a record save, a log write) show as its
// tail. A b.N of 5 is five turns of 1016 lines.
func BenchmarkRelayLatency(b *testing.B) {
	rr := newRelayRig(b)
	lines := claude.SyntheticTurn(1000)
	m := claude.NewMapper()
	lat := make([]time.Duration, 0, b.N*len(lines))
	turn := 1000
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		turn++
		evs, _ := m.Push(turn, "hi")
		for _, ev := range evs {
			rr.sink.Emit(ev)
		}
		for _, l := range lines {
			start := time.Now()
			evs := m.Map(l).Events
			if len(evs) == 0 {
				continue
			}
			for _, ev := range evs {
				rr.sink.Emit(ev)
			}
			lat = append(lat, rr.wait(rr.seq()).Sub(start))
		}
	}
	b.StopTimer()
	slices.Sort(lat)
	q := func(p float64) float64 { return float64(lat[int(float64(len(lat)-1)*p)].Microseconds()) }
	b.ReportMetric(q(0.5), "p50-µs")
	b.ReportMetric(q(0.99), "p99-µs")
	b.ReportMetric(q(0.999), "p999-µs")
	b.ReportMetric(float64(lat[len(lat)-1].Microseconds()), "max-µs")
}

// cpu is the process's CPU time so far, user and system.
func cpu() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
