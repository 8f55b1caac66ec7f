package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/kaimon/kaimon/internal/event"
	"github.com/kaimon/kaimon/internal/testutil/agents"
	"github.com/kaimon/kaimon/internal/testutil/fakeopenai"
	"github.com/kaimon/kaimon/internal/verbs"
)

// newQwenEnv is a kaimon installation whose agents find the real qwen-code
// (`qwen --acp`) and run it offline against one fakeopenai server, its
// HOME, QWEN_HOME and TMPDIR inside the installation.
func newQwenEnv(t testing.TB) *acpEnv {
	t.Helper()
	return newOpenAIACPEnv(t, "KAIMON_QWEN_BIN", "qwen", func(e *acpEnv) ([]string, error) {
		return agents.QwenOffline(e.openai.URL(), filepath.Join(e.home, "qwen-home"))
	})
}

// turnKinds is kinds of turn n as one line, the qwen's empty usage chunks
// aside (the mapper drops them).
func (e *acpEnv) turnKinds(t *testing.T, id string, n int) string {
	return kinds(e.events(t, id), n)
}

// TestACPQwen drives qwen-code through kaimon: open (preset default is
// qwen's auto-edit mode), a text turn streamed, a tool turn (write_file
// through fs/write_text_file), a shell command asked and permitted, one
// asked and denied, usage summed from qwen's per-request figures,
// interrupt, close and resume by session/load with the conversation kept,
// fork refused by name; and presets on qwen's own modes: plan refuses a
// command without asking, bypass (yolo) runs it without asking.
func TestACPQwen(t *testing.T) {
	e := newQwenEnv(t)
	tmpBefore := qwenTemps(t)
	id := e.ok("open", "--model", "acp:qwen", e.work)
	e.dumpOnFail(t, id)
	var st verbs.AgentStatus
	e.okJSON(&st, "status", id)
	if st.Status != "idle" || st.SessionID == "" || st.QueuesPrompts || !strings.HasPrefix(st.Model, "acp:qwen:") || !strings.Contains(st.Model, agents.QwenModel) {
		t.Fatalf("status = %+v", st)
	}
	session := st.SessionID

	// A text turn, streamed as deltas (on the bus: kaimon tail), then the
	// whole text.
	tail := exec.Command(filepath.Join(binDir, "kaimon"), "tail", "agent:"+id, "--turn", "1", "--until-result")
	var tailOut strings.Builder
	tail.Env, tail.Dir, tail.Stdout = e.env, e.work, &tailOut
	tail.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := tail.Start(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond) // subscribed before the turn streams
	if out := e.ok("run", id, "hello there"); !strings.HasPrefix(out, "Hello from fakeopenai (request #") {
		t.Fatalf("text turn = %q", out)
	}
	if err := tail.Wait(); err != nil {
		t.Fatalf("kaimon tail: %v\n%s", err, tailOut.String())
	}
	streamed := ""
	for _, line := range strings.Split(tailOut.String(), "\n") {
		if gjson.Get(line, "kind").String() == string(event.AssistantText) && gjson.Get(line, "data.delta").Bool() {
			streamed += gjson.Get(line, "data.content.text").String()
		}
	}
	if !strings.HasPrefix(streamed, "Hello from fakeopenai (request #") {
		t.Fatalf("turn 1 streamed %q; tail printed:\n%s", streamed, tailOut.String())
	}
	if k := e.turnKinds(t, id, 1); k != "user_text turn_started assistant_text usage result" {
		t.Fatalf("turn 1 kinds: %s", k)
	}
	// qwen reports each model request's usage in _meta.usage of a chunk
	// (its prompt response has none): one request here.
	e.okJSON(&st, "status", id)
	if st.Usage.InputTokens != fakeopenai.InputTokens || st.Usage.OutputTokens != fakeopenai.OutputTokens {
		t.Fatalf("usage after one turn = %+v", st.Usage)
	}

	// A tool turn: auto-edit lets write_file through unasked; qwen writes
	// through fs/write_text_file, inside cwd.
	target := filepath.Join(e.work, "qw.txt")
	out := e.ok("run", id, `call tool: write_file {"file_path":"`+target+`","content":"written by qwen\n"}`)
	if !strings.HasPrefix(out, "Tool said: ") || !strings.HasSuffix(out, "Done.") {
		t.Fatalf("write turn = %q", out)
	}
	if b, err := os.ReadFile(target); err != nil || string(b) != "written by qwen\n" {
		t.Fatalf("file written: %q %v", b, err)
	}
	if k := e.turnKinds(t, id, 2); k != "user_text turn_started tool_use tool_use tool_result assistant_text usage result" {
		t.Fatalf("turn 2 kinds: %s", k)
	}
	use := e.waitEvent(t, id, event.ToolUse, func(d gjson.Result) bool { return d.Get("call.rawInput.file_path").String() == target })
	res := e.waitEvent(t, id, event.ToolResult, func(d gjson.Result) bool { return d.Get("update.status").String() == "completed" })
	if use.Turn != 2 || res.Turn != 2 || gjson.GetBytes(use.Data, "call.kind").String() != "edit" {
		t.Fatalf("tool events: %s / %s", use.Data, res.Data)
	}
	e.okJSON(&st, "status", id) // two model requests: the call, the follow-up
	if st.Usage.InputTokens != 3*fakeopenai.InputTokens || st.Usage.OutputTokens != 3*fakeopenai.OutputTokens {
		t.Fatalf("usage after the tool turn = %+v", st.Usage)
	}

	// A shell command that changes things asks (auto-edit); allowed, it runs.
	touched := filepath.Join(e.work, "touched")
	turn := e.ok("send", id, `call tool: run_shell_command {"command":"touch `+touched+`"}`)
	perm := e.waitEvent(t, id, event.Permission, func(d gjson.Result) bool { return !d.Get("decision").Exists() })
	if d := gjson.ParseBytes(perm.Data); d.Get("toolCall.kind").String() != "execute" ||
		!strings.Contains(d.Get("toolCall.rawInput.command").String(), "touch") {
		t.Fatalf("permission event: %s", perm.Data)
	}
	e.ok("permit", id, gjson.GetBytes(perm.Data, "requestId").String(), "allow")
	e.waitStatus(t, id, "idle")
	if _, err := os.Stat(touched); err != nil {
		t.Fatalf("permitted command did not run: %v (turn %s)", err, turn)
	}
	// qwen announces the call without its input, which only the question
	// carries: the tool_use with it comes before the permission.
	if k := e.turnKinds(t, id, atoiT(t, turn)); !strings.HasPrefix(k, "user_text turn_started tool_use tool_use permission permission tool_result assistant_text") {
		t.Fatalf("turn %s kinds: %s", turn, k)
	}
	// Denied, it does not.
	denied := filepath.Join(e.work, "denied")
	turn = e.ok("send", id, `call tool: run_shell_command {"command":"touch `+denied+`"}`)
	perm = e.waitEvent(t, id, event.Permission, func(d gjson.Result) bool {
		return !d.Get("decision").Exists() && strings.Contains(d.Get("toolCall.rawInput.command").String(), denied)
	})
	e.ok("permit", id, gjson.GetBytes(perm.Data, "requestId").String(), "deny")
	e.waitStatus(t, id, "idle")
	if _, err := os.Stat(denied); !os.IsNotExist(err) {
		t.Fatalf("denied command ran: %v (turn %s)", err, turn)
	}

	// set-model through the model config option: qwen takes a bare model
	// id on its current provider.
	var sm verbs.SetModelResult
	e.okJSON(&sm, "set-model", id, "fake-model-2")
	if !sm.Switched {
		t.Fatal("set-model fake-model-2 not switched")
	}
	e.ok("run", id, "which model now")
	if m := e.qwenModelOf("which model now"); m != "fake-model-2" {
		t.Fatalf("model after set-model = %q", m)
	}

	// interrupt a slow turn.
	n, _ := e.interruptSlow(t, id, 60*time.Second)
	turn = itoa(n)
	e.waitStatus(t, id, "idle")

	// fork: qwen declares no session/fork.
	e.fails(1, "acp:qwen does not declare session/fork", "open", "--fork", id)

	// close, then resume: session/load in a new process, the same session,
	// and the model is sent the earlier turns.
	e.ok("close", id)
	if got := e.ok("open", "--id", id, "--resume"); got != id {
		t.Fatalf("open --resume printed %q", got)
	}
	e.okJSON(&st, "status", id)
	if st.Status != "idle" || st.SessionID != session {
		t.Fatalf("resumed: %+v (session %s)", st, session)
	}
	e.ok("run", id, "what came before")
	reqs := e.openai.Requests()
	last := reqs[len(reqs)-1]
	for _, r := range reqs {
		if r.LastUserText == "what came before" && len(r.Tools) > 0 {
			last = r
		}
	}
	if !strings.Contains(strings.Join(last.History, "\n"), "user: hello there") {
		t.Fatalf("the resumed session's request lacks the first turn: %q", last.History)
	}
	e.ok("close", id)

	// plan: qwen refuses the command itself, asking nothing.
	pl := e.ok("open", "--model", "acp:qwen:fake-model-2", "--permission-mode", "plan", e.work)
	e.dumpOnFail(t, pl)
	planned := filepath.Join(e.work, "planned")
	e.ok("run", pl, `call tool: run_shell_command {"command":"touch `+planned+`"}`)
	if m := e.qwenModelOf(`call tool: run_shell_command {"command":"touch ` + planned + `"}`); m != "fake-model-2" {
		t.Fatalf("the model asked for at open: requests went to %q", m)
	}
	if _, err := os.Stat(planned); !os.IsNotExist(err) {
		t.Fatalf("plan mode ran a command: %v", err)
	}
	for _, r := range e.events(t, pl) {
		if r.Kind == event.Permission {
			t.Fatalf("plan mode asked: %s", r.Data)
		}
	}
	e.ok("close", pl)

	// notebook: what qwen asks about (a shell command: Bash by its
	// _meta.toolName) the preset denies without a person; what it does
	// unasked in auto-edit (edits, reads) it cannot hold, and says so.
	nb := e.ok("open", "--model", "acp:qwen", "--permission", "notebook", e.work)
	e.dumpOnFail(t, nb)
	ev := e.waitEvent(t, nb, event.Error, func(gjson.Result) bool { return true })
	if msg := gjson.GetBytes(ev.Data, "message").String(); !strings.Contains(msg, "not fully enforced on acp:qwen") {
		t.Fatalf("notebook's spawn error event: %s", msg)
	}
	nbTouched := filepath.Join(e.work, "nb-touched")
	e.ok("run", nb, `call tool: run_shell_command {"command":"touch `+nbTouched+`"}`)
	dec := e.waitEvent(t, nb, event.Permission, func(d gjson.Result) bool { return d.Get("decision").Exists() })
	if d := gjson.ParseBytes(dec.Data); d.Get("decision").String() != "deny" || d.Get("by").String() != "policy" {
		t.Fatalf("notebook shell decision: %s", dec.Data)
	}
	if _, err := os.Stat(nbTouched); !os.IsNotExist(err) {
		t.Fatalf("notebook's denied shell command ran: %v", err)
	}
	e.ok("close", nb)

	// bypass: yolo, the command runs and nothing is asked.
	by := e.ok("open", "--model", "acp:qwen", "--permission", "bypass", e.work)
	e.dumpOnFail(t, by)
	yolo := filepath.Join(e.work, "yolo")
	e.ok("run", by, `call tool: run_shell_command {"command":"touch `+yolo+`"}`)
	if _, err := os.Stat(yolo); err != nil {
		t.Fatalf("bypass did not run the command: %v", err)
	}
	for _, r := range e.events(t, by) {
		if r.Kind == event.Permission {
			t.Fatalf("bypass asked: %s", r.Data)
		}
	}
	e.ok("close", by)

	// qwen's non-standard traffic was answered or dropped, never
	// refused: the SDK logs what it refuses.
	if log := e.daemonLog(t); strings.Contains(log, "qwen/notify") || strings.Contains(log, "craft/") {
		t.Fatalf("qwen's non-standard traffic reached the SDK:\n%s", log)
	}

	// Nothing of qwen's left in the system's temp dir.
	if left := newEntries(tmpBefore, qwenTemps(t)); len(left) > 0 {
		t.Fatalf("qwen left temp files outside the test: %v", left)
	}
}

// qwenModelOf is the model of the last request that offered tools and
// carried text as its last user message (qwen's side requests offer
// none, or carry their own text).
func (e *acpEnv) qwenModelOf(text string) string {
	m := ""
	for _, r := range e.openai.Requests() {
		if r.LastUserText == text && len(r.Tools) > 0 {
			m = r.Model
		}
	}
	return m
}

// qwenTemps lists the qwen-* entries of the system's temp dir.
func qwenTemps(t *testing.T) []string {
	t.Helper()
	m, _ := filepath.Glob(filepath.Join(os.TempDir(), "qwen*"))
	return m
}

func newEntries(before, after []string) []string {
	seen := map[string]bool{}
	for _, b := range before {
		seen[b] = true
	}
	var out []string
	for _, a := range after {
		if !seen[a] {
			out = append(out, a)
		}
	}
	return out
}
