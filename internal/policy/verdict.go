package policy

import (
	"fmt"
	"strings"

	"github.com/kaimon/kaimon/internal/apitype"
)

// Verdict is what a policy says of a tool call an agent asks about.
type Verdict int

const (
	// Ask leaves the call to agent_permit.
	Ask Verdict = iota
	Allow
	Deny
)

func (v Verdict) String() string {
	switch v {
	case Allow:
		return string(apitype.Allow)
	case Deny:
		return string(apitype.Deny)
	}
	return "ask"
}

// Permission decides, from the policy alone, a call of tool (by kaimon's
// name of it: see NativeToolName) that the agent asks about, and says why.
// What the policy leaves open is Ask.
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
func (p *Policy) Permission(tool string) (Verdict, string) {
	if verb, ok := KaimonVerb(tool); ok {
		if err := p.DoorCheck(verb); err != nil {
			return Deny, err.Error()
		}
	}
	if NamesTool(p.Deny, tool) {
		return Deny, tool + " is in this agent's disallowed tools"
	}
	if p.Bypass() {
		return Allow, "the agent runs without permission checks (bypass)"
	}
	if NamesTool(p.Allow, tool) {
		return Allow, tool + " is in this agent's allowed tools"
	}
	if p.WholeSet() {
		return Deny, fmt.Sprintf("%s is not in this agent's allowed_tools, which are its whole tool set (%s)", tool, p.wholeSetReason())
	}
	return Ask, ""
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
func (p *Policy) DoorCheck(verb string) error {
	tool := KaimonTool(verb)
	if contains(AgentVerbs, verb) && p.Guard {
		return fmt.Errorf("kaimon's recursion guard refuses %s to an agent kaimon owns, so that agents cannot spawn or drive agents; "+
			"an agent opened with disallowed_tools = [] (kaimon open --no-recursion-guard) may", tool)
	}
	if NamesTool(p.Deny, tool) {
		return fmt.Errorf("%s is in this agent's disallowed tools", tool)
	}
	if p.WholeSet() && !NamesTool(p.Allow, tool) {
		return fmt.Errorf("%s is not in this agent's allowed_tools, which are its whole tool set (%s)", tool, p.wholeSetReason())
	}
	return nil
}

// DoorVisible says whether the door lists kaimon's verb to the agent: under
// only, a kaimon tool the allowlist does not name is hidden (and, unknown,
// refused).
func (p *Policy) DoorVisible(verb string) bool {
	return !p.Only || NamesTool(p.Allow, KaimonTool(verb))
}

// ToolCheck is the deny half of the policy, for an agent's bridge (opencode's
// plugin) that asks before each call of one of the agent's own tools,
// named in the agent's words: it answers the tool's kaimon name, and
// false with the reason when the policy denies it (kaimon's own tools by
// the door's rules). What the policy would ask about is allowed here: the
// agent's own permission config asks kaimon about it through the protocol.
func (p *Policy) ToolCheck(name string) (tool string, allow bool, reason string) {
	tool = NativeToolName(name, "")
	if verb, ok := KaimonVerb(tool); ok {
		if err := p.DoorCheck(verb); err != nil {
			return tool, false, err.Error()
		}
	} else if v, why := p.Permission(tool); v == Deny {
		return tool, false, why
	}
	return tool, true, ""
}

func (p *Policy) wholeSetReason() string {
	if p.Only {
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
