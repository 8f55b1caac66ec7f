package e2e

// The fleet's views (list --all-hosts, kaimon mcp across hosts, tail
// --all-hosts) through the real sshd test hosts of fleet_harness_test.go,
// where fleetviews_test.go and fleettail_test.go drive the same views
// through a KAIMON_SSH_COMMAND stand-in: here the bytes cross real ssh, its
// master connection (which can be killed) and a link (which can be pulled).

import (
	"encoding/json"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kaimon/kaimon/internal/event"
	"github.com/kaimon/kaimon/internal/testutil/fakeapi"
	"github.com/kaimon/kaimon/internal/verbs"
)

// replayFast is the cheapest agent a host can run: the example recording
// replayed at once. The hosts share this machine's filesystem, and the
// recording is readable by their users.

// TestFleetListAllHostsReal: list --all-hosts over local, h1 and h2 through
// real ssh shows every host's agent with a HOST column and exits 0; with
// h2's link down (a spare link of the test's own, its ssh master warm) it
// still answers within 10 s, with local's and h1's agents, h2's error on
// stderr, and exit 1.
func TestFleetListAllHostsReal(t *testing.T) {
	var link *fleetLink
	fe := newFleetEnvVia(t, func(f *fleet) map[string]*fleetLink {
		link = f.spareLink(t, f.host("h2"))
		return map[string]*fleetLink{"h2": link}
	}, "")
	ids := map[string]string{ // host → the id list --all-hosts shows
		"local": fe.ok("open", fe.work, "--model", fe.replayModel()),
	}
	for _, h := range []string{"h1", "h2"} {
		ids[h] = h + "/" + bareID(t, h, fe.ok("--host", h, "open", fe.r.work[h], "--model", fe.replayModel()))
	}
	if strings.Contains(ids["local"], "/") {
		t.Fatalf("open here printed %q, want a bare id", ids["local"])
	}

	rows := func(out string) [][]string {
		t.Helper()
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if len(lines) == 0 || !strings.HasPrefix(lines[0], "HOST ") {
			t.Fatalf("list --all-hosts printed no HOST column:\n%s", out)
		}
		var rs [][]string
		for _, l := range lines[1:] {
			rs = append(rs, strings.Fields(l))
		}
		return rs
	}
	want := func(hosts ...string) [][]string {
		var rs [][]string
		for _, h := range hosts {
			rs = append(rs, []string{h, ids[h]})
		}
		return rs
	}
	hostAndID := func(rs [][]string) [][]string {
		var out [][]string
		for _, r := range rs {
			if len(r) < 2 {
				t.Fatalf("list --all-hosts row %q has no host and id", r)
			}
			out = append(out, r[:2])
		}
		return out
	}

	r := fe.kaimonWithin(time.Minute, "list", "--all-hosts")
	if r.code != 0 {
		t.Fatalf("list --all-hosts with every host up: %s", r)
	}
	t.Logf("kaimon list --all-hosts:\n%s", r.stdout)
	if got := hostAndID(rows(r.stdout)); !slices.EqualFunc(got, want("local", "h1", "h2"), slices.Equal) {
		t.Errorf("list --all-hosts rows %q, want %q", got, want("local", "h1", "h2"))
	}

	up := linkDown(t, fe.f.host("h2"), link)
	r = fe.kaimonWithin(10*time.Second, "list", "--all-hosts")
	t.Logf("kaimon list --all-hosts with h2's link down:\n%s%s", r.stdout, r.stderr)
	if r.code != 1 || !strings.Contains(r.stderr, "h2") {
		t.Errorf("list --all-hosts with h2's link down: want exit 1 and h2's error; got %s", r)
	}
	if got := hostAndID(rows(r.stdout)); !slices.EqualFunc(got, want("local", "h1"), slices.Equal) {
		t.Errorf("list --all-hosts rows with h2 down %q, want %q", got, want("local", "h1"))
	}
	var all verbs.ListResult
	r = fe.kaimonWithin(10*time.Second, "list", "--all-hosts", "--json")
	if err := json.Unmarshal([]byte(r.stdout), &all); r.code != 1 || err != nil {
		t.Fatalf("list --all-hosts --json with h2's link down: %v\n%s", err, r)
	}
	if len(all.Hosts) != 3 || all.Hosts[2].Host != "h2" || all.Hosts[2].Error == "" || all.Hosts[1].Error != "" || all.Hosts[0].Error != "" {
		t.Errorf("list --all-hosts --json hosts with h2's link down: %+v", all.Hosts)
	}
	up()

	// With the link back, h2's agent, which lived on meanwhile, is listed
	// again.
	r = fe.kaimonWithin(time.Minute, "list", "--all-hosts")
	if got := hostAndID(rows(r.stdout)); r.code != 0 || !slices.EqualFunc(got, want("local", "h1", "h2"), slices.Equal) {
		t.Errorf("list --all-hosts after h2's link came back: rows %q, want %q; %s", got, want("local", "h1", "h2"), r)
	}
}

