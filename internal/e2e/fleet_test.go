package e2e

import (
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestFleetSSH: each test host is reached by plain ssh with the run's key
// and its pinned host key, as its own user, with kaimon on its PATH and the
// test's own KAIMON_HOME; a host key that is not the pinned one and a key
// that is not authorized are both refused.
func TestFleetSSH(t *testing.T) {
	parallel(t)
	f := needFleet(t)
	r := f.newRemote(t, t.TempDir())
	for _, h := range f.hosts {
		if out, err := f.ssh(30*time.Second, h.name, "true"); err != nil {
			t.Fatalf("ssh -F %s %s true: %v: %s", f.sshConfig, h.name, err, out)
		}
		out, err := r.ssh(30*time.Second, h.name, `id -un; echo "$KAIMON_HOME"; command -v kaimon`)
		if err != nil {
			t.Fatalf("ssh %s: %v: %s", h.name, err, out)
		}
		if want := h.user + "\n" + r.home[h.name] + "\n" + filepath.Join(binDir, "kaimon") + "\n"; out != want {
			t.Errorf("ssh %s: got %q, want %q", h.name, out, want)
		}
	}

	dir := t.TempDir()
	// h2's address pinned to h1's key: ssh refuses, as it would a host
	// that is not the one known.
	h1, h2 := f.host("h1"), f.host("h2")
	wrongKnown := filepath.Join(dir, "known_hosts")
	if err := os.WriteFile(wrongKnown, []byte(h2.addr+" "+h1.hostKey+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, code := sshArgs(t, "-F", f.sshConfig, "-o", "UserKnownHostsFile="+wrongKnown, "h2", "true")
	if code != 255 || !strings.Contains(out, "Host key verification failed") {
		t.Errorf("ssh h2 with h1's key pinned: exit %d: %s", code, out)
	}
	// A key made for no one: the host refuses it.
	stranger := filepath.Join(dir, "stranger")
	if err := runCmd("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", stranger); err != nil {
		t.Fatal(err)
	}
	out, code = sshArgs(t, "-F", "/dev/null", "-i", stranger, "-o", "IdentitiesOnly=yes", "-o", "IdentityAgent=none",
		"-o", "UserKnownHostsFile="+f.knownHosts, "-o", "StrictHostKeyChecking=yes", "-o", "BatchMode=yes", "-l", h1.user, h1.addr, "true")
	if code != 255 || !strings.Contains(out, "Permission denied") {
		t.Errorf("ssh h1 with a key it does not know: exit %d: %s", code, out)
	}
}

// TestFleetLinkDown: with the link this test reaches h1 by down (its
// namespace's end of the pair), ssh to h1 fails within a bounded time while
// h2, and h1 by its main link, still answer; with the link back up, h1
// answers by it again. The link is a spare of h1's, this test's own.
func TestFleetLinkDown(t *testing.T) {
	parallel(t)
	f := needFleet(t)
	h1 := f.host("h1")
	l := f.spareLink(t, h1)
	r := f.newRemoteVia(t, t.TempDir(), map[string]*fleetLink{"h1": l}, "")
	if out, err := r.ssh(30*time.Second, "h1", "true"); err != nil {
		t.Fatalf("ssh h1 before the link went down: %v: %s", err, out)
	}
	up := linkDown(t, h1, l)
	out, code := sshArgs(t, "-F", r.sshConfig, "-o", "ConnectTimeout=3", "h1", "true")
	if code != 255 || !strings.Contains(out, l.addr) {
		t.Errorf("ssh h1 with its link down: want exit 255 naming %s; got exit %d: %s", l.addr, code, out)
	}
	for _, other := range []string{"h2", "h1"} {
		if out, err := f.ssh(30*time.Second, other, "true"); err != nil {
			t.Errorf("ssh %s by its main link while h1's spare is down: %v: %s", other, err, out)
		}
	}
	up()
	if out, err := r.ssh(30*time.Second, "h1", "true"); err != nil {
		t.Errorf("ssh h1 after its link came back: %v: %s", err, out)
	}
}

// linkDown takes link l of host h down (its end inside the namespace, as
// if the cable were pulled: packets to it vanish, nothing answers) and
// returns a func that brings it back up; that also runs when t ends.
func linkDown(t testing.TB, h *fleetHost, l *fleetLink) (up func()) {
	t.Helper()
	if err := runCmd("ip", "-n", h.ns, "link", "set", l.vethNS, "down"); err != nil {
		t.Fatal(err)
	}
	done := false
	up = func() {
		if done {
			return
		}
		done = true
		if err := runCmd("ip", "-n", h.ns, "link", "set", l.vethNS, "up"); err != nil {
			t.Error(err)
			return
		}
		// Forget that the address did not answer (a neighbour entry
		// marked failed is refused at once for a while: "No route to
		// host"), and wait for sshd to answer there again: the link is
		// back as the cable would be.
		_ = runCmd("ip", "neigh", "flush", "dev", l.vethRoot)
		waitGone(func() bool {
			c, err := net.DialTimeout("tcp", net.JoinHostPort(l.addr, "22"), time.Second)
			if err == nil {
				c.Close()
			}
			return err == nil
		}, 30*time.Second)
	}
	t.Cleanup(up)
	return up
}

// sshArgs runs ssh with args, failing t if it has not ended within 10 s:
// a refusal or an unreachable host must come back, never hang. It returns
// the combined output and the exit code.
func sshArgs(t testing.TB, args ...string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "ssh", args...).CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("ssh %s did not end within 10s", strings.Join(args, " "))
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return string(out), ee.ExitCode()
	}
	if err != nil {
		t.Fatalf("ssh %s: %v", strings.Join(args, " "), err)
	}
	return string(out), 0
}
