package session

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/kaimon/kaimon/internal/backend/claude"
	"github.com/kaimon/kaimon/internal/bus"
	"github.com/tidwall/gjson"
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
func BenchmarkRelay(b *testing.B) {
	r := newRig(b, 10)
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
	var (
		mu   sync.Mutex
		cond = sync.NewCond(&mu)
		last uint64
	)
	go func() {
		for {
			m, err := sub.Next()
			if err != nil {
				return
			}
			// Only the seq: what the subscriber does is not kaimon's cost.
			seq := gjson.GetBytes(m.Body, "seq").Uint()
			mu.Lock()
			last = seq
			cond.Broadcast()
			mu.Unlock()
		}
	}()
	wait := func(seq uint64) {
		mu.Lock()
		for last < seq {
			cond.Wait()
		}
		mu.Unlock()
	}
	lines := claude.SyntheticTurn(1000)
	m := claude.NewMapper()
	ag := sink.(*Agent)
	seq := func() uint64 {
		ag.mu.Lock()
		defer ag.mu.Unlock()
		return ag.seq
	}
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

// cpu is the process's CPU time so far, user and system.
func cpu() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
