package e2e

import (
	"strings"
	"testing"
	"time"
)

// BenchmarkFleetWarmCall is issue 19's warm remote call: `kaimon --host h1
// list --json` to a host in a network namespace of the test's, through the
// real ssh and sshd and the ssh master kaimon keeps, beside the same
// command to this machine's daemon and a bare `ssh h1 true` (a connection
// of its own each time: what a call would cost without the master), in
// alternation, one sitting. The targets: remote ≤ local + 5 ms, and ≤ 0.5×
// the bare ssh.
func BenchmarkFleetWarmCall(b *testing.B) {
	fe := newFleetEnv(b)
	local := fe.ok("open", fe.work, "--model", "replay:"+exampleLog()+"?speed=0")
	remote := fe.ok("--host", "h1", "open", fe.r.work["h1"], "--model", fe.replayModel())
	var rm, lo, bare []time.Duration
	call := func(into *[]time.Duration, want string, args ...string) {
		t0 := time.Now()
		out := fe.ok(args...)
		*into = append(*into, time.Since(t0))
		if !strings.Contains(out, want) {
			b.Fatalf("kaimon %s lacks %s: %s", strings.Join(args, " "), want, out)
		}
	}
	ssh := func() {
		t0 := time.Now()
		out, err := fe.r.ssh(30*time.Second, "h1", "true")
		bare = append(bare, time.Since(t0))
		if err != nil {
			b.Fatalf("ssh h1 true: %v: %s", err, out)
		}
	}
	remoteID := strings.TrimPrefix(remote, "h1/")
	calls := []func(){
		func() { call(&rm, remoteID, "--host", "h1", "list", "--json") },
		func() { call(&lo, local, "list", "--json") },
		ssh,
	}
	calls[0]() // warm: the master is up from open already; this is the measured path
	rm = rm[:0]
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for j := range calls {
			calls[(i+j)%len(calls)]()
		}
	}
	b.StopTimer()
	r, l, s := median(rm), median(lo), median(bare)
	b.ReportMetric(ms(r), "remote-ms")
	b.ReportMetric(ms(l), "local-ms")
	b.ReportMetric(ms(s), "ssh-ms")
	b.ReportMetric(ms(r-l), "over-local-ms")
	b.ReportMetric(r.Seconds()/s.Seconds(), "of-ssh")
}
