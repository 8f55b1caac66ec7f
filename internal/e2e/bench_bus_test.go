package e2e

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/kaimon/kaimon/internal/bus"
	"github.com/kaimon/kaimon/internal/event"
	"github.com/kaimon/kaimon/internal/verbs"
)

// BenchmarkBusStalledSubscriber measures what a stalled subscriber costs a
// real claude turn that streams 5000 deltas (`stream 5000 chunks`) through
// kaimon-agentd to a fast subscriber. Each iteration runs the same turn
// twice, side by side, on fresh agents:
//
//	alone:   the fast subscriber only;
//	stalled: plus one subscriber that is connected and subscribed to every
//	         agent but never reads (a new one for each such turn).
//
// The order of the two alternates, so that drift in the machine's load
// falls on both. Metrics: alone-ms and stalled-ms (agent_run through the
// control API, the turn as a script sees it), ratio (their quotient),
// dropped/turn (what the bus dropped for the stalled one), and for the
// fast subscriber env/s (envelopes received per second of turn) and p50-µs,
// p99-µs (agent→subscriber latency: receive time minus the envelope's
// ts), all turns together. The fast subscriber must get every envelope.
// scripts/bench-bus.sh prints them as a table.
func BenchmarkBusStalledSubscriber(b *testing.B) {
	e := newEnv(b)
	e.ok("daemon", "start")
	cl := e.client()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	fast := startFastSub(b, ctx, e)
	var (
		alone, stalled time.Duration
		envelopes      int
		lat            []time.Duration
		dropped        uint64
	)
	turn := func(withStalled bool) {
		o, err := cl.Open(ctx, &verbs.OpenArgs{Cwd: e.work})
		if err != nil {
			b.Fatal(err)
		}
		id := o.AgentID
		var st *bus.Subscriber
		if withStalled {
			if st, err = bus.Dial(ctx, e.busEndpoint()); err == nil {
				if err = st.Subscribe("agent:"); err == nil {
					err = st.Sync(10 * time.Second)
				}
			}
			if err != nil {
				b.Fatal(err)
			}
		}
		before := e.busStats().Dropped
		fast.reset()
		start := time.Now()
		if _, err := cl.Run(ctx, &verbs.RunArgs{AgentID: id, Text: "stream 5000 chunks"}); err != nil {
			b.Fatal(err)
		}
		d := time.Since(start)
		envs := fast.until(b, func(envs []event.Envelope) bool { return hasKind(envs, id, event.Result) })
		envs = slices.DeleteFunc(slices.Clone(envs), func(e event.Envelope) bool { return e.AgentID != id })
		for j := 1; j < len(envs); j++ {
			if envs[j].Seq != envs[j-1].Seq+1 {
				b.Fatalf("the fast subscriber lost seq %d..%d", envs[j-1].Seq+1, envs[j].Seq-1)
			}
		}
		fast.mu.Lock()
		lat = append(lat, fast.lat...)
		fast.mu.Unlock()
		envelopes += len(envs)
		if withStalled {
			stalled += d
			dropped += e.busStats().Dropped - before
			st.Close()
		} else {
			alone += d
		}
		if _, err := cl.Close(ctx, &verbs.CloseArgs{AgentID: id}); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		turn(i%2 == 1)
		turn(i%2 == 0)
	}
	b.StopTimer()
	n := float64(b.N)
	b.ReportMetric(float64(alone.Milliseconds())/n, "alone-ms")
	b.ReportMetric(float64(stalled.Milliseconds())/n, "stalled-ms")
	b.ReportMetric(stalled.Seconds()/alone.Seconds(), "ratio")
	b.ReportMetric(float64(dropped)/n, "dropped/turn")
	b.ReportMetric(float64(envelopes)/(alone+stalled).Seconds(), "env/s")
	reportLatency(b, lat)
}

func reportLatency(b *testing.B, lat []time.Duration) {
	if len(lat) == 0 {
		return
	}
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
}
