package acp

import (
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"unicode"

	"github.com/kaimon/kaimon/internal/agentbin"
	"github.com/kaimon/kaimon/internal/apitype"
	"github.com/kaimon/kaimon/internal/backend"
	"github.com/kaimon/kaimon/internal/backend/host"
	"github.com/kaimon/kaimon/internal/suggest"
)

// Prefix is the model prefix that selects this backend.
const Prefix = apitype.PrefixACP

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
	// CumulativeUsage: the usage of a prompt response counts every model
	// request since the agent's process began (copilot), not the turn's:
	// the mapper reports the difference from the previous response.
	CumulativeUsage bool
	// TitlesDescribe: the agent's tool call titles describe the call
	// (copilot: the shell command's description, "Creating /x/y"), never
	// name the tool, so a preset knows the call by its ACP kind alone.
	TitlesDescribe bool
	// ModelFlag is the command-line flag that takes the model at spawn
	// (copilot: --model), for an agent whose session offers no model
	// selection over ACP.
	ModelFlag string
	// AsksEdits: the agent asks before every edit and has no mode that
	// accepts them (copilot; auggie, whose edit tools kaimon sets to ask:
	// AskTools), so under a mode that accepts edits
	// (acceptEdits, auto) kaimon answers an edit inside the cwd itself,
	// as the claude CLI's acceptEdits does.
	AsksEdits bool
	// ExcludeFlag is the command-line flag that keeps tools from the
	// model at spawn (copilot: --excluded-tools NAME…, variadic, so last),
	// and NativeTools every tool of the agent's, by the preset tool name
	// each stands for (a preset tool missing is one it has not):
	// with both, the preset's deny list holds against the agent's own
	// tools, as claude-agent-acp's disallowedTools does.
	ExcludeFlag string
	NativeTools map[string][]string
	// ExcludeEach: ExcludeFlag takes one tool and is repeated for each
	// (auggie: --remove-tool NAME), rather than taking them all.
	ExcludeEach bool
	// PermissionFlag is the command-line flag that sets one of the
	// agent's own tool permission rules, NAME:POLICY, repeated for each
	// (auggie: --permission), and AskTools those of its tools (of
	// NativeTools) that change something: each that the preset leaves to
	// ask (policy.Permission of the preset tool it stands for) is set to
	// ask-user, so that the agent asks through session/request_permission
	// and the preset, or a person, answers. Its other tools run as its
	// mode says.
	PermissionFlag string
	AskTools       []string
	// AdvisoryPlan: the agent's mode for plan only tells the model not to
	// edit and still runs its edits (auggie's ask), so under plan kaimon
	// keeps the agent's edit tools from the model too (ExcludeFlag).
	AdvisoryPlan bool
	// ModeNotes say, by kaimon's permission mode, what the agent does
	// instead of a mode it has no way to obey: said at open (Enforcement).
	ModeNotes map[string]string
	// Questions are the agent's permission requests that ask about no
	// tool call, by their toolCallId, each with why kaimon declines it
	// whatever the preset (backend.PermissionRequest.Refused).
	Questions map[string]string
	// Notice matches a whole agent message chunk that is the agent's own
	// notice rather than the model's text (copilot's "Info: Disabled
	// tools: …" that --excluded-tools brings): not an event.
	Notice *regexp.Regexp
	// PermissionEnv (RoutePermissionEnv) is the variable in which the
	// agent takes opencode's permission config as JSON.
	PermissionEnv string
	// NoProjectConfigEnv (RoutePermissionEnv) is the variable that, set to
	// 1, keeps the agent from loading the project's own config.
	NoProjectConfigEnv string
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
	// codex's modes are sandboxes: read-only (writes need an escalation,
	// which asks), auto (workspace writes and commands run unasked),
	// full-access. Edits under acceptEdits stay asked (read-only) rather
	// than let commands run unasked too.
	"codex": {Program: agentbin.ACP["codex"], Route: RoutePermissionOnly, Modes: map[string]string{
		"default": "read-only", "acceptEdits": "read-only", "plan": "read-only", "auto": "auto", "bypassPermissions": "full-access"}},
	"qwen":    {Program: agentbin.ACP["qwen"], Route: RoutePermissionOnly, AnnouncesBeforeAsk: true, Modes: qwenModes},
	"copilot": {Program: agentbin.ACP["copilot"], Route: RoutePermissionOnly, AnnouncesBeforeAsk: true, Modes: copilotModes, CumulativeUsage: true, TitlesDescribe: true, ModelFlag: "--model", AsksEdits: true, ExcludeFlag: "--excluded-tools", NativeTools: copilotTools, Notice: copilotNotice},
	"kilo": {Program: agentbin.ACP["kilo"], Route: RoutePermissionEnv, AnnouncesBeforeAsk: true,
		PermissionEnv: "KILO_PERMISSION", NoProjectConfigEnv: "KILO_DISABLE_PROJECT_CONFIG",
		// Its modes are a "mode" config option: code (its agent, under
		// whatever the permission overlay says), plan (edits denied but
		// for its plan files), ask, debug, orchestrator.
		Modes: map[string]string{"default": "code", "acceptEdits": "code", "auto": "code", "bypassPermissions": "code", "plan": "plan"}},
	"auggie": {Program: agentbin.ACP["auggie"], Route: RoutePermissionOnly, AnnouncesBeforeAsk: true, HTTPMCP: true,
		Modes: auggieModes, TitlesDescribe: true, AsksEdits: true, ExcludeFlag: "--remove-tool", ExcludeEach: true, NativeTools: auggieTools,
		PermissionFlag: "--permission", AskTools: auggieAsks, AdvisoryPlan: true, ModeNotes: auggieModeNotes, Questions: auggieQuestions, Notice: auggieNotice},
}

