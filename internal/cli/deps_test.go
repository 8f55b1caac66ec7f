package cli

import (
	"os/exec"
	"strings"
	"testing"
)

// deps lists the packages pkg links, itself included.
func deps(t *testing.T, pkg string) []string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go tool on PATH")
	}
	out, err := exec.Command(goBin, "list", "-deps", pkg).Output()
	if err != nil {
		t.Fatalf("go list -deps %s: %v", pkg, err)
	}
	return strings.Fields(string(out))
}

// TestCLIDeps keeps out of the kaimon binary the packages whose init costs
// every one-line verb time at start (Go runs the init of every package
// linked, used or not): the MCP server's, whose JSON Schema library
// compiles five meta-schemas at init (kaimon mcp execs kaimon-agentd's
// server instead), the ACP SDK and the backends that link it (kaimon
// reads the agent programs from internal/agentbin instead), every
// backend package (the model aliases and prefixes the CLI completes and
// prints are internal/apitype's words), and the daemon's own packages:
// internal/proc among them, the supervision of agent children (its exit
// waiter, its subreaper), of which the CLI needs only words and a look
// at /proc (internal/procstat).
func TestCLIDeps(t *testing.T) {
	t.Parallel()
	banned := []string{
		"github.com/mark3labs/mcp-go/server",
		"github.com/santhosh-tekuri/jsonschema/v6",
		"github.com/kaimon/kaimon/internal/mcpserver",
		"github.com/kaimon/kaimon/internal/server",
		"github.com/coder/acp-go-sdk",
		"github.com/kaimon/kaimon/internal/backend",
		"github.com/kaimon/kaimon/internal/backend/", // any package under it
		"github.com/kaimon/kaimon/internal/proc",
		"github.com/kaimon/kaimon/internal/proc/",
	}
	for _, d := range deps(t, "github.com/kaimon/kaimon/cmd/kaimon") {
		for _, b := range banned {
			if d == b || strings.HasSuffix(b, "/") && strings.HasPrefix(d, b) {
				t.Errorf("kaimon links %s: its init runs at every start of the CLI", d)
			}
		}
	}
}

// TestClientDeps keeps the daemon's client a client: it speaks the wire
// (internal/verbs, internal/apitype), and links neither the server that
// answers it nor the event bus and ZeroMQ behind that server. Every user
// of the client (the CLI's verbs, the monitor, `kaimon mcp`, and the
// remote hosts to come) would otherwise link them too.
func TestClientDeps(t *testing.T) {
	t.Parallel()
	banned := []string{
		"github.com/kaimon/kaimon/internal/server",
		"github.com/kaimon/kaimon/internal/bus",
		"github.com/go-zeromq/", // any package of it
	}
	for _, d := range deps(t, "github.com/kaimon/kaimon/internal/client") {
		for _, b := range banned {
			if d == b || strings.HasSuffix(b, "/") && strings.HasPrefix(d, b) {
				t.Errorf("internal/client links %s: wire types belong in internal/apitype or internal/verbs, not beside what serves them", d)
			}
		}
	}
}
