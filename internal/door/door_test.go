package door

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/kaimon/kaimon/internal/backend"
	"github.com/kaimon/kaimon/internal/policy"
	"github.com/kaimon/kaimon/internal/testutil/backendtest"
	"github.com/kaimon/kaimon/internal/verbs"
)

// svc is a verbs.Service that answers agent_list and records every call
// that reaches it.
type svc struct {
	verbs.Service // nil: any other verb panics, which mcp-go recovers as an error
	mu            sync.Mutex
	calls         []string
}

func (s *svc) note(v string) {
	s.mu.Lock()
	s.calls = append(s.calls, v)
	s.mu.Unlock()
}

func (s *svc) List(ctx context.Context, a *verbs.ListArgs) (*verbs.ListResult, error) {
	s.note("list")
	return &verbs.ListResult{Agents: []verbs.ListEntry{{AgentID: "x1"}}}, nil
}

func (s *svc) Status(ctx context.Context, a *verbs.StatusArgs) (*verbs.AgentStatus, error) {
	s.note("status")
	return &verbs.AgentStatus{Status: "idle"}, nil
}

func (s *svc) Permit(ctx context.Context, a *verbs.PermitArgs) (*verbs.PermitResult, error) {
	s.note("permit " + a.AgentID)
	return &verbs.PermitResult{Permitted: true}, nil
}

// Open resolves the new agent's policy as the session manager does, with
// the parent the request carries.
func (s *svc) Open(ctx context.Context, a *verbs.OpenArgs) (*verbs.OpenResult, error) {
	s.note("open " + a.Permission)
	if _, err := policy.ForOpen(a, policy.CallerOf(ctx)); err != nil {
		return nil, err
	}
	return &verbs.OpenResult{AgentID: "child"}, nil
}

func (s *svc) reached() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.calls...)
}

func startDoor(t *testing.T) (*Door, *svc) {
	t.Helper()
	s := &svc{}
	d := New(s)
	if err := d.Listen("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { d.Serve(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	if !strings.HasPrefix(d.URL(), "http://127.0.0.1:") || !strings.HasSuffix(d.URL(), "/mcp") || d.Port() == 0 {
		t.Fatalf("url %q port %d", d.URL(), d.Port())
	}
	return d, s
}

