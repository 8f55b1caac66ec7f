package backend

import (
	"context"
	"fmt"
	"strings"

	"github.com/kaimon/kaimon/internal/event"
)

// Door is kaimon's MCP door as one agent sees it: the URL of the streamable
// HTTP endpoint on 127.0.0.1 and the agent's own secret token, which the
// agent sends as "Authorization: Bearer <token>" together with its id in
// HeaderAgent.
type Door struct {
	URL   string
	Token string
}

// HeaderAgent is the header that names the calling agent at the door.
const HeaderAgent = "X-Kaimon-Agent"

// KaimonTool is the name an owned agent knows kaimon's verb by, e.g.
// mcp__kaimon__agent_list.
func KaimonTool(verb string) string { return KaimonServer + "__" + verb }

// KaimonVerb returns the verb of a kaimon tool name, and whether tool is one.
func KaimonVerb(tool string) (string, bool) {
	verb, ok := strings.CutPrefix(tool, KaimonServer+"__")
	return verb, ok && verb != ""
}

// PermissionRequest is an agent asking whether it may run one tool call.
// Every backend raises its agent's questions in this one shape (the claude
// CLI's can_use_tool, ACP's session/request_permission), through
// Options.Ask, so that one registry and one verb, agent_permit, answer them.
type PermissionRequest struct {
	Turn int
	// Tool is the agent's own name of the tool: Bash, Write,
	// mcp__kaimon__agent_list.
	Tool string
	// Call is the tool call, ACP-shaped, with status "pending".
	Call event.ToolCall
	// Options are the agent's answer options (ACP); nil for an agent that
	// takes a plain allow or deny (the claude CLI), which then gets
	// DefaultPermissionOptions.
	Options []event.PermissionOption
}

// DefaultPermissionOptions are what agent_permit can answer to an agent
// that offers no options of its own.
var DefaultPermissionOptions = []event.PermissionOption{
	{OptionID: "allow", Name: "Allow", Kind: "allow_once"},
	{OptionID: "allow_always", Name: "Always allow", Kind: "allow_always"},
	{OptionID: "deny", Name: "Deny", Kind: "reject_once"},
	{OptionID: "deny_always", Name: "Always deny", Kind: "reject_always"},
}

// PermissionDecision answers a PermissionRequest.
type PermissionDecision struct {
	Allow  bool
	Always bool
	// By says who decided: event.DecidedByUser, …Policy, …Timeout,
	// …Cancelled.
	By string
	// Message says why; a denied agent reads it as the tool's error.
	Message string
}

// Option returns the id of the option of opts that matches d (by ACP kind:
// allow_always, allow_once, reject_always, reject_once, the exact one
// first), for an agent that answers with an option id; "" if none fits.
func (d PermissionDecision) Option(opts []event.PermissionOption) string {
	prefix := "reject_"
	if d.Allow {
		prefix = "allow_"
	}
	kinds := []string{prefix + "once", prefix + "always"}
	if d.Always {
		kinds[0], kinds[1] = kinds[1], kinds[0]
	}
	for _, k := range kinds {
		for _, o := range opts {
			if o.Kind == k {
				return o.OptionID
			}
		}
	}
	return ""
}

// Asker raises a permission request and blocks until it is decided: by the
// preset, by agent_permit, by the timeout, or by ctx ending (cancelled, a
// deny).
type Asker func(ctx context.Context, req PermissionRequest) PermissionDecision

// Verdict is what a preset says of a tool call an agent asks about.
type Verdict int

const (
	// VerdictAsk leaves the call to agent_permit.
	VerdictAsk Verdict = iota
	VerdictAllow
	VerdictDeny
)

// Permission decides, from the policy alone, a tool call the agent asks
// about, and says why. What the policy leaves open is VerdictAsk.
//
//   - A kaimon tool is decided by the door's rules (DoorCheck): refused
//     there, it is denied here too.
//   - A tool the deny list names is denied.
//   - Under bypass (or permission_mode bypassPermissions) all else is
//     allowed.
//   - A tool the allowlist names whole (no argument pattern) is allowed.
//   - Under specialist or only, where the allowlist is the whole tool set,
//     anything else is denied.
//   - Everything else is asked.
func (p Policy) Permission(o *Options, tool string) (Verdict, string) {
	if verb, ok := KaimonVerb(tool); ok {
		if err := p.DoorCheck(o, verb); err != nil {
			return VerdictDeny, err.Error()
		}
	}
	if NamesTool(p.Deny, tool) {
		return VerdictDeny, tool + " is in this agent's disallowed tools"
	}
	if p.SkipPermissions || p.Mode == "bypassPermissions" {
		return VerdictAllow, "the agent runs without permission checks (bypass)"
	}
	if NamesTool(p.Allow, tool) {
		return VerdictAllow, tool + " is in this agent's allowed tools"
	}
	if p.Preset.ReplaceAllow || o.Only {
		return VerdictDeny, fmt.Sprintf("%s is not in this agent's allowed_tools, which are its whole tool set (%s)", tool, wholeSetReason(p, o))
	}
	return VerdictAsk, ""
}

// DoorCheck applies the policy to a call of kaimon's verb through the MCP
// door, for every backend; nil means the call may go ahead.
//
//   - The recursion guard refuses every agent_* verb unless the agent was
//     opened with disallowed_tools = []. A caller's own disallowed_tools
//     replace the guard in the agent program's deny list, but not here.
//   - A kaimon tool the deny list names is refused.
//   - Under specialist and under only, a kaimon tool the allowlist does not
//     name is refused (notebook and lab allow the whole server).
func (p Policy) DoorCheck(o *Options, verb string) error {
	tool := KaimonTool(verb)
	if contains(AgentVerbs, verb) && !(o.DisallowedTools != nil && len(o.DisallowedTools) == 0) {
		return fmt.Errorf("kaimon's recursion guard refuses %s to an agent kaimon owns, so that agents cannot spawn or drive agents; "+
			"an agent opened with disallowed_tools = [] (kaimon open --no-recursion-guard) may", tool)
	}
	if NamesTool(p.Deny, tool) {
		return fmt.Errorf("%s is in this agent's disallowed tools", tool)
	}
	if (p.Preset.ReplaceAllow || o.Only) && !NamesTool(p.Allow, tool) {
		return fmt.Errorf("%s is not in this agent's allowed_tools, which are its whole tool set (%s)", tool, wholeSetReason(p, o))
	}
	return nil
}

// DoorVisible says whether the door lists kaimon's verb to the agent: under
// only, a kaimon tool the allowlist does not name is hidden (and, unknown,
// refused).
func (p Policy) DoorVisible(o *Options, verb string) bool {
	return !o.Only || NamesTool(p.Allow, KaimonTool(verb))
}

func wholeSetReason(p Policy, o *Options) string {
	if o.Only {
		return "only"
	}
	return "the " + p.Preset.Name + " preset"
}

// NamesTool says whether a tool list names tool as a whole: by its name, or
// by its MCP server (mcp__srv, or mcp__srv__*). An entry with an argument
// pattern, such as Bash(git *), names only some calls, so not the tool.
func NamesTool(list []string, tool string) bool {
	for _, e := range list {
		e = strings.TrimSpace(e)
		switch {
		case e == tool:
			return true
		case strings.HasSuffix(e, "__*") && strings.HasPrefix(e, "mcp__") && strings.HasPrefix(tool, strings.TrimSuffix(e, "*")):
			return true
		case strings.HasPrefix(e, "mcp__") && !strings.Contains(e[len("mcp__"):], "__") && strings.HasPrefix(tool, e+"__"):
			return true
		}
	}
	return false
}
