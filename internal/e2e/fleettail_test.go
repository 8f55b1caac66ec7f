package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kaimon/kaimon/internal/event"
)

// fleetEnvs is this machine's installation and two others reached as
// hosts h1 and h2 through sshToInstallations, all with fakeclaude.
func fleetEnvs(t testing.TB) (local *kenv, hosts map[string]*kenv) {
	local = newFakeEnv(t)
	hosts = map[string]*kenv{"h1": newFakeEnv(t), "h2": newFakeEnv(t)}
	byDest := map[string]*kenv{}
	for name, to := range hosts {
		byDest[name+".invalid"] = to
	}
	local.env = append(local.env, "KAIMON_SSH_COMMAND="+sshToInstallations(t, byDest))
	for _, name := range []string{"h1", "h2"} {
		local.ok("host", "add", name, "ssh://me@"+name+".invalid", "--remote-bin", filepath.Join(binDir, "kaimon"))
	}
	return local, hosts
}

// killDialStdio kills every `kaimon dial-stdio` serving installation e,
// with its process group (the stand-in's: the ssh child kaimon started),
// as a dropped ssh connection would end it. It returns how many it
// killed.
func killDialStdio(t *testing.T, e *kenv) int {
	t.Helper()
	n := 0
	for _, pid := range e.processes() {
		cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err != nil || !strings.Contains(string(cmdline), "dial-stdio") {
			continue
		}
		pgid, err := syscall.Getpgid(pid)
		if err != nil || pgid == e.daemonPID() {
			continue
		}
		if syscall.Kill(-pgid, syscall.SIGKILL) == nil {
			n++
		}
	}
	return n
}

// hostEnvelope is a line of a merged tail.
type hostEnvelope struct {
	Host string `json:"host"`
	event.Envelope
}

