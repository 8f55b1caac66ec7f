package e2e

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/kaimon/kaimon/internal/event"
	"github.com/kaimon/kaimon/internal/testutil/agents"
	"github.com/kaimon/kaimon/internal/testutil/fakeopenai"
	"github.com/kaimon/kaimon/internal/verbs"
)

// newKiloEnv is a kaimon installation whose kilo runs offline against a
// fakeopenai chat completions API (agents.KiloOffline), its HOME, XDG dirs
// and TMPDIR inside the installation.
func newKiloEnv(t testing.TB) *acpEnv {
	t.Helper()
	e := newOpenAIACPEnv(t, "KAIMON_KILO_BIN", "kilo", func(e *acpEnv) ([]string, error) {
		return agents.KiloOffline(e.openai.URL(), filepath.Join(e.home, "kilo"))
	})
	// Its temporary files go in its TMPDIR, none in /tmp.
	checkTmpLeft(t, "kilo", "/tmp/kilo*", "/tmp/kilo/*")
	return e
}

// TestACPKilo drives kilo (`kilo acp`) through kaimon, two agents' worth
// at once on one installation and one fake server: the session (a text
// turn with the usage its prompt answer reports, a write it makes unasked
// under default, a shell command asked and answered allow and deny,
// set-model, interrupt, fork, close and resume) beside the presets
// (notebook, plan, bypass), each held by kilo through the permission
// overlay kaimon puts in KILO_PERMISSION.
func TestACPKilo(t *testing.T) {
	e := newKiloEnv(t)
	// The first kilo makes its database; two at once on a new one stall
	// each other's session/new.
	id := e.ok("open", "--model", "acp:kilo:"+agents.KiloModel, e.work)
	t.Run("session", func(t *testing.T) {
		t.Parallel()
		e.on(t).kiloSession(t, id)
	})
	t.Run("presets", func(t *testing.T) {
		t.Parallel()
		e.on(t).kiloPresets(t)
	})
}

// on is e for subtest t: its checks fail t.
func (e *acpEnv) on(t *testing.T) *acpEnv {
	k := *e.kenv
	k.t = t
	return &acpEnv{kenv: &k, openai: e.openai, gemini: e.gemini}
}

