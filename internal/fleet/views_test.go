package fleet

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/kaimon/kaimon/internal/apitype"
	"github.com/kaimon/kaimon/internal/client"
	"github.com/kaimon/kaimon/internal/server/servertest"
	"github.com/kaimon/kaimon/internal/verbs"
)

// Placement's order: fewest working, then fewest live, ties to the first
// (local, then the names in order, as All gives them).
func TestChoose(t *testing.T) {
	cases := []struct {
		name  string
		loads []Load
		want  string
	}{
		{"none", nil, ""},
		{"all equal: local first", []Load{{"local", 0, 0}, {"h1", 0, 0}, {"h2", 0, 0}}, "local"},
		{"equal but local: the first name", []Load{{"local", 0, 1}, {"h1", 0, 0}, {"h2", 0, 0}}, "h1"},
		{"fewest working beats fewest live", []Load{{"local", 1, 1}, {"h1", 0, 5}, {"h2", 2, 2}}, "h1"},
		{"working equal: fewest live", []Load{{"local", 1, 3}, {"h1", 1, 2}, {"h2", 1, 4}}, "h1"},
		{"a later host with less work", []Load{{"local", 1, 1}, {"h1", 1, 1}, {"h2", 0, 9}}, "h2"},
		{"one host", []Load{{"h2", 3, 3}}, "h2"},
	}
	for _, c := range cases {
		if got := Choose(c.loads); got != c.want {
			t.Errorf("%s: Choose(%v) = %q, want %q", c.name, c.loads, got, c.want)
		}
	}
}

// LoadOf counts working agents, and live ones (every state but dead).
func TestLoadOf(t *testing.T) {
	agents := []verbs.ListEntry{
		{AgentStatus: verbs.AgentStatus{Status: apitype.Working}},
		{AgentStatus: verbs.AgentStatus{Status: apitype.Idle}},
		{AgentStatus: verbs.AgentStatus{Status: apitype.Starting}},
		{AgentStatus: verbs.AgentStatus{Status: apitype.Dead}},
	}
	if got, want := LoadOf("h1", agents), (Load{"h1", 1, 3}); got != want {
		t.Errorf("LoadOf = %+v, want %+v", got, want)
	}
}

func entries(statuses ...apitype.AgentState) *verbs.ListResult {
	r := &verbs.ListResult{}
	for i, s := range statuses {
		r.Agents = append(r.Agents, verbs.ListEntry{AgentID: "a" + string(rune('0'+i)), AgentStatus: verbs.AgentStatus{Status: s}})
	}
	return r
}

// testFleet is local and h1 served by fakes over real sockets, and h2, a
// host whose ssh fails.
func testFleet(t *testing.T, local, h1 *servertest.Fake) *Fleet {
	h1cl := servertest.New(t, h1)
	return &Fleet{
		Hosts: map[string]Host{"h1": {URL: "ssh://h1"}, "h2": {URL: "ssh://h2"}},
		Local: servertest.New(t, local),
		dialRemote: func(host string) (*client.Client, error) {
			if host == "h1" {
				return h1cl, nil
			}
			return nil, &Error{Host: host, Exit: 255, Stderr: "ssh: connect to host h2 port 22: Connection refused"}
		},
	}
}

