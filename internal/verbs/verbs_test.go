package verbs

import (
	"errors"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
)

// The table and the typed argument structs must describe the same
// arguments: a field missing from the table would be invisible in help, MCP
// schemas and completions; a table row without a field would be ignored.
func TestTableMatchesArgStructs(t *testing.T) {
	want := []string{"agent_open", "agent_send", "agent_run", "agent_output", "agent_status",
		"agent_set_model", "agent_list", "agent_interrupt", "agent_close", "agent_permit", "agent_forget", "agent_diff"}
	var got []string
	for _, v := range All {
		got = append(got, v.Name)
		var names []string
		for _, a := range v.Args {
			names = append(names, a.Name)
			switch a.Type {
			case TString, TInteger, TNumber, TBoolean, TArray:
			default:
				t.Errorf("%s.%s: unknown type %q", v.Name, a.Name, a.Type)
			}
			if a.Doc == "" {
				t.Errorf("%s.%s: no doc", v.Name, a.Name)
			}
		}
		fields := JSONFields(reflect.TypeOf(v.NewArgs()).Elem())
		sort.Strings(names)
		sort.Strings(fields)
		if !reflect.DeepEqual(names, fields) {
			t.Errorf("%s: table args %v, struct fields %v", v.Name, names, fields)
		}
		if v.CLI == "" || v.Summary == "" || v.Doc == "" || v.Returns == "" {
			t.Errorf("%s: incomplete entry %+v", v.Name, v)
		}
		if ByName(v.CLI) != v || ByName(v.Name) != v {
			t.Errorf("%s: ByName does not find it", v.Name)
		}
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("verbs = %v, want the spec's nine plus agent_permit, agent_forget and agent_diff: %v", got, want)
	}
}

// The spec's returns, field for field.
func TestResultFieldsAreTheSpecs(t *testing.T) {
	cases := []struct {
		v    any
		want string
	}{
		{OutputResult{}, "agent_id turn which status done text truncated dropped_chars usage log_errors"},
		{AgentStatus{}, "agent_id status model cwd turn created_at last_activity session_id transcript event_log usage usage_note queues_prompts reason record_error pending_permissions repository worktree branch base_commit dirty worktree_error"},
		{ListEntry{}, "agent_id host status model cwd turn created_at last_activity session_id transcript event_log usage usage_note queues_prompts reason record_error pending_permissions repository worktree branch base_commit dirty worktree_error"},
		{ForgetResult{}, "forgotten kept branches_kept"},
		{ForgetKept{}, "agent_id worktree reason"},
		{KeptBranch{}, "agent_id repository branch"},
		{DiffResult{}, "agent_id worktree branch base_commit diff truncated"},
		{OpenResult{}, "agent_id warnings"},
		{SendResult{}, "turn"},
		{RunResult{}, "text"},
		{SetModelResult{}, "switched"},
		{InterruptResult{}, "interrupted"},
		{CloseResult{}, "closed"},
		{PermitResult{}, "permitted"},
		{ListResult{}, "agents hosts"},
		{HostAnswer{}, "host agents error"},
	}
	for _, c := range cases {
		got := strings.Join(JSONFields(reflect.TypeOf(c.v)), " ")
		if got != c.want {
			t.Errorf("%T fields = %q, want %q", c.v, got, c.want)
		}
	}
}

func TestDecode(t *testing.T) {
	send := ByName("agent_send")
	cases := []struct {
		raw     string
		wantErr string
	}{
		{`{"agent_id":"a","text":"hi"}`, ""},
		{`{"agent_id":"a"}`, "argument text is required"},
		{`{"agent_id":"a","text":""}`, "argument text is required"},
		{`{"agent_id":"a","text":"hi","bogus":1}`, `unknown argument "bogus"; it takes agent_id, text`},
		{`{"agent_id":5,"text":"hi"}`, "argument agent_id must be a string"},
		{`[1]`, "must be a JSON object"},
	}
	for _, c := range cases {
		a, err := send.Decode([]byte(c.raw))
		if c.wantErr == "" {
			if err != nil {
				t.Errorf("%s: %v", c.raw, err)
			} else if a.(*SendArgs).Text != "hi" {
				t.Errorf("%s: decoded %+v", c.raw, a)
			}
			continue
		}
		var ve *Error
		if !errors.As(err, &ve) || ve.Code != CodeBadArgument || !strings.Contains(ve.Message, c.wantErr) {
			t.Errorf("%s: err = %v, want bad_argument containing %q", c.raw, err, c.wantErr)
		}
	}
	// disallowed_tools: absent, [] and a list are three different things.
	open := ByName("agent_open")
	for raw, want := range map[string]string{
		`{"cwd":"/"}`:                             "nil",
		`{"cwd":"/","disallowed_tools":[]}`:       "[]",
		`{"cwd":"/","disallowed_tools":["Bash"]}`: "[Bash]",
	} {
		a, err := open.Decode([]byte(raw))
		if err != nil {
			t.Fatal(err)
		}
		got := "nil"
		if d := a.(*OpenArgs).DisallowedTools; d != nil {
			got = "[" + strings.Join(*d, " ") + "]"
		}
		if got != want {
			t.Errorf("%s: disallowed_tools = %s, want %s", raw, got, want)
		}
	}
}

