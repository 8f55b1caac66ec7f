package e2e

// A host's link is not its daemon: the ssh master connection kaimon keeps
// for a host breaking under a turn is no crash of the daemon there, and
// ending one host's master leaves the others'.

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/kaimon/kaimon/internal/testutil/fakeapi"
	"github.com/kaimon/kaimon/internal/verbs"
)

// slowReply is what the fake API's "please be slow" turn says, whole.
func slowReply() string {
	var b strings.Builder
	for i := range fakeapi.SlowChunks {
		b.WriteString("chunk" + strconv.Itoa(i) + " ")
	}
	return strings.TrimSpace(b.String())
}

// TestFleetRunMasterKilled: the ssh master of h1 (whose calls ride its
// forwarding) and of h2 (whose calls go through dial-stdio) killed with
// SIGKILL while a `kaimon run` waits on a slow turn there. The remote agent
// goes on working; the run reconnects, asks the agent's state again, and
// ends with the turn's whole reply and exit 0: it never says the daemon
// was lost, nor suggests a resume (which the live agent would refuse).
func TestFleetRunMasterKilled(t *testing.T) {
	fe := newFleetEnv(t)
	hosts := []string{"h1", "h2"}
	ids := map[string]string{}
	for _, h := range hosts {
		ids[h] = h + "/" + bareID(t, h, fe.ok("--host", h, "open", fe.r.work[h]))
		// A warm master (and on h1 its forwarding) before the turn.
		fe.ok("run", ids[h], "say exactly: before")
	}
	runs := map[string]*bgProc{}
	slow := map[string]string{}
	for _, h := range hosts {
		slow[h] = fakeapi.TriggerSlow + " (run over " + h + "'s master)"
		runs[h] = fe.start(filepath.Join(binDir, "kaimon"), "run", ids[h], slow[h])
	}
	masters := map[string]int{}
	for _, h := range hosts {
		waitFor(t, "the slow turn to reach "+h+"'s model", time.Minute, func() bool { return asked(fe.f.host(h).api, slow[h]) })
		if masters[h] = fe.masterOf(h); masters[h] == 0 {
			t.Fatalf("no ssh master of %s runs for this installation", h)
		}
	}
	for _, h := range hosts {
		if err := syscall.Kill(masters[h], syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	codes := map[string]int{}
	var mu sync.Mutex
	for _, h := range hosts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			code := runs[h].wait()
			mu.Lock()
			codes[h] = code
			mu.Unlock()
		}()
	}
	wg.Wait()
	for _, h := range hosts {
		p := runs[h]
		p.mu.Lock()
		out := strings.Join(p.lines, "\n")
		p.mu.Unlock()
		stderr := p.stderr.String()
		t.Logf("run on %s after its master %d was killed: exit %d\nstdout: %s\nstderr: %s", h, masters[h], codes[h], out, stderr)
		if strings.Contains(stderr, "kaimon-agentd was lost") || strings.Contains(stderr, "--resume") {
			t.Errorf("run on %s says its daemon was lost, or suggests a resume, when only the link broke: %s", h, stderr)
		}
		if codes[h] != 0 || strings.TrimSpace(out) != slowReply() {
			t.Errorf("run on %s after its master was killed: want exit 0 and the whole reply; got exit %d, stdout %q", h, codes[h], out)
		}
		if !strings.Contains(stderr, "host "+h) || !strings.Contains(stderr, "reconnect") {
			t.Errorf("run on %s did not say that the link to its host broke and was reconnected: %q", h, stderr)
		}
		var st verbs.AgentStatus
		fe.okJSON(&st, "status", ids[h])
		if st.Status != "idle" || st.Turn != 2 {
			t.Errorf("%s after the run: %+v, want idle after turn 2", ids[h], st)
		}
		if m := fe.masterOf(h); m == 0 || m == masters[h] {
			t.Errorf("%s's master after the kill: %d (the killed one was %d)", h, m, masters[h])
		}
	}
	for _, h := range hosts {
		fe.ok("close", ids[h])
	}
}

// TestFleetRunLinkLost: the link a `kaimon run` reaches h1 by goes down
// (a spare link of the test's own) under a slow turn, and stays down. The
// run tries to reach h1 again, a bounded number of times, then exits 5
// saying that the link to h1 was lost and how to see the agent once the
// host answers: not that the daemon was lost, nor a resume. With the link
// back, the agent, which worked on meanwhile, has ended its turn.
func TestFleetRunLinkLost(t *testing.T) {
	var link *fleetLink
	fe := newFleetEnvVia(t, func(f *fleet) map[string]*fleetLink {
		link = f.spareLink(t, f.host("h1"))
		return map[string]*fleetLink{"h1": link}
	}, "")
	h1 := fe.f.host("h1")
	id := "h1/" + bareID(t, "h1", fe.ok("--host", "h1", "open", fe.r.work["h1"]))
	fe.ok("run", id, "say exactly: before")
	slow := fakeapi.TriggerSlow + " (run over a link that goes down)"
	run := fe.start(filepath.Join(binDir, "kaimon"), "run", id, slow)
	waitFor(t, "the slow turn to reach h1's model", time.Minute, func() bool { return asked(h1.api, slow) })
	up := linkDown(t, h1, link)
	code := run.wait()
	stderr := run.stderr.String()
	t.Logf("run on h1 with its link down: exit %d; stderr: %s", code, stderr)
	if code != 5 || !strings.Contains(stderr, "the link to host h1 was lost") || !strings.Contains(stderr, "kaimon status "+id) {
		t.Errorf("run on h1 with its link down for good: want exit 5, saying the link to h1 was lost and naming `kaimon status %s`; got exit %d: %s", id, code, stderr)
	}
	if strings.Contains(stderr, "kaimon-agentd was lost") || strings.Contains(stderr, "--resume") {
		t.Errorf("run on h1 says its daemon was lost, or suggests a resume, when only the link broke: %s", stderr)
	}
	up()
	waitFor(t, "the agent on h1 to end its turn", time.Minute, func() bool {
		var st verbs.AgentStatus
		return jsonOf(fe.ok("status", id, "--json"), &st) == nil && st.Status == "idle" && st.Turn == 2
	})
	if got := fe.ok("output", id); strings.TrimSpace(got) != slowReply() {
		t.Errorf("output %s after the link came back: %q", id, got)
	}
	fe.ok("close", id)
}

