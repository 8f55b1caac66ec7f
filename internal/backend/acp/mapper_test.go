package acp

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	sdk "github.com/coder/acp-go-sdk"
	"github.com/tidwall/gjson"

	"github.com/kaimon/kaimon/internal/event"
)

// replay feeds a captured ACP session (testdata/*.jsonl: one JSON-RPC
// message a line, dir c2a or a2c; from ../shared/fixtures) through the
// mapper the way the backend does: a session/prompt pushes a turn, its
// response ends it, session/update maps, session/request_permission maps
// its tool call. It returns every event, and the preset tool name of each
// permission request.
func replay(t *testing.T, name string) ([]event.Event, []string) {
	t.Helper()
	return replayWith(t, name, NewMapper())
}

// replayWith is replay through m (an agent's mapper: newMapperFor).
func replayWith(t *testing.T, name string, m *Mapper) ([]event.Event, []string) {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var evs []event.Event
	var tools []string
	prompts := map[string]bool{}
	turn := 0
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		rec := gjson.ParseBytes(sc.Bytes())
		msg := rec.Get("msg")
		dir := rec.Get("dir").String()
		method := msg.Get("method").String()
		id := msg.Get("id")
		switch {
		case dir == "c2a" && method == "session/prompt":
			prompts[id.Raw] = true
			turn++
			out, active := m.Push(turn, msg.Get("params.prompt.0.text").String())
			if !active {
				t.Fatalf("turn %d queued in a recorded session", turn)
			}
			evs = append(evs, out...)
		case dir == "a2c" && method == "session/update":
			var n sdk.SessionNotification
			if err := json.Unmarshal([]byte(msg.Get("params").Raw), &n); err != nil {
				t.Fatalf("%s: session/update does not parse: %v", name, err)
			}
			evs = append(evs, m.Update(n).Events...)
		case dir == "a2c" && method == "session/request_permission":
			var p sdk.RequestPermissionRequest
			if err := json.Unmarshal([]byte(msg.Get("params").Raw), &p); err != nil {
				t.Fatal(err)
			}
			if isQuestion(string(p.ToolCall.ToolCallId)) {
				// Asks about no tool call: no tool, nothing tracked.
				out, call := m.Question(p.ToolCall)
				if call.Status != "pending" || call.ToolCallID == "" {
					t.Fatalf("question call %+v", call)
				}
				evs = append(evs, out...)
				continue
			}
			out, call, tool := m.Permission(p.ToolCall)
			if call.Status != "pending" || call.ToolCallID == "" {
				t.Fatalf("permission call %+v", call)
			}
			evs = append(evs, out...)
			tools = append(tools, tool)
		case dir == "a2c" && method == "" && prompts[id.Raw]:
			delete(prompts, id.Raw)
			if msg.Get("error").Exists() {
				out, _ := m.Fail(msg.Get("error.message").String(), nil)
				evs = append(evs, out...)
				continue
			}
			var resp sdk.PromptResponse
			if err := json.Unmarshal([]byte(msg.Get("result").Raw), &resp); err != nil {
				t.Fatal(err)
			}
			out, _ := m.End(resp)
			evs = append(evs, out...)
		}
	}
	return evs, tools
}

// shape renders turn n's authoritative events: kinds, with the text of
// text blocks, the id and input of tool_use, the status of tool_result.
func shape(evs []event.Event, n int) string {
	var out []string
	for _, ev := range evs {
		if ev.Turn != n || !event.Authoritative(ev.Kind, ev.Data) {
			continue
		}
		d := gjson.ParseBytes(ev.Data)
		switch ev.Kind {
		case event.AssistantText, event.Thought:
			out = append(out, string(ev.Kind)+"("+d.Get("content.text").String()+")")
		case event.ToolUse:
			s := "tool_use(" + d.Get("call.title").String()
			if d.Get("call.rawInput").Exists() {
				s += " +input"
			}
			out = append(out, s+")")
		case event.ToolResult:
			out = append(out, "tool_result("+d.Get("update.status").String()+")")
		case event.Result:
			out = append(out, "result("+d.Get("stopReason").String()+")")
		case event.Usage:
			if d.Get("context").Exists() {
				continue // running figures
			}
			out = append(out, "usage")
		default:
			out = append(out, string(ev.Kind))
		}
	}
	return strings.Join(out, " ")
}

func deltas(evs []event.Event, n int, kind event.Kind) string {
	var b strings.Builder
	for _, ev := range evs {
		if ev.Turn == n && ev.Kind == kind && !event.Authoritative(ev.Kind, ev.Data) {
			b.WriteString(gjson.GetBytes(ev.Data, "content.text").String())
		}
	}
	return b.String()
}

func resultUsage(t *testing.T, evs []event.Event, n int) event.UsageFigures {
	t.Helper()
	for _, ev := range evs {
		if ev.Turn == n && ev.Kind == event.Result {
			var r event.ResultData
			json.Unmarshal(ev.Data, &r)
			return r.Usage
		}
	}
	t.Fatalf("no result of turn %d", n)
	return event.UsageFigures{}
}

