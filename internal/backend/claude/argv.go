// Package claude drives the claude CLI in headless multi-turn stream-JSON
// mode (one process, many turns, control requests on stdin) and maps its
// native stream-json output into kaimon events.
//
// The package has three parts: Args turns agent_open's options into the
// CLI's argv; Mapper is a pure translator from the CLI's stdout lines to
// events, with the turn bookkeeping that attribution needs; Backend owns the
// process and glues the two to a backend.Sink.
package claude

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"unicode"

	"github.com/kaimon/kaimon/internal/apitype"
	"github.com/kaimon/kaimon/internal/backend"
	"github.com/kaimon/kaimon/internal/policy"
)

// DefaultModel is the model an agent gets when agent_open names none: the
// family alias, which the CLI resolves to its latest Sonnet.
const DefaultModel = "sonnet"

// baseArgs put the CLI in headless multi-turn stream-json mode with token
// streaming.
var baseArgs = []string{
	"-p",
	"--input-format", "stream-json",
	"--output-format", "stream-json",
	"--verbose",
	"--include-partial-messages",
}

// errOnlyMCPConfig and errOnlyMCPTools are the refusals of only that the
// spec names ("Restricting a claude agent to its tools").
var (
	errOnlyMCPConfig = errors.New("only refuses a caller-supplied mcp_config: under only kaimon generates the agent's MCP config itself; drop mcp_config or only")
	errOnlyMCPTools  = errors.New("the kaimon MCP door's port is not known, so an agent restricted with only cannot be given MCP tools (kaimon-agentd runs without its door: see its log): drop the mcp__ entries from allowed_tools, or drop only")
)

// ParseModel splits a claude model string into the model and its effort.
// An inline suffix ("sonnet/high") gives the effort unless effort (the
// agent_open option) is set, which wins. An empty model is DefaultModel.
// An effort outside backend.Efforts is an error listing the valid ones,
// and a model with a prefix (another backend's, or none's: olama:qwen3)
// is refused, not passed to the CLI, and so to the API, as a name.
func ParseModel(model, effort string) (name, eff string, err error) {
	name = strings.TrimSpace(model)
	if p, err := backend.Lookup(name); err != nil {
		return "", "", err
	} else if p != apitype.Claude {
		return "", "", fmt.Errorf("model %q is the %s backend's, not a claude model: an agent keeps its backend; close it and open one with that model", model, p.Backend)
	}
	if i := strings.LastIndexByte(name, '/'); i >= 0 {
		name, eff = name[:i], name[i+1:]
		if !validEffort(eff) {
			return "", "", fmt.Errorf("unknown effort %q in model %q: use one of %s", eff, model, strings.Join(backend.Efforts, ", "))
		}
		if name == "" {
			return "", "", fmt.Errorf("model %q names an effort but no model: write e.g. sonnet/%s", model, eff)
		}
	}
	if name == "" {
		name = DefaultModel
	}
	if effort != "" {
		if !validEffort(effort) {
			return "", "", fmt.Errorf("unknown effort %q: use one of %s", effort, strings.Join(backend.Efforts, ", "))
		}
		eff = effort
	}
	if strings.HasPrefix(name, "-") || strings.IndexFunc(name, unicode.IsSpace) >= 0 {
		return "", "", fmt.Errorf("bad claude model %q: use an alias (sonnet, opus, haiku) or a model id such as claude-sonnet-5", model)
	}
	return name, eff, nil
}

func validEffort(e string) bool {
	for _, v := range backend.Efforts {
		if v == e {
			return true
		}
	}
	return false
}

