package e2e

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/kaimon/kaimon/internal/event"
	"github.com/kaimon/kaimon/internal/testutil/agents"
	"github.com/kaimon/kaimon/internal/testutil/fakeopenai"
	"github.com/kaimon/kaimon/internal/verbs"
)

// newCopilotEnv is a kaimon installation whose acp:copilot is the real
// GitHub Copilot CLI (copilot --acp, pinned in package.json) against one
// fakeopenai server, offline (agents.CopilotOffline).
func newCopilotEnv(t testing.TB) *acpEnv {
	t.Helper()
	return newOpenAIACPEnv(t, "KAIMON_COPILOT_BIN", "copilot", func(e *acpEnv) ([]string, error) {
		return agents.CopilotOffline(e.openai.URL(), e.home, fakeopenai.Models[0]), nil
	})
}

// TestACPCopilot drives the GitHub Copilot CLI through kaimon: a text turn
// streamed, a shell command asked under the default preset and answered
// allow (it writes a file) and deny (it does not), a file created under
// acceptEdits without asking, usage per turn, interrupt, close and resume
// with the conversation kept; plan mode refusing an edit; the model asked
// for at open.
func TestACPCopilot(t *testing.T) {
	e := newCopilotEnv(t)
	id := e.ok("open", "--model", "acp:copilot", e.work)
	e.dumpOnFail(t, id)
	var st verbs.AgentStatus
	e.okJSON(&st, "status", id)
	if st.Status != "idle" || st.SessionID == "" || !strings.HasPrefix(st.Model, "acp:copilot") {
		t.Fatalf("status = %+v", st)
	}
	session := st.SessionID

	// A text turn, its text streamed as deltas on the bus.
	deltas := e.tailTurn(t, id)
	if out := e.ok("run", id, "hello there"); !strings.HasPrefix(out, "Hello from fakeopenai (request #") {
		t.Fatalf("text turn = %q", out)
	}
	streamed := ""
	for _, l := range deltas() {
		if d := gjson.Parse(l); d.Get("kind").String() == "assistant_text" && d.Get("data.delta").Bool() {
			streamed += d.Get("data.content.text").String()
		}
	}
	if !strings.HasPrefix(streamed, "Hello from fakeopenai (request #") {
		t.Fatalf("streamed deltas of turn 1: %q", streamed)
	}
	if k := kinds(e.events(t, id), 1); k != "user_text turn_started assistant_text usage result" {
		t.Fatalf("turn 1 kinds: %s", k)
	}
	e.okJSON(&st, "status", id)
	if st.Usage.InputTokens != fakeopenai.InputTokens || st.Usage.OutputTokens != fakeopenai.OutputTokens {
		t.Fatalf("usage after one turn = %+v", st.Usage)
	}

	// A tool turn: copilot asks before every shell command; kaimon permit
	// allows it, and the command writes a file in the agent's dir.
	made := filepath.Join(e.work, "made.txt")
	turn := e.ok("send", id, `call tool: bash {"command":"echo hi-from-copilot > made.txt && cat made.txt","description":"write made.txt"}`)
	perm := e.waitEvent(t, id, event.Permission, func(d gjson.Result) bool { return !d.Get("decision").Exists() })
	if d := gjson.ParseBytes(perm.Data); d.Get("toolCall.kind").String() != "execute" || !strings.Contains(d.Get("toolCall.rawInput.command").String(), "made.txt") {
		t.Fatalf("permission event: %s", perm.Data)
	}
	var pend verbs.AgentStatus
	e.okJSON(&pend, "status", id)
	if len(pend.PendingPermissions) != 1 || pend.PendingPermissions[0].Tool != "Bash" {
		t.Fatalf("pending permissions: %+v (copilot's shell is Bash to a preset)", pend.PendingPermissions)
	}
	e.ok("permit", id, gjson.GetBytes(perm.Data, "requestId").String(), "allow")
	e.waitStatus(t, id, "idle")
	if out := e.ok("output", id, "--turn", turn); !strings.HasPrefix(out, "Tool said: hi-from-copilot\n") || !strings.HasSuffix(out, ". Done.") {
		t.Fatalf("tool turn output = %q", out)
	}
	if b, err := os.ReadFile(made); err != nil || string(b) != "hi-from-copilot\n" {
		t.Fatalf("the permitted command's file: %q %v", b, err)
	}
	n := atoiT(t, turn)
	if k := kinds(e.events(t, id), n); k != "user_text turn_started tool_use permission permission tool_result assistant_text usage result" {
		t.Fatalf("turn %d kinds: %s", n, k)
	}
	res := e.waitEvent(t, id, event.ToolResult, func(d gjson.Result) bool { return d.Get("update.status").String() == "completed" })
	if !strings.Contains(string(res.Data), "hi-from-copilot") {
		t.Fatalf("tool_result: %s", res.Data)
	}
	// The turn's usage, not the agent's running total: two model requests.
	var o verbs.OutputResult
	e.okJSON(&o, "output", id, "--turn", turn)
	if o.Usage.InputTokens != 2*fakeopenai.InputTokens || o.Usage.OutputTokens != 2*fakeopenai.OutputTokens {
		t.Fatalf("usage of the tool turn = %+v, want two requests' worth", o.Usage)
	}
	e.okJSON(&st, "status", id)
	if st.Usage.InputTokens != 3*fakeopenai.InputTokens || st.Usage.OutputTokens != 3*fakeopenai.OutputTokens {
		t.Fatalf("usage after two turns = %+v, want three requests' worth", st.Usage)
	}

	// Denied: the command does not run, and copilot ends the turn.
	denied := filepath.Join(e.work, "denied.txt")
	turn = e.ok("send", id, `call tool: bash {"command":"touch denied.txt","description":"touch denied.txt"}`)
	perm = e.waitEvent(t, id, event.Permission, func(d gjson.Result) bool {
		return !d.Get("decision").Exists() && strings.Contains(d.Get("toolCall.rawInput.command").String(), "denied.txt")
	})
	e.ok("permit", id, gjson.GetBytes(perm.Data, "requestId").String(), "deny")
	e.waitStatus(t, id, "idle")
	if _, err := os.Stat(denied); !os.IsNotExist(err) {
		t.Fatalf("the denied command ran: %v", err)
	}
	res = e.waitEvent(t, id, event.ToolResult, func(d gjson.Result) bool { return d.Get("update.status").String() == "failed" })
	if res.Turn != atoiT(t, turn) {
		t.Fatalf("denied call's result in turn %d, want %s: %s", res.Turn, turn, res.Data)
	}

	// An edit inside the cwd: copilot asks, and under the default preset
	// (acceptEdits) kaimon's policy allows it without a person.
	created := filepath.Join(e.work, "created.txt")
	turn = e.ok("send", id, `call tool: create {"path":"`+created+`","file_text":"created by copilot\n"}`)
	dec := e.waitEvent(t, id, event.Permission, func(d gjson.Result) bool {
		return d.Get("decision").Exists() && d.Get("toolCall.kind").String() == "edit"
	})
	if d := gjson.ParseBytes(dec.Data); d.Get("decision").String() != "allow" || d.Get("by").String() != "policy" || !strings.Contains(d.Get("message").String(), "acceptEdits") {
		t.Fatalf("the edit's decision: %s", dec.Data)
	}
	e.waitStatus(t, id, "idle")
	if b, err := os.ReadFile(created); err != nil || string(b) != "created by copilot\n" {
		t.Fatalf("the accepted edit's file: %q %v", b, err)
	}

	// interrupt a slow turn.
	n, _ = e.interruptSlow(t, id, 30*time.Second)
	turn = itoa(n)
	e.waitStatus(t, id, "idle")

	// A file outside the cwd: copilot asks to access the path; an
	// interrupt answers the pending request cancelled and ends the turn,
	// and nothing is written.
	outside := filepath.Join(e.home, "cp-outside.txt")
	turn = e.ok("send", id, `call tool: create {"path":"`+outside+`","file_text":"x\n"}`)
	perm = e.waitEvent(t, id, event.Permission, func(d gjson.Result) bool {
		return !d.Get("decision").Exists() && strings.Contains(d.Get("toolCall.rawInput.path").String(), "cp-outside.txt")
	})
	e.interruptAtPermission(t, id, atoiT(t, turn), perm)
	e.waitStatus(t, id, "idle")
	if _, err := os.Stat(outside); !os.IsNotExist(err) {
		t.Fatalf("a write outside the cwd happened: %v", err)
	}

	// close, then resume: session/load of the same session, and the
	// model sees the earlier turns.
	e.ok("close", id)
	if got := e.ok("open", "--id", id, "--resume"); got != id {
		t.Fatalf("open --resume printed %q", got)
	}
	st = verbs.AgentStatus{}
	e.okJSON(&st, "status", id)
	if st.Status != "idle" || st.SessionID != session {
		t.Fatalf("resumed: %+v (session was %s)", st, session)
	}
	if out := e.ok("run", id, "what came before"); !strings.HasPrefix(out, "Hello from fakeopenai") {
		t.Fatalf("turn after resume = %q", out)
	}
	reqs := e.openai.Requests()
	last := reqs[len(reqs)-1]
	if !hasLine(last.History, "assistant: Hello from fakeopenai") || !strings.Contains(strings.Join(last.History, "\n"), "hello there") {
		t.Fatalf("the resumed conversation: %q", last.History)
	}
	// The running total starts again with the process; kaimon's does not.
	e.okJSON(&st, "status", id)
	if st.Usage.InputTokens < 4*fakeopenai.InputTokens {
		t.Fatalf("usage after resume = %+v", st.Usage)
	}
	// copilot declares no session/fork: refused, naming it.
	e.fails(1, "acp:copilot does not declare session/fork", "open", "--fork", id)
	e.ok("close", id)

	copilotPresets(t, e)
}

