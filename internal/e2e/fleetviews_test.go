package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/kaimon/kaimon/internal/verbs"
)

// sshToInstallations is sshToInstallation for several hosts: the
// destination's host (the word after "--", without its user) picks the
// installation whose environment runs the remote command line; any other
// destination fails as ssh does when it cannot resolve the name (exit 255).
// An `ssh -O exit` (no command) has no master to end here.
func sshToInstallations(t testing.TB, hosts map[string]*kenv) string {
	var b strings.Builder
	b.WriteString("#!/bin/sh\nwhile [ $# -gt 0 ] && [ \"$1\" != -- ]; do shift; done\ndest=$2; cmd=$3\n" +
		"[ -z \"$cmd\" ] && exit 0\ncase ${dest#*@} in\n")
	for dest, to := range hosts {
		fmt.Fprintf(&b, "%s) exec env -i", dest)
		for _, kv := range to.env {
			k, v, _ := strings.Cut(kv, "=")
			fmt.Fprintf(&b, " %s='%s'", k, strings.ReplaceAll(v, "'", `'\''`))
		}
		b.WriteString(" sh -c \"$cmd\" ;;\n")
	}
	b.WriteString("*) echo \"ssh: Could not resolve hostname $dest: Name or service not known\" >&2; exit 255 ;;\nesac\n")
	p := filepath.Join(t.TempDir(), "ssh-to-installations")
	if err := os.WriteFile(p, []byte(b.String()), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// firstReply is what the example recording's agent answers its first turn.
func firstReply(t *testing.T) string {
	for _, ev := range turnEvents(readLog(t, exampleLog())) {
		if ev.Kind == "assistant_text" {
			var d struct {
				Content struct{ Text string } `json:"content"`
			}
			_ = json.Unmarshal(ev.Data, &d)
			return d.Content.Text
		}
	}
	t.Fatal("the example recording has no assistant text")
	return ""
}

// Five `open --host any` in a row over this machine and two hosts spread
// as the rule says (fewest working, then fewest live; ties to local, then
// the names in order), a host whose ssh fails passed over; then `list
// --all-hosts` shows every host's agents in one table with a HOST column,
// the failed host's error on stderr (in hosts with --json) and exit 1; and
// completion offers HOST/ and then that host's ids, starting no daemon on
// a host whose daemon is not running.
func TestOpenAnySpreadsAndListAllHosts(t *testing.T) {
	local, h1, h2, h3 := newEnv(t), newEnv(t), newEnv(t), newEnv(t)
	local.env = append(local.env, "KAIMON_SSH_COMMAND="+sshToInstallations(t, map[string]*kenv{
		"h1.invalid": h1, "h2.invalid": h2, "h3.invalid": h3}))
	kaimonBin := filepath.Join(binDir, "kaimon")
	for _, h := range []string{"h1", "h2"} {
		local.ok("host", "add", h, "ssh://"+h+".invalid", "--remote-bin", kaimonBin)
	}
	local.ok("host", "add", "down", "ssh://down.invalid", "--remote-bin", kaimonBin)

	fast := "replay:" + exampleLog() + "?speed=0"
	// Each recorded pause (up to replay.MaxGap) lasts hours at this speed:
	// the agent's turn works until it is closed.
	slow := "replay:" + exampleLog() + "?speed=0.00001"
	open := func(model string) string {
		t.Helper()
		r := local.kaimon("--host", "any", "open", local.work, "--model", model)
		if r.code != 0 || !strings.Contains(r.stderr, "--host any left out host down: ssh failed: ssh: Could not resolve hostname down.invalid") {
			t.Fatalf("open --host any: %s", r)
		}
		return strings.TrimSpace(r.stdout)
	}
	hostOf := func(id string) string {
		if h, _, ok := strings.Cut(id, "/"); ok {
			return h
		}
		return "local"
	}
	// 1: every host empty, the tie goes to local; its agent is then kept
	// working. Placed here, its id is local/ID: a bare one would go to
	// KAIMON_HOST=any, which names no agent's host.
	ids := []string{open(slow)}
	bare := strings.TrimPrefix(ids[0], "local/")
	local.ok("send", ids[0], "hello there")
	waitFor(t, "the local agent working", time.Minute, func() bool {
		var st verbs.AgentStatus
		local.okJSON(&st, "status", ids[0])
		return st.Status == "working"
	})
	// 2, 3: h1 and h2 have no agent; local has a working one.
	// 4: no host has a working agent but local; h1 and h2 one live each:
	// h1 by name. 5: h2 has fewer live agents than h1.
	for i := 0; i < 4; i++ {
		ids = append(ids, open(fast))
	}
	var got []string
	for _, id := range ids {
		got = append(got, hostOf(id))
	}
	if want := []string{"local", "h1", "h2", "h1", "h2"}; !slices.Equal(got, want) {
		t.Fatalf("five opens with --host any went to %q (ids %q), want %q", got, ids, want)
	}
	// Each id is its host's daemon's.
	var rl verbs.ListResult
	h1.okJSON(&rl, "list")
	if len(rl.Agents) != 2 || "h1/"+rl.Agents[0].AgentID != ids[1] || "h1/"+rl.Agents[1].AgentID != ids[3] {
		t.Errorf("h1's daemon lists %+v, want %s and %s", rl.Agents, ids[1], ids[3])
	}

	// list --all-hosts: the table, and the down host's error.
	r := local.kaimon("list", "--all-hosts")
	if r.code != 1 || !strings.Contains(r.stderr, "kaimon: host down: ssh failed: ssh: Could not resolve hostname down.invalid") {
		t.Errorf("list --all-hosts with a host down: %s", r)
	}
	t.Logf("kaimon list --all-hosts:\n%s%s", r.stdout, r.stderr)
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if len(lines) != 6 || !strings.HasPrefix(lines[0], "HOST ") {
		t.Fatalf("list --all-hosts printed:\n%s", r.stdout)
	}
	for i, id := range []string{ids[0], ids[1], ids[3], ids[2], ids[4]} { // local, then h1, then h2
		if f := strings.Fields(lines[i+1]); len(f) < 3 || f[0] != hostOf(id) || f[1] != strings.TrimPrefix(id, "local/") {
			t.Errorf("row %d: %q, want host %s and id %s", i+1, lines[i+1], hostOf(id), id)
		}
	}
	if !strings.Contains(lines[1], "working") {
		t.Errorf("the local agent's row: %q, want working", lines[1])
	}
	r = local.kaimon("list", "--all-hosts", "--json")
	var all verbs.ListResult
	if err := json.Unmarshal([]byte(r.stdout), &all); r.code != 1 || err != nil {
		t.Fatalf("list --all-hosts --json: %v\n%s", err, r)
	}
	if len(all.Agents) != 5 || all.Agents[1].Host != "h1" || all.Agents[1].AgentID != ids[1] || all.Agents[0].Host != "local" || all.Agents[0].AgentID != bare {
		t.Errorf("list --all-hosts --json agents: %+v", all.Agents)
	}
	wantHosts := []verbs.HostAnswer{{Host: "local", Agents: 1}, {Host: "down"}, {Host: "h1", Agents: 2}, {Host: "h2", Agents: 2}}
	if len(all.Hosts) != 4 || !strings.Contains(all.Hosts[1].Error, "host down: ssh failed") {
		t.Fatalf("list --all-hosts --json hosts: %+v", all.Hosts)
	}
	all.Hosts[1].Error = ""
	if !slices.Equal(all.Hosts, wantHosts) {
		t.Errorf("list --all-hosts --json hosts: %+v, want %+v", all.Hosts, wantHosts)
	}
	// any places only: a bare id under it is refused as before, and a
	// qualified one goes to its host.
	local.fails(2, `host "any" places a new agent`, "--host", "any", "status", bare)
	if out := local.ok("--host", "any", "status", ids[1]); !strings.Contains(out, "idle") {
		t.Errorf("--host any status %s: %s", ids[1], out)
	}

	// Completion: hosts as HOST/ beside the local ids; after h1/, h1's.
	local.ok("host", "add", "h3", "ssh://h3.invalid", "--remote-bin", kaimonBin)
	cands := func(words ...string) []string {
		t.Helper()
		var out []string
		for _, l := range strings.Split(local.ok(append([]string{"__complete", "--"}, words...)...), "\n") {
			if v, _, _ := strings.Cut(l, "\t"); v != "" {
				out = append(out, v)
			}
		}
		return out
	}
	if got, want := cands("status", ""), []string{bare, "down/", "h1/", "h2/", "h3/"}; !slices.Equal(got, want) {
		t.Errorf("status <TAB>: %q, want %q", got, want)
	}
	if got, want := cands("status", "h1/"), []string{ids[1], ids[3]}; !slices.Equal(got, want) {
		t.Errorf("status h1/<TAB>: %q, want %q", got, want)
	}
	// h3's daemon is not running: nothing, and it is not started.
	if got := cands("status", "h3/"); len(got) != 0 {
		t.Errorf("status h3/<TAB> with h3's daemon down: %q", got)
	}
	if pids := h3.processes(); len(pids) != 0 {
		t.Errorf("a completion started processes on h3: %s", describe(pids))
	}
	if got := cands("status", "down/"); len(got) != 0 {
		t.Errorf("status down/<TAB>: %q", got)
	}

	// run -C under --host any runs its turn where it placed its agent,
	// then closes it: on h3, now added, which has none (its daemon is
	// started there by the placement's dial-stdio).
	if got := local.ok("--host", "any", "run", "-C", local.work, "--model", fast, "hello there"); got != firstReply(t) {
		t.Errorf("--host any run -C printed %q, want %q", got, firstReply(t))
	}
	h3.okJSON(&rl, "list")
	if len(rl.Agents) != 1 || rl.Agents[0].Status != "dead" || rl.Agents[0].Turn != 1 {
		t.Errorf("after run -C under --host any, h3's daemon lists %+v, want one agent, dead after one turn", rl.Agents)
	}
}

// kaimon mcp with a host configured: agent_open with host opens there and
// returns a qualified id, which agent_run takes; agent_list lists both
// hosts' agents with their host, and a host that is down in its hosts
// without failing the call; the instructions name the hosts; a host not
// configured is a tool error that says which are.
func TestMCPAcrossHosts(t *testing.T) {
	local, h1 := newEnv(t), newEnv(t)
	local.env = append(local.env, "KAIMON_SSH_COMMAND="+sshToInstallations(t, map[string]*kenv{"h1.invalid": h1}))
	kaimonBin := filepath.Join(binDir, "kaimon")
	local.ok("host", "add", "h1", "ssh://h1.invalid", "--remote-bin", kaimonBin)
	local.ok("host", "add", "down", "ssh://down.invalid", "--remote-bin", kaimonBin)

	call, instructions := startMCP(t, local.env)
	if !strings.Contains(instructions, "on the hosts down, h1") {
		t.Errorf("the instructions do not name the hosts: %s", instructions)
	}
	onH1, _, l := mcpOpenRunList(t, call, "replay:"+exampleLog()+"?speed=0", h1.work, local.work)
	// The host that is down is reported, and fails nothing.
	if len(l.Hosts) != 3 || !strings.Contains(l.Hosts[1].Error, "host down: ssh failed") {
		t.Fatalf("agent_list hosts: %+v", l.Hosts)
	}
	l.Hosts[1].Error = ""
	if want := []verbs.HostAnswer{{Host: "local", Agents: 1}, {Host: "down"}, {Host: "h1", Agents: 1}}; !slices.Equal(l.Hosts, want) {
		t.Errorf("agent_list hosts: %+v, want %+v", l.Hosts, want)
	}

	text, isErr := call("agent_open", map[string]any{"cwd": local.work, "model": "replay:" + exampleLog() + "?speed=0", "host": "h9"})
	if !isErr || !strings.Contains(text, `no host is named "h9"`) || !strings.Contains(text, "h1") {
		t.Errorf("agent_open host h9: %v %s", isErr, text)
	}
	mcpClose(t, call, onH1)
}

// mcpCall calls one tool of an MCP session: its one text and whether it is
// a tool error.
type mcpCall func(tool string, args map[string]any) (string, bool)

// startMCP starts `kaimon mcp` with exactly env, as an MCP client would,
// and connects a real MCP client to it for the rest of t.
func startMCP(t testing.TB, env []string) (call mcpCall, instructions string) {
	t.Helper()
	c, err := client.NewStdioMCPClient("env", nil, append(append([]string{"-i"}, env...), filepath.Join(binDir, "kaimon"), "mcp")...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	var init mcp.InitializeRequest
	init.Params.ProtocolVersion = mcp.LATEST_PROTOCOL_VERSION
	init.Params.ClientInfo = mcp.Implementation{Name: "kaimon-e2e", Version: "1"}
	ir, err := c.Initialize(ctx, init)
	if err != nil {
		t.Fatal(err)
	}
	return func(tool string, args map[string]any) (string, bool) {
		t.Helper()
		var req mcp.CallToolRequest
		req.Params.Name, req.Params.Arguments = tool, args
		res, err := c.CallTool(ctx, req)
		if err != nil || len(res.Content) != 1 {
			t.Fatalf("%s %v: %+v %v", tool, args, res, err)
		}
		return res.Content[0].(mcp.TextContent).Text, res.IsError
	}, ir.Instructions
}

// mcpOpenRunList is what an orchestrator does across hosts, with agents of
// model (a replay of the example recording): agent_open
// with host h1 (in h1Dir there) returns a qualified id, agent_run runs a
// turn on it, agent_open without host opens here (in localDir), and
// agent_list then lists exactly those two, idle, each with its host. It
// returns the two ids and the list, whose hosts the caller checks.
func mcpOpenRunList(t *testing.T, call mcpCall, model, h1Dir, localDir string) (onH1, here string, l verbs.ListResult) {
	t.Helper()
	text, isErr := call("agent_open", map[string]any{"cwd": h1Dir, "model": model, "host": "h1"})
	var opened verbs.OpenResult
	if isErr || json.Unmarshal([]byte(text), &opened) != nil || !strings.HasPrefix(opened.AgentID, "h1/") {
		t.Fatalf("agent_open host h1: %s", text)
	}
	text, isErr = call("agent_run", map[string]any{"agent_id": opened.AgentID, "text": "hello"})
	var ran verbs.RunResult
	if isErr || json.Unmarshal([]byte(text), &ran) != nil || ran.Text != firstReply(t) {
		t.Errorf("agent_run %s: %s", opened.AgentID, text)
	}
	text, isErr = call("agent_open", map[string]any{"cwd": localDir, "model": model})
	var localOpen verbs.OpenResult
	if isErr || json.Unmarshal([]byte(text), &localOpen) != nil || strings.Contains(localOpen.AgentID, "/") {
		t.Fatalf("agent_open without host: %s", text)
	}
	text, isErr = call("agent_list", nil)
	if isErr || json.Unmarshal([]byte(text), &l) != nil {
		t.Fatalf("agent_list: %s", text)
	}
	var got []string
	for _, a := range l.Agents {
		got = append(got, a.Host+" "+a.AgentID+" "+string(a.Status))
	}
	if want := []string{"local " + localOpen.AgentID + " idle", "h1 " + opened.AgentID + " idle"}; !slices.Equal(got, want) {
		t.Errorf("agent_list: %q, want %q", got, want)
	}
	return opened.AgentID, localOpen.AgentID, l
}

// mcpClose closes agent id through agent_close.
func mcpClose(t testing.TB, call mcpCall, id string) {
	t.Helper()
	if text, isErr := call("agent_close", map[string]any{"agent_id": id}); isErr || !strings.Contains(text, `"closed":true`) {
		t.Errorf("agent_close %s: %s", id, text)
	}
}