// ListAll lists every host that answers, ids qualified and each agent
// with its host, and says per host what it answered; a failed host does
// not fail the list. With AllHosts, List is ListAll, failing only when
// every host failed.
func TestListAll(t *testing.T) {
	local := (&servertest.Fake{}).Returns("list", entries(apitype.Idle), nil)
	h1 := (&servertest.Fake{}).Returns("list", entries(apitype.Working, apitype.Dead), nil)
	f := testFleet(t, local, h1)
	res, err := f.ListAll(context.Background(), &verbs.ListArgs{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, a := range res.Agents {
		got = append(got, a.Host+" "+a.AgentID)
	}
	if want := []string{"local a0", "h1 h1/a0", "h1 h1/a1"}; strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("agents %q, want %q", got, want)
	}
	if len(res.Hosts) != 3 || res.Hosts[0] != (verbs.HostAnswer{Host: "local", Agents: 1}) || res.Hosts[1] != (verbs.HostAnswer{Host: "h1", Agents: 2}) ||
		res.Hosts[2].Host != "h2" || !strings.Contains(res.Hosts[2].Error, "host h2: ssh failed: ssh: connect to host h2") {
		t.Errorf("hosts %+v", res.Hosts)
	}
	if err := Failed(res); err == nil || !strings.Contains(err.Error(), "host h2") {
		t.Errorf("Failed = %v", err)
	}

	// Without a configured host, this machine alone, and no error.
	alone := &Fleet{Hosts: map[string]Host{}, Local: f.Local}
	if l, err := alone.ListAll(context.Background(), &verbs.ListArgs{}); err != nil || len(l.Agents) != 1 || l.Agents[0].AgentID != "a0" ||
		len(l.Hosts) != 1 || l.Hosts[0] != (verbs.HostAnswer{Host: "local", Agents: 1}) || Failed(l) != nil {
		t.Errorf("ListAll with no host configured: %+v %v", l, err)
	}

	f.AllHosts = true
	if l, err := f.List(context.Background(), &verbs.ListArgs{}); err != nil || len(l.Agents) != 3 {
		t.Errorf("List with AllHosts: %+v %v", l, err)
	}
	down := &Fleet{Hosts: map[string]Host{"h2": {URL: "ssh://h2"}}, AllHosts: true, Local: f.Local,
		dialRemote: f.dialRemote}
	local.Returns("list", nil, verbs.Errorf(verbs.CodeUnavailable, "the daemon is down"))
	if _, err := down.List(context.Background(), &verbs.ListArgs{}); err == nil ||
		!strings.Contains(err.Error(), "host local: the daemon is down") || !strings.Contains(err.Error(), "host h2: ssh failed") {
		t.Errorf("List with every host failed: %v", err)
	}
}

// open with host any goes where Choose says, the unreachable host passed
// over with a warning; the id comes back qualified and the host's daemon
// gets no host argument. A host argument contradicting a qualified id, any
// with resume, and a host not configured are usage errors that open
// nothing.
func TestOpenPlaces(t *testing.T) {
	local := (&servertest.Fake{}).Returns("list", entries(apitype.Working), nil).Returns("open", &verbs.OpenResult{AgentID: "n1"}, nil)
	h1 := (&servertest.Fake{}).Returns("list", entries(apitype.Idle, apitype.Idle), nil).Returns("open", &verbs.OpenResult{AgentID: "n2"}, nil)
	f := testFleet(t, local, h1)
	var warn strings.Builder
	f.Warn = &warn
	r, err := f.Open(context.Background(), &verbs.OpenArgs{Cwd: "/w", Host: Any})
	if err != nil || r.AgentID != "h1/n2" {
		t.Fatalf("open host any: %+v %v", r, err)
	}
	if !strings.Contains(warn.String(), "--host any left out host h2: ssh failed") {
		t.Errorf("no warning of h2: %q", warn.String())
	}
	calls := h1.Calls()
	if last := calls[len(calls)-1]; last.Verb != "agent_open" || last.Args.(*verbs.OpenArgs).Host != "" || last.Args.(*verbs.OpenArgs).Cwd != "/w" {
		t.Errorf("h1's daemon got %+v", last)
	}
	// Default any (--host any) places too; a qualified id under host h1
	// opens on h1.
	f.Default, f.Pinned = Any, true
	if r, err := f.Open(context.Background(), &verbs.OpenArgs{Cwd: "/w"}); err != nil || r.AgentID != "h1/n2" {
		t.Errorf("open with Default any: %+v %v", r, err)
	}
	// Under --host any an id that names its host goes there (run -C's
	// turn after its open); a bare one is refused, as any names no
	// agent's host.
	if h, id, err := f.Route("h1/n2"); err != nil || h != "h1" || id != "n2" {
		t.Errorf("Route(h1/n2) under --host any: %s %s %v", h, id, err)
	}
	var ue *UsageError
	if _, err := f.Status(context.Background(), &verbs.StatusArgs{AgentID: "n2"}); !errors.As(err, &ue) || !strings.Contains(err.Error(), `host "any" places a new agent`) {
		t.Errorf("status of a bare id under --host any: %v", err)
	}
	// Under --host any a fork needs its parent's host named, and one
	// opened here comes back as local/ID.
	if _, err := f.Open(context.Background(), &verbs.OpenArgs{Fork: "p1"}); !errors.As(err, &ue) || !strings.Contains(err.Error(), "qualify p1 as HOST/ID") {
		t.Errorf("fork of a bare id under --host any: %v", err)
	}
	if r, err := f.Open(context.Background(), &verbs.OpenArgs{Fork: "local/p1"}); err != nil || r.AgentID != "local/n1" {
		t.Errorf("fork of local/p1 under --host any: %+v %v", r, err)
	}
	f.Default, f.Pinned = "", false
	if r, err := f.Open(context.Background(), &verbs.OpenArgs{Cwd: "/w", ID: "h1/x1", Host: "h1"}); err != nil || r.AgentID != "h1/n2" {
		t.Errorf("open --id h1/x1 on h1: %+v %v", r, err)
	}
	// A fork opens on its parent's host, with the parent's bare id.
	for _, host := range []string{"", Any, "h1"} {
		r, err := f.Open(context.Background(), &verbs.OpenArgs{Fork: "h1/p1", Host: host})
		calls := h1.Calls()
		last := calls[len(calls)-1].Args.(*verbs.OpenArgs)
		if err != nil || r.AgentID != "h1/n2" || last.Fork != "p1" || last.Host != "" {
			t.Errorf("fork h1/p1 with host %q: %+v %v; h1's daemon got %+v", host, r, err, last)
		}
	}
	opens := func() int {
		n := 0
		for _, c := range append(local.Calls(), h1.Calls()...) {
			if c.Verb == "agent_open" {
				n++
			}
		}
		return n
	}
	before := opens()
	for _, c := range []struct {
		args verbs.OpenArgs
		want string
	}{
		{verbs.OpenArgs{Cwd: "/w", ID: "h1/x1", Host: "local"}, "the id h1/x1 is on host h1, but host names local"},
		{verbs.OpenArgs{ID: "x1", Resume: true, Host: Any}, "resume reopens a dead one on the host it died on"},
		{verbs.OpenArgs{Cwd: "/w", Host: "h9"}, `no host is named "h9"`},
		{verbs.OpenArgs{Fork: "h1/p1", Host: Local}, "a fork opens on the host of the agent it forks (h1), not on local"},
	} {
		_, err := f.Open(context.Background(), &c.args)
		var ue *UsageError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("open %+v: %v, want a usage error saying %q", c.args, err, c.want)
		}
	}
	if _, err := f.Open(context.Background(), &verbs.OpenArgs{Cwd: "/w", Host: "h9"}); err == nil || !strings.Contains(err.Error(), "also any") {
		t.Errorf("an unknown host does not offer any: %v", err)
	}
	if n := opens(); n != before {
		t.Errorf("bad opens reached a daemon: %d opens, want %d", n, before)
	}
	// Placed on this machine, the id is local/ID: a bare one would go to
	// the Default, which may be any.
	h1.Returns("list", entries(apitype.Working, apitype.Working), nil)
	if r, err := f.Open(context.Background(), &verbs.OpenArgs{Cwd: "/w", Host: Any}); err != nil || r.AgentID != "local/n1" {
		t.Errorf("open host any placed here: %+v %v", r, err)
	}
	// With no host answering, any is an error naming each one's.
	local.Returns("list", nil, errors.New("local down"))
	h1.Returns("list", nil, errors.New("h1 down"))
	if _, err := f.Open(context.Background(), &verbs.OpenArgs{Cwd: "/w", Host: Any}); err == nil ||
		!strings.Contains(err.Error(), "no host answered") || !strings.Contains(err.Error(), "host h2") {
		t.Errorf("open any with no host up: %v", err)
	}
}

