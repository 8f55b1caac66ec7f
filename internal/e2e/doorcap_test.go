package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kaimon/kaimon/internal/verbs"
)

// TestDoorChildCappedAtParent has a real claude CLI agent under lab
// without the recursion guard, whose own Bash asks permission, open agents
// through the door (the fake model API scripts the calls): a bypass child
// is refused, with the parent's preset in the error the model reads, and
// the command the parent then has it run runs nowhere; a lab child, no
// looser than its parent, opens.
func TestDoorChildCappedAtParent(t *testing.T) {
	e := newEnv(t)
	parent := e.ok("open", "--permission", "lab", "--no-recursion-guard", e.work)
	marker := filepath.Join(e.work, "marker")
	open := func(id, preset string) string {
		t.Helper()
		args, _ := json.Marshal(map[string]any{"id": id, "cwd": e.work, "permission": preset})
		return e.ok("run", parent, "call tool: mcp__kaimon__agent_open "+string(args))
	}

	out := open("kid", "bypass")
	if !strings.Contains(out, "(is_error)") || !strings.Contains(out, "preset bypass runs without permission checks") ||
		!strings.Contains(out, "the opening agent runs under preset lab") {
		t.Fatalf("lab agent's agent_open of a bypass agent = %q", out)
	}
	args, _ := json.Marshal(map[string]any{"agent_id": "kid", "text": "run command: touch " + marker})
	ran := e.ok("run", parent, "call tool: mcp__kaimon__agent_run "+string(args))
	if _, err := os.Stat(marker); !os.IsNotExist(err) {
		t.Fatalf("a command ran unasked through a child of the lab agent: %s: %v (agent_run said %q)", marker, err, ran)
	}
	if !strings.Contains(ran, "(is_error)") || !strings.Contains(ran, `no agent "kid"`) {
		t.Errorf("agent_run of the refused child = %q", ran)
	}
	var l verbs.ListResult
	e.okJSON(&l, "list")
	for _, a := range l.Agents {
		if a.AgentID == "kid" {
			t.Fatalf("the refused child is listed: %+v", a)
		}
	}

	// No looser than its parent: it opens, through the same door.
	if out := open("kid2", "lab"); !strings.Contains(out, `"agent_id":"kid2"`) || strings.Contains(out, "(is_error)") {
		t.Fatalf("lab agent's agent_open of a lab agent = %q", out)
	}
	e.ok("close", "kid2")
}
