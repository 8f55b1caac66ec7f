package e2e

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kaimon/kaimon/internal/apitype"
	"github.com/kaimon/kaimon/internal/event"
	"github.com/kaimon/kaimon/internal/testutil/agents"
	"github.com/kaimon/kaimon/internal/verbs"
	"github.com/tidwall/gjson"
)

// newCodexEnv is a kaimon installation whose codex-acp runs offline
// against a fakeopenai Responses API, CODEX_HOME and TMPDIR in the test's
// dir.
func newCodexEnv(t testing.TB) *acpEnv {
	t.Helper()
	return newOfflineCodexEnv(t, "KAIMON_CODEX_ACP_BIN", "codex-acp")
}

// newOfflineCodexEnv is a kaimon installation whose program (codex-acp,
// or codex itself, named by binEnv) runs Codex offline against a
// fakeopenai Responses API, CODEX_HOME and TMPDIR in the test's dir.
func newOfflineCodexEnv(t testing.TB, binEnv, program string) *acpEnv {
	t.Helper()
	e := newOpenAIACPEnv(t, binEnv, program, func(e *acpEnv) ([]string, error) {
		return agents.CodexOffline(e.openai.URL(), filepath.Join(e.home, "codex-home"), filepath.Join(e.home, "tmp"), os.Getenv("PATH"))
	})
	checkTmpLeft(t, "codex", "/tmp/codex*")
	return e
}

