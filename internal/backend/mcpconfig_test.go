package backend

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// notMCPConfigs are files an mcp_config may name by mistake or on
// purpose, each with what ReadMCPConfig must say of it; the bytes of none
// may come back.
var notMCPConfigs = []struct{ body, want string }{
	{"ANTHROPIC_API_KEY=sk-hunter2\n", "is not JSON (it fails at line 1, column 1)"},
	{"{\"mcpServers\": {\n  \"x\": {\"command\": \"hunter2\",, }}}", "is not JSON (it fails at line 2, column 30)"},
	{`{"mcpServers": 31415926}`, "is JSON but not an MCP config (a value of the wrong type at line 1, column"},
	{`"hunter2"`, "is JSON but not an MCP config"},
}

// checkNoEcho fails t if msg quotes a character of body (as the JSON
// decoder's "invalid character 'A'") or holds a word of it.
func checkNoEcho(t *testing.T, msg, body string) {
	t.Helper()
	if regexp.MustCompile(`'.'`).MatchString(msg) {
		t.Errorf("the error quotes a character of the file: %s", msg)
	}
	for _, w := range regexp.MustCompile(`[A-Za-z0-9_-]{5,}`).FindAllString(body, -1) {
		if w != "mcpServers" && w != "command" && strings.Contains(msg, w) {
			t.Errorf("the error echoes %q of the file: %s", w, msg)
		}
	}
}

func TestReadMCPConfigEchoesNothing(t *testing.T) {
	path := filepath.Join(t.TempDir(), "mcp.json")
	for _, c := range notMCPConfigs {
		if err := os.WriteFile(path, []byte(c.body), 0o600); err != nil {
			t.Fatal(err)
		}
		var cfg struct {
			MCPServers map[string]struct {
				Command string `json:"command"`
			} `json:"mcpServers"`
		}
		err := ReadMCPConfig("mcp.json", path, &cfg)
		if err == nil || !strings.Contains(err.Error(), `mcp_config "mcp.json" `+c.want) {
			t.Errorf("%q: %v, want it to say %q", c.body, err, c.want)
			continue
		}
		checkNoEcho(t, err.Error(), c.body)
	}
	if err := os.WriteFile(path, []byte(`{"mcpServers": {"x": {"command": "srv"}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		MCPServers map[string]struct {
			Command string `json:"command"`
		} `json:"mcpServers"`
	}
	if err := ReadMCPConfig("mcp.json", path, &cfg); err != nil || cfg.MCPServers["x"].Command != "srv" {
		t.Errorf("an MCP config: %+v, %v", cfg, err)
	}
}
