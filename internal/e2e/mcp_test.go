package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/kaimon/kaimon/internal/apitype"
	"github.com/kaimon/kaimon/internal/event"
	"github.com/kaimon/kaimon/internal/testutil/agents"
	"github.com/kaimon/kaimon/internal/verbs"
)

// inspectorBin is the MCP Inspector (pinned in package.json), or skips; in
// CI its absence fails.
func inspectorBin(t *testing.T) string {
	t.Helper()
	if b := agents.Find("KAIMON_INSPECTOR_BIN", "mcp-inspector"); b != "" {
		return b
	}
	msg := "the MCP Inspector is not installed: run `npm ci` in the repo root, or set KAIMON_INSPECTOR_BIN"
	if os.Getenv("CI") != "" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

// inspect runs the MCP Inspector's CLI against `kaimon mcp` with one
// method. The Inspector gives a stdio server only a few variables of its
// own environment, so the installation's are passed with -e.
func (e *kenv) inspect(t *testing.T, method string, args ...string) (map[string]any, string) {
	t.Helper()
	bin := inspectorBin(t)
	argv := []string{"--cli", filepath.Join(binDir, "kaimon"), "mcp"}
	for _, kv := range e.env {
		argv = append(argv, "-e", kv)
	}
	argv = append(argv, "--method", method)
	argv = append(argv, args...)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, argv...)
	cmd.Dir = e.work
	cmd.Env = e.env
	var so, se bytes.Buffer
	cmd.Stdout, cmd.Stderr = &so, &se
	err := cmd.Run()
	var out map[string]any
	if jerr := json.Unmarshal(so.Bytes(), &out); jerr != nil {
		t.Fatalf("inspector %s %v: %v (%v)\nstdout: %s\nstderr: %s", method, args, err, jerr, so.String(), se.String())
	}
	return out, se.String()
}

// callText is the text of a tools/call result, and whether it is a tool
// error.
func callText(t *testing.T, out map[string]any) (string, bool) {
	t.Helper()
	content, _ := out["content"].([]any)
	if len(content) != 1 {
		t.Fatalf("tools/call result %v", out)
	}
	isErr, _ := out["isError"].(bool)
	return content[0].(map[string]any)["text"].(string), isErr
}

