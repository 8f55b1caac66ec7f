package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kaimon/kaimon/internal/testutil/fakeapi"
	"github.com/kaimon/kaimon/internal/verbs"
)

// fleetEnv is a local installation that knows the run's hosts as h1 and
// h2 (kaimon host add ssh://USER@ADDR) and reaches them through an ssh
// config of its own (KAIMON_SSH_COMMAND), which gives it remote daemons of
// its own on both.
type fleetEnv struct {
	*kenv
	f *fleet
	r *remote
}

func newFleetEnv(t testing.TB) *fleetEnv {
	t.Helper()
	return newFleetEnvVia(t, nil, "")
}

// newFleetEnvVia is newFleetEnv with some hosts reached by links other
// than their main ones (a spareLink of the test's own; via is called once
// the hosts are there, and may be nil), and whose remote daemons run
// claude as their claude CLI ("" is the real one).
func newFleetEnvVia(t testing.TB, via func(*fleet) map[string]*fleetLink, claude string) *fleetEnv {
	t.Helper()
	f := needFleet(t)
	e := newEnv(t)
	var links map[string]*fleetLink
	if via != nil {
		links = via(f)
	}
	r := f.newRemoteVia(t, e.home, links, claude)
	e.env = append(e.env, "KAIMON_SSH_COMMAND=ssh -F "+r.sshConfig)
	fe := &fleetEnv{kenv: e, f: f, r: r}
	for _, h := range f.hosts {
		e.ok("host", "add", h.name, fe.url(h.name))
	}
	// Before the remote daemons stop (newRemote's cleanup) and the local
	// leak check (newEnv's): the ssh masters kaimon left to persist.
	t.Cleanup(fe.endMasters)
	return fe
}

// replayModel is a replay agent of the example recording at full speed,
// from the copy the hosts' users can read (the checkout may be closed to
// them).
func (fe *fleetEnv) replayModel() string { return "replay:" + fe.f.example + "?speed=0" }

// url is the host's URL for kaimon host add, by the link this test
// reaches it by.
func (fe *fleetEnv) url(host string) string {
	return "ssh://" + fe.f.host(host).user + "@" + fe.r.addr(host)
}

// with runs kaimon with extra environment (NAME=value).
func (fe *fleetEnv) with(extra []string, args ...string) result {
	fe.t.Helper()
	return runKaimon(fe.t, filepath.Join(binDir, "kaimon"), fe.work, slices.Concat(fe.env, extra), nil, 3*time.Minute, args...)
}

// okWith is ok with extra environment.
func (fe *fleetEnv) okWith(extra []string, args ...string) string {
	fe.t.Helper()
	r := fe.with(extra, args...)
	if r.code != 0 {
		fe.t.Fatalf("%s kaimon %s: %s", strings.Join(extra, " "), strings.Join(args, " "), r)
	}
	return strings.TrimRight(r.stdout, "\n")
}