// copilotPresets: notebook keeps copilot's own tools from its model
// (--excluded-tools), so nothing is said at spawn and a shell call finds
// no tool; the model asked for at open goes in with --model, and
// set-model, which copilot offers no way to do, says how; plan mode
// refuses an edit without asking; bypass answers every ask by policy.
func copilotPresets(t *testing.T, e *acpEnv) {
	nb := e.ok("open", "--model", "acp:copilot:"+fakeopenai.Models[1], "--permission", "notebook", e.work)
	e.dumpOnFail(t, nb)
	for _, r := range e.events(t, nb) {
		if r.Kind == event.Error {
			t.Fatalf("notebook on copilot reported at spawn: %s", r.Data)
		}
	}
	mark := filepath.Join(e.work, "nb-mark")
	out := e.ok("run", nb, `call tool: bash {"command":"touch nb-mark","description":"touch nb-mark"}`)
	if !strings.Contains(out, "Tool 'bash' does not exist") {
		t.Fatalf("notebook bash = %q", out)
	}
	if _, err := os.Stat(mark); !os.IsNotExist(err) {
		t.Fatalf("the notebook agent's bash ran: %v", err)
	}
	reqs := e.openai.Requests()
	last := reqs[len(reqs)-1]
	if last.Model != fakeopenai.Models[1] {
		t.Fatalf("model of the notebook agent's request = %q, want %s (asked for at open)", last.Model, fakeopenai.Models[1])
	}
	for _, tool := range last.Tools {
		switch tool {
		case "bash", "view", "create", "edit", "grep", "glob", "task":
			t.Fatalf("the notebook agent was offered %s: %v", tool, last.Tools)
		}
	}
	var st verbs.AgentStatus
	e.okJSON(&st, "status", nb)
	if st.Model != "acp:copilot:"+fakeopenai.Models[1] {
		t.Fatalf("notebook agent's model = %q", st.Model)
	}
	var sm verbs.SetModelResult
	e.okJSON(&sm, "set-model", nb, fakeopenai.Models[0])
	if sm.Switched {
		t.Fatal("set-model switched a copilot session, which offers no model selection")
	}
	e.waitEvent(t, nb, event.Error, func(d gjson.Result) bool { return strings.Contains(d.Get("message").String(), "--model") })
	e.ok("close", nb)

	plan := e.ok("open", "--model", "acp:copilot", "--permission-mode", "plan", e.work)
	e.dumpOnFail(t, plan)
	planned := filepath.Join(e.work, "planned.txt")
	e.ok("run", plan, `call tool: create {"path":"`+planned+`","file_text":"x\n"}`)
	res := e.waitEvent(t, plan, event.ToolResult, func(gjson.Result) bool { return true })
	if d := gjson.ParseBytes(res.Data); d.Get("update.status").String() != "failed" || !strings.Contains(string(res.Data), "Plan mode") {
		t.Fatalf("plan mode's create: %s", res.Data)
	}
	if _, err := os.Stat(planned); !os.IsNotExist(err) {
		t.Fatalf("plan mode created a file: %v", err)
	}
	for _, r := range e.events(t, plan) {
		if r.Kind == event.Permission {
			t.Fatalf("plan mode asked: %s", r.Data)
		}
	}
	e.ok("close", plan)

	by := e.ok("open", "--model", "acp:copilot", "--permission", "bypass", e.work)
	e.dumpOnFail(t, by)
	e.ok("run", by, `call tool: bash {"command":"touch by-mark","description":"touch by-mark"}`)
	dec := e.waitEvent(t, by, event.Permission, func(d gjson.Result) bool { return d.Get("decision").Exists() })
	if d := gjson.ParseBytes(dec.Data); d.Get("decision").String() != "allow" || d.Get("by").String() != "policy" {
		t.Fatalf("bypass shell decision: %s", dec.Data)
	}
	if _, err := os.Stat(filepath.Join(e.work, "by-mark")); err != nil {
		t.Fatalf("bypass's shell command did not run: %v", err)
	}
	e.ok("close", by)
}

// tailTurn follows agent id's bus from the start of its log, once it is
// live, until the first result: what it printed, deltas included, is
// returned by the func, which waits for it.
func (e *acpEnv) tailTurn(t *testing.T, id string) func() []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	cmd := exec.CommandContext(ctx, filepath.Join(binDir, "kaimon"), "tail", "agent:"+id, "--from-start", "--until-result")
	cmd.Dir, cmd.Env = e.work, e.env
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 1024)
	go func() {
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 1<<20), 16<<20)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	// The replay of the open's events: tail is live after it.
	var got []string
	select {
	case l, ok := <-lines:
		if !ok {
			t.Fatal("kaimon tail printed nothing")
		}
		got = append(got, l)
	case <-time.After(30 * time.Second):
		t.Fatal("kaimon tail printed nothing in 30s")
	}
	return func() []string {
		defer cancel()
		for l := range lines {
			got = append(got, l)
		}
		cmd.Wait()
		return got
	}
}
