package acp

import "regexp"

// copilotModes maps kaimon's permission modes onto the GitHub Copilot
// CLI's session modes (ids are URLs ending #agent, #plan, #autopilot;
// sessionMode matches the fragment). Observed with 1.0.102:
//
//   - agent asks (session/request_permission) before every shell command
//     and every edit; reads inside the cwd it does at once. Kaimon's
//     policy answers the asks: under acceptEdits and auto an edit inside
//     the cwd is allowed (Agent.AsksEdits), under bypass everything is,
//     and the deny list holds against whatever it asks about.
//   - plan refuses edits and modifying shell commands itself, without
//     asking: kaimon's plan.
//   - autopilot turns on allow_all (it asks nothing, so a deny list could
//     not hold) and goes on past the turn with continuation requests of
//     its own: no preset means that, and bypass gets agent mode with every
//     ask allowed by kaimon instead.
var copilotModes = map[string]string{
	"default":           "agent",
	"acceptEdits":       "agent",
	"auto":              "agent",
	"plan":              "plan",
	"bypassPermissions": "agent",
}

// copilotTools are the Copilot CLI's own tools (1.0.102) by the preset
// tool name each stands for, for --excluded-tools. Its sql tool (a
// database of the session's own) stands for none.
var copilotTools = map[string][]string{
	"Bash":  {"bash", "read_bash", "stop_bash", "list_bash"},
	"Read":  {"view"},
	"Write": {"create"},
	"Edit":  {"edit"},
	"Glob":  {"glob"},
	"Grep":  {"grep"},
	"Task":  {"task", "read_agent", "list_agents", "write_agent"},
	"Agent": {"task", "read_agent", "list_agents", "write_agent"},
}

// copilotNotice is the notice copilot sends as the first message chunk of
// a turn when tools are excluded.
var copilotNotice = regexp.MustCompile(`^Info: Disabled tools: [\w, -]+$`)