// endMasters asks each ssh master connection kaimon left running for this
// installation (ControlPersist) to exit, as `ssh -O exit` does, and fails
// the test if one outlives that. A master is found by its title ("ssh:
// CONTROL_PATH [mux]"), which ssh writes over its environment, so the
// leak checks that read environments cannot see it.
func (fe *fleetEnv) endMasters() {
	for _, path := range fe.masters() {
		_ = runCmd("ssh", "-F", fe.r.sshConfig, "-o", "ControlPath="+path, "-O", "exit", "h1")
	}
	waitGone(func() bool { return len(fe.masters()) == 0 }, 10*time.Second)
	for pid, path := range fe.masters() {
		fe.t.Errorf("the ssh master %d (%s) outlived ssh -O exit", pid, path)
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}

// masters are the ssh master connections (ControlPersist) this
// installation's kaimon runs, pid → control path, found by their title
// ("ssh: CONTROL_PATH [mux]"), which ssh writes over its environment, so
// the leak checks that read environments cannot see them.
func (fe *fleetEnv) masters() map[int]string {
	prefix := "ssh: " + fe.home + "/"
	out := map[int]string{}
	ents, _ := os.ReadDir("/proc")
	for _, ent := range ents {
		pid, err := strconv.Atoi(ent.Name())
		if err != nil {
			continue
		}
		b, _ := os.ReadFile("/proc/" + ent.Name() + "/cmdline")
		title := strings.TrimRight(string(b), "\x00 ")
		if path, ok := strings.CutPrefix(title, "ssh: "); ok && strings.HasPrefix(title, prefix) && strings.HasSuffix(path, "[mux]") {
			out[pid] = strings.TrimSpace(strings.TrimSuffix(path, "[mux]"))
		}
	}
	return out
}

// bareID reads what open printed for an agent on host: the id, qualified
// NAME/ID or not; it returns the bare id.
func bareID(t testing.TB, host, out string) string {
	t.Helper()
	h, id, ok := strings.Cut(out, "/")
	if !ok {
		return out
	}
	if h != host || id == "" || strings.ContainsAny(id, "/ \n") {
		t.Fatalf("open on host %s printed %q", host, out)
	}
	return id
}

// jsonOf decodes a command's JSON output into v.
func jsonOf(s string, v any) error { return json.Unmarshal([]byte(s), v) }

// asked says whether api received a turn whose user text is text.
func asked(api *fakeapi.Server, text string) bool {
	return slices.ContainsFunc(api.Requests(), func(r fakeapi.Request) bool { return r.LastUserText == text })
}

// TestFleetRemoteAgent: an agent's whole life on a remote host, through
// each way of naming the host: --host, KAIMON_HOST and a qualified id. Its
// turns reach that host's model API and no other, its program runs there as
// the host's user, and the local daemon knows nothing of it.
func TestFleetRemoteAgent(t *testing.T) {
	fe := newFleetEnv(t)
	h1, h2 := fe.f.host("h1"), fe.f.host("h2")

	// h1 through --host.
	id1 := bareID(t, "h1", fe.ok("--host", "h1", "open", fe.r.work["h1"]))
	if got := fe.ok("--host", "h1", "run", id1, "say exactly: one on h1"); got != "one on h1" {
		t.Fatalf("run on h1 printed %q", got)
	}
	if !asked(h1.api, "say exactly: one on h1") || asked(h2.api, "say exactly: one on h1") || asked(fe.api, "say exactly: one on h1") {
		t.Fatal("the turn on h1 did not reach h1's model API, or reached another")
	}
	// Its program runs on h1, as h1's user, under this test's remote home.
	var onH1 []int
	for _, pid := range processesWithEnv("KAIMON_HOME=" + fe.r.home["h1"]) {
		if fi, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); err == nil && fi.Sys().(*syscall.Stat_t).Uid == uint32(h1.uid) {
			onH1 = append(onH1, pid)
		}
	}
	if !strings.Contains(describe(onH1), "kaimon-agentd") || !strings.Contains(describe(onH1), "claude") {
		t.Errorf("no kaimon-agentd and claude of h1's user on h1: %s", describe(onH1))
	}

	// The same agent through its qualified id, and through KAIMON_HOST.
	if got := fe.ok("output", "h1/"+id1); got != "one on h1" {
		t.Errorf("output h1/%s = %q", id1, got)
	}
	var st verbs.AgentStatus
	fe.okJSON(&st, "status", "h1/"+id1)
	if st.Status != "idle" || st.Turn != 1 || st.Cwd != fe.r.work["h1"] {
		t.Errorf("status h1/%s: %+v", id1, st)
	}
	st = verbs.AgentStatus{}
	if err := jsonOf(fe.okWith([]string{"KAIMON_HOST=h1"}, "status", id1, "--json"), &st); err != nil || st.Status != "idle" {
		t.Errorf("KAIMON_HOST=h1 status %s: %+v %v", id1, st, err)
	}
	// This machine's daemon has no agent.
	var l verbs.ListResult
	fe.okJSON(&l, "list")
	if len(l.Agents) != 0 {
		t.Errorf("the local list shows %+v", l.Agents)
	}

	// h2 through KAIMON_HOST; closed through its qualified id.
	id2 := bareID(t, "h2", fe.okWith([]string{"KAIMON_HOST=h2"}, "open", fe.r.work["h2"]))
	if got := fe.okWith([]string{"KAIMON_HOST=h2"}, "run", id2, "say exactly: two on h2"); got != "two on h2" {
		t.Fatalf("run on h2 printed %q", got)
	}
	if !asked(h2.api, "say exactly: two on h2") || asked(h1.api, "say exactly: two on h2") {
		t.Fatal("the turn on h2 did not reach h2's model API, or reached h1's")
	}
	l = verbs.ListResult{}
	fe.okJSON(&l, "--host", "h2", "list")
	if len(l.Agents) != 1 || l.Agents[0].AgentID != "h2/"+id2 {
		t.Errorf("h2's list: %+v", l.Agents)
	}
	if got := fe.ok("close", "h2/"+id2); got != "closed" {
		t.Errorf("close h2/%s = %q", id2, got)
	}
	if got := fe.ok("--host", "h1", "close", id1); got != "closed" {
		t.Errorf("--host h1 close %s = %q", id1, got)
	}
	st = verbs.AgentStatus{}
	fe.okJSON(&st, "status", "h1/"+id1)
	if st.Status != "dead" || st.Reason != "closed" {
		t.Errorf("h1/%s after close: %+v", id1, st)
	}
}

