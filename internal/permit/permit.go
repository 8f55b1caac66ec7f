// Package permit is the registry of the permission requests agents are
// waiting on: each gets an id that agent_permit answers by, a decision is
// delivered exactly once (an answer and a timeout may race; one wins), and
// an "always" answer becomes a rule for that agent's later requests of the
// same tool. It knows nothing of backends: the claude CLI's can_use_tool
// and ACP's session/request_permission both end up here, through the
// session manager.
package permit

import (
	"crypto/rand"
	"encoding/hex"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/kaimon/kaimon/internal/apitype"
	"github.com/kaimon/kaimon/internal/backend"
	"github.com/kaimon/kaimon/internal/verbs"
)

// decidedKept is how many decided requests are remembered, so that a late
// agent_permit learns what became of its request rather than "unknown".
const decidedKept = 256

// Registry holds pending requests and always-rules, per agent. Its zero
// value is not usable; use New.
type Registry struct {
	mu      sync.Mutex
	pending map[key]*waiter
	rules   map[string]map[string]bool // agent → tool → allow
	decided map[key]backend.PermissionDecision
	order   []key
}

type key struct{ agent, id string }

type waiter struct {
	tool    string
	title   string
	expires time.Time
	ch      chan backend.PermissionDecision // buffered: one decision
}

// New returns an empty registry.
func New() *Registry {
	return &Registry{
		pending: map[key]*waiter{},
		rules:   map[string]map[string]bool{},
		decided: map[key]backend.PermissionDecision{},
	}
}

// NewID returns a fresh request id: short enough to type, random enough
// not to collide within an agent.
func NewID() string {
	b := make([]byte, 5)
	_, _ = rand.Read(b)
	return "p" + hex.EncodeToString(b)
}

// Rule returns the always-answer agent gave for tool, if any.
func (r *Registry) Rule(agent, tool string) (allow, ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	allow, ok = r.rules[agent][tool]
	return allow, ok
}

// Open registers a pending request of agent for tool (titled title for
// people, answered by expires at the latest) and returns its id and the
// channel its one decision arrives on.
func (r *Registry) Open(agent, tool, title string, expires time.Time) (id string, decision <-chan backend.PermissionDecision) {
	w := &waiter{tool: tool, title: title, expires: expires, ch: make(chan backend.PermissionDecision, 1)}
	r.mu.Lock()
	defer r.mu.Unlock()
	for {
		id = NewID()
		if _, taken := r.pending[key{agent, id}]; !taken {
			break
		}
	}
	r.pending[key{agent, id}] = w
	return id, w.ch
}

// Settle decides a pending request: it delivers d, and records an always
// rule. It reports false when the request was no longer pending (decided
// already), in which case the first decision stands.
func (r *Registry) Settle(agent, id string, d backend.PermissionDecision) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.settleLocked(key{agent, id}, d)
}

func (r *Registry) settleLocked(k key, d backend.PermissionDecision) bool {
	w, ok := r.pending[k]
	if !ok {
		return false
	}
	delete(r.pending, k)
	if d.Always {
		if r.rules[k.agent] == nil {
			r.rules[k.agent] = map[string]bool{}
		}
		r.rules[k.agent][w.tool] = d.Allow
	}
	r.decided[k] = d
	r.order = append(r.order, k)
	for len(r.order) > decidedKept {
		delete(r.decided, r.order[0])
		r.order = r.order[1:]
	}
	w.ch <- d
	return true
}

// Answer is agent_permit: it decides agent's pending request id. An id
// that is not pending is a not_found error, or a wrong_state error that
// says how it was decided.
func (r *Registry) Answer(agent, id string, d backend.PermissionDecision) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	k := key{agent, id}
	if r.settleLocked(k, d) {
		return nil
	}
	if old, ok := r.decided[k]; ok {
		return verbs.WrongState("permission request %s of agent %s was already decided: %s (%s)", id, agent, apitype.DecisionOf(old.Allow).Past(), old.By)
	}
	return verbs.NotFound("agent %s has no pending permission request %q: take the requestId of a permission event without a decision (in the agent's event log, or on its bus channel)", agent, id)
}

// Tool is the tool agent's pending request id asks about, and whether it
// is pending.
func (r *Registry) Tool(agent, id string) (string, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	w, ok := r.pending[key{agent, id}]
	if !ok {
		return "", false
	}
	return w.tool, true
}

// IsPending says whether agent's request id waits for an answer.
func (r *Registry) IsPending(agent, id string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ok := r.pending[key{agent, id}]
	return ok
}

// Pending lists agent's pending requests, the first to expire first.
func (r *Registry) Pending(agent string) []verbs.PendingPermission {
	r.mu.Lock()
	type req struct {
		id string
		w  *waiter
	}
	var reqs []req
	for k, w := range r.pending {
		if k.agent == agent {
			reqs = append(reqs, req{k.id, w})
		}
	}
	r.mu.Unlock()
	slices.SortFunc(reqs, func(a, b req) int {
		if c := a.w.expires.Compare(b.w.expires); c != 0 {
			return c
		}
		return strings.Compare(a.id, b.id)
	})
	var out []verbs.PendingPermission
	for _, q := range reqs {
		out = append(out, verbs.PendingPermission{RequestID: q.id, Tool: q.w.tool, Title: q.w.title,
			ExpiresAt: q.w.expires.UTC().Format(time.RFC3339Nano)})
	}
	return out
}

// Forget denies every pending request of agent with d (its process went
// away) and drops its rules: a reopened agent starts with none.
func (r *Registry) Forget(agent string, d backend.PermissionDecision) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for k := range r.pending {
		if k.agent == agent {
			r.settleLocked(k, d)
		}
	}
	delete(r.rules, agent)
}
