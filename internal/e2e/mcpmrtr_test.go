package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kaimon/kaimon/internal/event"
	"github.com/kaimon/kaimon/internal/mcpserver"
	"github.com/kaimon/kaimon/internal/verbs"
)

// mrtrCaps are the clientCapabilities of a 2026-07-28 client that answers
// elicitations in form mode (as the claude CLI 2.1.328 declares them).
var mrtrCaps = map[string]any{"elicitation": map[string]any{"form": map[string]any{}}}

// mrtrRound is an input_required result of agent_run, read: its one
// input request's key, the permission request it asks about, and the
// requestState.
type mrtrRound struct {
	key, request, state string
	message             string
}

// mrtrOpen opens an agent through c's agent_open.
func mrtrOpen(t testing.TB, c *rawMCP, dir string) string {
	t.Helper()
	r := c.Tool("agent_open", map[string]any{"cwd": dir}, nil)
	var o verbs.OpenResult
	if r.IsError || json.Unmarshal(r.StructuredContent, &o) != nil || o.AgentID == "" {
		t.Fatalf("agent_open: %+v", r)
	}
	return o.AgentID
}

// mustAsk checks that r is an MRTR round asking, in form mode, about agent
// id's pending permission request whose input holds needle.
func mustAsk(t *testing.T, e *kenv, r rawToolResult, id, needle string) mrtrRound {
	t.Helper()
	if r.ResultType != "input_required" || r.RequestState == "" || len(r.InputRequests) != 1 {
		t.Fatalf("not an MRTR round: %+v", r)
	}
	p := e.pendingPermission(t, id, needle)
	for key, ir := range r.InputRequests {
		var perm struct {
			AgentID   string `json:"agent_id"`
			RequestID string `json:"request_id"`
		}
		_ = json.Unmarshal(ir.Params.Meta[mcpserver.MetaPermission], &perm)
		if ir.Method != "elicitation/create" || ir.Params.Mode != "form" || !strings.Contains(string(ir.Params.RequestedSchema), `"always"`) ||
			!strings.Contains(ir.Params.Message, "Agent "+id+" asks to run Bash") || !strings.Contains(ir.Params.Message, needle) ||
			perm.AgentID != id || perm.RequestID != p.RequestID {
			t.Fatalf("input request %q = %+v, for permission %+v", key, ir, p)
		}
		return mrtrRound{key: key, request: p.RequestID, state: r.RequestState, message: ir.Params.Message}
	}
	panic("unreachable")
}

var (
	mrtrAccept  = map[string]any{"action": "accept", "content": map[string]any{}}
	mrtrDecline = map[string]any{"action": "decline"}
)

