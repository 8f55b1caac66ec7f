package e2e

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/kaimon/kaimon/internal/event"
	"github.com/kaimon/kaimon/internal/testutil/agents"
	"github.com/kaimon/kaimon/internal/testutil/fakeaugment"
	"github.com/kaimon/kaimon/internal/verbs"
)

// auggieEnv is a kaimon installation whose agents find auggie and, as its
// Augment tenant, a fakeaugment on 127.0.0.1. auggie's settings deny
// indexing in the installation's project directory only: elsewhere its
// first prompt asks the Workspace Indexing question.
type auggieEnv struct {
	*acpEnv
	aug *fakeaugment.Server
}

func newAuggieEnv(t testing.TB) *auggieEnv {
	t.Helper()
	bin := acpAgent(t, "KAIMON_AUGGIE_BIN", "auggie")
	aug := fakeaugment.New(t)
	if testing.Verbose() {
		aug.SetLog(os.Stderr)
	}
	e := &auggieEnv{acpEnv: &acpEnv{kenv: newEnv(t, "KAIMON_AUGGIE_BIN", bin)}, aug: aug}
	vars, err := agents.AuggieOffline(aug.URL(), filepath.Join(e.home, "claude-home"), filepath.Join(e.home, "tmp"), e.work)
	if err != nil {
		t.Fatal(err)
	}
	e.setEnv(vars...)
	return e
}

// lastAug is the last chat-stream request auggie made.
func (e *auggieEnv) lastAug(t *testing.T) fakeaugment.Request {
	t.Helper()
	reqs := e.aug.Requests()
	if len(reqs) == 0 {
		t.Fatal("auggie made no chat-stream request")
	}
	return reqs[len(reqs)-1]
}