// TestMCPInspector drives agents through `kaimon mcp` with a real MCP
// client, the MCP Inspector's CLI: it lists the tools, then calls every
// one (an agent opened on the real claude CLI, a turn run, its status and
// output read, closed and forgotten), one Inspector process (and one
// `kaimon mcp`) per call, all seeing the one daemon.
func TestMCPInspector(t *testing.T) {
	e := newEnv(t)
	inspectorBin(t)

	out, _ := e.inspect(t, "tools/list")
	tools, _ := out["tools"].([]any)
	var names []string
	var open map[string]any
	for _, x := range tools {
		tool := x.(map[string]any)
		names = append(names, tool["name"].(string))
		if tool["name"] == "agent_open" {
			open = tool
		}
	}
	sort.Strings(names)
	want := "agent_close agent_diff agent_forget agent_interrupt agent_list agent_open agent_output agent_permit agent_run agent_send agent_set_model agent_status"
	if strings.Join(names, " ") != want {
		t.Fatalf("tools %v", names)
	}
	schema := open["inputSchema"].(map[string]any)
	// cwd is required except to resume, so the schema cannot require it;
	// its description says so.
	cwd := schema["properties"].(map[string]any)["cwd"].(map[string]any)
	if req := fmt.Sprint(schema["required"]); req != "<nil>" && req != "[]" || !strings.Contains(fmt.Sprint(cwd["description"]), "Required, except to resume") {
		t.Errorf("agent_open required %s, cwd %v", req, cwd)
	}
	if p := schema["properties"].(map[string]any)["permission"].(map[string]any); p["default"] != "default" || len(p["enum"].([]any)) != 6 {
		t.Errorf("agent_open permission %v", p)
	}

	out, _ = e.inspect(t, "tools/call", "--tool-name", "agent_open", "--tool-arg", "cwd="+e.work, "id=insp-1")
	if txt, isErr := callText(t, out); isErr || txt != `{"agent_id":"insp-1"}` {
		t.Fatalf("agent_open = %q %v", txt, isErr)
	}
	out, _ = e.inspect(t, "tools/call", "--tool-name", "agent_run", "--tool-arg", "agent_id=insp-1", "text=say exactly: hello from the inspector", "timeout=120")
	if txt, isErr := callText(t, out); isErr || txt != `{"text":"hello from the inspector"}` {
		t.Fatalf("agent_run = %q %v", txt, isErr)
	}
	out, _ = e.inspect(t, "tools/call", "--tool-name", "agent_status", "--tool-arg", "agent_id=insp-1")
	txt, isErr := callText(t, out)
	var st verbs.AgentStatus
	if err := json.Unmarshal([]byte(txt), &st); err != nil || isErr || st.Status != "idle" || st.Turn != 1 || st.Cwd != e.work || st.Usage.OutputTokens == 0 {
		t.Fatalf("agent_status = %q %v", txt, isErr)
	}
	// The other tools, each called once: the Inspector's SDK checks a
	// result's structuredContent against the tool's outputSchema.
	for _, c := range []struct {
		args []string
		want string
		err  bool
	}{
		{[]string{"agent_list"}, `"agent_id":"insp-1"`, false},
		{[]string{"agent_output", "agent_id=insp-1", "which=full_turn"}, `"text":"hello from the inspector"`, false},
		{[]string{"agent_set_model", "agent_id=insp-1", "model=opus"}, `"switched":`, false},
		{[]string{"agent_interrupt", "agent_id=insp-1"}, `{"interrupted":false}`, false},
		{[]string{"agent_permit", "agent_id=insp-1", "request_id=p-none", "decision=allow"}, "no pending permission request", true},
	} {
		argv := []string{"tools/call", "--tool-name", c.args[0]}
		if len(c.args) > 1 {
			argv = append(append(argv, "--tool-arg"), c.args[1:]...)
		}
		out, _ = e.inspect(t, argv[0], argv[1:]...)
		if txt, isErr := callText(t, out); isErr != c.err || !strings.Contains(txt, c.want) {
			t.Errorf("%s = %q %v", c.args[0], txt, isErr)
		}
	}
	out, _ = e.inspect(t, "tools/call", "--tool-name", "agent_close", "--tool-arg", "agent_id=insp-1")
	if txt, isErr := callText(t, out); isErr || txt != `{"closed":true}` {
		t.Fatalf("agent_close = %q %v", txt, isErr)
	}
	// The CLI sees what the MCP client did.
	e.okJSON(&st, "status", "insp-1")
	if st.Status != "dead" {
		t.Fatalf("status after agent_close = %+v", st)
	}
	// A failure is a tool error with a message to act on.
	out, _ = e.inspect(t, "tools/call", "--tool-name", "agent_send", "--tool-arg", "agent_id=insp-1", "text=anyone?")
	if txt, isErr := callText(t, out); !isErr || !strings.Contains(txt, "agent insp-1 is dead; reopen it") {
		t.Fatalf("agent_send to a dead agent = %q %v", txt, isErr)
	}
	out, _ = e.inspect(t, "tools/call", "--tool-name", "agent_diff", "--tool-arg", "agent_id=insp-1")
	if txt, isErr := callText(t, out); !isErr || !strings.Contains(txt, "agent insp-1 has no worktree") || !strings.Contains(txt, "--worktree") {
		t.Fatalf("agent_diff of an agent without a worktree = %q %v", txt, isErr)
	}
	out, _ = e.inspect(t, "tools/call", "--tool-name", "agent_forget", "--tool-arg", `agent_ids=["insp-1"]`)
	if txt, isErr := callText(t, out); isErr || txt != `{"forgotten":["insp-1"]}` {
		t.Fatalf("agent_forget = %q %v", txt, isErr)
	}
}

// doorClient connects to the daemon's MCP door with the headers of an
// agent's generated MCP config (or forged ones).
func doorClient(t *testing.T, url string, headers map[string]string) (*client.Client, error) {
	t.Helper()
	c, err := client.NewStreamableHttpClient(url, transport.WithHTTPHeaders(headers))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.Start(ctx); err != nil {
		return nil, err
	}
	var init mcp.InitializeRequest
	init.Params.ProtocolVersion = mcp.LATEST_PROTOCOL_VERSION
	init.Params.ClientInfo = mcp.Implementation{Name: "kaimon-e2e", Version: "1"}
	if _, err := c.Initialize(ctx, init); err != nil {
		return nil, err
	}
	return c, nil
}

// agentDoor reads an agent's generated MCP config: the door's URL and the
// headers the agent's calls carry.
func (e *kenv) agentDoor(t *testing.T, id string) (string, map[string]string) {
	t.Helper()
	b, err := os.ReadFile(e.paths().Agent(id).MCPConfig)
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		MCPServers map[string]struct {
			Type    string            `json:"type"`
			URL     string            `json:"url"`
			Headers map[string]string `json:"headers"`
		} `json:"mcpServers"`
	}
	if err := json.Unmarshal(b, &cfg); err != nil {
		t.Fatal(err)
	}
	k := cfg.MCPServers["kaimon"]
	if k.Type != "http" || k.Headers["X-Kaimon-Agent"] != id || !strings.HasPrefix(k.Headers["Authorization"], "Bearer ") {
		t.Fatalf("%s-mcp.json: %s", id, b)
	}
	return k.URL, k.Headers
}

