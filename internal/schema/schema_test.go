package schema

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	sj "github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/kaimon/kaimon/internal/apitype"
	"github.com/kaimon/kaimon/internal/event"
	"github.com/kaimon/kaimon/internal/verbs"
)

// compile compiles doc (a JSON Schema 2020-12 document) and returns the
// schema at ref within it ("" for the whole); a document that is not valid
// JSON Schema fails the test here, checked against the draft's meta-schema.
func compile(t *testing.T, doc json.RawMessage, ref string) *sj.Schema {
	t.Helper()
	v, err := sj.UnmarshalJSON(bytes.NewReader(doc))
	if err != nil {
		t.Fatalf("not JSON: %v\n%s", err, doc)
	}
	c := sj.NewCompiler()
	c.DefaultDraft(sj.Draft2020)
	if err := c.AddResource("doc.json", v); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile("doc.json" + ref)
	if err != nil {
		t.Fatalf("does not compile: %v\n%s", err, doc)
	}
	return s
}

// check validates v's JSON against s: wantOK says whether it must pass.
func check(t *testing.T, s *sj.Schema, name string, v any, wantOK bool) {
	t.Helper()
	b, err := event.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	inst, err := sj.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	err = s.Validate(inst)
	switch {
	case wantOK && err != nil:
		t.Errorf("%s: %s does not validate: %v", name, b, err)
	case !wantOK && err == nil:
		t.Errorf("%s: %s validates, but it is not the shape", name, b)
	}
}

var usage = event.UsageFigures{InputTokens: 10, OutputTokens: 20, CacheReadTokens: 3, CacheCreationTokens: 4}

var status = verbs.AgentStatus{Status: apitype.Idle, Model: "sonnet", Cwd: "/w", Turn: 2, CreatedAt: "2026-01-02T15:04:05Z",
	LastActivity: "2026-01-02T15:04:06Z", SessionID: "s", Transcript: "/t.jsonl", EventLog: "/e.jsonl", Usage: usage,
	QueuesPrompts: true, Reason: "closed", RecordError: "disk full",
	PendingPermissions: []verbs.PendingPermission{{RequestID: "p1", Tool: "Bash", Title: "ls", ExpiresAt: "2026-01-02T15:09:05Z"}},
	Repository:         "/r", Worktree: "/wt/ab12", Branch: "kaimon/ab12", BaseCommit: "0123abcd", Dirty: true, WorktreeError: "git status failed"}

// filled are results of every verb with every field set, as the daemon
// (or kaimon mcp across hosts) returns them.
var filled = map[string]any{
	"agent_open":      verbs.OpenResult{AgentID: "ab12"},
	"agent_send":      verbs.SendResult{Turn: 3},
	"agent_run":       verbs.RunResult{Text: "hello"},
	"agent_output":    verbs.OutputResult{AgentID: "ab12", Turn: 1, Which: verbs.DefaultWhich, Status: apitype.Working, Text: "partial", Truncated: true, DroppedChars: 5, Usage: usage, LogErrors: []string{"line 3: torn"}},
	"agent_status":    status,
	"agent_set_model": verbs.SetModelResult{Switched: true},
	"agent_list": verbs.ListResult{Agents: []verbs.ListEntry{{AgentID: "h/ab12", Host: "h", AgentStatus: status}},
		Hosts: []verbs.HostAnswer{{Host: "h", Agents: 1}, {Host: "g", Error: "ssh: no route"}}},
	"agent_interrupt": verbs.InterruptResult{Interrupted: true},
	"agent_close":     verbs.CloseResult{Closed: true},
	"agent_permit":    verbs.PermitResult{Permitted: true},
	"agent_forget": verbs.ForgetResult{Forgotten: []string{"ab12"}, Kept: []verbs.ForgetKept{{AgentID: "cd34", Worktree: "/wt/cd34", Reason: "dirty"}},
		BranchesKept: []verbs.KeptBranch{{AgentID: "ab12", Repository: "/r", Branch: "kaimon/ab12"}}},
	"agent_diff": verbs.DiffResult{AgentID: "ab12", Worktree: "/wt/ab12", Branch: "kaimon/ab12", BaseCommit: "0123abcd", Diff: "diff --git a/x b/x\n"},
}

// zeroOf is the zero value of t but for its word fields (a status), which
// have no zero word: each holds its list's first. The rest stays zero:
// nil slices (null), empty strings, omitted optional fields.
func zeroOf(t reflect.Type) any {
	v := reflect.New(t).Elem()
	var fill func(v reflect.Value)
	fill = func(v reflect.Value) {
		switch {
		case v.Type() == reflect.TypeFor[apitype.AgentState]():
			v.Set(reflect.ValueOf(apitype.AgentStates[0]))
		case v.Kind() == reflect.Struct:
			for i := 0; i < v.NumField(); i++ {
				if v.Type().Field(i).IsExported() {
					fill(v.Field(i))
				}
			}
		}
	}
	fill(v)
	return v.Interface()
}

