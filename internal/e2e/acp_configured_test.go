package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/kaimon/kaimon/internal/event"
	"github.com/kaimon/kaimon/internal/verbs"
)

// TestACPConfiguredAgent drives an agent kaimon has no row for, from the
// config file's acp_agents alone: gemini-cli under the name "gem", with
// its args and an env of the entry's own. kaimon speaks standard ACP to
// it: a text turn, a tool turn whose permission kaimon permit answers
// (the command sees the entry's env), close. A configured agent whose
// program is missing names the config key and the path; an unknown one
// lists the configured names beside the built-in ones.
func TestACPConfiguredAgent(t *testing.T) {
	e := newACPEnv(t) // gemini's fake and offline env, no KAIMON_GEMINI_BIN
	gem := acpAgent(t, "KAIMON_GEMINI_BIN", "gemini")
	missing := filepath.Join(e.home, "no-such-agent")
	writeJSONFile(t, filepath.Join(e.home, "config.json"), map[string]any{"acp_agents": map[string]any{
		"gem":  map[string]any{"cmd": gem, "args": []string{"--acp"}, "env": map[string]string{"KAIMON_TEST_MARK": "from-config"}},
		"gone": map[string]any{"cmd": missing},
	}})

	id := e.ok("open", "--model", "acp:gem:gemini-2.5-pro", e.work)
	e.dumpOnFail(t, id)
	var st verbs.AgentStatus
	e.okJSON(&st, "status", id)
	if st.Status != "idle" || st.Model != "acp:gem:gemini-2.5-pro" || st.SessionID == "" {
		t.Fatalf("status = %+v", st)
	}
	if out := e.ok("run", id, "hello there"); !strings.HasPrefix(out, "Hello from fakegemini (request #") {
		t.Fatalf("text turn = %q", out)
	}
	if k := kinds(e.events(t, id), 1); !strings.HasPrefix(k, "user_text turn_started assistant_text") || !strings.HasSuffix(k, "result") {
		t.Fatalf("turn 1 kinds: %s", k)
	}

	// A tool turn: the shell command asks, kaimon permit allows, and the
	// command runs with the entry's env.
	mark := filepath.Join(e.work, "mark")
	turn := atoiT(t, e.ok("send", id, `call tool: run_shell_command {"command":"printf %s \"$KAIMON_TEST_MARK\" > `+mark+`"}`))
	perm := e.waitEvent(t, id, event.Permission, func(d gjson.Result) bool { return !d.Get("decision").Exists() })
	e.ok("permit", id, gjson.GetBytes(perm.Data, "requestId").String(), "allow")
	e.waitStatus(t, id, "idle")
	if b, err := os.ReadFile(mark); err != nil || string(b) != "from-config" {
		t.Fatalf("the command's output: %q %v", b, err)
	}
	if k := kinds(e.events(t, id), turn); !strings.Contains(k, "tool_use") || !strings.Contains(k, "tool_result") {
		t.Fatalf("tool turn kinds: %s", k)
	}
	e.ok("close", id)

	e.fails(1, "acp_agents.gone.cmd names "+missing, "open", "--model", "acp:gone", e.work)
	r := e.fails(1, `unknown ACP agent "nobody"`, "open", "--model", "acp:nobody", e.work)
	if !strings.Contains(r.stderr, "gem") || !strings.Contains(r.stderr, "codex") || !strings.Contains(r.stderr, "kaimon agents") {
		t.Fatalf("unknown agent error lists neither the configured nor the built-in agents: %s", r.stderr)
	}
}