// A merged tail of this machine and two hosts while turns run on all of
// them: every authoritative event of every agent arrives once, in seq
// order, marked with its host and its id qualified; the connection to h1
// killed mid-turn is reconnected and the tail goes on with no gap.
func TestTailAllHosts(t *testing.T) {
	local, hosts := fleetEnvs(t)
	envOf := map[string]*kenv{"local": local, "h1": hosts["h1"], "h2": hosts["h2"]}
	var agents []string // qualified, as the merged stream shows them
	for _, h := range []string{"local", "h1", "h2"} {
		agents = append(agents, strings.TrimSpace(local.ok("--host", h, "open", envOf[h].work)))
	}
	agents = append(agents, strings.TrimSpace(local.ok("--host", "h1", "open", hosts["h1"].work)))
	local.fails(2, "--all-hosts follows every host, and --host names one", "--host", "h1", "tail", "--all-hosts")
	local.fails(2, "about one agent", "tail", "--all-hosts", "--from-start", "agent:x")
	local.fails(2, "without a host", "tail", "--all-hosts", "h1/agent:")
	local.fails(2, `no host is named "h9"`, "tail", "h9/agent:")
	local.fails(2, "follows one channel", "--host", "h1", "tail", "agent:a", "agent:b")
	tail := local.tail("--all-hosts")
	turn := untilTailHasAll(t, tail, agents, 90*time.Second, func(id string) { local.ok("send", id, "stream 20 chunks") })
	// A long turn on all, and h1's connection killed while it streams.
	turn++
	for _, id := range agents {
		local.ok("send", id, "stream 1500 chunks at 500/s")
	}
	h1agent := agents[1]
	waitFor(t, "h1's turn streaming in the tail", time.Minute, func() bool {
		n := 0
		for _, e := range merged(t, tail) {
			if e.AgentID == h1agent && e.Turn == turn {
				n++
			}
		}
		return n > 100
	})
	if killDialStdio(t, hosts["h1"]) == 0 {
		t.Fatal("no dial-stdio of h1 to kill")
	}
	for _, id := range agents {
		waitFor(t, "the result of the long turn of "+id, 2*time.Minute, func() bool { return hasResult(merged(t, tail), id, turn) })
	}
	// One more turn after the break: the tail still follows h1.
	turn++
	for _, id := range agents {
		local.ok("send", id, "stream 20 chunks")
	}
	for _, id := range agents {
		waitFor(t, "the result of the last turn of "+id, time.Minute, func() bool { return hasResult(merged(t, tail), id, turn) })
	}
	checkMergedAgainstLogs(t, merged(t, tail), agents, func(host, id string) []event.Record { return envOf[host].logOf(id) })
	if s := tail.stderr.String(); !strings.Contains(s, "host h1: the stream broke") {
		t.Errorf("the tail did not say h1's stream broke; stderr: %s", s)
	}

	// One agent of a host, its log replayed there and then live: the
	// result of its first turn ends the tail, the records before it
	// printed as its log holds them.
	_, id, _ := strings.Cut(h1agent, "/")
	out := local.ok("tail", "h1/agent:"+id, "--from-start", "--turn", "1", "--until-result", "--no-deltas")
	var want []uint64
	for _, r := range hosts["h1"].logOf(id) {
		if r.Turn == 1 {
			want = append(want, r.Seq)
		}
	}
	var got []uint64
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		var e event.Envelope
		if err := json.Unmarshal([]byte(l), &e); err != nil || e.AgentID != id {
			t.Fatalf("tail h1/agent:%s printed %q (%v)", id, l, err)
		}
		got = append(got, e.Seq)
	}
	if len(got) == 0 || len(got) > len(want) || !slices.Equal(got, want[:len(got)]) {
		t.Errorf("tail h1/agent:%s --from-start --turn 1 printed seqs %v; turn 1 in its log: %v", id, got, want)
	}

	// A host that cannot be reached at the start: named on stderr, the
	// others followed.
	local.ok("host", "add", "h3", "ssh://h3.invalid")
	tail3 := local.tail("--all-hosts", "--kinds", "result")
	waitFor(t, "the tail to say h3 cannot be reached", time.Minute, func() bool {
		s := tail3.stderr.String()
		return strings.Contains(s, "host h3: ssh failed: ssh: Could not resolve hostname") && strings.Contains(s, "trying again in the background")
	})
	local.ok("send", agents[2], "stream 3 chunks")
	tail3.waitEnvelopes("h2's result", func(envs []event.Envelope) bool {
		return slices.ContainsFunc(envs, func(e event.Envelope) bool { return e.AgentID == agents[2] && e.Turn == turn+1 })
	})
	// Under KAIMON_E2E_RACE the tails are built with the race detector
	// too: their followers share one printer.
	for _, p := range []*bgProc{tail, tail3} {
		if s := p.stderr.String(); strings.Contains(s, "DATA RACE") {
			t.Errorf("a merged tail raced:\n%s", s)
		}
	}
}

// merged parses the merged tail's lines so far.
// checkMergedAgainstLogs checks a merged tail's envelopes (envs) of each
// agent (qualified ids; bare on local): each marked with its host, and its
// authoritative seqs, from the first printed, exactly those its log on its
// host holds (logOf): once each, in order, no gap.
func checkMergedAgainstLogs(t *testing.T, envs []hostEnvelope, agents []string, logOf func(host, id string) []event.Record) {
	t.Helper()
	for _, qid := range agents {
		host, id, ok := strings.Cut(qid, "/")
		if !ok {
			host, id = "local", qid
		}
		var got []uint64
		for _, e := range envs {
			if e.AgentID != qid {
				if strings.HasSuffix(e.AgentID, id) {
					t.Errorf("agent %s shown as %s (host %s)", qid, e.AgentID, e.Host)
				}
				continue
			}
			if e.Host != host {
				t.Errorf("agent %s seq %d marked host %q", qid, e.Seq, e.Host)
			}
			if event.Authoritative(e.Kind, e.Data) {
				got = append(got, e.Seq)
			}
		}
		if len(got) == 0 {
			t.Fatalf("nothing authoritative of %s", qid)
		}
		var want []uint64
		for _, r := range logOf(host, id) {
			if r.Seq >= got[0] {
				want = append(want, r.Seq)
			}
		}
		t.Logf("agent %s on %s: %d authoritative events printed, seqs %d..%d", qid, host, len(got), got[0], got[len(got)-1])
		if !slices.Equal(got, want) {
			t.Errorf("agent %s: the tail printed authoritative seqs %v,\nits log on %s holds %v (from the first printed)", qid, got, host, want)
		}
	}
}