func doorCall(t *testing.T, c *client.Client, name string, args map[string]any) (string, bool) {
	t.Helper()
	var req mcp.CallToolRequest
	req.Params.Name = name
	req.Params.Arguments = args
	res, err := c.CallTool(context.Background(), req)
	if err != nil {
		return err.Error(), true
	}
	var parts []string
	for _, x := range res.Content {
		if tc, ok := x.(mcp.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, "\n"), res.IsError
}

func (e *kenv) daemonLog(t *testing.T) string {
	b, _ := os.ReadFile(filepath.Join(e.home, "cache", "agents", "agentd.log"))
	return string(b)
}

// TestDoor has real claude agents call kaimon back through the daemon's
// MCP door (the fake model API scripts the tool calls), with each agent's
// preset enforced there.
func TestDoor(t *testing.T) {
	e := newEnv(t)
	call := "call tool: mcp__kaimon__agent_list {}"

	// lab without the recursion guard: the call reaches the door and the
	// agent gets the list, itself in it.
	lab := e.ok("open", "--permission", "lab", "--no-recursion-guard", e.work)
	var ds apitype.DaemonStatus
	e.okJSON(&ds, "daemon", "status")
	if !strings.HasPrefix(ds.Door, "http://127.0.0.1:") {
		t.Fatalf("daemon status door %q", ds.Door)
	}
	if b, err := os.ReadFile(filepath.Join(e.home, "sock", "door.json")); err != nil || !strings.Contains(string(b), ds.Door) {
		t.Fatalf("door.json: %s %v", b, err)
	}
	out := e.ok("run", lab, call)
	if !strings.HasPrefix(out, `Tool said: {"agents":[`) || !strings.Contains(out, `"agent_id":"`+lab+`"`) {
		t.Fatalf("lab agent_list through the door = %q", out)
	}
	if log := e.daemonLog(t); !strings.Contains(log, "door: agent "+lab+" calls agent_list") {
		t.Fatalf("the door did not see the call; daemon log:\n%s", log)
	}

	// The default recursion guard: the CLI does not even offer the tool,
	// and the door refuses the agent's token too.
	guarded := e.ok("open", "--permission", "lab", e.work)
	if out := e.ok("run", guarded, call); !strings.Contains(out, "No such tool available: mcp__kaimon__agent_list") {
		t.Fatalf("guarded agent's call = %q", out)
	}
	url, headers := e.agentDoor(t, guarded)
	if url != ds.Door {
		t.Fatalf("agent's MCP config names %s, the daemon's door is %s", url, ds.Door)
	}
	c, err := doorClient(t, url, headers)
	if err != nil {
		t.Fatal(err)
	}
	if txt, isErr := doorCall(t, c, "agent_list", nil); !isErr || !strings.Contains(txt, "recursion guard refuses mcp__kaimon__agent_list") {
		t.Fatalf("guarded agent's token at the door: %q %v", txt, isErr)
	}
	// A caller's own deny list replaces the guard in the CLI's list, so
	// the CLI lets the call go; the door still refuses it.
	custom := e.ok("open", "--permission", "lab", "--disallow", "Task", e.work)
	if out := e.ok("run", custom, call); !strings.Contains(out, "recursion guard refuses mcp__kaimon__agent_list") {
		t.Fatalf("custom deny list agent's call = %q", out)
	}
	if log := e.daemonLog(t); !strings.Contains(log, "door: agent "+custom+": agent_list refused") {
		t.Fatalf("the door did not refuse the call; daemon log:\n%s", log)
	}

	// only: a kaimon tool the allowlist does not name is invisible (the
	// model is not offered it) and refused; the named one works.
	only := e.ok("open", "--only", "--allow", "mcp__kaimon__agent_list", "--no-recursion-guard", e.work)
	status := `call tool: mcp__kaimon__agent_status {"agent_id":"` + lab + `"}`
	if out := e.ok("run", only, status); !strings.Contains(out, "No such tool available: mcp__kaimon__agent_status") {
		t.Fatalf("only agent's call of an unnamed tool = %q", out)
	}
	offered := map[string]bool{}
	for _, r := range e.api.Requests() {
		if r.LastUserText == status {
			for _, name := range r.Tools {
				offered[name] = true
			}
		}
	}
	if !offered["mcp__kaimon__agent_list"] || offered["mcp__kaimon__agent_status"] || offered["Bash"] {
		t.Fatalf("under only the model was offered %v", offered)
	}
	if out := e.ok("run", only, call); !strings.Contains(out, `"agent_id":"`+only+`"`) {
		t.Fatalf("only agent's agent_list = %q", out)
	}
	url, headers = e.agentDoor(t, only)
	c, err = doorClient(t, url, headers)
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.ListTools(context.Background(), mcp.ListToolsRequest{})
	if err != nil || len(res.Tools) != 1 || res.Tools[0].Name != "agent_list" {
		t.Fatalf("only agent's tools/list: %+v %v", res, err)
	}
	if txt, isErr := doorCall(t, c, "agent_status", map[string]any{"agent_id": lab}); !isErr || !strings.Contains(txt, "not found") {
		t.Fatalf("only agent's agent_status at the door: %q %v", txt, isErr)
	}

	// A forged or missing token gets nothing: 401 before any MCP.
	for name, h := range map[string]map[string]string{
		"no token":      {"X-Kaimon-Agent": lab},
		"forged token":  {"X-Kaimon-Agent": lab, "Authorization": "Bearer " + strings.Repeat("ab", 32)},
		"other's token": {"X-Kaimon-Agent": lab, "Authorization": headers["Authorization"]},
	} {
		req, _ := http.NewRequest("POST", ds.Door, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"agent_list","arguments":{}}}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		for k, v := range h {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("%s: status %d", name, resp.StatusCode)
		}
		if _, err := doorClient(t, ds.Door, h); err == nil {
			t.Errorf("%s: an MCP session initialized", name)
		}
	}

	// A closed agent's token stops working, and its config is gone.
	e.ok("close", only)
	if _, err := os.Stat(e.paths().Agent(only).MCPConfig); !os.IsNotExist(err) {
		t.Errorf("%s-mcp.json outlived the agent: %v", only, err)
	}
	if txt, isErr := doorCall(t, c, "agent_list", nil); !isErr {
		t.Errorf("a closed agent's token still calls: %q", txt)
	}
}