func (e *acpEnv) kiloSession(t *testing.T, id string) {
	e.dumpOnFail(t, id)
	var st verbs.AgentStatus
	e.okJSON(&st, "status", id)
	if st.Status != "idle" || st.SessionID == "" || st.Model != "acp:kilo:"+agents.KiloModel {
		t.Fatalf("status = %+v", st)
	}

	// A text turn: streamed as assistant_text, its usage from the prompt's answer.
	if out := e.ok("run", id, "hello there"); !strings.HasPrefix(out, "Hello from fakeopenai (request #") {
		t.Fatalf("text turn = %q", out)
	}
	if k := kinds(e.events(t, id), 1); k != "user_text turn_started assistant_text usage result" {
		t.Fatalf("turn 1 kinds: %s", k)
	}
	e.okJSON(&st, "status", id)
	if st.Usage.InputTokens != fakeopenai.InputTokens || st.Usage.OutputTokens != fakeopenai.OutputTokens {
		t.Fatalf("usage after one turn = %+v", st.Usage)
	}
	t.Logf("status after a text turn: %+v", st)
	t.Logf("tools kilo offers: %v", e.lastRequest(t, "hello there").Tools)

	// A tool turn: the default preset (acceptEdits) lets kilo write a file
	// in cwd without asking; its own write tool, not fs/write_text_file.
	target := filepath.Join(e.work, "kilo.txt")
	turn := atoiT(t, e.ok("send", id, `call tool: write {"filePath":"`+target+`","content":"written by kilo\n"}`))
	e.waitStatus(t, id, "idle")
	if out := e.ok("output", id, "--turn", strconv.Itoa(turn)); out != "Tool said: Wrote file successfully.. Done." {
		t.Fatalf("write turn output = %q", out)
	}
	if b, err := os.ReadFile(target); err != nil || string(b) != "written by kilo\n" {
		t.Fatalf("file written: %q %v", b, err)
	}
	if k := kinds(e.events(t, id), turn); !strings.HasPrefix(k, "user_text turn_started tool_use") || !strings.Contains(k, "tool_result assistant_text usage result") || strings.Contains(k, "permission") {
		t.Fatalf("write turn kinds: %s", k)
	}

	// A shell command asks under default (KILO_PERMISSION carries the
	// preset: kilo itself would run it unasked); answered allow, it runs.
	allowed := filepath.Join(e.work, "allowed.txt")
	turn = atoiT(t, e.ok("send", id, `call tool: bash {"command":"echo yes > allowed.txt","description":"write allowed"}`))
	perm := e.waitEvent(t, id, event.Permission, func(d gjson.Result) bool { return !d.Get("decision").Exists() })
	if perm.Turn != turn || gjson.GetBytes(perm.Data, "toolCall.kind").String() != "execute" || !strings.Contains(string(perm.Data), "allowed.txt") {
		t.Fatalf("permission event: %s", perm.Data)
	}
	reqID := gjson.GetBytes(perm.Data, "requestId").String()
	e.ok("permit", id, reqID, "allow")
	e.waitStatus(t, id, "idle")
	if b, err := os.ReadFile(allowed); err != nil || string(b) != "yes\n" {
		t.Fatalf("allowed command: %q %v", b, err)
	}
	// The request and its decision are two permission events; kilo may
	// send a tool_call update between them.
	if k := kinds(e.events(t, id), turn); strings.Count(k, "permission") != 2 || !strings.Contains(k, "tool_use permission") || !strings.Contains(k, "tool_result") {
		t.Fatalf("allowed turn kinds: %s", k)
	}
	// Answered deny, it does not run, and the turn ends.
	denied := filepath.Join(e.work, "denied.txt")
	turn = atoiT(t, e.ok("send", id, `call tool: bash {"command":"echo no > denied.txt","description":"write denied"}`))
	perm = e.waitEvent(t, id, event.Permission, func(d gjson.Result) bool {
		return !d.Get("decision").Exists() && d.Get("requestId").String() != reqID
	})
	e.ok("permit", id, gjson.GetBytes(perm.Data, "requestId").String(), "deny")
	e.waitStatus(t, id, "idle")
	if _, err := os.Stat(denied); !os.IsNotExist(err) {
		t.Fatalf("denied command ran: %v", err)
	}
	res := e.waitEvent(t, id, event.ToolResult, func(d gjson.Result) bool { return d.Get("update.status").String() == "failed" })
	if res.Turn != turn {
		t.Fatalf("failed tool result of turn %d, want %d: %s", res.Turn, turn, res.Data)
	}

	// set-model through the model config option; an unknown one is refused.
	var sm verbs.SetModelResult
	e.okJSON(&sm, "set-model", id, "acp:kilo:fake/fake-model-2")
	if !sm.Switched {
		t.Fatal("set-model fake-model-2 not switched")
	}
	e.ok("run", id, "say exactly: on model two")
	if req := e.lastRequest(t, "say exactly: on model two"); req.Model != "fake-model-2" {
		t.Fatalf("model after set-model = %q", req.Model)
	}
	e.okJSON(&sm, "set-model", id, "nope/none")
	if sm.Switched {
		t.Fatal("unknown model switched")
	}

	// Interrupt a slow turn: session/cancel ends it cancelled.
	turn, _ = e.interruptSlow(t, id, 60*time.Second)
	e.waitStatus(t, id, "idle")

	// Fork (kilo declares sessionCapabilities.fork): the fork's first
	// request carries the conversation, the parent's next does not carry
	// the fork's.
	fork := e.ok("open", "--fork", id)
	e.dumpOnFail(t, fork)
	e.ok("run", fork, "say exactly: in the fork")
	if req := e.lastRequest(t, "say exactly: in the fork"); !hasLine(req.History, "user: hello there") || !hasLine(req.History, "assistant: Hello from fakeopenai") {
		t.Fatalf("the fork's first request: %q", req.History)
	}
	ps, fs := e.status(t, id), e.status(t, fork)
	if fs.SessionID == "" || fs.SessionID == ps.SessionID || fs.Model != ps.Model {
		t.Fatalf("fork %+v\nof %+v", fs, ps)
	}
	e.ok("run", id, "say exactly: in the parent")
	if req := e.lastRequest(t, "say exactly: in the parent"); !hasLine(req.History, "user: hello there") || hasLine(req.History, "user: say exactly: in the fork") {
		t.Fatalf("the parent's next request: %q", req.History)
	}
	e.ok("close", fork)

	// Close and resume: session/load of the same session, which remembers.
	e.ok("close", id)
	if st := e.status(t, id); st.Status != "dead" {
		t.Fatalf("after close: %+v", st)
	}
	e.ok("open", "--id", id, "--resume")
	if st := e.status(t, id); st.SessionID != ps.SessionID || st.Status != "idle" {
		t.Fatalf("resumed %+v, session was %s", st, ps.SessionID)
	}
	e.ok("run", id, "say exactly: after resume")
	if req := e.lastRequest(t, "say exactly: after resume"); !hasLine(req.History, "user: hello there") || !hasLine(req.History, "user: say exactly: in the parent") {
		t.Fatalf("the resumed session's request: %q", req.History)
	}
	e.ok("close", id)
}