// connect opens an MCP session with the headers kaimon's generated config
// carries.
func connect(t *testing.T, d *Door, id, token string) (*client.Client, error) {
	t.Helper()
	c, err := client.NewStreamableHttpClient(d.URL(), transport.WithHTTPHeaders(map[string]string{
		"Authorization": "Bearer " + token, backend.HeaderAgent: id,
	}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if err := c.Start(t.Context()); err != nil {
		return nil, err
	}
	var init mcp.InitializeRequest
	init.Params.ProtocolVersion = mcp.LATEST_PROTOCOL_VERSION
	init.Params.ClientInfo = mcp.Implementation{Name: "door-test", Version: "1"}
	if _, err := c.Initialize(t.Context(), init); err != nil {
		return nil, err
	}
	return c, nil
}

func mustConnect(t *testing.T, d *Door, id, token string) *client.Client {
	t.Helper()
	c, err := connect(t, d, id, token)
	if err != nil {
		t.Fatalf("connect as %s: %v", id, err)
	}
	return c
}

func callTool(t *testing.T, c *client.Client, name string, args map[string]any) (string, bool) {
	t.Helper()
	var req mcp.CallToolRequest
	req.Params.Name = name
	req.Params.Arguments = args
	res, err := c.CallTool(t.Context(), req)
	if err != nil {
		return err.Error(), true
	}
	var out []string
	for _, c := range res.Content {
		if tc, ok := c.(mcp.TextContent); ok {
			out = append(out, tc.Text)
		}
	}
	return strings.Join(out, "\n"), res.IsError
}

func listed(t *testing.T, c *client.Client) []string {
	t.Helper()
	res, err := c.ListTools(t.Context(), mcp.ListToolsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range res.Tools {
		names = append(names, tool.Name)
	}
	sort.Strings(names)
	return names
}

// A request without the token of an admitted agent gets 401 and nothing
// else: no token, a forged one, another agent's token, a revoked one.
func TestForgedTokenGetsNothing(t *testing.T) {
	d, s := startDoor(t)
	none := []string{}
	tok := d.Admit(backendtest.Resolved(t, backend.Options{OpenArgs: verbs.OpenArgs{ID: "a1", Permission: "lab", DisallowedTools: &none}}))
	other := d.Admit(backendtest.Resolved(t, backend.Options{OpenArgs: verbs.OpenArgs{ID: "a2", Permission: "lab", DisallowedTools: &none}}))
	if len(tok) != 64 || tok == other {
		t.Fatalf("tokens %q %q", tok, other)
	}
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"agent_list","arguments":{}}}`
	for name, h := range map[string]map[string]string{
		"no headers":            {},
		"no token":              {backend.HeaderAgent: "a1"},
		"forged token":          {backend.HeaderAgent: "a1", "Authorization": "Bearer " + strings.Repeat("0", 64)},
		"another agent's token": {backend.HeaderAgent: "a1", "Authorization": "Bearer " + other},
		"a prefix of the token": {backend.HeaderAgent: "a1", "Authorization": "Bearer " + tok[:32]},
		"the token and more":    {backend.HeaderAgent: "a1", "Authorization": "Bearer " + tok + "0"},
		"token without id":      {"Authorization": "Bearer " + tok},
		"unknown agent":         {backend.HeaderAgent: "zz", "Authorization": "Bearer " + tok},
		"basic auth":            {backend.HeaderAgent: "a1", "Authorization": "Basic " + tok},
	} {
		req, _ := http.NewRequest("POST", d.URL(), strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		for k, v := range h {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var e map[string]string
		json.NewDecoder(resp.Body).Decode(&e)
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized || e["code"] != "unauthorized" || resp.Header.Get("WWW-Authenticate") == "" {
			t.Errorf("%s: status %d body %v", name, resp.StatusCode, e)
		}
	}
	// An MCP client with a forged token cannot even initialize.
	if _, err := connect(t, d, "a1", "forged"); err == nil {
		t.Error("a forged token initialized a session")
	}
	// A revoked token stops working; a stale revoke does not touch the new one.
	c := mustConnect(t, d, "a1", tok)
	if out, isErr := callTool(t, c, "agent_list", nil); isErr {
		t.Fatalf("admitted agent_list: %s", out)
	}
	d.Revoke("a1", tok)
	if out, isErr := callTool(t, c, "agent_list", nil); !isErr {
		t.Errorf("revoked token still calls: %s", out)
	}
	tok2 := d.Admit(backendtest.Resolved(t, backend.Options{OpenArgs: verbs.OpenArgs{ID: "a1", Permission: "lab", DisallowedTools: &none}}))
	d.Revoke("a1", tok)
	mustConnect(t, d, "a1", tok2)
	if got := s.reached(); len(got) != 1 {
		t.Errorf("calls that reached the service: %v", got)
	}
}

// The door applies each caller's preset: the recursion guard, specialist's
// allowlist, and only's hiding.
func TestPolicyAtTheDoor(t *testing.T) {
	d, s := startDoor(t)
	none := []string{}
	// Every verb's tool, as tools/list sorts them: the table's, not a
	// list of its own.
	var all []string
	for _, v := range verbs.All {
		all = append(all, v.Name)
	}
	slices.Sort(all)

	// The default recursion guard: listed, refused at tools/call.
	guarded := mustConnect(t, d, "g", d.Admit(backendtest.Resolved(t, backend.Options{OpenArgs: verbs.OpenArgs{ID: "g", Permission: "lab"}})))
	if got := listed(t, guarded); strings.Join(got, " ") != strings.Join(all, " ") {
		t.Errorf("guarded lists %v", got)
	}
	out, isErr := callTool(t, guarded, "agent_list", nil)
	if !isErr || !strings.Contains(out, "recursion guard refuses mcp__kaimon__agent_list") || !strings.Contains(out, "disallowed_tools = []") {
		t.Errorf("guarded agent_list = %v %q", isErr, out)
	}
	// A caller's own deny list replaces the guard in the CLI, not here.
	custom := mustConnect(t, d, "c", d.Admit(backendtest.Resolved(t, backend.Options{OpenArgs: verbs.OpenArgs{ID: "c", Permission: "lab", DisallowedTools: &[]string{"Task"}}})))
	if out, isErr := callTool(t, custom, "agent_status", map[string]any{"agent_id": "x1"}); !isErr || !strings.Contains(out, "recursion guard") {
		t.Errorf("custom deny list agent_status = %v %q", isErr, out)
	}

	// lab with disallowed_tools = []: allowed.
	lab := mustConnect(t, d, "l", d.Admit(backendtest.Resolved(t, backend.Options{OpenArgs: verbs.OpenArgs{ID: "l", Permission: "lab", DisallowedTools: &none}})))
	if out, isErr := callTool(t, lab, "agent_list", nil); isErr || out != `{"agents":[{"agent_id":"x1","status":"","model":"","cwd":"","turn":0,"created_at":"","last_activity":"","session_id":"","transcript":"","event_log":"","usage":{"inputTokens":0,"outputTokens":0,"cacheReadTokens":0,"cacheCreationTokens":0,"costUsd":0},"queues_prompts":false}]}` {
		t.Errorf("lab agent_list = %v %q", isErr, out)
	}
	// It cannot answer its own permission requests, but another's.
	if out, isErr := callTool(t, lab, "agent_permit", map[string]any{"agent_id": "l", "request_id": "p1", "decision": "allow"}); !isErr || !strings.Contains(out, "its own permission requests") {
		t.Errorf("self permit = %v %q", isErr, out)
	}
	if out, isErr := callTool(t, lab, "agent_permit", map[string]any{"agent_id": "x1", "request_id": "p1", "decision": "allow"}); isErr {
		t.Errorf("permit of another agent = %q", out)
	}

	// specialist: only what allowed_tools names.
	spec := mustConnect(t, d, "s", d.Admit(backendtest.Resolved(t, backend.Options{OpenArgs: verbs.OpenArgs{ID: "s", Permission: "specialist", DisallowedTools: &none, AllowedTools: []string{"mcp__kaimon__agent_status"}}})))
	if out, isErr := callTool(t, spec, "agent_status", map[string]any{"agent_id": "x1"}); isErr {
		t.Errorf("specialist agent_status = %q", out)
	}
	if out, isErr := callTool(t, spec, "agent_list", nil); !isErr || !strings.Contains(out, "not in this agent's allowed_tools") {
		t.Errorf("specialist agent_list = %v %q", isErr, out)
	}

	// only: a tool not named is invisible and refused as unknown.
	only := mustConnect(t, d, "o", d.Admit(backendtest.Resolved(t, backend.Options{OpenArgs: verbs.OpenArgs{ID: "o", Only: true, DisallowedTools: &none, AllowedTools: []string{"Read", "mcp__kaimon__agent_list"}}})))
	if got := listed(t, only); strings.Join(got, " ") != "agent_list" {
		t.Errorf("only lists %v", got)
	}
	if out, isErr := callTool(t, only, "agent_status", map[string]any{"agent_id": "x1"}); !isErr || !strings.Contains(out, "not found") {
		t.Errorf("only agent_status = %v %q", isErr, out)
	}
	if out, isErr := callTool(t, only, "agent_list", nil); isErr {
		t.Errorf("only agent_list = %q", out)
	}

	if got := strings.Join(s.reached(), ","); got != "list,permit x1,status,list" {
		t.Errorf("calls that reached the service: %s", got)
	}
}

// An agent_open through the door carries the caller's policy as the
// parent's, so that the new agent is capped at it: a lab agent opens a lab
// agent, not a bypass one.
func TestOpenCarriesParentPolicy(t *testing.T) {
	d, s := startDoor(t)
	none := []string{}
	cwd := t.TempDir()
	c := mustConnect(t, d, "p", d.Admit(backendtest.Resolved(t, backend.Options{OpenArgs: verbs.OpenArgs{ID: "p", Cwd: cwd, Permission: "lab", DisallowedTools: &none}})))
	if txt, isErr := callTool(t, c, "agent_open", map[string]any{"cwd": cwd, "permission": "lab"}); isErr {
		t.Fatalf("lab opens lab: %s", txt)
	}
	txt, isErr := callTool(t, c, "agent_open", map[string]any{"cwd": cwd, "permission": "bypass"})
	if !isErr || !strings.Contains(txt, "preset bypass runs without permission checks") || !strings.Contains(txt, "runs under preset lab") {
		t.Fatalf("lab opens bypass: %q %v", txt, isErr)
	}
	if got := s.reached(); !slices.Equal(got, []string{"open lab", "open bypass"}) {
		t.Fatalf("the service saw %v", got)
	}
}

// The path arguments of an agent_open made through the door stay inside the
// calling agent's cwd; relative ones are taken from there.
func TestOpenPathsConfinedToCallersCwd(t *testing.T) {
	root := t.TempDir()
	cwd := filepath.Join(root, "agent")
	if err := os.MkdirAll(filepath.Join(cwd, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(root, filepath.Join(cwd, "out")); err != nil {
		t.Fatal(err)
	}
	real := func(p string) string { r, _ := filepath.EvalSymlinks(p); return r }
	cases := []struct {
		a       verbs.OpenArgs
		wantCwd string
		wantErr string
	}{
		{verbs.OpenArgs{Cwd: filepath.Join(cwd, "sub")}, real(filepath.Join(cwd, "sub")), ""},
		{verbs.OpenArgs{Cwd: "sub"}, real(filepath.Join(cwd, "sub")), ""},
		{verbs.OpenArgs{Cwd: "."}, real(cwd), ""},
		{verbs.OpenArgs{Cwd: root}, "", "outside the agent's working directory"},
		{verbs.OpenArgs{Cwd: "../"}, "", "outside the agent's working directory"},
		{verbs.OpenArgs{Cwd: "out"}, "", "outside the agent's working directory"},
		{verbs.OpenArgs{Cwd: "sub", MCPConfig: "/etc/passwd"}, "", "outside the agent's working directory"},
	}
	for _, c := range cases {
		a := c.a
		err := confineOpen(cwd, &a)
		switch {
		case c.wantErr == "" && (err != nil || a.Cwd != c.wantCwd):
			t.Errorf("%+v: cwd %q err %v, want %q", c.a, a.Cwd, err, c.wantCwd)
		case c.wantErr != "" && (err == nil || !strings.Contains(err.Error(), c.wantErr)):
			t.Errorf("%+v: err %v, want %q", c.a, err, c.wantErr)
		}
	}
}

func TestWriteInfo(t *testing.T) {
	d, _ := startDoor(t)
	path := filepath.Join(t.TempDir(), "door.json")
	if err := d.WriteInfo(path); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(path)
	var info Info
	if err := json.Unmarshal(b, &info); err != nil || info.URL != d.URL() || info.Port != d.Port() || info.PID != os.Getpid() {
		t.Fatalf("door.json %s: %v", b, err)
	}
	if st, _ := os.Stat(path); st.Mode().Perm() != 0o600 {
		t.Errorf("door.json mode %v", st.Mode())
	}
}

// zeros is an endless body, so that a test sends megabytes without
// holding them.
type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = ' '
	}
	return len(p), nil
}

// An admitted agent's body over verbs.MaxBody is 413, found from its
// Content-Length before reading, or while reading when it has none: never
// read whole.
func TestOversizedBody(t *testing.T) {
	d, _ := startDoor(t)
	tok := d.Admit(backendtest.Resolved(t, backend.Options{OpenArgs: verbs.OpenArgs{ID: "a1", Permission: "lab", DisallowedTools: &[]string{}}}))
	for name, length := range map[string]int64{"content-length": 50 << 20, "chunked": -1} {
		req, _ := http.NewRequest("POST", d.URL(), io.LimitReader(zeros{}, 50<<20))
		req.ContentLength = length
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set(backend.HeaderAgent, "a1")
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var e map[string]string
		json.NewDecoder(resp.Body).Decode(&e)
		resp.Body.Close()
		if resp.StatusCode != http.StatusRequestEntityTooLarge || e["code"] != "too_large" || !strings.Contains(e["error"], "16 MiB") {
			t.Errorf("%s: status %d body %v", name, resp.StatusCode, e)
		}
	}
	// A body within the limit still reaches MCP.
	c := mustConnect(t, d, "a1", tok)
	if out, isErr := callTool(t, c, "agent_list", nil); isErr {
		t.Fatalf("agent_list after oversized bodies: %s", out)
	}
}
