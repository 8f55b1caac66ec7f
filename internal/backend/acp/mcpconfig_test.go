package acp

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	sdk "github.com/coder/acp-go-sdk"

	"github.com/kaimon/kaimon/internal/backend"
	"github.com/kaimon/kaimon/internal/verbs"
)

// A caller's mcp_config that is not an MCP config is named, with where it
// fails, and none of its bytes: it may be a key file. One that is goes to
// the agent as its servers.
func TestMCPServersNameABadConfigWithoutItsBytes(t *testing.T) {
	dir := t.TempDir()
	secret := filepath.Join(dir, "secret.env")
	os.WriteFile(secret, []byte("ANTHROPIC_API_KEY=sk-hunter2\n"), 0o600)
	b := &Backend{opts: backend.Options{OpenArgs: verbs.OpenArgs{MCPConfig: secret}}}
	_, err := b.mcpServers(sdk.McpCapabilities{})
	if err == nil || !strings.Contains(err.Error(), `mcp_config "`+secret+`" is not JSON (it fails at line 1, column 1)`) {
		t.Fatalf("mcpServers of a .env: %v; want the file named as not JSON", err)
	}
	if strings.Contains(err.Error(), "'A'") || strings.Contains(err.Error(), "hunter2") {
		t.Errorf("the error echoes the file: %v", err)
	}
	good := filepath.Join(dir, "mcp.json")
	os.WriteFile(good, []byte(`{"mcpServers":{"x":{"command":"srv","args":["-v"]}}}`), 0o600)
	b.opts.MCPConfig = good
	servers, err := b.mcpServers(sdk.McpCapabilities{})
	if err != nil || len(servers) != 1 || servers[0].Stdio == nil || servers[0].Stdio.Command != "srv" {
		t.Fatalf("mcpServers of an MCP config: %+v, %v", servers, err)
	}
}