// TestACPCodex drives codex-acp: a text turn, a tool turn, an escalation
// asked under preset default and answered allow then deny, interrupt,
// fork refused, close and resume.
func TestACPCodex(t *testing.T) {
	e := newCodexEnv(t)
	id := e.ok("open", "--model", "acp:codex", e.work)
	e.dumpOnFail(t, id)
	var st verbs.AgentStatus
	e.okJSON(&st, "status", id)
	if st.Status != apitype.AgentState("idle") || st.SessionID == "" {
		t.Fatalf("status = %+v", st)
	}
	if out := e.ok("run", id, "hello there"); !strings.HasPrefix(out, "Hello from fakeopenai (request #") {
		t.Fatalf("text turn = %q", out)
	}
	if k := kinds(e.events(t, id), 1); k != "user_text turn_started assistant_text usage result" {
		t.Fatalf("turn 1 kinds: %s", k)
	}
	// codex reports no token counts, only its context size: status says
	// so rather than showing zeros as counted.
	e.okJSON(&st, "status", id)
	if !strings.HasPrefix(st.UsageNote, "usage not reported by this agent; context size only: ") || st.Usage.InputTokens != 0 {
		t.Fatalf("usage after a turn: %+v %q", st.Usage, st.UsageNote)
	}
	if out := e.ok("status", id); !strings.Contains(out, st.UsageNote) || strings.Contains(out, "in 0  out 0") {
		t.Fatalf("status text:\n%s", out)
	}

	// A tool turn: a read-only command runs in codex's sandbox unasked.
	turn := atoiT(t, e.ok("send", id, `call tool: exec_command {"cmd":"echo hi-from-codex"}`))
	e.waitStatus(t, id, "idle")
	out := e.ok("output", id, "--turn", itoa(turn))
	if !strings.Contains(out, "hi-from-codex") || !strings.HasPrefix(out, "Tool said: ") {
		t.Fatalf("tool turn output = %q", out)
	}
	k := kinds(e.events(t, id), turn)
	if !strings.Contains(k, "tool_use") || !strings.Contains(k, "tool_result") {
		t.Fatalf("tool turn kinds: %s", k)
	}

	// An escalated write asks before its tool_call is announced; the
	// permission carries the command from the request's own toolCall.
	allowed := filepath.Join(e.work, "allowed.txt")
	turn = atoiT(t, e.ok("send", id, `call tool: exec_command {"cmd":"echo yes > allowed.txt","sandbox_permissions":"require_escalated","justification":"write a file"}`))
	perm := e.waitEvent(t, id, event.Permission, func(d gjson.Result) bool { return !d.Get("decision").Exists() })
	t.Logf("permission: %s", perm.Data)
	if perm.Turn != turn || !strings.Contains(string(perm.Data), "allowed.txt") {
		t.Fatalf("permission event lacks the command: %s", perm.Data)
	}
	reqID := gjson.GetBytes(perm.Data, "requestId").String()
	e.ok("permit", id, reqID, "allow")
	e.waitStatus(t, id, "idle")
	if b, err := os.ReadFile(allowed); err != nil || string(b) != "yes\n" {
		t.Fatalf("allowed write: %q %v", b, err)
	}
	denied := filepath.Join(e.work, "denied.txt")
	turn = atoiT(t, e.ok("send", id, `call tool: exec_command {"cmd":"echo no > denied.txt","sandbox_permissions":"require_escalated","justification":"write a file"}`))
	perm = e.waitEvent(t, id, event.Permission, func(d gjson.Result) bool {
		return !d.Get("decision").Exists() && d.Get("requestId").String() != reqID
	})
	e.ok("permit", id, gjson.GetBytes(perm.Data, "requestId").String(), "deny")
	e.waitStatus(t, id, "idle")
	// codex's abort ends the turn cancelled.
	if r := e.events(t, id); gjson.GetBytes(r[len(r)-2].Data, "stopReason").String() != "cancelled" {
		t.Fatalf("denied turn ended %s", r[len(r)-2].Data)
	}
	if _, err := os.Stat(denied); !os.IsNotExist(err) {
		t.Fatalf("denied write happened: %v", err)
	}

	// Interrupt a slow turn.
	turn = atoiT(t, e.ok("send", id, "please be slow"))
	e.waitEvent(t, id, event.AssistantText, func(gjson.Result) bool { return true })
	time.Sleep(1000 * time.Millisecond)
	var ir verbs.InterruptResult
	e.okJSON(&ir, "interrupt", id)
	if !ir.Interrupted {
		t.Fatal("interrupt: false")
	}
	res := e.turnResult(t, id, turn)
	if sr := gjson.GetBytes(res.Data, "stopReason").String(); sr != "cancelled" {
		t.Fatalf("interrupted turn ended %s", res.Data)
	}
	e.waitStatus(t, id, "idle")

	// bypass means codex's full-access: a write outside the read-only
	// sandbox runs unasked (in read-only it would not, and no permission
	// is asked for a command codex did not escalate).
	byp := e.ok("open", "--model", "acp:codex", "-p", "bypass", e.work)
	free := filepath.Join(e.work, "free.txt")
	e.ok("run", byp, `call tool: exec_command {"cmd":"echo free > free.txt"}`)
	if b, err := os.ReadFile(free); err != nil || string(b) != "free\n" {
		t.Fatalf("bypass write: %q %v", b, err)
	}
	e.ok("close", byp)

	// codex declares no session/fork: a fork is refused, naming it.
	e.fails(1, "acp:codex does not declare session/fork", "open", "--fork", id)

	// close, then resume: the same session, and the model sees the
	// earlier turns.
	e.okJSON(&st, "status", id)
	session := st.SessionID
	e.ok("close", id)
	if got := e.ok("open", "--id", id, "--resume"); got != id {
		t.Fatalf("open --resume printed %q", got)
	}
	e.okJSON(&st, "status", id)
	if st.SessionID != session || st.Status != "idle" {
		t.Fatalf("resumed: %+v", st)
	}
	e.ok("run", id, "what did I say first")
	reqs := e.openai.Requests()
	if h := strings.Join(reqs[len(reqs)-1].History, "\n"); !strings.Contains(h, "user: hello there") {
		t.Fatalf("resumed history lacks the first turn:\n%s", h)
	}
	e.ok("close", id)
}

func itoa(n int) string { return strconv.Itoa(n) }