// TestFleetHostCheck: host ls --check reaches both hosts and reports their
// kaimon's version; a host whose ssh fails is reported with ssh's error
// beside them, and the check exits 1.
func TestFleetHostCheck(t *testing.T) {
	fe := newFleetEnv(t)
	version := strings.Fields(fe.ok("version"))[1] // "kaimon VERSION"
	// A port nothing listens on: ssh is refused at once.
	fe.ok("host", "add", "h4", "ssh://"+fe.f.host("h1").user+"@"+fe.r.addr("h1")+":2222")
	r := fe.kaimonWithin(30*time.Second, "host", "ls", "--check")
	if r.code != 1 || !strings.Contains(r.stderr, "1 of 4 hosts failed the check") {
		t.Errorf("host ls --check with h4 refused: %s", r)
	}
	lines := strings.Split(r.stdout, "\n")
	line := func(name string) string {
		i := slices.IndexFunc(lines, func(l string) bool { return strings.HasPrefix(l, name+" ") })
		if i < 0 {
			t.Fatalf("host ls --check has no line for %s:\n%s", name, r.stdout)
		}
		return lines[i]
	}
	for _, h := range fe.f.hosts {
		if l := line(h.name); !strings.Contains(l, fe.r.addr(h.name)) || !strings.Contains(l, "ok, kaimon-agentd "+version) {
			t.Errorf("host ls --check: %s's line does not name its URL and version %s: %q", h.name, version, l)
		}
	}
	if l := line("h4"); !strings.Contains(l, "FAIL") || !strings.Contains(l, "Connection refused") {
		t.Errorf("host ls --check: h4's line does not say ssh's error: %q", l)
	}
}

// TestFleetBadHosts: each mistake about a real host gets a clear error,
// with the code the issue gives it, and changes nothing.
func TestFleetBadHosts(t *testing.T) {
	fe := newFleetEnv(t)
	hostsBefore := fe.ok("host", "ls")

	// A host name not configured: exit 2, with the accepted forms.
	fe.fails(2, `"nope"`, "--host", "nope", "list")
	if r := fe.with([]string{"KAIMON_HOST=nope"}, "list"); r.code != 2 || !strings.Contains(r.stderr, `"nope"`) || !strings.Contains(r.stderr, "ssh://") {
		t.Errorf("KAIMON_HOST=nope list: %s", r)
	}
	if r := fe.kaimon("--host", "nope", "list"); !strings.Contains(r.stderr, "ssh://") || !strings.Contains(r.stderr, "h1") {
		t.Errorf("--host nope does not name the accepted forms and the configured hosts: %s", r)
	}
	// An id qualified with a host not configured.
	fe.fails(2, `"nope"`, "status", "nope/someid")
	fe.fails(2, `"nope"`, "run", "nope/someid", "hello")

	// kaimon missing there: a remote_bin that does not exist. Exit 1,
	// naming the host and remote_bin.
	fe.ok("host", "add", "h3", fe.url("h1"), "--remote-bin", "/nonexistent/kaimon")
	r := fe.kaimonWithin(30*time.Second, "--host", "h3", "list")
	if r.code != 1 || !strings.Contains(r.stderr, "h3") || !strings.Contains(r.stderr, "/nonexistent/kaimon") ||
		!strings.Contains(r.stderr, "remote-bin") && !strings.Contains(r.stderr, "remote_bin") {
		t.Errorf("--host h3 list with kaimon missing there: %s", r)
	}
	fe.ok("host", "rm", "h3")

	// A host whose ssh fails (refused: nothing listens on the port): exit
	// 1, naming the host and ssh's error.
	fe.ok("host", "add", "h4", "ssh://"+fe.f.host("h1").user+"@"+fe.r.addr("h1")+":2222")
	r = fe.kaimonWithin(30*time.Second, "run", "h4/someid", "hello")
	if r.code != 1 || !strings.Contains(r.stderr, "h4") || !strings.Contains(r.stderr, "Connection refused") {
		t.Errorf("run on a host whose ssh is refused: %s", r)
	}
	fe.ok("host", "rm", "h4")

	// Nothing changed: the same hosts, no agent here or there.
	if got := fe.ok("host", "ls"); got != hostsBefore {
		t.Errorf("host ls was\n%s\nand is now\n%s", hostsBefore, got)
	}
	for _, host := range []string{"local", "h1"} {
		var l verbs.ListResult
		fe.okJSON(&l, "--host", host, "list")
		if len(l.Agents) != 0 {
			t.Errorf("%s lists %+v after bad input", host, l.Agents)
		}
	}
}