// A remote daemon's error names the agent by its bare id; the fleet shows
// it qualified, so that the command it suggests reaches the agent's host.
// A longer word that merely holds the id is left as it is.
func TestErrorsQualifyTheID(t *testing.T) {
	h1 := (&servertest.Fake{}).Returns("run", nil, verbs.Errorf(verbs.CodeNotFound,
		"agent a0 is dead; reopen it with its conversation: `kaimon open --id a0 --resume` (or afresh: `kaimon open --id a0 DIR`); see xa0 and a0x"))
	f := testFleet(t, &servertest.Fake{}, h1)
	_, err := f.Run(context.Background(), &verbs.RunArgs{AgentID: "h1/a0", Text: "hi"})
	var ve *verbs.Error
	if !errors.As(err, &ve) || ve.Code != verbs.CodeNotFound ||
		ve.Message != "agent h1/a0 is dead; reopen it with its conversation: `kaimon open --id h1/a0 --resume` (or afresh: `kaimon open --id h1/a0 DIR`); see xa0 and a0x" {
		t.Errorf("run h1/a0 on a dead agent: %#v", err)
	}
	// On this machine the id is shown as the daemon wrote it.
	local := (&servertest.Fake{}).Returns("run", nil, verbs.Errorf(verbs.CodeNotFound, "agent a0 is dead"))
	f = testFleet(t, local, h1)
	if _, err := f.Run(context.Background(), &verbs.RunArgs{AgentID: "a0", Text: "hi"}); err == nil || err.Error() != "agent a0 is dead" {
		t.Errorf("run a0 here: %v", err)
	}
}
