package e2e

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/kaimon/kaimon/internal/event"
	"github.com/kaimon/kaimon/internal/testutil/fakeopenai"
	"github.com/kaimon/kaimon/internal/verbs"
)

// newNativeCodexEnv is a kaimon installation whose codex: agents run the
// real Codex CLI (`codex app-server`) offline against a fakeopenai
// Responses API, as acp:codex's test runs codex-acp.
func newNativeCodexEnv(t testing.TB) *acpEnv {
	t.Helper()
	return newOfflineCodexEnv(t, "KAIMON_CODEX_BIN", "codex")
}

// resultUsage is the usage of turn's result.
func (e *acpEnv) resultUsage(t *testing.T, id string, turn int) event.UsageFigures {
	t.Helper()
	res := e.turnResult(t, id, turn)
	return event.UsageFigures{InputTokens: gjson.GetBytes(res.Data, "usage.inputTokens").Int(), OutputTokens: gjson.GetBytes(res.Data, "usage.outputTokens").Int()}
}

// TestCodex drives `codex app-server` through kaimon: a text turn, a
// reasoning turn, a command asked (with its justification) and allowed,
// one asked and denied, interrupt (of a question pending, and of a
// streaming reply), set-model per turn, usage per turn as
// the fake counted it (one request, or two for a tool turn) summed in
// status, and a command run unasked under auto.
func TestCodex(t *testing.T) {
	e := newNativeCodexEnv(t)
	id := e.ok("open", "--model", "codex:", e.work)
	e.dumpOnFail(t, id)
	var st verbs.AgentStatus
	e.okJSON(&st, "status", id)
	if st.Status != "idle" || st.SessionID == "" || st.Model != "codex:gpt-5.4" || !strings.HasSuffix(st.Transcript, st.SessionID+".jsonl") {
		t.Fatalf("status = %+v", st)
	}

	one := fakeopenai.Usage(1)
	if out := e.ok("run", id, "hello there"); out != "Hello from fakeopenai (request #1)." {
		t.Fatalf("text turn = %q", out)
	}
	// Codex writes its rollout file, the transcript, from the first turn.
	if _, err := os.Stat(st.Transcript); err != nil {
		t.Fatalf("the rollout file: %v", err)
	}
	if k := kinds(e.events(t, id), 1); k != "user_text turn_started assistant_text usage result" {
		t.Fatalf("turn 1 kinds: %s", k)
	}
	if u := e.resultUsage(t, id, 1); u != one {
		t.Fatalf("turn 1 usage %+v, the fake's %+v", u, one)
	}

	if out := e.ok("run", id, "please think"); out != "Thought about it. Answer: 42." {
		t.Fatalf("reasoning turn = %q", out)
	}
	if k := kinds(e.events(t, id), 2); k != "user_text turn_started thought assistant_text usage result" {
		t.Fatalf("turn 2 kinds: %s", k)
	}

	// Under the default preset (Codex's untrusted) a command asks: the
	// permission carries the command and Codex's justification; allowed,
	// it runs, and the turn's usage is its two requests'.
	allowed := filepath.Join(e.work, "allowed.txt")
	turn := atoiT(t, e.ok("send", id, `call tool: exec_command {"cmd":"echo hi-from-codex > allowed.txt; cat allowed.txt","sandbox_permissions":"require_escalated","justification":"write a file"}`))
	perm := e.waitEvent(t, id, event.Permission, func(d gjson.Result) bool { return !d.Get("decision").Exists() })
	if perm.Turn != turn || gjson.GetBytes(perm.Data, "toolCall.title").String() != "echo hi-from-codex > allowed.txt; cat allowed.txt" ||
		gjson.GetBytes(perm.Data, "toolCall.rawInput.justification").String() != "write a file" {
		t.Fatalf("permission event: %s", perm.Data)
	}
	reqID := gjson.GetBytes(perm.Data, "requestId").String()
	e.ok("permit", id, reqID, "allow")
	e.waitStatus(t, id, "idle")
	if b, err := os.ReadFile(allowed); err != nil || string(b) != "hi-from-codex\n" {
		t.Fatalf("allowed write: %q %v", b, err)
	}
	if out := e.ok("output", id, "--turn", itoa(turn)); !strings.HasPrefix(out, "Tool said: ") || !strings.Contains(out, "hi-from-codex") {
		t.Fatalf("tool turn output = %q", out)
	}
	if k := kinds(e.events(t, id), turn); k != "user_text turn_started tool_use permission permission tool_result assistant_text usage result" {
		t.Fatalf("tool turn kinds: %s", k)
	}
	if u := e.resultUsage(t, id, turn); u != fakeopenai.Usage(2) {
		t.Fatalf("tool turn usage %+v, the fake's %+v", u, fakeopenai.Usage(2))
	}

	// Denied: declined, the model is told, the turn ends normally.
	denied := filepath.Join(e.work, "denied.txt")
	turn = atoiT(t, e.ok("send", id, `call tool: exec_command {"cmd":"echo no > denied.txt"}`))
	perm = e.waitEvent(t, id, event.Permission, func(d gjson.Result) bool {
		return !d.Get("decision").Exists() && d.Get("requestId").String() != reqID
	})
	e.ok("permit", id, gjson.GetBytes(perm.Data, "requestId").String(), "deny")
	res := e.turnResult(t, id, turn)
	if sr := gjson.GetBytes(res.Data, "stopReason").String(); sr != "end_turn" {
		t.Fatalf("denied turn ended %s", res.Data)
	}
	if out := e.ok("output", id, "--turn", itoa(turn)); !strings.Contains(out, "rejected") {
		t.Fatalf("denied turn output = %q", out)
	}
	if _, err := os.Stat(denied); !os.IsNotExist(err) {
		t.Fatalf("denied write happened: %v", err)
	}

	// Interrupt: turn/interrupt, and the turn ends cancelled; a question
	// pending is withdrawn (answered cancel).
	turn = atoiT(t, e.ok("send", id, `call tool: exec_command {"cmd":"echo later > later.txt"}`))
	perm = e.waitEvent(t, id, event.Permission, func(d gjson.Result) bool {
		return !d.Get("decision").Exists() && strings.Contains(d.Get("toolCall.title").String(), "later.txt")
	})
	e.interruptAtPermission(t, id, turn, perm)
	e.waitStatus(t, id, "idle")
	turn = atoiT(t, e.ok("send", id, "please be slow"))
	waitFor(t, "the slow stream", 30e9, func() bool {
		var o verbs.OutputResult
		e.okJSON(&o, "output", id)
		return strings.Contains(o.Text, "chunk1")
	})
	var ir verbs.InterruptResult
	if e.okJSON(&ir, "interrupt", id); !ir.Interrupted {
		t.Fatal("interrupt: false")
	}
	if res := e.turnResult(t, id, turn); gjson.GetBytes(res.Data, "stopReason").String() != "cancelled" {
		t.Fatalf("the interrupted turn: %s", res.Data)
	}
	if out := e.ok("output", id, "--turn", itoa(turn)); !strings.HasPrefix(out, "chunk0 chunk1 ") {
		t.Fatalf("the interrupted turn's text: %q", out)
	}
	e.waitStatus(t, id, "idle")

	// set-model: the next turn asks for the model, the thread goes on.
	var sm verbs.SetModelResult
	e.okJSON(&sm, "set-model", id, "codex:gpt-5.4-mini/high")
	if !sm.Switched {
		t.Fatal("set-model: not switched")
	}
	e.ok("run", id, "hello again")
	reqs := e.openai.Requests()
	last := reqs[len(reqs)-1]
	if last.Model != "gpt-5.4-mini" || !strings.Contains(strings.Join(last.History, "\n"), "user: hello there") {
		t.Fatalf("after set-model the request was %+v", last)
	}
	e.okJSON(&st, "status", id)
	if st.Model != "codex:gpt-5.4-mini/high" {
		t.Fatalf("status model after set-model: %q", st.Model)
	}
	// Every turn's usage is in the session's, as the fake counted it:
	// one per request.
	if want := fakeopenai.Usage(len(reqs)); st.Usage.InputTokens != want.InputTokens || st.Usage.OutputTokens != want.OutputTokens {
		t.Fatalf("session usage %+v after %d requests, want %+v", st.Usage, len(reqs), want)
	}
	e.ok("close", id)

	// Under auto (Codex's on-request, the model asks for what goes
	// outside the sandbox) a command runs unasked.
	auto := e.ok("open", "--model", "codex:", "-p", "auto", e.work)
	e.dumpOnFail(t, auto)
	if out := e.ok("run", auto, `call tool: exec_command {"cmd":"echo unasked"}`); !strings.Contains(out, "unasked") {
		t.Fatalf("auto's command: %q", out)
	}
	if k := kinds(e.events(t, auto), 1); k != "user_text turn_started tool_use tool_result assistant_text usage result" {
		t.Fatalf("auto's turn: %s", k)
	}
	e.ok("close", auto)
}