// TestFleetRunRemoteDaemonKilled: h1's daemon itself killed (SIGKILL)
// under a `kaimon run`'s slow turn. The run reaches h1 again (which starts
// a new daemon there) and reports what that one says, not a guess made
// from the broken connection: the turn failed, the daemon lost (exit 3),
// the agent dead (daemon crashed), to be resumed.
func TestFleetRunRemoteDaemonKilled(t *testing.T) {
	fe := newFleetEnv(t)
	h1 := fe.f.host("h1")
	id := "h1/" + bareID(t, "h1", fe.ok("--host", "h1", "open", fe.r.work["h1"]))
	fe.ok("run", id, "say exactly: before")
	slow := fakeapi.TriggerSlow + " (run while h1's daemon is killed)"
	run := fe.start(filepath.Join(binDir, "kaimon"), "run", id, slow)
	waitFor(t, "the slow turn to reach h1's model", time.Minute, func() bool { return asked(h1.api, slow) })
	rh := fe.r.home["h1"]
	daemon := slices.DeleteFunc(processesWithEnv("KAIMON_HOME="+rh), func(pid int) bool {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		return filepath.Base(strings.Split(string(b), "\x00")[0]) != "kaimon-agentd"
	})
	if len(daemon) != 1 {
		t.Fatalf("want one kaimon-agentd on h1 for this test; have %s", describe(daemon))
	}
	if err := syscall.Kill(daemon[0], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	code := run.wait()
	stderr := run.stderr.String()
	t.Logf("run on h1 whose daemon was killed: exit %d; stderr: %s", code, stderr)
	if code != 3 || !strings.Contains(stderr, "kaimon-agentd was lost") || !strings.Contains(stderr, "kaimon open --id "+id+" --resume") {
		t.Errorf("run on h1 whose daemon was killed: want exit 3, saying the daemon was lost and naming `kaimon open --id %s --resume`; got exit %d: %s", id, code, stderr)
	}
	if !strings.Contains(stderr, "is dead (daemon crashed)") {
		t.Errorf("run on h1 whose daemon was killed does not say what h1 says of the agent (dead, daemon crashed): %s", stderr)
	}
	var st verbs.AgentStatus
	fe.okJSON(&st, "status", id)
	if st.Status != "dead" || st.Reason != "daemon crashed" {
		t.Errorf("%s after its daemon was killed: %+v", id, st)
	}
}

// TestFleetLiveRunMasterKilled: a `kaimon run` on a terminal renders h1's
// slow turn as it streams; h1's ssh master is killed mid-reply. The run
// says the link broke, follows the turn again from the last event it had,
// and ends it as on an unbroken link: the whole reply on the screen once
// (what streamed around the note, and the deltas lost with the link, give
// way to the complete text, as for a slow reader), the usage line, exit 0.
func TestFleetLiveRunMasterKilled(t *testing.T) {
	fe := newFleetEnv(t)
	id := "h1/" + bareID(t, "h1", fe.ok("--host", "h1", "open", fe.r.work["h1"]))
	fe.ok("run", id, "say exactly: before")
	k := fe.kaimonPty(t, fe.ptyEnv(), "run", id, fakeapi.TriggerSlow+" (a terminal's run over h1's master)")
	k.waitOutput("chunk3 ")
	master := fe.masterOf("h1")
	if master == 0 {
		t.Fatal("no ssh master of h1 runs for this installation")
	}
	if err := syscall.Kill(master, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	code := k.wait()
	out := k.output()
	plain := screen(t, out)
	t.Logf("the terminal, h1's master %d killed mid-reply:\n%s", master, plain)
	if code != 0 || !strings.Contains(plain, "the link to host h1 broke") || strings.Count(plain, slowReply()) != 1 || !strings.Contains(plain, "✓ turn 2 · end_turn") {
		t.Errorf("a terminal's run whose master was killed: want exit 0, the link's break said, the whole reply once and the usage line; got exit %d:\n%s", code, plain)
	}
	if strings.Contains(plain, "kaimon-agentd was lost") || strings.Contains(plain, "--resume") {
		t.Errorf("a terminal's run says its daemon was lost, or suggests a resume, when only the link broke:\n%s", plain)
	}
}

// TestFleetLiveRunShowsReplyOnce: a `kaimon run` on a terminal of an agent
// named HOST/ID shows the reply once. (Its events name the agent bare, as
// its host's daemon does, and run took the reply for not yet shown, so
// printed it again.)
func TestFleetLiveRunShowsReplyOnce(t *testing.T) {
	fe := newFleetEnv(t)
	id := "h1/" + bareID(t, "h1", fe.ok("--host", "h1", "open", fe.r.work["h1"]))
	k := fe.kaimonPty(t, fe.ptyEnv(), "run", id, "say exactly: once on h1")
	code := k.wait()
	plain := screen(t, k.output())
	if code != 0 || strings.Count(plain, "once on h1") != 1 || !strings.Contains(plain, "✓ turn 1 · end_turn") {
		t.Errorf("a terminal's run of %s: want exit 0, the reply once and the usage line; got exit %d:\n%s", id, code, plain)
	}
}
