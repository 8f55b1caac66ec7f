package acp

import (
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"unicode"

	"github.com/kaimon/kaimon/internal/agentbin"
	"github.com/kaimon/kaimon/internal/backend"
	"github.com/kaimon/kaimon/internal/backend/host"
)

// Prefix is the model prefix that selects this backend.
const Prefix = backend.PrefixACP

// Agent is one ACP agent program kaimon knows how to drive: its program
// (agentbin's row: name, binary, variable, install hint) and how to talk
// to it.
type Agent struct {
	agentbin.Program
	// FallbackArgs are tried once when the program rejects Args (an
	// older gemini-cli knows only --experimental-acp).
	FallbackArgs []string
	// Modes maps kaimon's permission modes (policy.Policy.Mode, with
	// "bypassPermissions" for a bypass preset) onto the agent's own session
	// modes; nil for the common names (see sessionMode). A mode missing
	// from the map leaves the agent's mode as it is.
	Modes map[string]string
	// Route is how a preset reaches the agent's own tools (see policy.go).
	Route Route
	// AnnouncesBeforeAsk: the agent announces a tool call (tool_call)
	// before asking permission for it, so the permission handler may wait
	// a moment for that announce to be mapped and learn the tool's name.
	AnnouncesBeforeAsk bool
	// HTTPMCP: the agent takes HTTP MCP servers in session/new though its
	// initialize does not declare mcpCapabilities.http (auggie).
	HTTPMCP bool
}

// Agents are the built-in ACP agents, by name; their programs are
// agentbin's rows. An agent whose route is RoutePermissionOnly is driven
// with standard ACP alone.
var Agents = map[string]*Agent{
	"opencode": {Program: agentbin.ACP["opencode"], Route: RouteBridge, AnnouncesBeforeAsk: true},
	"claude":   {Program: agentbin.ACP["claude"], Route: RouteClaudeMeta, AnnouncesBeforeAsk: true},
	"gemini": {Program: agentbin.ACP["gemini"],
		FallbackArgs: []string{"--experimental-acp"}, Route: RoutePermissionOnly},
	"codex":   {Program: agentbin.ACP["codex"], Route: RoutePermissionOnly},
	"qwen":    {Program: agentbin.ACP["qwen"], Route: RoutePermissionOnly, AnnouncesBeforeAsk: true},
	"copilot": {Program: agentbin.ACP["copilot"], Route: RoutePermissionOnly, AnnouncesBeforeAsk: true},
	"kilo":    {Program: agentbin.ACP["kilo"], Route: RoutePermissionOnly, AnnouncesBeforeAsk: true},
	"auggie":  {Program: agentbin.ACP["auggie"], Route: RoutePermissionOnly, AnnouncesBeforeAsk: true, HTTPMCP: true},
}

// AgentNames lists the agents in the spec's order.
var AgentNames = agentbin.ACPNames

// IsACP says whether a model string selects this backend.
func IsACP(model string) bool { return strings.HasPrefix(strings.TrimSpace(model), Prefix) }

// ParseModel splits acp:<agent>[:<model>]. The model is everything after
// the second colon, slashes and colons included
// (acp:opencode:ollama/qwen2.5:14b is opencode with ollama/qwen2.5:14b).
func ParseModel(s string) (*Agent, string, error) {
	rest, ok := strings.CutPrefix(strings.TrimSpace(s), Prefix)
	if !ok {
		return nil, "", fmt.Errorf("model %q is not an ACP model: write acp:<agent>[:<model>] with agent %s", s, strings.Join(AgentNames, ", "))
	}
	name, model, _ := strings.Cut(rest, ":")
	a := Agents[name]
	if a == nil {
		if p, ok := agentbin.LookupACP(name); ok {
			a = Agents[p.Name]
		}
	}
	if a == nil {
		return nil, "", fmt.Errorf("unknown ACP agent %q in model %q: use one of %s", name, s, strings.Join(AgentNames, ", "))
	}
	model = strings.TrimSpace(model)
	if strings.HasPrefix(model, "-") || strings.IndexFunc(model, unicode.IsSpace) >= 0 {
		return nil, "", fmt.Errorf("bad model %q in %q", model, s)
	}
	return a, model, nil
}

// findBinary returns the absolute path of the agent's program: $BinEnv,
// else Bin on PATH (as env sets it).
func (a *Agent) findBinary(env []string) (string, error) {
	if p := host.LookupEnv(env, a.Env); p != "" {
		path, err := exec.LookPath(p)
		if err != nil && !errors.Is(err, exec.ErrDot) {
			return "", fmt.Errorf("%w: %s=%s is not an executable %s (%v): point it at one, or unset it to use %s on PATH",
				backend.ErrNotFound, a.Env, p, a.Bin, err, a.Bin)
		}
		return filepath.Abs(path)
	}
	path, err := lookPath(a.Bin, host.LookupEnv(env, "PATH"))
	if err != nil {
		return "", fmt.Errorf("%w: %s (the ACP agent %s) is not on PATH: install it with `%s`, or set %s to its path",
			backend.ErrNotFound, a.Bin, a.Name, a.Install, a.Env)
	}
	return filepath.Abs(path)
}

// lookPath finds name in the directories of path (the agent's PATH, which
// may differ from the daemon's own).
func lookPath(name, path string) (string, error) {
	if path == "" {
		return exec.LookPath(name)
	}
	for _, dir := range filepath.SplitList(path) {
		if dir == "" {
			continue
		}
		p := filepath.Join(dir, name)
		if p2, err := exec.LookPath(p); err == nil {
			return p2, nil
		}
	}
	return "", exec.ErrNotFound
}

// defaultEnv sets key unless env already has it.
func defaultEnv(env []string, key, value string) []string {
	if _, ok := hasEnv(env, key); ok {
		return env
	}
	return append(env, key+"="+value)
}

func hasEnv(env []string, key string) (string, bool) {
	for i := len(env) - 1; i >= 0; i-- {
		if k, v, ok := strings.Cut(env[i], "="); ok && k == key {
			return v, true
		}
	}
	return "", false
}
