package backend

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// ReadMCPConfig reads the caller's mcp_config at path (as given: name) into
// v. What it reports of a file that is not an MCP config is its name and
// where the parse failed, never its bytes, nor the JSON decoder's message
// (which quotes a character, a number or a key of it): mcp_config may name
// any file the caller can read, a key file or a .env, and the error goes
// back to the caller (an MCP client, a model reading untrusted text) and
// into the agent's event log.
func ReadMCPConfig(name, path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("mcp_config %q: %w: pass the path of an existing MCP config JSON file", name, err)
	}
	err = json.Unmarshal(b, v)
	if err == nil {
		return nil
	}
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		line, col := position(b, syn.Offset)
		return fmt.Errorf("mcp_config %q is not JSON (it fails at line %d, column %d): pass the path of an MCP config JSON file, {\"mcpServers\": {...}}", name, line, col)
	case errors.As(err, &typ):
		line, col := position(b, typ.Offset)
		return fmt.Errorf("mcp_config %q is JSON but not an MCP config (a value of the wrong type at line %d, column %d): it holds {\"mcpServers\": {NAME: {\"command\": ..., \"args\": [...]}}}", name, line, col)
	}
	return fmt.Errorf("mcp_config %q is not an MCP config JSON file: pass the path of one, {\"mcpServers\": {...}}", name)
}

// position is the line and column (from 1, in bytes) of offset in b: the
// decoder's offsets count the bytes read, so the failing one is just
// before.
func position(b []byte, offset int64) (line, col int) {
	off := int(min(max(offset, 1), int64(len(b)))) - 1
	if off < 0 {
		return 1, 1
	}
	line = 1 + bytes.Count(b[:off], []byte{'\n'})
	col = off - bytes.LastIndexByte(b[:off], '\n')
	return line, col
}

// MCPServer is one server of a caller's mcp_config (the claude CLI's
// --mcp-config format): a command, or a URL (Type "sse" or "http").
type MCPServer struct {
	Type    string            `json:"type"`
	Command string            `json:"command"`
	Args    []string          `json:"args"`
	Env     map[string]string `json:"env"`
	URL     string            `json:"url"`
	Headers map[string]string `json:"headers"`
}

// CallerMCPServers reads the servers of the caller's mcp_config, for a
// backend that hands them to its agent in the agent's own form; nil
// without one. A server named kaimon is refused: kaimon attaches its
// door under that name to every agent itself.
func (o *Options) CallerMCPServers() (map[string]MCPServer, error) {
	if o.MCPConfig == "" {
		return nil, nil
	}
	path, err := filepath.Abs(o.MCPConfig)
	if err != nil {
		return nil, err
	}
	var cfg struct {
		MCPServers map[string]MCPServer `json:"mcpServers"`
	}
	if err := ReadMCPConfig(o.MCPConfig, path, &cfg); err != nil {
		return nil, err
	}
	if _, ok := cfg.MCPServers["kaimon"]; ok {
		return nil, fmt.Errorf("mcp_config %q defines a server named kaimon, which kaimon attaches to every agent itself: rename or remove it", o.MCPConfig)
	}
	return cfg.MCPServers, nil
}