// Decode holds every argument to its Enum and fills in the Defaults, so
// that nothing behind it re-checks or re-defaults by hand; agent_open with
// resume keeps what was left out empty, for the record to fill.
func TestDecodeEnumsAndDefaults(t *testing.T) {
	open := ByName("agent_open")
	for raw, want := range map[string]string{
		`{"cwd":"/","effort":"huge"}`:          `effort "huge" is not one of low, medium, high, xhigh, max`,
		`{"cwd":"/","permission":"yolo"}`:      `permission "yolo" is not one of default, notebook`,
		`{"cwd":"/","permission_mode":"sudo"}`: `permission_mode "sudo" is not one of`,
		`{"id":"x"}`:                           "argument cwd is required unless resume or fork is given",
		`{"id":"x","resume":false}`:            "argument cwd is required unless resume or fork is given",
		`{"cwd":"/","which":"x"}`:              `unknown argument "which"`,
	} {
		_, err := open.Decode([]byte(raw))
		var ve *Error
		if !errors.As(err, &ve) || ve.Code != CodeBadArgument || !strings.Contains(ve.Message, want) {
			t.Errorf("%s: err = %v, want bad_argument containing %q", raw, err, want)
		}
	}
	a, err := open.Decode([]byte(`{"cwd":"/"}`))
	if err != nil {
		t.Fatal(err)
	}
	if o := a.(*OpenArgs); o.Model != DefaultModel || o.Permission != DefaultPermission || o.AllowedTools == nil || o.DisallowedTools != nil {
		t.Errorf("defaults not applied: %+v", o)
	}
	a, err = open.Decode([]byte(`{"id":"x","resume":true}`))
	if err != nil {
		t.Fatal(err)
	}
	if o := a.(*OpenArgs); o.Model != "" || o.Permission != "" || o.Cwd != "" || !o.Resume {
		t.Errorf("resume: defaults applied over the record's: %+v", o)
	}
	a, err = open.Decode([]byte(`{"fork":"x"}`))
	if err != nil {
		t.Fatal(err)
	}
	if o := a.(*OpenArgs); o.Model != "" || o.Permission != "" || o.Cwd != "" || o.Fork != "x" {
		t.Errorf("fork: defaults applied over the forked agent's record: %+v", o)
	}
	if _, err := open.Decode([]byte(`{"fork":""}`)); err == nil || !strings.Contains(err.Error(), "cwd is required") {
		t.Errorf("an empty fork made cwd optional: %v", err)
	}
	out, err := ByName("agent_output").Decode([]byte(`{"agent_id":"a"}`))
	if err != nil {
		t.Fatal(err)
	}
	if o := out.(*OutputArgs); o.Which != DefaultWhich || o.MaxChars != DefaultMaxChars {
		t.Errorf("output defaults: %+v", o)
	}
	if _, err := ByName("agent_output").Decode([]byte(`{"agent_id":"a","which":"some"}`)); err == nil || !strings.Contains(err.Error(), `which "some" is not one of last_message, full_turn, all`) {
		t.Errorf("which outside its enum: %v", err)
	}
	run, err := ByName("agent_run").Decode([]byte(`{"agent_id":"a","text":"t"}`))
	if err != nil || run.(*RunArgs).Timeout != DefaultTimeout {
		t.Errorf("run timeout default: %+v, %v", run, err)
	}
}