// AgentNames lists the agents in the spec's order.
var AgentNames = agentbin.ACPNames

// IsACP says whether a model string selects this backend.
func IsACP(model string) bool { return strings.HasPrefix(strings.TrimSpace(model), Prefix) }

// ParseModel splits acp:<agent>[:<model>] among the built-in agents
// alone (ParseModelIn with no configured agents).
func ParseModel(s string) (*Agent, string, error) { return ParseModelIn(s, nil) }

// ParseModelIn splits acp:<agent>[:<model>]. The model is everything
// after the second colon, slashes and colons included
// (acp:opencode:ollama/qwen2.5:14b is opencode with ollama/qwen2.5:14b).
// The agent is one of configured (the config's acp_agents) first, then a
// built-in one by name or alias.
func ParseModelIn(s string, configured []agentbin.Program) (*Agent, string, error) {
	rest, ok := strings.CutPrefix(strings.TrimSpace(s), Prefix)
	if !ok {
		return nil, "", fmt.Errorf("model %q is not an ACP model: write acp:<agent>[:<model>] with agent one of %s (kaimon agents lists them)", s, strings.Join(KnownNames(configured), ", "))
	}
	name, model, _ := strings.Cut(rest, ":")
	a := lookupAgent(name, configured)
	if a == nil {
		known := KnownNames(configured)
		hint := ""
		if n := suggest.Nearest(name, known, 0.8); n != "" {
			hint = fmt.Sprintf(" (did you mean %q?)", Prefix+n)
		}
		return nil, "", fmt.Errorf("unknown ACP agent %q in model %q%s: use one of %s (`kaimon agents` lists them, with what each runs)", name, s, hint, strings.Join(known, ", "))
	}
	model = strings.TrimSpace(model)
	if strings.HasPrefix(model, "-") || strings.IndexFunc(model, unicode.IsSpace) >= 0 {
		return nil, "", fmt.Errorf("bad model %q in %q", model, s)
	}
	return a, model, nil
}

// KnownNames are the agents acp:<name> selects: the built-in ones, then
// the configured ones that are not built in.
func KnownNames(configured []agentbin.Program) []string {
	out := append([]string{}, AgentNames...)
	for _, p := range configured {
		if _, ok := Agents[p.Name]; !ok {
			out = append(out, p.Name)
		}
	}
	return out
}

// lookupAgent finds name among configured, then the built-in agents. A
// configured agent with a built-in name is that agent with the config's
// command (its args replacing the fallback's too); any other is driven
// with standard ACP alone.
func lookupAgent(name string, configured []agentbin.Program) *Agent {
	builtin := Agents[name]
	if builtin == nil {
		if p, ok := agentbin.LookupACP(name); ok {
			builtin = Agents[p.Name]
		}
	}
	for _, p := range configured {
		if p.Name != name && (builtin == nil || p.Name != builtin.Name) {
			continue
		}
		if builtin == nil {
			return &Agent{Program: p, Route: RoutePermissionOnly}
		}
		a := *builtin
		a.Program = p
		if !slices.Equal(p.Args, builtin.Args) {
			a.FallbackArgs = nil
		}
		return &a
	}
	return builtin
}

// findBinary returns the absolute path of the agent's program: $BinEnv,
// else Bin on PATH (as env sets it).
func (a *Agent) findBinary(env []string) (string, error) {
	if a.Configured {
		path, err := lookPath(a.Bin, host.LookupEnv(env, "PATH"))
		if err != nil {
			return "", fmt.Errorf("%w: %s names %s, which is not an executable program (%v): fix the config file's %s",
				backend.ErrNotFound, a.ConfigKey, a.Bin, err, a.ConfigKey)
		}
		return filepath.Abs(path)
	}
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

// lookPath is host.LookPath.
var lookPath = host.LookPath

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
