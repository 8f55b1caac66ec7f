package e2e

import (
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// TestFleetHostRmEndsOnlyItsMaster: with masters running for h1 and h2,
// and a third name for h1's destination (h1b, another remote-bin: the
// same master), `host rm h2` ends h2's master and no other; `host rm h1`
// leaves the master h1b still uses; `host rm h1b` ends it.
func TestFleetHostRmEndsOnlyItsMaster(t *testing.T) {
	fe := newFleetEnv(t)
	fe.ok("host", "add", "h1b", fe.url("h1"), "--remote-bin", filepath.Join(binDir, "kaimon"))
	for _, h := range []string{"h1", "h2", "h1b"} {
		fe.ok("--host", h, "list")
	}
	m1, m2 := fe.masterOf("h1"), fe.masterOf("h2")
	if m1 == 0 || m2 == 0 {
		t.Fatalf("masters of h1 and h2: %d, %d; want both running", m1, m2)
	}
	alive := func(pid int) bool { return syscall.Kill(pid, 0) == nil }

	fe.ok("host", "rm", "h2")
	waitGone(func() bool { return !alive(m2) }, 10*time.Second)
	if alive(m2) {
		t.Errorf("host rm h2 left h2's master %d running", m2)
	}
	if !alive(m1) {
		t.Errorf("host rm h2 ended h1's master %d", m1)
	}

	fe.ok("host", "rm", "h1")
	// h1b still has its master: a call there makes no new one.
	fe.ok("--host", "h1b", "list")
	if m := fe.masterOf("h1"); m != m1 {
		t.Errorf("host rm h1 ended the master %d that host h1b (the same destination) still uses; h1b's is now %d", m1, m)
	}

	fe.ok("host", "rm", "h1b")
	waitGone(func() bool { return !alive(m1) }, 10*time.Second)
	if alive(m1) {
		t.Errorf("host rm h1b, the last name of h1's destination, left its master %d running", m1)
	}
}