// TestMCPMRTR: a 2026-07-28 client's agent_run meets the claude CLI
// worker's permission requests (default preset) as MRTR rounds: accept
// runs the tool, decline denies it, two requests in a turn are two rounds,
// an answer given with kaimon permit first lets the retry complete without
// asking, a request expired makes the retry say so, a bad requestState or
// answer is refused or denies, and a retry reaches a `kaimon mcp` started
// after the round's. The client never gets a server-initiated request.
func TestMCPMRTR(t *testing.T) {
	e := newEnv(t, "KAIMON_PERMISSION_TIMEOUT", "10")
	// Started first, so that stopping the first `kaimon mcp` (its
	// process tree) leaves the daemon.
	e.ok("daemon", "start")
	c := startRawMCP(t, e, mrtrCaps)
	c.Discover()
	id := mrtrOpen(t, c, e.work)
	e.dumpOnFail(t, id)
	outside := filepath.Join(e.home, "outside")
	file := func(n int) string { return fmt.Sprintf("%s-%d", outside, n) }
	ran := func(n int) bool {
		_, err := os.Stat(file(n))
		return err == nil
	}
	turn := 0
	run := func(text string) map[string]any {
		turn++
		return map[string]any{"agent_id": id, "text": text}
	}
	const accepted = "Tool said: (Bash completed with no output). Done."
	complete := func(what string, r rawToolResult) string {
		t.Helper()
		if r.ResultType == "input_required" || r.IsError {
			t.Fatalf("%s: %+v", what, r)
		}
		var rr verbs.RunResult
		if json.Unmarshal(r.StructuredContent, &rr) != nil {
			t.Fatalf("%s: structured content %s", what, r.StructuredContent)
		}
		return rr.Text
	}
	sameTurn := func(what string) {
		t.Helper()
		var st verbs.AgentStatus
		e.okJSON(&st, "status", id)
		if st.Turn != turn {
			t.Fatalf("%s: the agent is at turn %d, not %d: the retry sent the turn again", what, st.Turn, turn)
		}
	}

	// Accept: the tool runs, in the turn the first call sent.
	args := run("run command: touch " + file(1))
	a := mustAsk(t, e, c.Tool("agent_run", args, nil), id, file(1))
	if text := complete("accepted", c.Answer("agent_run", args, a.key, mrtrAccept, a.state)); text != accepted || !ran(1) {
		t.Fatalf("accepted turn = %q, ran %v", text, ran(1))
	}
	sameTurn("accepted")
	// The session so far (discover, open, run → input_required → retry →
	// complete), for the reader of -v.
	t.Logf("a 2026-07-28 session:\n%s", strings.Join(c.Wire(), "\n"))
	if ps := e.permissions(t, id); ps[len(ps)-1].Decision != "allow" || ps[len(ps)-1].By != event.DecidedByUser {
		t.Fatalf("accepted decision %+v", ps[len(ps)-1])
	}

	// Decline: denied. Before it, a tampered state and answers under
	// keys never asked are refused, and grant nothing; after it, the
	// state replayed is refused.
	args = run("run command: touch " + file(2))
	a = mustAsk(t, e, c.Tool("agent_run", args, nil), id, file(2))
	tampered := []byte(a.state)
	tampered[len(tampered)/3] ^= 1
	if r := c.Answer("agent_run", args, a.key, mrtrAccept, string(tampered)); !r.IsError || !strings.Contains(r.Text(), "fails verification") {
		t.Fatalf("tampered requestState: %+v", r)
	}
	if r := c.Answer("agent_run", args, "not-asked", mrtrAccept, a.state); !r.IsError || !strings.Contains(r.Text(), `"not-asked"`) ||
		!strings.Contains(r.Text(), a.key) {
		t.Fatalf("an answer under a key not asked: %+v", r)
	}
	other := map[string]any{"agent_id": id, "text": "run command: touch " + file(2) + " and more"}
	if r := c.Answer("agent_run", other, a.key, mrtrAccept, a.state); !r.IsError || !strings.Contains(r.Text(), "other arguments") {
		t.Fatalf("a state retried with other arguments: %+v", r)
	}
	if ran(2) || e.pendingPermission(t, id, file(2)).RequestID != a.request {
		t.Fatalf("a refused retry answered the request: ran %v", ran(2))
	}
	if text := complete("declined", c.Answer("agent_run", args, a.key, mrtrDecline, a.state)); !strings.Contains(text, "denied") || ran(2) {
		t.Fatalf("declined turn = %q, ran %v", text, ran(2))
	}
	sameTurn("declined")
	if r := c.Answer("agent_run", args, a.key, mrtrAccept, a.state); !r.IsError || !strings.Contains(r.Text(), "used before") || ran(2) {
		t.Fatalf("a replayed requestState: %+v, ran %v", r, ran(2))
	}

	// Content that does not fit the schema: denied, and the log says why.
	args = run("run command: touch " + file(3))
	a = mustAsk(t, e, c.Tool("agent_run", args, nil), id, file(3))
	bad := map[string]any{"action": "accept", "content": map[string]any{"always": "yes please"}}
	if text := complete("bad content", c.Answer("agent_run", args, a.key, bad, a.state)); !strings.Contains(text, "does not fit its schema") || ran(3) {
		t.Fatalf("turn answered with bad content = %q, ran %v", text, ran(3))
	}
	if !strings.Contains(e.eventsOf(t, id, event.Error), "does not fit its schema") {
		t.Fatalf("no error event for the bad answer: %s", e.eventsOf(t, id, event.Error))
	}

	// Two permission requests in one turn: two rounds.
	args = run(fmt.Sprintf("run commands: touch %s ;; touch %s", file(4), file(5)))
	a = mustAsk(t, e, c.Tool("agent_run", args, nil), id, file(4))
	b := mustAsk(t, e, c.Answer("agent_run", args, a.key, mrtrAccept, a.state), id, file(5))
	if b.request == a.request || b.state == a.state || !ran(4) || ran(5) {
		t.Fatalf("second round %+v after %+v; ran %v %v", b, a, ran(4), ran(5))
	}
	if text := complete("second round", c.Answer("agent_run", args, b.key, mrtrAccept, b.state)); !strings.Contains(text, "Done.") || !ran(5) {
		t.Fatalf("two-round turn = %q, ran %v", text, ran(5))
	}
	sameTurn("two rounds")

	// Answered with kaimon permit first: the retry carries on without
	// its answer (a decline, which would have denied), to the turn's end.
	args = run("run command: touch " + file(6))
	a = mustAsk(t, e, c.Tool("agent_run", args, nil), id, file(6))
	e.ok("permit", id, a.request, "allow")
	if text := complete("answered first by kaimon permit", c.Answer("agent_run", args, a.key, mrtrDecline, a.state)); text != accepted || !ran(6) {
		t.Fatalf("turn answered by kaimon permit = %q, ran %v", text, ran(6))
	}

	// Never answered in time: the retry says the request expired.
	args = run("run command: touch " + file(7))
	a = mustAsk(t, e, c.Tool("agent_run", args, nil), id, file(7))
	e.waitDone(t, id, turn)
	if r := c.Answer("agent_run", args, a.key, mrtrAccept, a.state); !r.IsError || !strings.Contains(r.Text(), "expired") || ran(7) {
		t.Fatalf("a retry after the request expired: %+v, ran %v", r, ran(7))
	}

	// `kaimon mcp` restarted between the rounds: the retry still works.
	args = run("run command: touch " + file(8))
	a = mustAsk(t, e, c.Tool("agent_run", args, nil), id, file(8))
	if n := len(c.ServerRequests()); n != 0 {
		t.Fatalf("the 2026-07-28 client got %d server-initiated requests: %+v", n, c.ServerRequests())
	}
	c.Stop()
	c2 := startRawMCP(t, e, mrtrCaps)
	c2.Discover()
	if text := complete("retried after a restart", c2.Answer("agent_run", args, a.key, mrtrAccept, a.state)); text != accepted || !ran(8) {
		t.Fatalf("turn retried after a restart = %q, ran %v", text, ran(8))
	}
	sameTurn("after a restart")

	// A 2026-07-28 request without its required _meta: -32602.
	meta := c2.Meta()
	delete(meta, metaClientCaps)
	if _, rerr := c2.Wait(c2.Send("tools/call", map[string]any{"_meta": meta, "name": "agent_list", "arguments": map[string]any{}}), time.Minute); rerr == nil || rerr.Code != -32602 {
		t.Fatalf("a request without clientCapabilities: %v", rerr)
	}
	if n := len(c2.ServerRequests()); n != 0 {
		t.Fatalf("the 2026-07-28 client got %d server-initiated requests: %+v", n, c2.ServerRequests())
	}
}