// hasResult says whether envs hold a result of agent id's turn turn or later.
func hasResult(envs []hostEnvelope, id string, turn int) bool {
	return slices.ContainsFunc(envs, func(e hostEnvelope) bool { return e.AgentID == id && e.Kind == event.Result && e.Turn >= turn })
}

// untilTailHasAll starts a turn on every agent (start), round after
// round, until the merged tail holds a result of each agent's latest
// round, and returns the rounds it took: the tail follows each host from
// when its stream opened, which a test cannot see.
func untilTailHasAll(t *testing.T, tail *bgProc, agents []string, within time.Duration, start func(id string)) int {
	t.Helper()
	turn := 0
	waitFor(t, "every agent's turn in the merged tail", within, func() bool {
		turn++
		t.Logf("round %d of turns before the tail has every host", turn)
		for _, id := range agents {
			start(id)
		}
		deadline := time.Now().Add(10 * time.Second)
		for time.Now().Before(deadline) {
			envs := merged(t, tail)
			if !slices.ContainsFunc(agents, func(id string) bool { return !hasResult(envs, id, turn) }) {
				return true
			}
			time.Sleep(100 * time.Millisecond)
		}
		return false
	})
	return turn
}

func merged(t *testing.T, p *bgProc) []hostEnvelope {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]hostEnvelope, 0, len(p.lines))
	for _, l := range p.lines {
		var e hostEnvelope
		if err := json.Unmarshal([]byte(l), &e); err != nil {
			t.Fatalf("tail printed %q: %v", l, err)
		}
		out = append(out, e)
	}
	return out
}

// hostRow is the monitor's table line of agent id on host, "" if none.
func hostRow(screen, host, id string) string {
	for _, l := range strings.Split(screen, "\n") {
		if f := strings.Fields(l); len(f) > 2 && f[0] == host && f[1] == id {
			return l
		}
	}
	return ""
}

// `kaimon monitor --all-hosts` over this machine and two hosts: one table
// with a HOST column, a row per agent of each host; a turn on h2 shows in
// its row; x on h1's row closes that agent on h1. --once prints the same
// table, and a host that cannot be reached is named with its error, exit 1,
// the others' rows still printed.
func TestMonitorAllHosts(t *testing.T) {
	local, hosts := fleetEnvs(t)
	ids := map[string]string{} // host → bare id
	for _, h := range []string{"local", "h1", "h2"} {
		qid := strings.TrimSpace(local.ok("--host", h, "open", local.work))
		_, ids[h], _ = strings.Cut(qid, "/")
		if h == "local" {
			ids[h] = qid
		}
	}
	local.ok("run", "h1/"+ids["h1"], "stream 3 chunks")

	tm := newTmux(t, local.env, local.work, 120, 30, filepath.Join(binDir, "kaimon"), "monitor", "--all-hosts")
	s := tm.waitScreen("a row of each host", func(s string) bool {
		return strings.Contains(hostRow(s, "local", ids["local"]), "idle") && strings.Contains(hostRow(s, "h1", ids["h1"]), "idle") &&
			strings.Contains(hostRow(s, "h2", ids["h2"]), "idle")
	})
	if f := strings.Fields(s[strings.Index(s, "HOST"):]); len(f) < 2 || f[0] != "HOST" || f[1] != "ID" {
		t.Errorf("the table's header does not start HOST ID:\n%s", s)
	}
	if r := hostRow(s, "h1", ids["h1"]); !strings.Contains(r, " 1 ") {
		t.Errorf("h1's row does not show its turn 1: %q", r)
	}
	// A turn on h2, from its host's stream.
	local.ok("run", "h2/"+ids["h2"], "stream 3 chunks")
	tm.waitScreen("h2's turn in its row", func(s string) bool { return strings.Contains(hostRow(s, "h2", ids["h2"]), " 1 ") })
	// The rows are in order of creation: local's selected, h1's next.
	tm.keys("j")
	tm.waitScreen("h1's agent selected", func(s string) bool { return strings.Contains(s, "feed h1/"+ids["h1"]) })
	tm.keys("x")
	tm.waitScreen("the question to close h1's agent", func(s string) bool { return strings.Contains(s, "close agent h1/"+ids["h1"]+"?") })
	tm.keys("y")
	tm.waitScreen("h1's agent dead", func(s string) bool { return strings.Contains(hostRow(s, "h1", ids["h1"]), "dead") })
	if st := hosts["h1"].statusOf(t, ids["h1"]); st.Status != "dead" {
		t.Errorf("after x on its row, h1's agent is %s on h1", st.Status)
	}
	if st := local.statusOf(t, ids["local"]); st.Status != "idle" {
		t.Errorf("after x on h1's row, this machine's agent is %s", st.Status)
	}

	out := local.ok("monitor", "--once", "--all-hosts")
	for _, h := range []string{"local", "h1", "h2"} {
		if hostRow(out, h, ids[h]) == "" {
			t.Errorf("monitor --once --all-hosts lacks %s's agent:\n%s", h, out)
		}
	}
	local.ok("host", "add", "h3", "ssh://h3.invalid")
	r := local.kaimon("monitor", "--once", "--all-hosts")
	if r.code != 1 || !strings.Contains(r.stderr, "host h3") || hostRow(r.stdout, "h2", ids["h2"]) == "" {
		t.Errorf("monitor --once --all-hosts with h3 unreachable: %s", r)
	}
}