// kiloPresets: notebook, plan and bypass on kilo, each held by kilo itself
// through the permission overlay: no spawn warning, the denied tools not
// offered to the model, bypass's command run unasked.
func (e *acpEnv) kiloPresets(t *testing.T) {
	noWarning := func(id string) {
		t.Helper()
		for _, r := range e.events(t, id) {
			if r.Kind == event.Error {
				t.Fatalf("agent %s: %s", id, r.Data)
			}
		}
	}
	offered := func(req fakeopenai.Request, tool string) bool { return slices.Contains(req.Tools, tool) }

	// notebook: kilo's shell and file tools are not offered.
	nb := e.ok("open", "--model", "acp:kilo:"+agents.KiloModel, "--permission", "notebook", e.work)
	e.dumpOnFail(t, nb)
	mark := filepath.Join(e.work, "nb-mark")
	out := e.ok("run", nb, `call tool: bash {"command":"touch `+mark+`","description":"nb"}`)
	req := e.lastRequest(t, `call tool: bash {"command":"touch `+mark+`","description":"nb"}`)
	for _, tool := range []string{"bash", "read", "write", "edit", "glob", "grep", "kaimon_agent_open"} {
		if offered(req, tool) {
			t.Fatalf("notebook kilo was offered %s: %v", tool, req.Tools)
		}
	}
	if !offered(req, "todowrite") {
		t.Fatalf("notebook kilo lost the tools it keeps: %v", req.Tools)
	}
	if _, err := os.Stat(mark); !os.IsNotExist(err) {
		t.Fatalf("notebook kilo ran bash (%v): %q", err, out)
	}
	noWarning(nb)
	e.ok("close", nb)

	// plan: kilo's plan mode, edits denied.
	pl := e.ok("open", "--model", "acp:kilo:"+agents.KiloModel, "--permission-mode", "plan", e.work)
	e.dumpOnFail(t, pl)
	planned := filepath.Join(e.work, "planned.txt")
	call := `call tool: write {"filePath":"` + planned + `","content":"x"}`
	e.ok("run", pl, call)
	if _, err := os.Stat(planned); !os.IsNotExist(err) {
		t.Fatalf("plan kilo wrote a file: %v", err)
	}
	req = e.lastRequest(t, call)
	if offered(req, "write") || offered(req, "edit") || !offered(req, "read") {
		t.Fatalf("plan kilo's tools: %v", req.Tools)
	}
	t.Logf("plan kilo's system prompt begins: %.200q", req.System)
	noWarning(pl)
	e.ok("close", pl)

	// bypass: a command runs without a question.
	by := e.ok("open", "--model", "acp:kilo:"+agents.KiloModel, "--permission", "bypass", e.work)
	e.dumpOnFail(t, by)
	mark = filepath.Join(e.work, "by-mark")
	e.ok("run", by, `call tool: bash {"command":"touch `+mark+`","description":"by"}`)
	if _, err := os.Stat(mark); err != nil {
		t.Fatalf("bypass kilo's command did not run: %v", err)
	}
	for _, r := range e.events(t, by) {
		if r.Kind == event.Permission && !gjson.GetBytes(r.Data, "decision").Exists() {
			t.Fatalf("bypass kilo asked: %s", r.Data)
		}
	}
	noWarning(by)
	e.ok("close", by)
}
