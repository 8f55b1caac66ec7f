package apitype

// Decision answers an agent's permission request: agent_permit's decision,
// and the decision a decided permission event carries. On the wire it is
// the bare word.
type Decision string

const (
	Allow Decision = "allow" // the tool call runs
	Deny  Decision = "deny"  // the tool call is refused
)

// Decisions lists every decision: agent_permit's enum in the verb table,
// the CLI's usage and check, and completion all read it.
var Decisions = []Decision{Allow, Deny}

// DecisionOf is the decision of an answer that allows or not.
func DecisionOf(allow bool) Decision {
	if allow {
		return Allow
	}
	return Deny
}

// Valid says whether d is one of Decisions.
func (d Decision) Valid() bool { return d == Allow || d == Deny }

// Past is the decision as an outcome, for people: allowed or denied (and
// an unknown word as it came).
func (d Decision) Past() string {
	switch d {
	case Allow:
		return "allowed"
	case Deny:
		return "denied"
	}
	return string(d)
}