// Every number argument has a Range, and Decode refuses a value given
// outside it with a bad_argument naming the range: a timeout of 1e10
// seconds overflowed time.Duration and timed out at once.
func TestDecodeRanges(t *testing.T) {
	for _, v := range All {
		for _, a := range v.Args {
			if (a.Type == TNumber || a.Type == TInteger) && a.Range == nil {
				t.Errorf("%s: number argument %s has no Range", v.Name, a.Name)
			}
			if d, ok := a.Default.(float64); ok && a.Range != nil && !a.Range.Contains(d) {
				t.Errorf("%s: %s's default %g is outside its range %s", v.Name, a.Name, d, a.Range)
			}
		}
	}
	for _, c := range []struct{ verb, raw, want string }{
		{"agent_run", `{"agent_id":"a","text":"t","timeout":1e10}`, "timeout 1e+10 is out of range: it must be > 0 and <= 604800"},
		{"agent_run", `{"agent_id":"a","text":"t","timeout":0}`, "timeout 0 is out of range: it must be > 0"},
		{"agent_run", `{"agent_id":"a","text":"t","timeout":-1}`, "timeout -1 is out of range"},
		{"agent_output", `{"agent_id":"a","max_chars":-5}`, "max_chars -5 is out of range: it must be >= 1 and <= 1e+08"},
		{"agent_output", `{"agent_id":"a","max_chars":0}`, "max_chars 0 is out of range"},
		{"agent_output", `{"agent_id":"a","turn":-1}`, "turn -1 is out of range: it must be >= 0 and <= 2.147483647e+09"},
		{"agent_output", `{"agent_id":"a","turn":4294967296}`, "turn 4.294967296e+09 is out of range"},
		{"agent_output", `{"agent_id":"a","max_chars":1e30}`, "argument max_chars must be an integer"},
	} {
		_, err := ByName(c.verb).Decode([]byte(c.raw))
		var ve *Error
		if !errors.As(err, &ve) || ve.Code != CodeBadArgument || !strings.Contains(ve.Message, c.want) {
			t.Errorf("%s: err = %v, want bad_argument containing %q", c.raw, err, c.want)
		}
	}
	for _, c := range []struct{ verb, raw string }{
		{"agent_run", `{"agent_id":"a","text":"t","timeout":0.5}`},
		{"agent_run", `{"agent_id":"a","text":"t","timeout":604800}`},
		{"agent_output", `{"agent_id":"a","turn":0,"max_chars":1}`},
		{"agent_output", `{"agent_id":"a","turn":3,"max_chars":100000000}`},
	} {
		if _, err := ByName(c.verb).Decode([]byte(c.raw)); err != nil {
			t.Errorf("%s: %v", c.raw, err)
		}
	}
}

func TestErrorStatus(t *testing.T) {
	for code, status := range map[string]int{CodeBadArgument: 400, CodeNotFound: 404, CodeWrongState: 409,
		CodeTurnFailed: 502, CodeUnavailable: 503, CodeTimeout: 504, CodeInternal: 500} {
		if got := (&Error{Code: code}).HTTPStatus(); got != status {
			t.Errorf("%s → %d, want %d", code, got, status)
		}
	}
	if e := AsError(errors.New("boom")); e.Code != CodeInternal || e.Message != "boom" {
		t.Errorf("AsError = %+v", e)
	}
}

// Every argument that names agents says which, as completion offers them:
// read-only verbs read any agent, and agent_open forks any; agent_forget
// and agent_open's id name dead ones, the other verbs act on live ones.
func TestAgentArgs(t *testing.T) {
	for _, v := range All {
		for _, a := range v.Args {
			names := a.Name == "agent_id" || a.Name == "agent_ids" || v.Name == "agent_open" && (a.Name == "id" || a.Name == "fork")
			if names != (a.Agents != AgentsNone) {
				t.Errorf("%s %s: Agents %d", v.Name, a.Name, a.Agents)
			}
			if !names {
				continue
			}
			want := AgentsLive
			switch {
			case v.ReadOnly, v.Name == "agent_open" && a.Name == "fork":
				want = AgentsAny
			case v.Name == "agent_forget", v.Name == "agent_open":
				want = AgentsDead
			}
			if a.Agents != want {
				t.Errorf("%s %s: Agents %d, want %d", v.Name, a.Name, a.Agents, want)
			}
			// agent_open names two (id, fork): AgentArg is the first.
			if got := v.AgentArg(); got == nil || got.Name != a.Name && !(v.Name == "agent_open" && a.Name == "fork" && got.Name == "id") {
				t.Errorf("%s: AgentArg is %v, want %s", v.Name, got, a.Name)
			}
		}
	}
}

// ValidAgentID is the rule the session manager states as a regexp.
func TestValidAgentID(t *testing.T) {
	re := regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)
	for _, id := range []string{"", "a", "A9", "0", "a.b_c-d", ".a", "-a", "_a", "a/b", "a b", "é", "a\n",
		strings.Repeat("x", 64), strings.Repeat("x", 65), "x" + strings.Repeat(".", 63), "x" + strings.Repeat(".", 64), "ab:c"} {
		if got, want := ValidAgentID(id), re.MatchString(id); got != want {
			t.Errorf("ValidAgentID(%q) = %v, the regexp says %v", id, got, want)
		}
	}
}