// TestFleetMCPReal: a real MCP client drives kaimon mcp, whose hosts are
// the real sshd hosts: agent_open with host h1 opens there and returns a
// qualified id, agent_run runs a turn on it, and agent_list lists h1's and
// this machine's agents with their hosts.
func TestFleetMCPReal(t *testing.T) {
	fe := newFleetEnv(t)
	call, _ := startMCP(t, fe.env)
	onH1, _, l := mcpOpenRunList(t, call, fe.replayModel(), fe.r.work["h1"], fe.work)
	// The agent is h1's daemon's: h1's own list, read over ssh, has it.
	var rl verbs.ListResult
	fe.okJSON(&rl, "--host", "h1", "list")
	if len(rl.Agents) != 1 || rl.Agents[0].AgentID != onH1 || rl.Agents[0].Turn != 1 {
		t.Errorf("h1's list after agent_open and agent_run: %+v, want %s after one turn", rl.Agents, onH1)
	}
	if want := []verbs.HostAnswer{{Host: "local", Agents: 1}, {Host: "h1", Agents: 1}, {Host: "h2"}}; !slices.Equal(l.Hosts, want) {
		t.Errorf("agent_list hosts: %+v, want %+v", l.Hosts, want)
	}
	mcpClose(t, call, onH1)
}

// masterOf is the pid of the ssh master connection kaimon keeps for host
// (ControlPersist), 0 if none runs. The masters are found by their title
// ("ssh: CONTROL_PATH [mux]", as endMasters finds them); which one is the
// host's, ssh itself says: `ssh -G` expands the control path's %C (a hash
// of the destination) for the host's destination as kaimon gives it.
func (fe *fleetEnv) masterOf(host string) int {
	fe.t.Helper()
	masters := map[string]int{} // control path → pid
	for pid, path := range fe.masters() {
		masters[path] = pid
	}
	for path := range masters {
		out, err := exec.Command("ssh", "-G", "-F", fe.r.sshConfig, "-o", "ControlPath="+filepath.Join(filepath.Dir(path), "ssh-%C"),
			fe.f.host(host).user+"@"+fe.r.addr(host)).Output()
		if err != nil {
			fe.t.Fatalf("ssh -G for %s: %v", host, err)
		}
		for _, l := range strings.Split(string(out), "\n") {
			if p, ok := strings.CutPrefix(l, "controlpath "); ok && masters[p] != 0 {
				return masters[p]
			}
		}
	}
	return 0
}

// remoteLog reads agent id's event log on host, from the remote home on
// disk (the hosts share this machine's filesystem), laid out as a local
// installation's.
func (fe *fleetEnv) remoteLog(host, id string) []event.Record {
	fe.t.Helper()
	return (&kenv{t: fe.t, home: fe.r.home[host]}).logOf(id)
}

