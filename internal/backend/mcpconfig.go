package backend

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
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