// TestCodexResumeAndFork: a codex: agent whose daemon was killed (-9)
// mid-turn is resumed by its thread id (thread/resume) with the model it
// was switched to, and the model sees its earlier turns; a fork
// (thread/fork) carries the parent's conversation, and the parent's next
// request does not carry the fork's.
func TestCodexResumeAndFork(t *testing.T) {
	e := newNativeCodexEnv(t)
	id := e.ok("open", "--model", "codex:", e.work)
	e.dumpOnFail(t, id)
	e.ok("run", id, "hello there")
	e.ok("set-model", id, "codex:gpt-5.4-mini/high")
	var before verbs.AgentStatus
	e.okJSON(&before, "status", id)
	e.ok("send", id, "please be slow")
	waitFor(t, "the slow turn to reach the model", 30e9, func() bool {
		return slices.ContainsFunc(e.openai.Requests(), func(r fakeopenai.Request) bool { return r.LastUserText == "please be slow" })
	})
	e.killDaemon(t)

	e.ok("daemon", "start")
	var st verbs.AgentStatus
	e.okJSON(&st, "status", id)
	if st.Status != "dead" || st.SessionID != before.SessionID || st.Model != "codex:gpt-5.4-mini/high" {
		t.Fatalf("after the crash: %+v", st)
	}
	e.ok("open", "--id", id, "--resume")
	e.okJSON(&st, "status", id)
	if st.Status != "idle" || st.SessionID != before.SessionID || st.Model != "codex:gpt-5.4-mini/high" || st.Transcript != before.Transcript {
		t.Fatalf("resumed: %+v\nbefore: %+v", st, before)
	}
	e.ok("run", id, "what came before")
	if req := e.lastRequest(t, "what came before"); req.Model != "gpt-5.4-mini" || !hasLine(req.History, "user: hello there") || !hasLine(req.History, "assistant: Hello from fakeopenai") {
		t.Fatalf("the resumed turn's request: model %q, conversation %q", req.Model, req.History)
	}

	fork := e.ok("open", "--fork", id)
	e.dumpOnFail(t, fork)
	e.ok("run", fork, "in the fork")
	if req := e.lastRequest(t, "in the fork"); !hasLine(req.History, "user: hello there") || !hasLine(req.History, "user: what came before") {
		t.Fatalf("the fork's first request: %q", req.History)
	}
	e.ok("run", id, "in the parent")
	if req := e.lastRequest(t, "in the parent"); !hasLine(req.History, "user: what came before") || hasLine(req.History, "user: in the fork") {
		t.Fatalf("the parent's next request: %q", req.History)
	}
	var fs verbs.AgentStatus
	e.okJSON(&fs, "status", fork)
	if fs.SessionID == "" || fs.SessionID == st.SessionID || fs.Transcript == st.Transcript || fs.Model != st.Model {
		t.Fatalf("fork %+v\nof %+v", fs, st)
	}
}