// Every verb's result, filled and zero, validates against VerbResult; one
// of another shape does not.
func TestVerbResult(t *testing.T) {
	for _, v := range verbs.All {
		doc := VerbResult(v)
		if !bytes.HasPrefix(doc, []byte(`{"type":"object",`)) {
			t.Errorf("%s: result schema is not an object's: %s", v.Name, doc)
		}
		s := compile(t, doc, "")
		f, ok := filled[v.Name]
		if !ok {
			t.Errorf("%s: no filled result in the test", v.Name)
			continue
		}
		if reflect.TypeOf(f) != v.Result {
			t.Errorf("%s: the test's result is a %T, the verb's a %v", v.Name, f, v.Result)
		}
		check(t, s, v.Name+" filled", f, true)
		check(t, s, v.Name+" zero", zeroOf(v.Result), true)
		check(t, s, v.Name+" with another field", map[string]any{"bogus": 1}, false)
	}
	s := compile(t, VerbResult(verbs.ByName("agent_status")), "")
	sleeping := status
	sleeping.Status = "sleeping"
	check(t, s, "status sleeping", sleeping, false)
	check(t, s, "status empty", verbs.AgentStatus{}, false)
	noUsage := map[string]any{}
	b, _ := json.Marshal(status)
	_ = json.Unmarshal(b, &noUsage)
	delete(noUsage, "usage")
	check(t, s, "status without usage", noUsage, false)
	check(t, s, "status with a turn as text", map[string]any{"status": "idle", "turn": "2"}, false)
}

// The arguments' schema is the table: every argument in its order, with
// its type, doc, default, enum and range; the required ones; no other.
func TestVerbArgs(t *testing.T) {
	for _, v := range verbs.All {
		doc := VerbArgs(v)
		s := compile(t, doc, "")
		var got struct {
			Type                 string                    `json:"type"`
			Properties           map[string]map[string]any `json:"properties"`
			Required             []string                  `json:"required"`
			AdditionalProperties *bool                     `json:"additionalProperties"`
		}
		if err := json.Unmarshal(doc, &got); err != nil {
			t.Fatal(err)
		}
		if got.Type != "object" || got.AdditionalProperties == nil || *got.AdditionalProperties || len(got.Properties) != len(v.Args) {
			t.Errorf("%s: %s", v.Name, doc)
		}
		var req []string
		last := -1
		for _, a := range v.Args {
			p := got.Properties[a.Name]
			if p["type"] != a.Type || p["description"] != a.Doc {
				t.Errorf("%s.%s: %v", v.Name, a.Name, p)
			}
			if at := bytes.Index(doc, []byte(`"`+a.Name+`":{`)); at < last {
				t.Errorf("%s.%s: out of the table's order in %s", v.Name, a.Name, doc)
			} else {
				last = at
			}
			if a.Required {
				req = append(req, a.Name)
			}
		}
		if !reflect.DeepEqual(got.Required, req) {
			t.Errorf("%s: required %v, want %v", v.Name, got.Required, req)
		}
		check(t, s, v.Name+" with another argument", map[string]any{"bogus": 1}, false)
	}
	open := compile(t, VerbArgs(verbs.ByName("agent_open")), "")
	check(t, open, "open", map[string]any{"cwd": "/w", "permission": "lab", "allowed_tools": []string{"Bash"}}, true)
	check(t, open, "open with an unknown preset", map[string]any{"cwd": "/w", "permission": "root"}, false)
	check(t, open, "open with tools as text", map[string]any{"allowed_tools": "Bash"}, false)
	run := compile(t, VerbArgs(verbs.ByName("agent_run")), "")
	check(t, run, "run", map[string]any{"agent_id": "a", "text": "hi", "timeout": 1}, true)
	check(t, run, "run with timeout 0", map[string]any{"agent_id": "a", "text": "hi", "timeout": 0}, false)
	check(t, run, "run without text", map[string]any{"agent_id": "a"}, false)
	output := string(VerbArgs(verbs.ByName("agent_output")))
	if !strings.Contains(output, `"default":"last_message","enum":["last_message","full_turn","all"]`) ||
		!strings.Contains(output, `"default":20000,"minimum":1,"maximum":100000000`) {
		t.Errorf("agent_output args %s", output)
	}
}