// Args returns the claude CLI's argv after the binary for an agent opened
// with o. It validates everything it reads: the model and effort, the
// permission options (o's policy, resolved at open), only's restrictions, and
// that an mcp_config file exists.
func Args(o *backend.Options) ([]string, error) {
	model, effort, err := ParseModel(o.Model, o.Effort)
	if err != nil {
		return nil, err
	}
	if err := o.Check(); err != nil {
		return nil, err
	}
	pol := o.Policy
	args := append([]string{}, baseArgs...)
	args = append(args, "--model", model)
	if effort != "" {
		args = append(args, "--effort", effort)
	}
	if pol.Mode != "" {
		args = append(args, "--permission-mode", pol.Mode)
	}
	if pol.SkipPermissions {
		args = append(args, "--dangerously-skip-permissions")
	} else if o.Ask != nil {
		// The CLI's permission checks come to kaimon as can_use_tool
		// control requests, which agent_permit can answer.
		args = append(args, "--permission-prompt-tool", "stdio")
	}
	if pol.Only {
		if o.MCPConfig != "" {
			return nil, errOnlyMCPConfig
		}
		tools, namesMCP := onlyTools(pol)
		if namesMCP && o.Door == nil {
			// Kaimon's generated MCP config (with the header that tells
			// the agent's calls apart) needs the door's port; until it
			// exists an agent under only gets no MCP server at all.
			return nil, errOnlyMCPTools
		}
		if len(tools) == 0 {
			tools = []string{""} // --tools "": no tools at all
		}
		args = append(args, "--tools")
		args = append(args, tools...)
		// No MCP server but kaimon's: ignore the user's own configs.
		args = append(args, "--strict-mcp-config")
	}
	// Each tool is its own argv element: patterns like Bash(git *) hold
	// spaces, and the CLI's flags are variadic.
	if len(pol.Allow) > 0 {
		args = append(args, "--allowedTools")
		args = append(args, pol.Allow...)
	}
	if len(pol.Deny) > 0 {
		args = append(args, "--disallowedTools")
		args = append(args, pol.Deny...)
	}
	if o.SystemPrompt != "" {
		args = append(args, "--append-system-prompt", o.SystemPrompt)
	}
	switch {
	case o.Fork != nil && o.ResumeSession != "":
		return nil, fmt.Errorf("fork and resume contradict each other: a kaimon bug (the session refuses them together)")
	case o.ResumeSession != "":
		// The CLI restores the conversation from its transcript and goes
		// on in the same session id.
		args = append(args, "--resume", o.ResumeSession)
	case o.Fork != nil:
		// The CLI restores the forked conversation and goes on in a new
		// session id (its init message says which), leaving the forked
		// transcript as it was.
		args = append(args, "--resume", o.Fork.Session, "--fork-session")
	}
	var configs []string
	if o.Door != nil {
		path, err := MCPConfigPath(o)
		if err != nil {
			return nil, err
		}
		configs = append(configs, path)
	}
	if o.MCPConfig != "" {
		path, err := filepath.Abs(o.MCPConfig)
		if err != nil {
			return nil, fmt.Errorf("mcp_config %q: %w", o.MCPConfig, err)
		}
		st, err := os.Stat(path)
		if err != nil {
			return nil, fmt.Errorf("mcp_config %q: %w: pass the path of an existing MCP config JSON file", o.MCPConfig, err)
		}
		if st.IsDir() {
			return nil, fmt.Errorf("mcp_config %q is a directory: pass the path of an MCP config JSON file", o.MCPConfig)
		}
		if err := checkUserMCPConfig(o.MCPConfig, path, o.Door != nil); err != nil {
			return nil, err
		}
		configs = append(configs, path)
	}
	if len(configs) > 0 {
		args = append(args, "--mcp-config")
		args = append(args, configs...)
	}
	// Kept for the agent's life: at its length, not at the capacity
	// append grew it to (twice the length, for the default policy).
	return slices.Clone(args), nil
}

// onlyTools returns the --tools list for only: the policy's OnlyTools, plus
// ToolSearch when the allowlist names MCP tools, which the CLI loads
// through it. namesMCP says whether it does.
func onlyTools(pol *policy.Policy) (tools []string, namesMCP bool) {
	tools, namesMCP = pol.OnlyTools()
	if namesMCP && !slices.Contains(tools, "ToolSearch") {
		tools = append(tools, "ToolSearch")
	}
	return tools, namesMCP
}