// TestCodexPresets: a codex: agent reaches kaimon's MCP door as server
// kaimon (Codex offers its tools as the namespace mcp__kaimon) with its
// own identity and policy, and the preset answers Codex's approvals:
// notebook (opened without the recursion guard) may list agents through
// the door, and its shell command is declined by policy unasked; under
// the default preset the guard refuses agent_list at the door; bypass
// runs a write unasked.
func TestCodexPresets(t *testing.T) {
	e := newNativeCodexEnv(t)
	nb := e.ok("open", "--model", "codex:", "-p", "notebook", "--no-recursion-guard", e.work)
	e.dumpOnFail(t, nb)
	out := e.ok("run", nb, `call tool: mcp__kaimon/agent_list {}`)
	if !strings.HasPrefix(out, "Tool said: ") || !strings.Contains(out, nb) {
		t.Fatalf("agent_list through the door: %q", out)
	}
	if tools := e.openai.Requests()[0].Tools; !slices.Contains(tools, "mcp__kaimon") {
		t.Fatalf("the model was offered %v", tools)
	}
	recs := e.events(t, nb)
	if k := kinds(recs, 1); k != "user_text turn_started tool_use tool_result assistant_text usage result" {
		t.Fatalf("turn 1: %s", k)
	}
	for _, r := range recs {
		if r.Kind == event.ToolUse && gjson.GetBytes(r.Data, "call.title").String() != "kaimon.agent_list" {
			t.Fatalf("the door's call: %s", r.Data)
		}
	}
	if out := e.ok("run", nb, `call tool: exec_command {"cmd":"echo no > nb.txt"}`); !strings.Contains(out, "rejected") {
		t.Fatalf("notebook's command: %q", out)
	}
	perm := e.waitEvent(t, nb, event.Permission, func(d gjson.Result) bool { return d.Get("decision").Exists() })
	if gjson.GetBytes(perm.Data, "by").String() != "policy" || gjson.GetBytes(perm.Data, "decision").String() != "deny" {
		t.Fatalf("notebook's command was decided: %s", perm.Data)
	}
	if _, err := os.Stat(filepath.Join(e.work, "nb.txt")); !os.IsNotExist(err) {
		t.Fatalf("notebook's command ran: %v", err)
	}

	def := e.ok("open", "--model", "codex:", e.work)
	if out := e.ok("run", def, `call tool: mcp__kaimon/agent_list {}`); !strings.Contains(out, "recursion guard refuses mcp__kaimon__agent_list") {
		t.Fatalf("agent_list under the guard: %q", out)
	}

	byp := e.ok("open", "--model", "codex:", "-p", "bypass", e.work)
	if out := e.ok("run", byp, `call tool: exec_command {"cmd":"echo free > free.txt"}`); !strings.HasPrefix(out, "Tool said: ") {
		t.Fatalf("bypass's command: %q", out)
	}
	if b, err := os.ReadFile(filepath.Join(e.work, "free.txt")); err != nil || string(b) != "free\n" {
		t.Fatalf("bypass's write: %q %v", b, err)
	}
	if k := kinds(e.events(t, byp), 1); strings.Contains(k, "permission") {
		t.Fatalf("bypass asked: %s", k)
	}
}

