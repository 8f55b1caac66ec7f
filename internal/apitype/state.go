package apitype

import "strings"

// AgentState is an agent's place in its lifecycle: agent_status's status,
// each agent_list entry's, and a status event's data. On the wire it is
// the bare word.
type AgentState string

// The states, as internal/session's FSM moves an agent through them:
// starting → idle ⇄ working → dead, and a dead slot may be reopened.
const (
	Starting AgentState = "starting" // the agent program is starting
	Idle     AgentState = "idle"     // ready for a turn
	Working  AgentState = "working"  // a turn runs
	Dead     AgentState = "dead"     // ended; kept for review until forgotten
)

// AgentStates lists every state in lifecycle order: the one list that the
// FSM, completion and the front ends' colours are checked against.
var AgentStates = []AgentState{Starting, Idle, Working, Dead}

// Valid says whether s is one of AgentStates.
func (s AgentState) Valid() bool {
	for _, x := range AgentStates {
		if s == x {
			return true
		}
	}
	return false
}

// Strings returns xs as plain strings: the verb table's Enum, a usage line
// and completion take them so.
func Strings[T ~string](xs []T) []string {
	out := make([]string, len(xs))
	for i, x := range xs {
		out[i] = string(x)
	}
	return out
}

// Join is xs joined with sep, e.g. allow|deny.
func Join[T ~string](xs []T, sep string) string { return strings.Join(Strings(xs), sep) }