// The words of a command line fill the positionals in order; one fewer
// leaves out the Skippable one alone (kaimon permit ID allow).
func TestPositionalsFor(t *testing.T) {
	names := func(args []*Arg) string {
		if args == nil {
			return "-" // they do not fit
		}
		var out []string
		for _, a := range args {
			out = append(out, a.Name)
		}
		return strings.Join(out, " ")
	}
	for _, c := range []struct {
		verb string
		n    int
		want string
	}{
		{"agent_permit", 3, "agent_id request_id decision"},
		{"agent_permit", 2, "agent_id decision"},
		{"agent_permit", 1, "-"},
		{"agent_permit", 4, "-"},
		{"agent_run", 2, "agent_id text"},
		{"agent_run", 1, "-"},
		{"agent_open", 1, "cwd"},
		{"agent_open", 0, ""},
		{"agent_open", 2, "-"},
		{"agent_forget", 0, ""},
		{"agent_forget", 2, "agent_ids agent_ids"},
		{"agent_list", 0, ""},
		{"agent_list", 1, "-"},
	} {
		if got := names(ByName(c.verb).PositionalsFor(c.n)); got != c.want {
			t.Errorf("%s with %d words fills %q, want %q", c.verb, c.n, got, c.want)
		}
	}
}

// A verb's positionals are its own arguments, each once, and only the last
// may be repeated, or left out but for one (Skippable) followed by
// required ones alone: otherwise the CLI could not tell which position a
// word fills. Flag names are unique within a verb.
func TestCLIShape(t *testing.T) {
	for _, v := range All {
		pos := v.PositionalArgs()
		optional := 0
		for i, a := range pos {
			if a == nil {
				t.Errorf("%s: positional %q is not an argument", v.Name, v.Positional[i])
				continue
			}
			if slices.Index(v.Positional, a.Name) != i {
				t.Errorf("%s: positional %s twice", v.Name, a.Name)
			}
			if i < len(pos)-1 && a.Type == TArray {
				t.Errorf("%s: positional %s is repeated but not last", v.Name, a.Name)
			}
			if !a.Required {
				optional++
			}
		}
		if skip := v.Skippable(); skip >= 0 && optional > 1 {
			t.Errorf("%s: positional %s may be left out, and so may %d others: the CLI could not tell which a word fills", v.Name, pos[skip].Name, optional-1)
		}
		flags := map[string]string{}
		for _, a := range v.Args {
			for _, f := range []string{a.FlagName(), a.Short} {
				if other, dup := flags[f]; f != "" && dup {
					t.Errorf("%s: arguments %s and %s share the flag %q", v.Name, other, a.Name, f)
				}
				flags[f] = a.Name
			}
			if len(a.Short) > 1 {
				t.Errorf("%s: %s's Short %q is not one letter", v.Name, a.Name, a.Short)
			}
		}
	}
	for verb, want := range map[string]string{"agent_open": "[DIR]", "agent_run": "ID TEXT", "agent_list": "",
		"agent_permit": "ID [REQUEST_ID] allow|deny", "agent_forget": "[ID…]", "agent_set_model": "ID MODEL"} {
		if got := ByName(verb).ArgsUsage(); got != want {
			t.Errorf("%s: ArgsUsage %q, want %q", verb, got, want)
		}
	}
	if got := ByName("agent_run").ArgsUsage("agent_id"); got != "TEXT" {
		t.Errorf("agent_run without agent_id: ArgsUsage %q, want TEXT", got)
	}
}

// Each verb knows its argument struct and the struct its result points to,
// as its Service method types them (internal/schema describes them).
func TestVerbTypes(t *testing.T) {
	want := map[string]any{"agent_open": OpenResult{}, "agent_status": AgentStatus{}, "agent_list": ListResult{}, "agent_forget": ForgetResult{}}
	for _, v := range All {
		if v.ArgsType != reflect.TypeOf(v.NewArgs()).Elem() {
			t.Errorf("%s: ArgsType %v", v.Name, v.ArgsType)
		}
		if v.Result == nil || v.Result.Kind() != reflect.Struct {
			t.Errorf("%s: Result %v, want a struct", v.Name, v.Result)
		}
		if w, ok := want[v.Name]; ok && v.Result != reflect.TypeOf(w) {
			t.Errorf("%s: Result %v, want %T", v.Name, v.Result, w)
		}
	}
}

// Each code travels with its own status, and only internal with 500 (the
// status of a code HTTPStatus does not know).
func TestCodesHaveTheirStatus(t *testing.T) {
	seen := map[int]string{}
	for _, c := range Codes {
		st := (&Error{Code: c}).HTTPStatus()
		if other, dup := seen[st]; dup {
			t.Errorf("codes %s and %s both travel with %d", c, other, st)
		}
		seen[st] = c
		if st == 500 && c != CodeInternal {
			t.Errorf("code %s has no status of its own", c)
		}
	}
}