// TestCodexBadInput: an app-server killed mid-turn fails the turn with the
// end of its stderr; a config Codex refuses (wire_api = "chat") fails the
// open in Codex's own words; a Codex not logged in, whose provider needs a
// login, fails the open within seconds, naming `codex login`, rather than
// let each turn retry "waiting for network" for minutes.
func TestCodexBadInput(t *testing.T) {
	e := newNativeCodexEnv(t)
	id := e.ok("open", "--model", "codex:", e.work)
	e.dumpOnFail(t, id)
	// Codex logs the unknown tool on its stderr.
	e.ok("run", id, `call tool: nosuchtool {}`)
	turn := atoiT(t, e.ok("send", id, "please be slow"))
	waitFor(t, "the slow turn to reach the model", 30e9, func() bool {
		return slices.ContainsFunc(e.openai.Requests(), func(r fakeopenai.Request) bool { return r.LastUserText == "please be slow" })
	})
	pids := e.agentPIDs(t)
	if len(pids) != 1 {
		t.Fatalf("pids: %+v", pids)
	}
	if err := syscall.Kill(pids[0].PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	res := e.turnResult(t, id, turn)
	if gjson.GetBytes(res.Data, "stopReason").String() != "error" || !strings.Contains(gjson.GetBytes(res.Data, "error").String(), "codex was killed") {
		t.Fatalf("the killed app-server's turn: %s", res.Data)
	}
	ev := e.waitEvent(t, id, event.Error, func(d gjson.Result) bool { return strings.Contains(d.Get("message").String(), "codex was killed") })
	if tail := gjson.GetBytes(ev.Data, "data.stderrTail").String(); !strings.Contains(tail, "unsupported call: nosuchtool") {
		t.Fatalf("the error event lacks the stderr's tail: %s", ev.Data)
	}
	e.waitStatus(t, id, "dead")

	// The daemon's agents get its environment: restart it with each
	// CODEX_HOME.
	home := func(name, cfg string) string {
		dir := filepath.Join(e.home, name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "config.toml"), []byte(cfg), 0o644); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	good, err := os.ReadFile(filepath.Join(e.home, "codex-home", "config.toml"))
	if err != nil {
		t.Fatal(err)
	}
	e.ok("daemon", "stop")
	e.setEnv("CODEX_HOME=" + home("codex-chat", strings.Replace(string(good), `wire_api = "responses"`, `wire_api = "chat"`, 1)))
	r := e.fails(1, "`wire_api = \"chat\"` is no longer supported", "open", "--model", "codex:", e.work)
	t.Logf("chat: %s", r.stderr)

	e.ok("daemon", "stop")
	e.setEnv("CODEX_HOME=" + home("codex-nologin", "check_for_update_on_startup = false\n[analytics]\nenabled = false\n"))
	start := time.Now()
	r = e.fails(1, "codex is not logged in, and its model provider needs a login: run `codex login`", "open", "--model", "codex:", e.work)
	t.Logf("no login: %s", r.stderr)
	if d := time.Since(start); d > 15e9 {
		t.Fatalf("the open took %v to fail", d)
	}
}