// A merged tail goes on through a loss of this machine's daemon: it says
// so, starts no daemon of its own, and once one is back follows it again,
// each agent resumed after the seq it was at, so that what the next
// daemon wrote in the log of the agent the lost one left (its error, the
// failed result, dead) and the turns after are printed once, in order,
// with no gap and no loss reported for the jump in seq.
func TestTailAllHostsRejoinsThisMachine(t *testing.T) {
	local := newFakeEnv(t)
	id := strings.TrimSpace(local.ok("open", local.work))
	tail := local.tail("--all-hosts")
	untilTailHasAll(t, tail, []string{id}, 60*time.Second, func(id string) { local.ok("send", id, "stream 20 chunks") })
	if err := syscall.Kill(local.daemonPID(), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the tail to say this machine's daemon went away", 30*time.Second, func() bool {
		return strings.Contains(tail.stderr.String(), "this machine's daemon went away")
	})
	time.Sleep(time.Second) // the tail's first tries to rejoin
	if _, err := local.client().Ping(context.Background()); err == nil {
		t.Fatal("a daemon is running again: the tail started one")
	}
	local.ok("daemon", "start")
	waitFor(t, "the tail to follow this machine again", 30*time.Second, func() bool {
		return strings.Contains(tail.stderr.String(), "this machine's daemon is back")
	})
	waitFor(t, "the next daemon's ending of the lost agent in the tail", 30*time.Second, func() bool {
		return slices.ContainsFunc(merged(t, tail), func(e hostEnvelope) bool {
			return e.AgentID == id && e.Kind == event.Status && strings.Contains(string(e.Data), `"dead"`)
		})
	})
	local.ok("open", "--id", id, local.work)
	local.ok("send", id, "stream 20 chunks")
	waitFor(t, "the turn after the reopen in the tail", 30*time.Second, func() bool {
		envs := merged(t, tail)
		return slices.ContainsFunc(envs, func(e hostEnvelope) bool {
			return e.AgentID == id && e.Kind == event.Result && e.Seq > 1<<16
		})
	})
	checkMergedAgainstLogs(t, merged(t, tail), []string{id}, func(_, id string) []event.Record { return local.logOf(id) })
	if s := tail.stderr.String(); strings.Contains(s, "lost") {
		t.Errorf("the tail reported a loss across the daemon's restart:\n%s", s)
	}
}