// TestFleetTailAllHostsReal: a merged tail --all-hosts of this machine, h1
// and h2 over real ssh while turns run on all three: every authoritative
// event of every agent arrives once, in seq order, marked with its host;
// then h1's real ssh master is killed (SIGKILL) while a turn streams there,
// and the tail reconnects and goes on with no gap: what it printed of each
// agent is what the agent's log on its host holds, from the first printed.
func TestFleetTailAllHostsReal(t *testing.T) {
	fe := newFleetEnv(t)
	h1 := fe.f.host("h1")
	agents := []string{fe.ok("open", fe.work)} // qualified, as the merged stream shows them
	for _, h := range []string{"h1", "h2"} {
		agents = append(agents, h+"/"+bareID(t, h, fe.ok("--host", h, "open", fe.r.work[h])))
	}
	h1agent := agents[1]
	// A command to h1 first, so that its master runs before the tail does.
	fe.ok("status", h1agent)
	tail := fe.tail("--all-hosts")
	turn := untilTailHasAll(t, tail, agents, 3*time.Minute, func(id string) { fe.ok("run", id, "stream 20 chunks") })

	// A slow turn on h1 (the model streams for seconds), a streamed one on
	// the others; h1's master killed once h1's turn streams in the tail.
	turn++
	slow := "please be slow (tail over ssh)"
	fe.ok("send", h1agent, slow)
	for _, id := range []string{agents[0], agents[2]} {
		fe.ok("send", id, "stream 300 chunks")
	}
	waitFor(t, "h1's slow turn streaming in the tail", time.Minute, func() bool {
		return asked(h1.api, slow) && slices.ContainsFunc(merged(t, tail), func(e hostEnvelope) bool {
			return e.AgentID == h1agent && e.Turn == turn && !event.Authoritative(e.Kind, e.Data)
		})
	})
	master := fe.masterOf("h1")
	if master == 0 {
		t.Fatal("no ssh master of h1 runs for this installation")
	}
	if err := syscall.Kill(master, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	for _, id := range agents {
		tail.waitEnvelopes("the result of turn "+strconv.Itoa(turn)+" of "+id, func([]event.Envelope) bool { return hasResult(merged(t, tail), id, turn) })
	}
	// One more turn after the break: the tail still follows h1.
	turn++
	for _, id := range agents {
		fe.ok("send", id, "stream 20 chunks")
	}
	for _, id := range agents {
		tail.waitEnvelopes("the result of turn "+strconv.Itoa(turn)+" of "+id, func([]event.Envelope) bool { return hasResult(merged(t, tail), id, turn) })
	}
	t.Logf("the merged tail's stderr after h1's master %d was killed:\n%s", master, tail.stderr.String())
	if s := tail.stderr.String(); !strings.Contains(s, "host h1: the stream broke") {
		t.Errorf("the tail did not say h1's stream broke; stderr: %s", s)
	}
	if m := fe.masterOf("h1"); m == 0 || m == master {
		t.Errorf("h1's master after the kill: %d (the killed one was %d)", m, master)
	}

	checkMergedAgainstLogs(t, merged(t, tail), agents, func(host, id string) []event.Record {
		if host == "local" {
			return fe.logOf(id)
		}
		return fe.remoteLog(host, id)
	})
	if s := tail.stderr.String(); strings.Contains(s, "DATA RACE") {
		t.Errorf("the merged tail raced:\n%s", s)
	}
}

// TestFleetInbox: list --waiting --all-hosts is an inbox across hosts: a
// row per permission request the agents of this machine and of h1 wait
// on (the real claude CLI asking to touch a file outside its directory),
// each with the permit line that answers it; a unique prefix of an id
// names the agent on its host; permit without a request id answers an
// agent's one request, after which the inbox lists the other alone.
func TestFleetInbox(t *testing.T) {
	fe := newFleetEnv(t)
	local := fe.ok("open", fe.work)
	h1 := "h1/" + bareID(t, "h1", fe.ok("--host", "h1", "open", fe.r.work["h1"]))
	idle := fe.ok("open", fe.work) // waits on no one: not in the inbox
	fe.ok("send", local, fakeapi.TriggerRunCommand+" touch "+filepath.Join(fe.home, "outside-local"))
	fe.ok("send", h1, fakeapi.TriggerRunCommand+" touch "+filepath.Join(fe.r.home["h1"], "outside-h1"))
	var res verbs.ListResult
	waitFor(t, "both agents waiting on a person", 2*time.Minute, func() bool {
		fe.okJSON(&res, "list", "--waiting", "--all-hosts")
		return len(res.Agents) == 2
	})
	r := fe.kaimonWithin(time.Minute, "list", "--waiting", "--all-hosts")
	t.Logf("kaimon list --waiting --all-hosts:\n%s", r.stdout)
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if r.code != 0 || len(lines) != 3 || !strings.HasPrefix(lines[0], "AGENT ") {
		t.Fatalf("inbox: %s", r)
	}
	for _, id := range []string{local, h1} {
		if !slices.ContainsFunc(lines[1:], func(l string) bool {
			return strings.HasPrefix(l, id+" ") && strings.Contains(l, "touch") && strings.Contains(l, "kaimon permit "+id+" p")
		}) {
			t.Errorf("no inbox row for %s with its permit line:\n%s", id, r.stdout)
		}
	}
	if strings.Contains(r.stdout, idle) {
		t.Errorf("the idle agent is in the inbox:\n%s", r.stdout)
	}
	// h1's agent by a prefix of its id, answered without its request id.
	prefix := h1[:len("h1/")+5]
	var st verbs.AgentStatus
	fe.okJSON(&st, "status", prefix)
	if len(st.PendingPermissions) != 1 {
		t.Fatalf("status %s: %+v", prefix, st)
	}
	if out := fe.ok("permit", prefix, "allow"); out != "allowed" {
		t.Fatalf("permit %s allow: %q", prefix, out)
	}
	waitFor(t, "h1's agent out of the inbox", time.Minute, func() bool {
		fe.okJSON(&res, "list", "--waiting", "--all-hosts")
		return len(res.Agents) == 1 && res.Agents[0].AgentID == local
	})
	fe.ok("permit", local, "deny")
	waitFor(t, "an empty inbox", time.Minute, func() bool {
		fe.okJSON(&res, "list", "--waiting", "--all-hosts")
		return len(res.Agents) == 0
	})
	if r := fe.kaimonWithin(time.Minute, "list", "--waiting"); r.code != 0 || r.stdout != "" || !strings.Contains(r.stderr, "no agent waits on a person") {
		t.Fatalf("an empty inbox: %s", r)
	}
}
