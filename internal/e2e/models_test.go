package e2e

import (
	"path/filepath"
	"strings"
	"testing"
)

// A typo in a model prefix is refused by agent_open, with the prefixes and
// the model meant, before any agent program starts: it used to open a
// claude agent that sent its turns to the API as model "olama:qwen3".
func TestOpenUnknownModelPrefix(t *testing.T) {
	e := newEnv(t)
	e.ok("daemon", "start") // its process is then the only one
	before := len(e.processes())
	r := e.fails(1, `unknown model prefix "olama:" in model "olama:qwen3"`, "open", "--model", "olama:qwen3", e.work)
	if !strings.Contains(r.stderr, `did you mean "ollama:qwen3"?`) || !strings.Contains(r.stderr, "acp:, codex:, ollama:, vmlx:, replay:") {
		t.Errorf("the refusal names neither the prefixes nor the model meant: %s", r)
	}
	if n := len(e.processes()); n != before {
		t.Errorf("%d processes of this installation after the refused open, %d before: %s", n, before, describe(e.processes()))
	}
	if reqs := e.api.Requests(); len(reqs) != 0 {
		t.Errorf("the refused open reached the model API: %+v", reqs)
	}
	e.noAgents()
}

// Without the claude CLI, an unknown prefix is still refused for what it
// is, not for the missing CLI that the model would have gone to.
func TestOpenUnknownModelPrefixWithoutClaude(t *testing.T) {
	e := newEnv(t, "KAIMON_CLAUDE_BIN", filepath.Join(t.TempDir(), "no-claude"))
	r := e.fails(1, `unknown model prefix "bogus:" in model "bogus:thing"`, "open", "--model", "bogus:thing", e.work)
	if strings.Contains(r.stderr, "claude CLI") {
		t.Errorf("the refusal is about the claude CLI: %s", r)
	}
	// The same daemon does say the CLI is missing for a claude model.
	e.fails(1, "not an executable claude CLI", "open", "--model", "sonnet", e.work)
	e.noAgents()
}
