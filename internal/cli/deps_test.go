package cli

import (
	"os/exec"
	"strings"
	"testing"
)

// TestCLIDeps keeps out of the kaimon binary the packages whose init costs
// every one-line verb time at start (Go runs the init of every package
// linked, used or not): the MCP server's, whose JSON Schema library
// compiles five meta-schemas at init (kaimon mcp execs kaimon-agentd's
// server instead), and the daemon's own packages.
func TestCLIDeps(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go tool on PATH")
	}
	out, err := exec.Command(goBin, "list", "-deps", "github.com/kaimon/kaimon/cmd/kaimon").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	deps := strings.Fields(string(out))
	banned := []string{
		"github.com/mark3labs/mcp-go/server",
		"github.com/santhosh-tekuri/jsonschema/v6",
		"github.com/kaimon/kaimon/internal/mcpserver",
	}
	for _, d := range deps {
		for _, b := range banned {
			if d == b {
				t.Errorf("kaimon links %s: its init runs at every start of the CLI", d)
			}
		}
	}
}