func TestMapperOpencodeText(t *testing.T) {
	evs, _ := replay(t, "opencode-text.jsonl")
	want := "user_text turn_started assistant_text(Hello from fake model. You said: Say hello please) usage result(end_turn)"
	if got := shape(evs, 1); got != want {
		t.Fatalf("turn 1:\n got %s\nwant %s", got, want)
	}
	// The deltas add up to the authoritative block.
	if d := deltas(evs, 1, event.AssistantText); d != "Hello from fake model. You said: Say hello please" {
		t.Fatalf("deltas %q", d)
	}
	if u := resultUsage(t, evs, 1); u.InputTokens != 42 || u.OutputTokens != 7 || u.CostUSD != 0 {
		t.Fatalf("usage %+v", u)
	}
}

func TestMapperOpencodeTools(t *testing.T) {
	evs, _ := replay(t, "opencode-tools-defaultperm.jsonl")
	// pending → in_progress (with input) → completed: announce, the
	// authoritative tool_use, the result; then the follow-up text.
	if got := shape(evs, 1); !strings.HasPrefix(got, "user_text turn_started tool_use(read) tool_use(read +input) tool_result(completed) assistant_text(Tool result received") ||
		!strings.HasSuffix(got, "usage result(end_turn)") {
		t.Fatalf("turn 1: %s", got)
	}
	// bash announces with a partial input ({cwd}) and repeats its
	// in_progress update: two tool_use, the second complete, one result.
	if got := shape(evs, 4); strings.Count(got, "tool_use(") != 2 || !strings.Contains(got, "tool_use(echo from-bash") || strings.Count(got, "tool_result") != 1 {
		t.Fatalf("turn 4: %s", got)
	}
	// Four turns, per-turn usage each (never cumulative).
	for n := 1; n <= 4; n++ {
		if u := resultUsage(t, evs, n); u.InputTokens != 42 {
			t.Fatalf("turn %d usage %+v", n, u)
		}
	}
}

func TestMapperOpencodePermissions(t *testing.T) {
	evs, tools := replay(t, "opencode-tools-askperm.jsonl")
	// The tool names come from the announce (opencode's permission
	// request titles a path), translated to the preset's names.
	if got := strings.Join(tools, " "); got != "Write Bash Read" {
		t.Fatalf("permission tools %q", got)
	}
	if got := shape(evs, 1); !strings.HasPrefix(got, "user_text turn_started tool_use(write) tool_use(write +input) tool_result(completed) assistant_text(") {
		t.Fatalf("turn 1: %s", got)
	}
	evs, tools = replay(t, "opencode-perm-reject.jsonl")
	if got := shape(evs, 1); !strings.Contains(got, "tool_result(failed)") || tools[0] != "Write" {
		t.Fatalf("rejected: %s %v", got, tools)
	}
}

func TestMapperOpencodeControl(t *testing.T) {
	evs, _ := replay(t, "opencode-control.jsonl")
	// A cancelled turn; a prompt for a bogus session answered with an
	// error.
	var stops []string
	for _, ev := range evs {
		if ev.Kind == event.Result {
			stops = append(stops, gjson.GetBytes(ev.Data, "stopReason").String())
		}
	}
	if got := strings.Join(stops, " "); got != "end_turn end_turn cancelled end_turn error" {
		t.Fatalf("stop reasons %q", got)
	}
	// config_option_update reports the model switch.
	f, _ := os.ReadFile(filepath.Join("testdata", "opencode-control.jsonl"))
	m := NewMapper()
	model := ""
	for _, line := range strings.Split(string(f), "\n") {
		msg := gjson.Get(line, "msg")
		if msg.Get("method").String() != "session/update" {
			continue
		}
		var n sdk.SessionNotification
		json.Unmarshal([]byte(msg.Get("params").Raw), &n)
		if o := m.Update(n); o.Model != "" && model == "" {
			model = o.Model
		}
	}
	if model != "fake/fake-model-2" {
		t.Fatalf("model from config_option_update = %q", model)
	}
}

func TestMapperClaudeACP(t *testing.T) {
	evs, tools := replay(t, "claude-acp-basic.jsonl")
	if got := shape(evs, 2); got != "user_text turn_started assistant_text(I will run a command.) tool_use(Terminal) tool_use(echo hi +input) tool_result(completed) assistant_text(Tool said: hi. Done.) usage result(end_turn)" {
		t.Fatalf("turn 2: %s", got)
	}
	// _meta.claudeCode.toolName names the tool.
	if strings.Join(tools, " ") != "Write" {
		t.Fatalf("tools %v", tools)
	}
	// The per-turn usage of the response, not the cumulative cost of
	// usage_update.
	if u := resultUsage(t, evs, 2); u.InputTokens != 200 || u.OutputTokens != 40 || u.CostUSD != 0 {
		t.Fatalf("usage %+v", u)
	}
	// A result whose content is only rawOutput gets it as text.
	for _, ev := range evs {
		if ev.Turn == 3 && ev.Kind == event.ToolResult {
			if txt := gjson.GetBytes(ev.Data, "update.content.0.content.text").String(); !strings.HasPrefix(txt, "File created successfully") {
				t.Fatalf("write result %s", ev.Data)
			}
		}
	}

	evs, _ = replay(t, "claude-acp-native-reject-cancel.jsonl")
	// A thought block, then text: each closed by the next.
	if got := shape(evs, 1); got != "user_text turn_started thought(Let me think about this briefly.) assistant_text(Thought about it. Answer: 42.) usage result(end_turn)" {
		t.Fatalf("turn 1: %s", got)
	}
	if got := shape(evs, 3); !strings.HasSuffix(got, "assistant_text(chunk0 chunk1 chunk2 ) usage result(cancelled)") {
		t.Fatalf("cancelled turn: %s", got)
	}
}

