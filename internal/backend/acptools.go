package backend

// An ACP agent's bridge (opencode's plugin) asks the door before each call
// of one of the agent's own tools; the door answers with the agent's
// policy (policy.Policy.ToolCheck).

// ToolCheckPath is the door's route where an agent's bridge (opencode's
// plugin) asks, with the agent's token, whether it may run one of its own
// tools: POST {"tool": NAME, "args": {…}} → ToolCheckResult.
const ToolCheckPath = "/v1/tool-check"

// ToolCheckRequest is the body of a tool check.
type ToolCheckRequest struct {
	Tool string         `json:"tool"`
	Args map[string]any `json:"args,omitempty"`
}

// ToolCheckResult answers a tool check.
type ToolCheckResult struct {
	Allow bool `json:"allow"`
	// Tool is the preset's name of the tool the check was about.
	Tool   string `json:"tool"`
	Reason string `json:"reason,omitempty"`
}