// TestMCPMRTRElicitNever: `kaimon mcp --elicit never` asks a 2026-07-28
// client about no permission request, as it asks a 2025-11-25 one about
// none: agent_run meets the worker's request with no round and waits on
// the turn, which kaimon permit lets go on to its end.
func TestMCPMRTRElicitNever(t *testing.T) {
	e := newEnv(t, "KAIMON_PERMISSION_TIMEOUT", "120")
	e.ok("daemon", "start")
	c := startRawMCP(t, e, mrtrCaps, "--elicit", "never")
	c.Discover()
	id := mrtrOpen(t, c, e.work)
	e.dumpOnFail(t, id)
	file := filepath.Join(e.home, "outside-never")
	args := map[string]any{"agent_id": id, "text": "run command: touch " + file}
	call := c.Send("tools/call", map[string]any{"_meta": c.Meta(), "name": "agent_run", "arguments": args})
	p := e.pendingPermission(t, id, file)
	e.ok("permit", id, p.RequestID, "allow")
	raw, rerr := c.Wait(call, 3*time.Minute)
	var r rawToolResult
	if rerr != nil || json.Unmarshal(raw, &r) != nil {
		t.Fatalf("agent_run: %s %v", raw, rerr)
	}
	if r.ResultType == "input_required" || r.IsError || !strings.Contains(r.Text(), "Done.") {
		t.Fatalf("agent_run under --elicit never: %+v", r)
	}
	if _, err := os.Stat(file); err != nil {
		t.Fatalf("the permitted command did not run: %v", err)
	}
	if n := len(c.ServerRequests()); n != 0 {
		t.Fatalf("the 2026-07-28 client got %d server-initiated requests: %+v", n, c.ServerRequests())
	}
}
