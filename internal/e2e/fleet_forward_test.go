package e2e

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestFleetWarmCallForwarded: after the first contact with a host (through
// dial-stdio, which starts its daemon), a call is a channel of the ssh
// master forwarded to the daemon's socket, and starts no dial-stdio there;
// once the daemon is stopped (its socket gone), the next call falls back
// to dial-stdio, which starts it again, and the calls after go through the
// forwarding again. The host's remote_bin is a wrapper that logs each
// dial-stdio it starts, so the count is read, not timed.
func TestFleetWarmCallForwarded(t *testing.T) {
	fe := newFleetEnv(t)
	h1 := fe.f.host("h1")
	rh := fe.r.home["h1"]
	dialLog := filepath.Join(rh, "dial-stdio.log")
	wrapper := filepath.Join(rh, "kaimon-logged")
	script := "#!/bin/sh\necho \"$*\" >> " + dialLog + "\nexec kaimon \"$@\"\n"
	if err := os.WriteFile(wrapper, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(wrapper, h1.uid, h1.gid); err != nil {
		t.Fatal(err)
	}
	fe.ok("host", "add", "w1", fe.url("h1"), "--remote-bin", wrapper)
	dials := func() int {
		b, err := os.ReadFile(dialLog)
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		return strings.Count(string(b), "dial-stdio\n")
	}
	forwards := func() []string {
		var out []string
		_ = filepath.WalkDir(fe.home, func(p string, d os.DirEntry, err error) error {
			if err == nil && strings.HasPrefix(d.Name(), "fwd-") {
				out = append(out, d.Name())
			}
			return nil
		})
		return out
	}

	// First contact: through dial-stdio, which starts the daemon; the
	// forwarding is made after it.
	fe.ok("--host", "w1", "list", "--json")
	if n := dials(); n != 1 {
		t.Fatalf("the first call started %d dial-stdio on h1, want 1", n)
	}
	if f := forwards(); len(f) != 1 || !strings.HasSuffix(f[0], ".sock") {
		t.Fatalf("after the first call, the forwarding socket: %v", f)
	}
	// Warm calls: channels of the master, no dial-stdio, the same
	// answers.
	id := bareID(t, "w1", fe.ok("--host", "w1", "open", fe.r.work["h1"], "--model", fe.replayModel()))
	for range 5 {
		if out := fe.ok("--host", "w1", "list", "--json"); !strings.Contains(out, id) {
			t.Fatalf("a warm list lacks %s: %s", id, out)
		}
	}
	if n := dials(); n != 1 {
		t.Fatalf("warm calls started %d dial-stdio on h1 in all, want the first call's 1", n)
	}

	// The daemon stopped, its socket gone: the forwarding answers
	// nothing, so the call goes through dial-stdio, which starts the
	// daemon again; the calls after are channels again.
	if out, err := fe.r.ssh(30*time.Second, "h1", "kaimon daemon stop"); err != nil {
		t.Fatalf("kaimon daemon stop on h1: %v: %s", err, out)
	}
	fe.ok("--host", "w1", "list", "--json")
	if n := dials(); n != 2 {
		t.Fatalf("the call after the daemon stopped started %d dial-stdio in all, want 2", n)
	}
	for range 3 {
		fe.ok("--host", "w1", "list", "--json")
	}
	if n := dials(); n != 2 {
		t.Fatalf("warm calls after the restart started %d dial-stdio in all, want 2", n)
	}

	// h2's sshd denies the forwarding (AllowTcpForwarding no): the calls
	// go on through dial-stdio, silently, and the denial is marked, so
	// that later calls do not ask again.
	for range 2 {
		if r := fe.kaimon("--host", "h2", "list", "--json"); r.code != 0 || r.stderr != "" {
			t.Fatalf("a call to h2, whose sshd denies forwarding: %s", r)
		}
	}
	if f := forwards(); len(f) != 2 || !slices.ContainsFunc(f, func(n string) bool { return strings.HasSuffix(n, ".sock.refused") }) {
		t.Errorf("after calls to h2, the socket dir holds %v: want h1's forwarding and h2's denial", f)
	}

	// host rm ends the master, and its forwarding's socket with it; but
	// not while another host reaches the same destination: w1 is h1's,
	// whose master and forwarding they are too.
	fe.ok("host", "rm", "w1")
	if f := forwards(); len(f) != 2 {
		t.Errorf("after host rm w1, the socket dir holds %v: want h1's forwarding (h1 is w1's destination) and h2's denial", f)
	}
	fe.ok("host", "rm", "h1")
	if f := forwards(); len(f) != 1 || !strings.HasSuffix(f[0], ".refused") {
		t.Errorf("after host rm w1 and h1, the socket dir holds %v: want h2's denial only", f)
	}
}
