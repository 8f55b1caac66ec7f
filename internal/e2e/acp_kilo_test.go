package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kaimon/kaimon/internal/testutil/agents"
	"github.com/kaimon/kaimon/internal/testutil/fakeopenai"
	"github.com/kaimon/kaimon/internal/verbs"
)

// newKiloEnv is a kaimon installation whose kilo runs offline against a
// fakeopenai chat completions API (agents.KiloOffline), its HOME, XDG dirs
// and TMPDIR inside the installation.
func newKiloEnv(t *testing.T) *acpEnv {
	t.Helper()
	bin := acpAgent(t, "KAIMON_KILO_BIN", "kilo")
	oa := fakeopenai.New(t)
	if testing.Verbose() {
		oa.SetLog(os.Stderr)
	}
	e := &acpEnv{openai: oa}
	e.kenv = newEnv(t, "KAIMON_KILO_BIN", bin)
	vars, err := agents.KiloOffline(oa.URL(), filepath.Join(e.home, "kilo"))
	if err != nil {
		t.Fatal(err)
	}
	drop := map[string]bool{}
	for _, kv := range vars {
		k, _, _ := strings.Cut(kv, "=")
		drop[k] = true
	}
	keep := e.env[:0]
	for _, kv := range e.env {
		if k, _, _ := strings.Cut(kv, "="); !drop[k] {
			keep = append(keep, kv)
		}
	}
	e.env = append(keep, vars...)
	return e
}

// TestACPKilo drives kilo (`kilo acp`): a text turn with the usage its
// prompt answer reports, ...
func TestACPKilo(t *testing.T) {
	e := newKiloEnv(t)
	id := e.ok("open", "--model", "acp:kilo:"+agents.KiloModel, e.work)
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
	e.ok("close", id)
}
