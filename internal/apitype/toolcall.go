package apitype

// ToolStatus is a tool call's status, ACP's words: the status of a
// tool_use's call and of a tool_result's update. On the wire it is the
// bare word.
type ToolStatus string

const (
	ToolPending    ToolStatus = "pending"     // asked for, not yet running (or awaiting permission)
	ToolInProgress ToolStatus = "in_progress" // running
	ToolCompleted  ToolStatus = "completed"   // ended with its output
	ToolFailed     ToolStatus = "failed"      // ended in an error, or refused
)

// Ended says whether a call with this status is over: completed or failed.
func (s ToolStatus) Ended() bool { return s == ToolCompleted || s == ToolFailed }

// StopReason is why a turn ended: a result's stopReason. The ACP ones,
// plus "error" for a turn that failed (API error, crash) so that a script
// can tell failure from completion. On the wire it is the bare word.
type StopReason string

const (
	StopEndTurn   StopReason = "end_turn"
	StopMaxTokens StopReason = "max_tokens"
	StopRefusal   StopReason = "refusal"
	StopCancelled StopReason = "cancelled"
	StopError     StopReason = "error"
)

// Failed reports whether a turn that ended with this stop reason failed.
func (r StopReason) Failed() bool {
	return r == StopError || r == StopRefusal || r == StopCancelled
}
