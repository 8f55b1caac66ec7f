package backend

import (
	"context"

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

// EnvAgentSession is the variable of an agent program's environment that
// holds the agent's id, for its calls back into kaimon (HeaderAgent).
const EnvAgentSession = "KAIMON_AGENT_SESSION"

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
	// Accepted, when set, says why the preset's permission mode accepts
	// the call although the agent asked (an edit inside the cwd under
	// acceptEdits, from an agent with no mode of its own for that): the
	// asker allows it by policy, unless the policy denies the tool.
	Accepted string
	// Refused, when set, says why kaimon declines the agent's question
	// whatever the preset (auggie's workspace indexing, a question about
	// no tool call): the asker denies it by policy.
	Refused string
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