// TestACPAuggie drives auggie --acp against fakeaugment: a text turn with
// status saying auggie reports no usage; under the default preset an edit
// asked and accepted by policy, a command asked and answered allow then
// deny, interrupts of a streaming turn and of a pending question; close
// and resume with the conversation kept; fork refused. auggiePresets
// goes on with the other presets and the indexing question.
func TestACPAuggie(t *testing.T) {
	e := newAuggieEnv(t)
	id := e.ok("open", "--model", "acp:auggie", e.work)
	e.dumpOnFail(t, id)
	var st verbs.AgentStatus
	e.okJSON(&st, "status", id)
	if st.Status != "idle" || st.SessionID == "" {
		t.Fatalf("status = %+v", st)
	}
	session := st.SessionID

	// A text turn: streamed as assistant_text, and output; auggie's
	// "Indexing disabled …" notice is not in it.
	out := e.ok("run", id, "hello there")
	if !strings.HasPrefix(out, "Hello from fakeaugment (request #") {
		t.Fatalf("text turn = %q", out)
	}
	recs := e.events(t, id)
	if k := kinds(recs, 1); k != "user_text turn_started assistant_text usage result" {
		t.Fatalf("turn 1 kinds: %s", k)
	}
	var text strings.Builder
	for _, r := range recs {
		if r.Turn == 1 && r.Kind == event.AssistantText && !gjson.GetBytes(r.Data, "delta").Bool() {
			text.WriteString(gjson.GetBytes(r.Data, "content.text").String())
		}
	}
	if text.String() != out {
		t.Fatalf("streamed text %q, output %q", text.String(), out)
	}
	if r := e.lastAug(t); r.LastUserText != "hello there" || r.Authorization != "Bearer fake-token" || len(r.Tools) == 0 {
		t.Fatalf("auggie's request: %+v", r)
	}
	// auggie reports no token counts over ACP (fakeaugment's token_usage
	// stays inside it): status says so rather than show zeros as counted.
	e.okJSON(&st, "status", id)
	if st.UsageNote != "usage not reported by this agent" || st.Usage.InputTokens != 0 {
		t.Fatalf("usage after a turn: %+v %q", st.Usage, st.UsageNote)
	}
	if out := e.ok("status", id); !strings.Contains(out, st.UsageNote) {
		t.Fatalf("status text lacks the usage note:\n%s", out)
	}

	// An edit: auggie asks (kaimon set save-file to ask-user), and the
	// default preset's acceptEdits allows it inside the cwd, by policy.
	target := filepath.Join(e.work, "aug.txt")
	turn := atoiT(t, e.ok("send", id, `call tool: save-file {"path":"aug.txt","file_content":"written by auggie"}`))
	dec := e.waitEvent(t, id, event.Permission, func(d gjson.Result) bool { return d.Get("decision").Exists() })
	if d := gjson.ParseBytes(dec.Data); dec.Turn != turn || d.Get("decision").String() != "allow" || d.Get("by").String() != "policy" ||
		!strings.Contains(d.Get("message").String(), "acceptEdits") || d.Get("toolCall.kind").String() != "edit" {
		t.Fatalf("the edit's decision: %s", dec.Data)
	}
	e.waitStatus(t, id, "idle")
	if b, err := os.ReadFile(target); err != nil || strings.TrimSpace(string(b)) != "written by auggie" {
		t.Fatalf("file written: %q %v", b, err)
	}
	if k := kinds(e.events(t, id), turn); k != "user_text turn_started tool_use permission tool_result assistant_text usage result" {
		t.Fatalf("edit turn kinds: %s", k)
	}
	if out := e.ok("output", id, "--turn", itoa(turn)); !strings.HasPrefix(out, "Tool said: File saved.") {
		t.Fatalf("tool turn output = %q", out)
	}

	// A command: asked of a person (Bash, to the preset); allowed, it runs.
	allowed := filepath.Join(e.work, "allowed.txt")
	turn = atoiT(t, e.ok("send", id, `call tool: launch-process {"command":"echo yes > allowed.txt","wait":true,"max_wait_seconds":30}`))
	perm := e.waitEvent(t, id, event.Permission, func(d gjson.Result) bool { return !d.Get("decision").Exists() })
	if d := gjson.ParseBytes(perm.Data); perm.Turn != turn || d.Get("toolCall.kind").String() != "execute" || !strings.Contains(d.Get("toolCall.rawInput.command").String(), "allowed.txt") {
		t.Fatalf("permission event: %s", perm.Data)
	}
	var pend verbs.AgentStatus
	e.okJSON(&pend, "status", id)
	if len(pend.PendingPermissions) != 1 || pend.PendingPermissions[0].Tool != "Bash" {
		t.Fatalf("pending permissions: %+v (auggie's launch-process is Bash to a preset)", pend.PendingPermissions)
	}
	allowID := gjson.GetBytes(perm.Data, "requestId").String()
	e.ok("permit", id, allowID, "allow")
	e.waitStatus(t, id, "idle")
	if b, err := os.ReadFile(allowed); err != nil || string(b) != "yes\n" {
		t.Fatalf("the permitted command's file: %q %v", b, err)
	}
	var results []string
	for _, r := range e.events(t, id) {
		if r.Turn == turn && r.Kind == event.ToolResult {
			results = append(results, gjson.GetBytes(r.Data, "update.status").String())
		}
	}
	if strings.Join(results, " ") != "completed" {
		t.Fatalf("the permitted command's results: %q", results)
	}

	// Denied: the command does not run, the call fails, and the turn
	// still ends (auggie tells the model, which answers).
	denied := filepath.Join(e.work, "denied.txt")
	turn = atoiT(t, e.ok("send", id, `call tool: launch-process {"command":"touch denied.txt","wait":true,"max_wait_seconds":30}`))
	perm = e.waitEvent(t, id, event.Permission, func(d gjson.Result) bool {
		return !d.Get("decision").Exists() && d.Get("requestId").String() != allowID
	})
	denyID := gjson.GetBytes(perm.Data, "requestId").String()
	e.ok("permit", id, denyID, "deny")
	e.waitStatus(t, id, "idle")
	if _, err := os.Stat(denied); !os.IsNotExist(err) {
		t.Fatalf("the denied command ran: %v", err)
	}
	recs = e.events(t, id)
	if k := kinds(recs, turn); k != "user_text turn_started tool_use permission permission tool_result assistant_text usage result" {
		t.Fatalf("denied turn kinds: %s", k)
	}
	for _, r := range recs {
		d := gjson.ParseBytes(r.Data)
		switch {
		case r.Turn != turn:
		case r.Kind == event.Permission && d.Get("decision").Exists():
			if d.Get("requestId").String() != denyID || d.Get("decision").String() != "deny" || d.Get("by").String() != "user" {
				t.Fatalf("the denied request's decision: %s", r.Data)
			}
		case r.Kind == event.ToolResult:
			if d.Get("update.status").String() != "failed" || !strings.Contains(string(r.Data), "denied by user") {
				t.Fatalf("the denied call's result: %s", r.Data)
			}
		case r.Kind == event.Result:
			if d.Get("stopReason").String() != "end_turn" {
				t.Fatalf("the denied turn ended %s", r.Data)
			}
		}
	}

	// Interrupt a streaming turn: auggie aborts its request, the turn
	// ends cancelled.
	turn, _ = e.interruptSlow(t, id, 30*time.Second)
	e.waitStatus(t, id, "idle")
	if o := e.ok("output", id, "--turn", itoa(turn)); strings.Contains(o, "chunk59") {
		t.Fatalf("the interrupted turn streamed to its end: %q", o)
	}

	// Interrupt while auggie waits on a question: answered cancelled, the
	// command does not run, the turn ends cancelled.
	pended := filepath.Join(e.work, "pended.txt")
	turn = atoiT(t, e.ok("send", id, `call tool: launch-process {"command":"touch pended.txt","wait":true,"max_wait_seconds":30}`))
	perm = e.waitEvent(t, id, event.Permission, func(d gjson.Result) bool {
		return !d.Get("decision").Exists() && strings.Contains(d.Get("toolCall.rawInput.command").String(), "pended.txt")
	})
	e.interruptAtPermission(t, id, turn, perm)
	e.waitStatus(t, id, "idle")
	if _, err := os.Stat(pended); !os.IsNotExist(err) {
		t.Fatalf("the interrupted command ran: %v", err)
	}

	// auggie declares no session/fork: refused, naming it.
	e.fails(1, "acp:auggie does not declare session/fork", "open", "--fork", id)

	// close, then resume (session/load, which auggie declares): the same
	// session, and the model sees the earlier turns.
	e.ok("close", id)
	if got := e.ok("open", "--id", id, "--resume"); got != id {
		t.Fatalf("open --resume printed %q", got)
	}
	st = verbs.AgentStatus{}
	e.okJSON(&st, "status", id)
	if st.SessionID != session || st.Status != "idle" {
		t.Fatalf("resumed: %+v (session was %s)", st, session)
	}
	if out := e.ok("run", id, "what did I say first"); !strings.HasPrefix(out, "Hello from fakeaugment") {
		t.Fatalf("turn after resume = %q", out)
	}
	if r := e.lastAug(t); !hasLine(r.History, "user: hello there") || !hasLine(r.History, "assistant: Hello from fakeaugment") {
		t.Fatalf("the resumed conversation: %q", r.History)
	}
	e.ok("close", id)

	auggiePresets(t, e)
}

