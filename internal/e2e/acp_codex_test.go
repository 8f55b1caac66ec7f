package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kaimon/kaimon/internal/apitype"
	"github.com/kaimon/kaimon/internal/event"
	"github.com/kaimon/kaimon/internal/testutil/agents"
	"github.com/kaimon/kaimon/internal/testutil/fakeopenai"
	"github.com/kaimon/kaimon/internal/verbs"
	"github.com/tidwall/gjson"
)

// newCodexEnv is a kaimon installation whose codex-acp runs offline
// against a fakeopenai Responses API, CODEX_HOME and TMPDIR in the test's
// dir.
func newCodexEnv(t *testing.T) *acpEnv {
	t.Helper()
	bin := acpAgent(t, "KAIMON_CODEX_ACP_BIN", "codex-acp")
	oa := fakeopenai.New(t)
	if testing.Verbose() {
		oa.SetLog(os.Stderr)
	}
	e := &acpEnv{openai: oa}
	e.kenv = newEnv(t, "KAIMON_CODEX_ACP_BIN", bin)
	vars, err := agents.CodexOffline(oa.URL(), filepath.Join(e.home, "codex-home"), filepath.Join(e.home, "tmp"), os.Getenv("PATH"))
	if err != nil {
		t.Fatal(err)
	}
	keep := e.env[:0]
	for _, kv := range e.env {
		k, _, _ := strings.Cut(kv, "=")
		if k != "PATH" && k != "TMPDIR" {
			keep = append(keep, kv)
		}
	}
	e.env = append(keep, vars...)
	before := codexTmp()
	t.Cleanup(func() {
		for p := range codexTmp() {
			if !before[p] {
				t.Errorf("codex left %s behind", p)
				os.RemoveAll(p)
			}
		}
	})
	return e
}

// codexTmp is the set of /tmp/codex-* entries.
func codexTmp() map[string]bool {
	m, _ := filepath.Glob("/tmp/codex*")
	s := map[string]bool{}
	for _, p := range m {
		s[p] = true
	}
	return s
}

// TestACPCodex drives codex-acp: a text turn, a tool turn.
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
	e.waitEvent(t, id, event.AssistantText, func(d gjson.Result) bool { return true })
	t.Logf("turn 1 kinds: %s", kinds(e.events(t, id), 1))
	e.okJSON(&st, "status", id)
	t.Logf("status: %+v", st)
	e.ok("close", id)
}