// pendingPermission waits for a pending permission event (no decision)
// whose tool input mentions needle, in the agent's event log.
func (e *kenv) pendingPermission(t *testing.T, id, needle string) event.PermissionData {
	t.Helper()
	var found event.PermissionData
	waitFor(t, "a permission request of "+id, 60*time.Second, func() bool {
		for _, p := range e.permissions(t, id) {
			if p.Decision == "" && strings.Contains(string(p.ToolCall.RawInput), needle) {
				found = p
				return true
			}
		}
		return false
	})
	return found
}

func (e *kenv) permissions(t *testing.T, id string) []event.PermissionData {
	b, _ := os.ReadFile(e.paths().Agent(id).Events)
	var out []event.PermissionData
	for _, line := range strings.Split(string(b), "\n") {
		var r event.Record
		if json.Unmarshal([]byte(line), &r) != nil || r.Kind != event.Permission {
			continue
		}
		var p event.PermissionData
		json.Unmarshal(r.Data, &p)
		out = append(out, p)
	}
	return out
}

func (e *kenv) waitDone(t *testing.T, id string, turn int) verbs.OutputResult {
	t.Helper()
	var o verbs.OutputResult
	waitFor(t, fmt.Sprintf("turn %d of %s to end", turn, id), 60*time.Second, func() bool {
		e.okJSON(&o, "output", id, "--turn", fmt.Sprint(turn))
		return o.Done
	})
	return o
}

