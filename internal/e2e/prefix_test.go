package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/kaimon/kaimon/internal/event"
	"github.com/kaimon/kaimon/internal/verbs"
)

// Through the real CLI and daemon: a unique prefix of an id names its
// agent (status, run, output), an ambiguous one is refused naming the
// ids it starts; and kaimon permit ID allow, without a request id,
// answers the one request the agent waits on, the prefix naming it too.
func TestIDPrefixAndPermitWithoutRequestID(t *testing.T) {
	e, cases := newLocalEnv(t)
	c := cases[0] // ollama:
	for _, id := range []string{"f98a0c1d", "f9b2e310"} {
		if got := e.ok("open", "--model", c.model, "--id", id, e.work); got != id {
			t.Fatalf("open --id %s printed %q", id, got)
		}
	}
	e.dumpOnFail(t, "f98a0c1d")

	if out := e.ok("status", "f98"); !strings.Contains(out, "status") || !strings.Contains(out, "idle") {
		t.Fatalf("status f98:\n%s", out)
	}
	r := e.kaimon("status", "f9")
	if r.code == 0 || !strings.Contains(r.stderr, `agent id "f9" is ambiguous`) || !strings.Contains(r.stderr, "f98a0c1d, f9b2e310") {
		t.Fatalf("status f9: want it refused naming both agents; got %s", r)
	}
	e.fails(1, `no agent "f97"`, "status", "f97")

	if out := e.ok("run", "f98", "hello there"); !strings.HasPrefix(out, "Hello from fake") {
		t.Fatalf("run f98 = %q", out)
	}
	var o verbs.OutputResult
	e.okJSON(&o, "output", "f98")
	if o.AgentID != "f98a0c1d" || !strings.HasPrefix(o.Text, "Hello from fake") {
		t.Fatalf("output f98 = %+v; want agent f98a0c1d's, by its whole id", o)
	}
	var st verbs.AgentStatus
	if e.okJSON(&st, "status", "f98"); st.AgentID != "f98a0c1d" {
		t.Fatalf("status f98 names agent %q, want its whole id", st.AgentID)
	}
	// tail's replay of one agent reads the log of the agent the prefix
	// names (its file is the whole id's), and ends at the turn's result.
	if out := e.ok("tail", "agent:f98", "--from-start", "--until-result", "--no-deltas"); !strings.Contains(out, `"kind":"result"`) ||
		!strings.Contains(out, `"agent_id":"f98a0c1d"`) || strings.Contains(out, "f9b2e310") {
		t.Fatalf("tail agent:f98 --from-start --until-result:\n%s", out)
	}

	// A bash call asks under default; the permit names no request.
	e.fails(1, "no pending permission request", "permit", "f98", "allow")
	e.ok("send", "f98", `call tool: bash {"command":"echo hi > prefixed.txt"}`)
	perm := e.waitEvent(t, "f98a0c1d", event.Permission, func(d gjson.Result) bool { return !d.Get("decision").Exists() })
	req := gjson.GetBytes(perm.Data, "requestId").String()
	if out := e.ok("status", "f98"); !strings.Contains(out, req+" asks for") || !strings.Contains(out, "kaimon permit f98a0c1d "+req) {
		t.Fatalf("status f98 does not show the request %s and its permit line:\n%s", req, out)
	}
	if out := e.ok("permit", "f98", "allow"); out != "allowed" {
		t.Fatalf("permit f98 allow printed %q", out)
	}
	e.waitStatus(t, "f98a0c1d", "idle")
	if b, _ := os.ReadFile(filepath.Join(e.work, "prefixed.txt")); string(b) != "hi\n" {
		t.Fatalf("the permitted bash did not run: %q", b)
	}
	decided := e.waitEvent(t, "f98a0c1d", event.Permission, func(d gjson.Result) bool { return d.Get("decision").Exists() })
	if gjson.GetBytes(decided.Data, "requestId").String() != req || gjson.GetBytes(decided.Data, "by").String() != "user" {
		t.Fatalf("the decision: %s", decided.Data)
	}
}
