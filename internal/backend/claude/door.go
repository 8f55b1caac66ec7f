package claude

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/kaimon/kaimon/internal/backend"
)

// The MCP server name under which the agent sees kaimon's door; its tools
// are then mcp__kaimon__<verb> (policy.KaimonServer).
const kaimonServerName = "kaimon"

// MCPConfigPath is where the agent's generated MCP config lives:
// its Files().MCPConfig (<cache>/<id>-mcp.json).
func MCPConfigPath(o *backend.Options) (string, error) {
	if o.CacheDir == "" {
		return "", errors.New("kaimon's MCP door needs a cache dir for the agent's MCP config")
	}
	return o.Files().MCPConfig, nil
}

// mcpConfig is the --mcp-config JSON naming the door as server kaimon:
// streamable HTTP, with the agent's id and secret token in headers, which
// the CLI sends with every request (observed with 2.1.197).
func mcpConfig(o *backend.Options) ([]byte, error) {
	type server struct {
		Type    string            `json:"type"`
		URL     string            `json:"url"`
		Headers map[string]string `json:"headers"`
	}
	return json.MarshalIndent(map[string]map[string]server{"mcpServers": {kaimonServerName: {
		Type: "http",
		URL:  o.Door.URL,
		Headers: map[string]string{
			"Authorization":     "Bearer " + o.Door.Token,
			backend.HeaderAgent: o.ID,
		},
	}}}, "", "  ")
}

// writeMCPConfig writes the agent's generated MCP config, readable by its
// owner only: it holds the agent's secret. It is written in place, not
// through a temp file (whose name would be an agent file of no kind in
// config.AgentFileKinds): nothing reads it before this returns, and one
// torn by a crash is removed when the next daemon starts. The old one is
// removed first, so that the new one is created with mode 0600.
func writeMCPConfig(o *backend.Options) (string, error) {
	path, err := MCPConfigPath(o)
	if err != nil {
		return "", err
	}
	b, err := mcpConfig(o)
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return "", err
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("writing the agent's MCP config: %w", err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return "", fmt.Errorf("writing the agent's MCP config: %w", err)
	}
	_, err = f.Write(append(b, '\n'))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(path)
		return "", fmt.Errorf("writing the agent's MCP config: %w", err)
	}
	return path, nil
}

// checkUserMCPConfig refuses a caller's mcp_config (named name, at path)
// that is not an MCP config JSON file, kaimon naming what is wrong with it
// rather than the claude CLI (backend.ReadMCPConfig); and, when kaimon
// attaches its door (door), one that defines a server named kaimon:
// kaimon attaches that server itself, with the headers that let its door
// tell the agent's calls apart and apply its preset.
func checkUserMCPConfig(name, path string, door bool) error {
	var cfg struct {
		MCPServers map[string]json.RawMessage `json:"mcpServers"`
	}
	if err := backend.ReadMCPConfig(name, path, &cfg); err != nil {
		return err
	}
	if _, ok := cfg.MCPServers[kaimonServerName]; ok && door {
		return fmt.Errorf("mcp_config %q defines a server named %q, which kaimon attaches to every agent itself: rename or remove it", name, kaimonServerName)
	}
	return nil
}