// TestFleetLinkDownRun: a run on a host whose link is down (with its ssh
// master warm from an earlier call) fails within 10 s, exit 1, naming the
// host, and h2 still answers; with the link back, the agent, which lived on
// meanwhile, runs again. The link is a spare of h1's, this test's own.
func TestFleetLinkDownRun(t *testing.T) {
	var link *fleetLink
	fe := newFleetEnvVia(t, func(f *fleet) map[string]*fleetLink {
		link = f.spareLink(t, f.host("h1"))
		return map[string]*fleetLink{"h1": link}
	}, "")
	id := bareID(t, "h1", fe.ok("--host", "h1", "open", fe.r.work["h1"]))
	fe.ok("run", "h1/"+id, "say exactly: before")

	up := linkDown(t, fe.f.host("h1"), link)
	r := fe.kaimonWithin(10*time.Second, "run", "h1/"+id, "say exactly: unheard")
	if r.code != 1 || !strings.Contains(r.stderr, "h1") {
		t.Errorf("run on h1 with its link down: want exit 1 naming h1; got %s", r)
	}
	var l verbs.ListResult
	fe.okJSON(&l, "--host", "h2", "list")
	up()

	if got := fe.ok("run", "h1/"+id, "say exactly: after"); got != "after" {
		t.Errorf("run on h1 after its link came back printed %q", got)
	}
	fe.ok("close", "h1/"+id)
}

// TestFleetRemoteCrash: the remote daemon killed with SIGKILL mid-turn. The
// agent is listed dead (daemon crashed) on its host, and resumes there, on
// that host, with its conversation.
func TestFleetRemoteCrash(t *testing.T) {
	fe := newFleetEnv(t)
	h1 := fe.f.host("h1")
	id := bareID(t, "h1", fe.ok("--host", "h1", "open", fe.r.work["h1"]))
	fe.ok("run", "h1/"+id, "say exactly: before the crash")
	slow := "please be slow (crash on h1)"
	fe.ok("send", "h1/"+id, slow)
	waitFor(t, "the slow turn to reach h1's model", 60*time.Second, func() bool { return asked(h1.api, slow) })

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
	// Its agents go with it, and the bridges to it.
	waitFor(t, "everything of the killed daemon on h1 to exit", 30*time.Second, func() bool {
		return len(processesWithEnv("KAIMON_HOME="+rh)) == 0
	})

	var l verbs.ListResult
	fe.okJSON(&l, "--host", "h1", "list")
	if len(l.Agents) != 1 || l.Agents[0].AgentID != "h1/"+id || l.Agents[0].Status != "dead" || l.Agents[0].Reason != "daemon crashed" {
		t.Fatalf("h1's list after its daemon was killed: %+v", l.Agents)
	}
	if got := bareID(t, "h1", fe.ok("open", "--host", "h1", "--id", id, "--resume")); got != id {
		t.Fatalf("open --host h1 --id %s --resume printed %q", id, got)
	}
	if got := fe.ok("run", "h1/"+id, "say exactly: after the resume"); got != "after the resume" {
		t.Fatalf("run after the resume printed %q", got)
	}
	req := requestFor(t, h1.api, "say exactly: after the resume")
	if !hasLine(req.History, "user: say exactly: before the crash") || !hasLine(req.History, "assistant: before the crash") {
		t.Errorf("the resumed agent's conversation on h1: %q", req.History)
	}
	fe.ok("close", "h1/"+id)
}