func TestMapperGemini(t *testing.T) {
	evs, tools := replay(t, "gemini-perm.jsonl")
	// write_file is announced only inside the permission request: it still
	// gets its tool_use, before the result.
	if got := shape(evs, 1); !strings.HasPrefix(got, "user_text turn_started tool_use(Writing to gem.txt) tool_result(completed)") {
		t.Fatalf("turn 1: %s", got)
	}
	if strings.Join(tools, " ") != "Write Bash" {
		t.Fatalf("tools %v", tools)
	}
	// Usage from _meta.quota.token_count.
	if u := resultUsage(t, evs, 1); u.InputTokens != 84 || u.OutputTokens != 14 {
		t.Fatalf("usage %+v", u)
	}
	evs, _ = replay(t, "gemini-tools.jsonl")
	if got := shape(evs, 2); !strings.HasPrefix(got, "user_text turn_started tool_use(hello.txt) tool_result(completed)") {
		t.Fatalf("gemini read turn: %s", got)
	}
	if got := shape(evs, 5); !strings.HasSuffix(got, " usage result(cancelled)") || !strings.Contains(got, "assistant_text(word0 ") {
		t.Fatalf("gemini cancelled turn: %s", got)
	}
}

func TestParseModel(t *testing.T) {
	for _, c := range []struct{ in, agent, model, err string }{
		{"acp:opencode", "opencode", "", ""},
		{"acp:opencode:ollama/qwen2.5:14b", "opencode", "ollama/qwen2.5:14b", ""},
		{"acp:claude:haiku", "claude", "haiku", ""},
		{"acp:gemini:gemini-2.5-pro", "gemini", "gemini-2.5-pro", ""},
		{"acp:codex", "codex", "", ""},
		{"acp:codex-acp:gpt-5.4", "codex", "gpt-5.4", ""},
		{"acp:nosuch", "", "", "unknown ACP agent"},
		{"acp:codx:gpt-5.4", "", "", `unknown ACP agent "codx" in model "acp:codx:gpt-5.4" (did you mean "acp:codex"?): use one of`},
		{"sonnet", "", "", "not an ACP model"},
	} {
		a, m, err := ParseModel(c.in)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%s: err %v", c.in, err)
			}
			continue
		}
		if err != nil || a.Name != c.agent || m != c.model {
			t.Errorf("%s: %v %q %v", c.in, a, m, err)
		}
	}
}

// qwen-code (recorded in mode default): its tools are named by
// _meta.toolName, not by their titles ("Shell", "WriteFile"); each model
// request's usage comes in _meta.usage of an empty message chunk, none on
// the prompt response, and a turn's usage is their sum; a rejected
// command fails its call and ends the turn.
func TestMapperQwen(t *testing.T) {
	evs, tools := replay(t, "qwen-default.jsonl")
	for n, want := range map[int]string{
		1: "user_text turn_started assistant_text(Hello from fakeopenai (request #",
		2: "user_text turn_started tool_use(Shell) tool_use(Shell +input) tool_result(completed) assistant_text(",
		3: "user_text turn_started tool_use(WriteFile) tool_use(WriteFile +input) tool_result(completed) assistant_text(Tool said: Successfully created and wrote to new file: ",
		4: "user_text turn_started tool_use(Shell) tool_use(Shell +input) tool_result(failed) usage result(end_turn)",
	} {
		if got := shape(evs, n); !strings.HasPrefix(got, want) {
			t.Fatalf("turn %d: %s\nwant %s…", n, got, want)
		}
	}
	if strings.Join(tools, " ") != "Bash Write Bash" {
		t.Fatalf("tools %v", tools)
	}
	for n, calls := range map[int]int64{1: 1, 2: 2, 3: 2, 4: 1} {
		if u := resultUsage(t, evs, n); u.InputTokens != 42*calls || u.OutputTokens != 7*calls {
			t.Fatalf("turn %d usage %+v, want %d requests' worth", n, u, calls)
		}
	}
	// The usage chunks open no text block: turn 2's one text is the
	// follow-up's.
	if got := deltas(evs, 2, event.AssistantText); !strings.HasPrefix(got, "Tool said: Command: touch ") {
		t.Fatalf("turn 2 text deltas %q", got)
	}
}
