package acp

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
