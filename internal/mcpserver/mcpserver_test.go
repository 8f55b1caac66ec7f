package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/mcptest"

	"github.com/kaimon/kaimon/internal/agentbin"
	"github.com/kaimon/kaimon/internal/apitype"
	"github.com/kaimon/kaimon/internal/verbs"
)

// fakeSvc answers every verb from canned results and records the calls.
type fakeSvc struct {
	mu      sync.Mutex
	calls   []string
	runWait time.Duration
	outputs int
}

func (f *fakeSvc) note(s string) {
	f.mu.Lock()
	f.calls = append(f.calls, s)
	f.mu.Unlock()
}

func (f *fakeSvc) Open(ctx context.Context, a *verbs.OpenArgs) (*verbs.OpenResult, error) {
	b, _ := json.Marshal(a)
	f.note("open " + string(b))
	return &verbs.OpenResult{AgentID: "ab12"}, nil
}
func (f *fakeSvc) Send(ctx context.Context, a *verbs.SendArgs) (*verbs.SendResult, error) {
	return &verbs.SendResult{Turn: 3}, nil
}
func (f *fakeSvc) Run(ctx context.Context, a *verbs.RunArgs) (*verbs.RunResult, error) {
	f.note("run " + a.Text)
	select {
	case <-time.After(f.runWait):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if a.Text == "fail" {
		return nil, &verbs.Error{Code: verbs.CodeTurnFailed, Message: "agent ab12 turn 1 failed: boom", Text: "half a reply"}
	}
	return &verbs.RunResult{Text: "reply to " + a.Text}, nil
}
func (f *fakeSvc) Output(ctx context.Context, a *verbs.OutputArgs) (*verbs.OutputResult, error) {
	f.mu.Lock()
	f.outputs++
	f.mu.Unlock()
	return &verbs.OutputResult{AgentID: a.AgentID, Turn: 1, Status: "working", Text: "partial words"}, nil
}
func (f *fakeSvc) Status(ctx context.Context, a *verbs.StatusArgs) (*verbs.AgentStatus, error) {
	return nil, verbs.NotFound("no agent %q: see `kaimon list`", a.AgentID)
}
func (f *fakeSvc) SetModel(ctx context.Context, a *verbs.SetModelArgs) (*verbs.SetModelResult, error) {
	return &verbs.SetModelResult{}, nil
}
func (f *fakeSvc) List(ctx context.Context, a *verbs.ListArgs) (*verbs.ListResult, error) {
	return &verbs.ListResult{Agents: []verbs.ListEntry{}}, nil
}
func (f *fakeSvc) Interrupt(ctx context.Context, a *verbs.InterruptArgs) (*verbs.InterruptResult, error) {
	return &verbs.InterruptResult{}, nil
}
func (f *fakeSvc) Close(ctx context.Context, a *verbs.CloseArgs) (*verbs.CloseResult, error) {
	return nil, errors.New("kaimon-agentd is not running: start it with `kaimon daemon start`")
}
func (f *fakeSvc) Diff(ctx context.Context, a *verbs.DiffArgs) (*verbs.DiffResult, error) {
	return &verbs.DiffResult{AgentID: a.AgentID}, nil
}
func (f *fakeSvc) Permit(ctx context.Context, a *verbs.PermitArgs) (*verbs.PermitResult, error) {
	f.note("permit " + a.RequestID + " " + string(a.Decision))
	return &verbs.PermitResult{Permitted: a.Decision == apitype.Allow}, nil
}

func start(t *testing.T, svc verbs.Service, o Options) *mcptest.Server {
	t.Helper()
	s := mcptest.NewUnstartedServer(t)
	s.AddTools(Tools(svc, o)...)
	s.AddServerOptions(ServerOptions(o)...)
	if err := s.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

func call(t *testing.T, s *mcptest.Server, name string, args map[string]any) *mcp.CallToolResult {
	t.Helper()
	var req mcp.CallToolRequest
	req.Params.Name = name
	req.Params.Arguments = args
	res, err := s.Client().CallTool(t.Context(), req)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return res
}

func text(t *testing.T, r *mcp.CallToolResult) string {
	t.Helper()
	if len(r.Content) != 1 {
		t.Fatalf("content %+v", r.Content)
	}
	tc, ok := r.Content[0].(mcp.TextContent)
	if !ok {
		t.Fatalf("content %T", r.Content[0])
	}
	return tc.Text
}

// The tools are the verb table: names in order, descriptions with the doc
// and the return, and every argument with its type, default, enum and
// description, required ones marked.
func TestToolsFromTheTable(t *testing.T) {
	s := start(t, &fakeSvc{}, Options{})
	res, err := s.Client().ListTools(t.Context(), mcp.ListToolsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	byName := map[string]mcp.Tool{}
	for _, tool := range res.Tools {
		names = append(names, tool.Name)
		byName[tool.Name] = tool
	}
	want := []string{"agent_open", "agent_send", "agent_run", "agent_output", "agent_status",
		"agent_set_model", "agent_list", "agent_interrupt", "agent_close", "agent_permit", "agent_forget", "agent_diff"}
	if !reflect.DeepEqual(sorted(names), sorted(want)) { // mcp-go lists them by name
		t.Fatalf("tools %v, want %v", names, want)
	}
	for _, v := range verbs.All {
		tool := byName[v.Name]
		if !strings.HasPrefix(tool.Description, v.Doc) || !strings.Contains(tool.Description, v.Returns) {
			t.Errorf("%s: description %q lacks its doc or return", v.Name, tool.Description)
		}
		b, _ := json.Marshal(tool.InputSchema)
		var schema struct {
			Type       string                    `json:"type"`
			Properties map[string]map[string]any `json:"properties"`
			Required   []string                  `json:"required"`
		}
		if err := json.Unmarshal(b, &schema); err != nil {
			t.Fatal(err)
		}
		if schema.Type != "object" || len(schema.Properties) != len(v.Args) {
			t.Errorf("%s: schema %s", v.Name, b)
		}
		var req []string
		for _, a := range v.Args {
			p := schema.Properties[a.Name]
			if p["type"] != a.Type || p["description"] != a.Doc {
				t.Errorf("%s.%s: property %v", v.Name, a.Name, p)
			}
			if a.Required {
				req = append(req, a.Name)
			}
		}
		if !reflect.DeepEqual(sorted(schema.Required), sorted(req)) {
			t.Errorf("%s: required %v, want %v", v.Name, schema.Required, req)
		}
	}
	open := schemaOf(t, byName["agent_open"])
	if open["model"]["default"] != "sonnet" || open["permission"]["default"] != "default" ||
		!reflect.DeepEqual(open["permission"]["enum"], []any{"default", "notebook", "specialist", "lab", "auto", "bypass"}) ||
		!reflect.DeepEqual(open["allowed_tools"]["items"], map[string]any{"type": "string"}) {
		t.Errorf("agent_open properties %v", open)
	}
	if d := byName["agent_send"].Description; !strings.Contains(d, "agent_send + agent_output is the non-blocking pattern") {
		t.Errorf("agent_send description %q", d)
	}
	if d := byName["agent_run"].Description; !strings.Contains(d, "progress") || !strings.Contains(d, "agent_output") {
		t.Errorf("agent_run description %q", d)
	}
	for _, v := range verbs.All { // the table's MCP note, where it has one
		if d := byName[v.Name].Description; !strings.Contains(d, v.Doc+" "+v.MCPNote) {
			t.Errorf("%s: description %q lacks the table's note %q", v.Name, d, v.MCPNote)
		}
	}
	run, output := schemaOf(t, byName["agent_run"]), schemaOf(t, byName["agent_output"])
	if run["timeout"]["exclusiveMinimum"] != 0.0 || run["timeout"]["maximum"] != 604800.0 || run["timeout"]["minimum"] != nil {
		t.Errorf("agent_run timeout %v", run["timeout"])
	}
	if output["max_chars"]["minimum"] != 1.0 || output["max_chars"]["maximum"] != 1e8 || output["turn"]["minimum"] != 0.0 {
		t.Errorf("agent_output max_chars %v, turn %v", output["max_chars"], output["turn"])
	}
	permit := schemaOf(t, byName["agent_permit"])
	if !reflect.DeepEqual(permit["decision"]["enum"], []any{"allow", "deny"}) {
		t.Errorf("agent_permit decision %v", permit["decision"])
	}
}

func schemaOf(t *testing.T, tool mcp.Tool) map[string]map[string]any {
	b, _ := json.Marshal(tool.InputSchema)
	var s struct {
		Properties map[string]map[string]any `json:"properties"`
	}
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatal(err)
	}
	return s.Properties
}

func sorted(s []string) []string {
	out := append([]string(nil), s...)
	sort.Strings(out)
	return out
}

// A call decodes its arguments through the table and returns the verb's
// JSON; every failure is a tool error with the verb's message.
func TestCalls(t *testing.T) {
	svc := &fakeSvc{}
	s := start(t, svc, Options{})

	r := call(t, s, "agent_open", map[string]any{"cwd": "/tmp", "disallowed_tools": []any{}, "allowed_tools": []any{"Bash"}})
	if r.IsError || text(t, r) != `{"agent_id":"ab12"}` {
		t.Fatalf("agent_open = %+v", r)
	}
	if got := svc.calls[0]; got != `open {"cwd":"/tmp","model":"sonnet","permission":"default","allowed_tools":["Bash"],"disallowed_tools":[]}` {
		t.Errorf("the service got %s", got)
	}
	// A number for a string argument is its text (the Inspector's CLI
	// sends agent_id=12345678 as a number).
	r = call(t, s, "agent_permit", map[string]any{"agent_id": 12345678, "request_id": "p1", "decision": "allow"})
	if r.IsError || text(t, r) != `{"permitted":true}` || svc.calls[len(svc.calls)-1] != "permit p1 allow" {
		t.Fatalf("agent_permit with a numeric id = %+v", r)
	}
	r = call(t, s, "agent_list", nil)
	if r.IsError || text(t, r) != `{"agents":[]}` {
		t.Fatalf("agent_list = %+v", r)
	}
	r = call(t, s, "agent_permit", map[string]any{"agent_id": "ab12", "request_id": "p1", "decision": "deny"})
	if r.IsError || text(t, r) != `{"permitted":false}` {
		t.Fatalf("agent_permit = %+v", r)
	}

	for _, tc := range []struct {
		name string
		args map[string]any
		want string
	}{
		{"agent_send", map[string]any{"agent_id": "ab12"}, "agent_send: argument text is required"},
		{"agent_send", map[string]any{"agent_id": "ab12", "text": "x", "colour": "red"}, `unknown argument "colour"`},
		{"agent_output", map[string]any{"agent_id": true}, "argument agent_id must be a string"},
		{"agent_output", map[string]any{"agent_id": "ab12", "turn": "2"}, "argument turn must be an integer"},
		{"agent_status", map[string]any{"agent_id": "zz"}, "no agent \"zz\": see the agent_list tool"},
		{"agent_close", map[string]any{"agent_id": "zz"}, "kaimon-agentd is not running: start it with `kaimon daemon start`"},
		{"agent_run", map[string]any{"agent_id": "ab12", "text": "fail"}, "agent ab12 turn 1 failed: boom\n\nThe turn's text so far:\nhalf a reply"},
	} {
		r := call(t, s, tc.name, tc.args)
		if !r.IsError || !strings.Contains(text(t, r), tc.want) {
			t.Errorf("%s %v = %+v, want a tool error containing %q", tc.name, tc.args, r, tc.want)
		}
	}
}

// agent_run reports progress while the turn runs when the client sent a
// progress token, and nothing after its result.
func TestRunProgress(t *testing.T) {
	svc := &fakeSvc{runWait: 400 * time.Millisecond}
	s := start(t, svc, Options{Progress: 50 * time.Millisecond})
	var mu sync.Mutex
	var got []map[string]any
	s.Client().OnNotification(func(n mcp.JSONRPCNotification) {
		if n.Method != "notifications/progress" {
			return
		}
		mu.Lock()
		got = append(got, n.Params.AdditionalFields)
		mu.Unlock()
	})
	progress := func() []map[string]any {
		mu.Lock()
		defer mu.Unlock()
		return append([]map[string]any(nil), got...)
	}
	var req mcp.CallToolRequest
	req.Params.Name = "agent_run"
	req.Params.Arguments = map[string]any{"agent_id": "ab12", "text": "hi"}
	req.Params.Meta = &mcp.Meta{ProgressToken: "tok-1"}
	res, err := s.Client().CallTool(t.Context(), req)
	if err != nil || res.IsError || text(t, res) != `{"text":"reply to hi"}` {
		t.Fatalf("agent_run = %+v, %v", res, err)
	}
	time.Sleep(150 * time.Millisecond)
	during := progress()
	if len(during) < 3 {
		t.Fatalf("%d progress notifications in 400ms at 50ms, want several: %v", len(during), during)
	}
	last := 0.0
	for _, p := range during {
		n, _ := p["progress"].(float64)
		if p["progressToken"] != "tok-1" || n <= last || !strings.Contains(p["message"].(string), "13 characters so far: …partial words") {
			t.Errorf("progress %v", p)
		}
		last = n
	}
	if len(during) > 9 {
		t.Errorf("%d notifications: some came after the result", len(during))
	}

	// Without a token, none.
	call(t, s, "agent_run", map[string]any{"agent_id": "ab12", "text": "again"})
	time.Sleep(100 * time.Millisecond)
	if after := progress(); len(after) != len(during) {
		t.Errorf("progress without a token: %v", after[len(during):])
	}
}

// Options.Visible hides tools (a hidden tool is unknown to tools/call
// too) and Options.Check refuses calls with a tool error.
func TestVisibleAndCheck(t *testing.T) {
	svc := &fakeSvc{}
	s := start(t, svc, Options{
		Visible: func(ctx context.Context, v *verbs.Verb) bool { return v.Name != "agent_close" },
		Check: func(ctx context.Context, v *verbs.Verb, args any) error {
			if v.Name == "agent_open" {
				return errors.New("the recursion guard refuses agent_open")
			}
			return nil
		},
	})
	res, err := s.Client().ListTools(t.Context(), mcp.ListToolsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tool := range res.Tools {
		if tool.Name == "agent_close" {
			t.Errorf("agent_close listed")
		}
	}
	if len(res.Tools) != len(verbs.All)-1 {
		t.Errorf("%d tools listed", len(res.Tools))
	}
	var req mcp.CallToolRequest
	req.Params.Name = "agent_close"
	req.Params.Arguments = map[string]any{"agent_id": "ab12"}
	if r, err := s.Client().CallTool(t.Context(), req); err == nil && !r.IsError {
		t.Errorf("hidden agent_close ran: %+v", r)
	}
	r := call(t, s, "agent_open", map[string]any{"cwd": "/tmp"})
	if !r.IsError || text(t, r) != "the recursion guard refuses agent_open" {
		t.Errorf("refused agent_open = %+v", r)
	}
	if len(svc.calls) != 0 {
		t.Errorf("refused calls reached the service: %v", svc.calls)
	}
}

func (f *fakeSvc) Forget(ctx context.Context, a *verbs.ForgetArgs) (*verbs.ForgetResult, error) {
	f.note("forget " + strings.Join(a.AgentIDs, " "))
	return &verbs.ForgetResult{Forgotten: a.AgentIDs}, nil
}

// Errors said in the CLI's words name the MCP tools that do the same: the
// client has no shell.
func TestErrorsNameTheTools(t *testing.T) {
	for _, c := range [][2]string{
		{"no agent \"zz\": see `kaimon list` for the agents kaimon knows", "no agent \"zz\": see the agent_list tool for the agents kaimon knows"},
		{"agent ab12 is dead; reopen it with `kaimon open --id ab12 DIR`", `agent ab12 is dead; reopen it with agent_open {"cwd":"DIR","id":"ab12"}`},
		{"resume its conversation with `kaimon open --id ab12 --resume`", `resume its conversation with agent_open {"id":"ab12","resume":true}`},
		{"stop the agent with `kaimon close ab12`", `stop the agent with agent_close {"agent_id":"ab12"}`},
		{"answer with `kaimon permit ab12 r1 allow`", `answer with agent_permit {"agent_id":"ab12","request_id":"r1","decision":"allow"}`},
		{"answer with `kaimon permit ab12 allow`", `answer with agent_permit {"agent_id":"ab12","decision":"allow"}`},
		{"forget them with `kaimon forget ab12 cd34 --logs`", `forget them with agent_forget {"agent_ids":["ab12","cd34"],"logs":true}`},
		// No verb, or words the verb does not take: as they were, or the tool named.
		{"start it with `kaimon daemon start`", "start it with `kaimon daemon start`"},
		{"try `kaimon close ab12 --colour red`", "try the agent_close tool (`kaimon close ab12 --colour red` in a shell)"},
	} {
		if got := toolError(verbs.NotFound("%s", c[0])); !got.IsError || got.Content[0].(mcp.TextContent).Text != c[1] {
			t.Errorf("%q became %+v, want %q", c[0], got.Content, c[1])
		}
	}
}

// The instructions name every kind of agent agent_open can start.
func TestInstructionsNameEveryAgentKind(t *testing.T) {
	for _, want := range append([]string{"claude CLI"}, agentbin.ACPNames...) {
		if !strings.Contains(Instructions, want) {
			t.Errorf("the instructions do not name %q: %s", want, Instructions)
		}
	}
	for _, p := range apitype.ModelPrefixes {
		if !strings.Contains(Instructions, p.Prefix) {
			t.Errorf("the instructions do not name the prefix %q: %s", p.Prefix, Instructions)
		}
	}
}