// auggiePresets: plan runs auggie's ask mode without its edit tools (and
// the model asked for at open);
// notebook keeps auggie's file and shell tools from its model, and says
// nothing at spawn; auto, which auggie cannot obey, is said at open;
// bypass asks nothing. The Workspace Indexing question, asked in a
// directory auggie's settings say nothing of, is declined by kaimon under
// bypass as under default, and its notices are not the model's text.
func auggiePresets(t *testing.T, e *auggieEnv) {
	said := func(id string) []string {
		var msgs []string
		for _, r := range e.events(t, id) {
			if r.Kind == event.Error {
				msgs = append(msgs, gjson.GetBytes(r.Data, "message").String())
			}
		}
		return msgs
	}

	// (opened with a model: auggie takes it by session/set_model)
	plan := e.ok("open", "--model", "acp:auggie:"+fakeaugment.Models[1], "--permission-mode", "plan", e.work)
	e.dumpOnFail(t, plan)
	var st verbs.AgentStatus
	if e.okJSON(&st, "status", plan); st.Model != "acp:auggie:"+fakeaugment.Models[1] {
		t.Fatalf("plan agent's model = %q", st.Model)
	}
	planned := filepath.Join(e.work, "planned.txt")
	out := e.ok("run", plan, `call tool: save-file {"path":"planned.txt","file_content":"x"}`)
	if !strings.Contains(out, "Tool save-file not found") {
		t.Fatalf("plan's save-file = %q", out)
	}
	if _, err := os.Stat(planned); !os.IsNotExist(err) {
		t.Fatalf("plan mode saved a file: %v", err)
	}
	reqs := e.aug.Requests()
	var first fakeaugment.Request
	for _, r := range reqs {
		if strings.Contains(r.LastUserText, "planned.txt") {
			first = r
			break
		}
	}
	// auggie's ask mode is a prompt prefix of its own; the edit tools are
	// gone, the shell is still offered (and would ask).
	if !strings.Contains(first.LastUserText, "ask mode") || slices.Contains(first.Tools, "save-file") || slices.Contains(first.Tools, "str-replace-editor") ||
		!slices.Contains(first.Tools, "launch-process") || first.Model != fakeaugment.Models[1] {
		t.Fatalf("plan's request: model %q text %q tools %v", first.Model, first.LastUserText, first.Tools)
	}
	for _, r := range e.events(t, plan) {
		if r.Kind == event.Permission {
			t.Fatalf("plan mode asked: %s", r.Data)
		}
	}
	e.ok("close", plan)

	nb := e.ok("open", "--model", "acp:auggie", "--permission", "notebook", e.work)
	e.dumpOnFail(t, nb)
	mark := filepath.Join(e.work, "nb-mark")
	if out := e.ok("run", nb, `call tool: launch-process {"command":"touch nb-mark","wait":true,"max_wait_seconds":30}`); !strings.Contains(out, "Tool launch-process not found") {
		t.Fatalf("notebook launch-process = %q", out)
	}
	if _, err := os.Stat(mark); !os.IsNotExist(err) {
		t.Fatalf("the notebook agent's shell ran: %v", err)
	}
	if tools := e.lastAug(t).Tools; slices.Contains(tools, "view") || slices.Contains(tools, "save-file") || !slices.Contains(tools, "web-fetch") {
		t.Fatalf("the notebook agent was offered %v", tools)
	}
	if msgs := said(nb); len(msgs) != 0 {
		t.Fatalf("notebook on auggie reported at spawn: %q", msgs)
	}
	e.ok("close", nb)

	auto := e.ok("open", "--model", "acp:auggie", "--permission", "auto", e.work)
	e.dumpOnFail(t, auto)
	ev := e.waitEvent(t, auto, event.Error, func(gjson.Result) bool { return true })
	if msg := gjson.GetBytes(ev.Data, "message").String(); !strings.Contains(msg, "preset auto (permission mode auto) cannot be obeyed on acp:auggie") {
		t.Fatalf("auto's spawn event: %s", ev.Data)
	}
	e.ok("close", auto)

	// In directories auggie's settings do not name, its first prompt asks
	// to index the workspace: declined by policy whatever the preset, and
	// the settings are left as they were.
	settings := filepath.Join(e.home, "claude-home", ".augment", "settings.json")
	before, err := os.ReadFile(settings)
	if err != nil {
		t.Fatal(err)
	}
	for _, preset := range []string{"bypass", "default"} {
		dir := filepath.Join(e.home, "fresh-"+preset)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		ag := e.ok("open", "--model", "acp:auggie", "--permission", preset, dir)
		e.dumpOnFail(t, ag)
		made := filepath.Join(dir, "made.txt")
		out := e.ok("run", ag, `call tool: save-file {"path":"made.txt","file_content":"x"}`)
		if !strings.HasPrefix(out, "Tool said: File saved.") {
			t.Fatalf("%s: first turn = %q (auggie's indexing notices are not text)", preset, out)
		}
		if _, err := os.Stat(made); err != nil {
			t.Fatalf("%s: the edit after the question: %v", preset, err)
		}
		var q []gjson.Result
		for _, r := range e.events(t, ag) {
			d := gjson.ParseBytes(r.Data)
			if r.Kind == event.Permission && d.Get("toolCall.toolCallId").String() == "workspace-indexing-permission" {
				q = append(q, d)
			}
			if r.Kind == event.ToolUse && d.Get("call.toolCallId").String() == "workspace-indexing-permission" {
				t.Fatalf("%s: the indexing question as a tool call: %s", preset, r.Data)
			}
		}
		if len(q) != 1 || q[0].Get("decision").String() != "deny" || q[0].Get("by").String() != "policy" ||
			!strings.Contains(q[0].Get("message").String(), "index the workspace") {
			t.Fatalf("%s: the indexing question's events: %v", preset, q)
		}
		// bypass asks nothing of auggie's own tools; default accepts the
		// edit by policy.
		var asked []string
		for _, r := range e.events(t, ag) {
			d := gjson.ParseBytes(r.Data)
			if r.Kind == event.Permission && d.Get("toolCall.kind").String() == "edit" {
				asked = append(asked, d.Get("decision").String()+" by "+d.Get("by").String())
			}
		}
		if want := map[string]string{"bypass": "", "default": "allow by policy"}[preset]; strings.Join(asked, ", ") != want {
			t.Fatalf("%s: the edit's permission events %q, want %q", preset, asked, want)
		}
		e.ok("close", ag)
	}
	if after, err := os.ReadFile(settings); err != nil || string(after) != string(before) {
		t.Fatalf("auggie's settings after the indexing question: %s (were %s) %v", after, before, err)
	}
}
