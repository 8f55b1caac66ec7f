package event

import "github.com/kaimon/kaimon/internal/apitype"

// PermissionOption is an ACP permission option, as session/request_permission
// offers them.
type PermissionOption struct {
	OptionID string `json:"optionId"`
	Name     string `json:"name"`
	Kind     string `json:"kind"` // allow_once | allow_always | reject_once | reject_always
}

// Who decided a permission request.
const (
	DecidedByUser      = "user"      // agent_permit
	DecidedByPolicy    = "policy"    // the agent's preset, or an earlier "always" answer
	DecidedByTimeout   = "timeout"   // nobody answered in time: denied
	DecidedByCancelled = "cancelled" // the agent withdrew the question or went away
)

// PermissionData is the data of a permission event. An agent's question
// comes first, without a decision: {requestId, toolCall, options,
// expiresAt}; agent_permit answers it by requestId. Its outcome follows as a
// second permission event with the same requestId and a decision (allow or
// deny), saying who decided and why. A request the preset decides at once
// has only the second event.
type PermissionData struct {
	RequestID string             `json:"requestId"`
	ToolCall  ToolCall           `json:"toolCall"`
	Options   []PermissionOption `json:"options,omitempty"`
	// ExpiresAt is when an unanswered request is denied (RFC 3339).
	ExpiresAt string `json:"expiresAt,omitempty"`

	Decision apitype.Decision `json:"decision,omitempty"` // absent while pending
	Always   bool             `json:"always,omitempty"`
	By       string           `json:"by,omitempty"` // user | policy | timeout | cancelled
	Message  string           `json:"message,omitempty"`
}