// TestPermit answers a real claude CLI's permission requests with `kaimon
// permit`: a Bash call outside the agent's directory, which the default
// preset (acceptEdits) does not allow by itself.
func TestPermit(t *testing.T) {
	e := newEnv(t)
	id := e.ok("open", e.work)
	outside := filepath.Join(e.home, "outside")

	// allow: the command runs.
	e.ok("send", id, "run command: touch "+outside+"-1")
	p := e.pendingPermission(t, id, outside+"-1")
	if p.ToolCall.Title != "Bash" || p.ToolCall.Kind != "execute" || p.ToolCall.Status != "pending" || len(p.Options) == 0 || p.ExpiresAt == "" {
		t.Fatalf("permission event %+v", p)
	}
	var st verbs.AgentStatus
	e.okJSON(&st, "status", id)
	if st.Status != "working" || len(st.PendingPermissions) != 1 {
		t.Fatalf("status while waiting for permission: %q, pending %+v", st.Status, st.PendingPermissions)
	}
	if pp := st.PendingPermissions[0]; pp.RequestID != p.RequestID || pp.Tool != "Bash" || pp.ExpiresAt != p.ExpiresAt {
		t.Fatalf("pending permission in status %+v, event %+v", pp, p)
	}
	// People see it as its own state, with the command that answers it.
	if out := e.ok("list"); !strings.Contains(out, "working (asks permission)") {
		t.Fatalf("list while waiting for permission:\n%s", out)
	}
	if out := e.ok("status", id); !strings.Contains(out, "kaimon permit "+id+" "+p.RequestID+" allow") {
		t.Fatalf("status while waiting for permission:\n%s", out)
	}
	if out := e.ok("permit", id, p.RequestID, "allow"); out != "allowed" {
		t.Fatalf("permit = %q", out)
	}
	if o := e.waitDone(t, id, 1); o.Text != "Tool said: (Bash completed with no output). Done." {
		t.Fatalf("allowed turn = %q", o.Text)
	}
	if _, err := os.Stat(outside + "-1"); err != nil {
		t.Fatalf("the allowed command did not run: %v", err)
	}
	var after verbs.AgentStatus
	if e.okJSON(&after, "status", id); len(after.PendingPermissions) != 0 {
		t.Fatalf("pending after the answer: %+v", after.PendingPermissions)
	}
	ps := e.permissions(t, id)
	if last := ps[len(ps)-1]; last.RequestID != p.RequestID || last.Decision != "allow" || last.By != "user" {
		t.Fatalf("decision event %+v", last)
	}
	// Answered already: a clear error.
	e.fails(1, "already decided: allowed (user)", "permit", id, p.RequestID, "deny")
	e.fails(2, "allow or deny", "permit", id, p.RequestID, "maybe")

	// deny (as JSON): the agent reads the refusal as the tool's error.
	e.ok("send", id, "run command: touch "+outside+"-2")
	p = e.pendingPermission(t, id, outside+"-2")
	var pr verbs.PermitResult
	e.okJSON(&pr, "permit", id, p.RequestID, "deny")
	if pr.Permitted {
		t.Fatal("deny reported permitted")
	}
	if o := e.waitDone(t, id, 2); o.Text != "Tool said: the user denied this tool call (is_error). Done." {
		t.Fatalf("denied turn = %q", o.Text)
	}
	if _, err := os.Stat(outside + "-2"); !os.IsNotExist(err) {
		t.Fatalf("the denied command ran: %v", err)
	}
	e.fails(1, "no pending permission request", "permit", id, "pnope", "allow")

	// interrupt: the CLI withdraws its question, and the request is
	// decided as cancelled.
	e.ok("send", id, "run command: touch "+outside+"-3")
	p = e.pendingPermission(t, id, outside+"-3")
	e.ok("interrupt", id)
	e.waitDone(t, id, 3)
	waitFor(t, "the withdrawn request's decision", 10*time.Second, func() bool {
		ps := e.permissions(t, id)
		last := ps[len(ps)-1]
		return last.RequestID == p.RequestID && last.Decision == "deny" && last.By == "cancelled"
	})
	e.fails(1, "already decided: denied (cancelled)", "permit", id, p.RequestID, "allow")
}

// TestPermitTimeout: a request nobody answers is denied after the
// configured timeout, and the decision is published.
func TestPermitTimeout(t *testing.T) {
	e := newEnv(t, "KAIMON_PERMISSION_TIMEOUT", "1")
	id := e.ok("open", e.work)
	outside := filepath.Join(e.home, "outside")
	r := e.kaimon("run", id, "run command: touch "+outside)
	if r.code != 0 || !strings.Contains(r.stdout, "nobody answered this permission request within 1s, so it is denied") {
		t.Fatalf("unanswered turn: %s", r)
	}
	if _, err := os.Stat(outside); !os.IsNotExist(err) {
		t.Fatalf("the unanswered command ran: %v", err)
	}
	ps := e.permissions(t, id)
	if len(ps) != 2 || ps[0].Decision != "" || ps[1].Decision != "deny" || ps[1].By != "timeout" || ps[1].RequestID != ps[0].RequestID {
		t.Fatalf("permission events %+v", ps)
	}
	// The person waiting on kaimon run was told what to do.
	if hint := "kaimon permit " + id + " " + ps[0].RequestID + " allow"; !strings.Contains(r.stderr, "asks permission for Bash") || !strings.Contains(r.stderr, hint) {
		t.Fatalf("run's stderr does not say how to answer (%q): %s", hint, r)
	}
}
