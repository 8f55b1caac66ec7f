package codex

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kaimon/kaimon/internal/backend"
	"github.com/kaimon/kaimon/internal/policy"
	"github.com/kaimon/kaimon/internal/verbs"
)

func TestParseModel(t *testing.T) {
	for _, c := range []struct{ model, effort, name, eff, err string }{
		{"codex:", "", "", "", ""},
		{"codex:gpt-5.4", "", "gpt-5.4", "", ""},
		{"codex:gpt-5.4/high", "", "gpt-5.4", "high", ""},
		{"codex:gpt-5.4/high", "low", "gpt-5.4", "low", ""},
		{"codex:/minimal", "", "", "minimal", ""},
		{"codex:gpt-5.4", "max", "gpt-5.4", "xhigh", ""},
		{"codex:gpt-5.4/extreme", "", "", "", `codex takes the reasoning efforts none, minimal, low, medium, high, xhigh, not "extreme"`},
		{"gpt-5.4", "", "", "", `model "gpt-5.4" is not a codex: model`},
	} {
		name, eff, err := ParseModel(c.model, c.effort)
		if (err == nil) != (c.err == "") || err != nil && err.Error() != c.err || name != c.name || eff != c.eff {
			t.Errorf("ParseModel(%q, %q) = %q, %q, %v; want %q, %q, %q", c.model, c.effort, name, eff, err, c.name, c.eff, c.err)
		}
	}
}

// Every permission mode a preset or permission_mode gives has Codex's
// approval policy and sandbox; full access only under bypass.
func TestModes(t *testing.T) {
	for _, m := range policy.PermissionModes {
		pm, ok := Modes[m]
		if !ok {
			t.Errorf("permission mode %s has no Codex approval policy and sandbox", m)
		}
		if (pm[1] == "danger-full-access" || pm[0] == "never") != (m == "bypassPermissions") {
			t.Errorf("permission mode %s runs Codex with %v", m, pm)
		}
	}
}

// The door is server kaimon, its token read from the environment (never
// in the protocol); the caller's servers follow in Codex's form, and one
// named kaimon is refused.
func TestMCPServers(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "mcp.json")
	os.WriteFile(cfg, []byte(`{"mcpServers":{"files":{"command":"mcp-files","args":["--ro"],"env":{"A":"1"}},"web":{"type":"http","url":"http://127.0.0.1:9/mcp","headers":{"X":"y"}}}}`), 0o600)
	b := &Backend{opts: backend.Options{OpenArgs: verbs.OpenArgs{ID: "a1", MCPConfig: cfg}, Door: &backend.Door{URL: "http://127.0.0.1:8/mcp", Token: "secret"}}}
	got, err := b.mcpServers()
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(got)
	want := `{"files":{"args":["--ro"],"command":"mcp-files","env":{"A":"1"}},` +
		`"kaimon":{"bearer_token_env_var":"KAIMON_DOOR_TOKEN","env_http_headers":{"X-Kaimon-Agent":"KAIMON_AGENT_SESSION"},"url":"http://127.0.0.1:8/mcp"},` +
		`"web":{"http_headers":{"X":"y"},"url":"http://127.0.0.1:9/mcp"}}`
	if string(raw) != want || strings.Contains(string(raw), "secret") {
		t.Fatalf("servers:\n%s\nwant\n%s", raw, want)
	}
	os.WriteFile(cfg, []byte(`{"mcpServers":{"kaimon":{"command":"x"}}}`), 0o600)
	if _, err := b.mcpServers(); err == nil || !strings.Contains(err.Error(), "defines a server named kaimon") {
		t.Fatalf("a caller's kaimon: %v", err)
	}
}
