package session

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"log"
	"strings"
	"time"

	"github.com/kaimon/kaimon/internal/apitype"
	"github.com/kaimon/kaimon/internal/backend"
	"github.com/kaimon/kaimon/internal/event"
	"github.com/kaimon/kaimon/internal/permit"
	"github.com/kaimon/kaimon/internal/policy"
	"github.com/kaimon/kaimon/internal/redact"
	"github.com/kaimon/kaimon/internal/render"
	"github.com/kaimon/kaimon/internal/verbs"
)

// Door is kaimon's MCP door (package door), where owned agents call back
// into kaimon. The manager admits each agent it opens with a secret token
// and revokes the token when the agent dies.
type Door interface {
	// URL is the door's MCP endpoint.
	URL() string
	// Admit lets agent o.ID in with o's policy and returns its new token,
	// replacing any earlier one of the same id.
	Admit(o backend.Options) (token string)
	// Revoke shuts the door to agent id if token is still its token.
	Revoke(id, token string)
}

// SetDoor gives the manager the door; agents opened from then on get it in
// their options. Without a door, an agent has no kaimon MCP server.
func (m *Manager) SetDoor(d Door) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.door = d
}

// attach readies opts, a claimed slot's options, for its backend: the
// permission asker, and the door with a fresh token. It returns them, for
// the open to keep in ag.opts and give the backend; ag's own options are
// not touched, so that what the open holds is the one copy.
func (m *Manager) attach(ag *Agent, opts backend.Options) backend.Options {
	m.mu.Lock()
	d := m.door
	m.mu.Unlock()
	opts.Ask = ag.ask
	opts.Door = nil
	var door []redact.Secret
	if d != nil {
		opts.Door = &backend.Door{URL: d.URL(), Token: d.Admit(opts)}
		door = append(door, redact.Secret{Name: redact.DoorToken, Value: opts.Door.Token, Whole: true})
	}
	// From the environment the agent is given (the backends add only
	// kaimon's own variables to it) and its token: what it may print.
	opts.Redact = redact.New(opts.Env, door...)
	ag.redact.Store(opts.Redact.Stream())
	return opts
}

// detach undoes attach for a dead agent: its token no longer opens the
// door, and its pending permission requests are denied.
func (m *Manager) detach(ag *Agent) {
	m.mu.Lock()
	d := m.door
	m.mu.Unlock()
	ag.mu.Lock()
	door := ag.opts.Door
	ag.mu.Unlock()
	if d != nil && door != nil {
		d.Revoke(ag.id, door.Token)
	}
	m.permits.Forget(ag.id, backend.PermissionDecision{By: event.DecidedByCancelled,
		Message: "the agent was closed before the request was answered"})
}

// ask is the backend's Asker for this agent. A question the backend
// refuses (req.Refused) is denied; the preset decides what it can (published as one decided permission event); an earlier "always"
// answer for the tool decides next; everything else is published as a
// pending permission event and waits for agent_permit, up to
// PermitTimeout, after which it is denied. The outcome is published as a
// second permission event with the same requestId.
func (ag *Agent) ask(ctx context.Context, req backend.PermissionRequest) backend.PermissionDecision {
	m := ag.m
	ag.mu.Lock()
	opts := ag.opts
	ag.mu.Unlock()
	data := event.PermissionData{ToolCall: req.Call, Options: req.Options}
	if data.Options == nil {
		data.Options = backend.DefaultPermissionOptions
	}
	if data.ToolCall.Status == "" {
		data.ToolCall.Status = apitype.ToolPending
	}

	var d backend.PermissionDecision
	decided := false
	if err := opts.Check(); err != nil {
		d, decided = backend.PermissionDecision{By: event.DecidedByPolicy, Message: "kaimon: " + err.Error()}, true
	} else if req.Refused != "" {
		d, decided = backend.PermissionDecision{By: event.DecidedByPolicy, Message: req.Refused}, true
	} else if v, why := opts.Policy.Permission(req.Tool); v != policy.Ask {
		d, decided = backend.PermissionDecision{Allow: v == policy.Allow, By: event.DecidedByPolicy, Message: why}, true
	} else if req.Accepted != "" {
		d, decided = backend.PermissionDecision{Allow: true, By: event.DecidedByPolicy, Message: req.Accepted}, true
	} else if allow, ok := m.permits.Rule(ag.id, req.Tool); ok {
		d, decided = backend.PermissionDecision{Allow: allow, Always: true, By: event.DecidedByPolicy,
			Message: "an earlier answer with always holds for " + req.Tool}, true
	}
	if decided {
		data.RequestID = permit.NewID()
		ag.publishDecision(req.Turn, data, d)
		return d
	}

	wait := m.PermitTimeout
	expires := time.Now().Add(wait)
	// What is asked for (the title, often the command) is shown in the
	// agent's status and the inbox: redacted as the permission event is
	// (publishRedacted).
	id, ch := m.permits.Open(ag.id, req.Tool, ag.redactor().String(asks(&data.ToolCall, req.Tool)), expires)
	data.RequestID = id
	data.ExpiresAt = expires.UTC().Format(time.RFC3339Nano)
	ag.publish(event.New(event.Permission, req.Turn, data))
	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case d = <-ch:
	case <-timer.C:
		m.permits.Settle(ag.id, id, backend.PermissionDecision{By: event.DecidedByTimeout,
			Message: fmt.Sprintf("nobody answered this permission request within %s, so it is denied (answer with %s)", wait, verbs.PermitCommand(ag.id, id, apitype.Allow))})
		d = <-ch
	case <-ctx.Done():
		m.permits.Settle(ag.id, id, backend.PermissionDecision{By: event.DecidedByCancelled,
			Message: "the agent withdrew the request"})
		d = <-ch
	}
	ag.publishDecision(req.Turn, data, d)
	return d
}

// publishDecision publishes a permission event carrying the decision.
func (ag *Agent) publishDecision(turn int, data event.PermissionData, d backend.PermissionDecision) {
	data.Options, data.ExpiresAt = nil, ""
	data.Decision = apitype.DecisionOf(d.Allow)
	data.Always, data.By, data.Message = d.Always, d.By, d.Message
	if d.By != event.DecidedByPolicy || !d.Allow {
		log.Printf("agent %s: permission %s for %s: %s by %s", ag.id, data.RequestID, ag.redactor().String(data.ToolCall.Title), data.Decision, d.By)
	}
	ag.publish(event.New(event.Permission, turn, data))
}

// Permit implements agent_permit.
func (m *Manager) Permit(ctx context.Context, a *verbs.PermitArgs) (*verbs.PermitResult, error) {
	ag, err := m.get(a.AgentID)
	if err != nil {
		return nil, err
	}
	if !a.Decision.Valid() {
		return nil, verbs.BadArg("agent_permit: decision must be %s, not %q", apitype.Join(apitype.Decisions, " or "), a.Decision)
	}
	allow := a.Decision == apitype.Allow
	if a.Error != "" && allow {
		return nil, verbs.BadArg("agent_permit: error goes with deny: it says why the answer could not be used")
	}
	if a.RequestID == "" {
		if a.RequestID, err = m.onlyPending(ag.id, a.Decision); err != nil {
			return nil, err
		}
	}
	msg := "the user " + a.Decision.Past() + " this tool call"
	if a.Error != "" {
		msg = "denied: " + a.Error
	}
	if caller := policy.CallerOf(ctx); caller != nil && allow {
		// An agent answering through the door: it may not grant what it
		// may not do unasked (a request no longer pending is left to
		// Answer's error).
		if tool, ok := m.permits.Tool(ag.id, a.RequestID); ok {
			if err := caller.Grants(tool); err != nil {
				return nil, verbs.BadArg("agent_permit: %v: deny it, or leave it to a person (%s)", err, verbs.PermitCommand(ag.id, a.RequestID, apitype.Allow))
			}
		}
	}
	d := backend.PermissionDecision{Allow: allow, Always: a.Always, By: event.DecidedByUser, Message: msg}
	if err := m.permits.Answer(ag.id, a.RequestID, d); err != nil {
		return nil, err
	}
	if a.Error != "" {
		// Logged once the deny has answered the request, so that it is
		// logged only for a request this answer decided.
		ag.mu.Lock()
		turn := ag.turn
		ag.mu.Unlock()
		ag.publish(event.NewError(turn, "permission request "+a.RequestID+": "+a.Error, nil))
	}
	return &verbs.PermitResult{Permitted: allow}, nil
}

// onlyPending is the request agent_permit answers when it names none:
// agent id's one pending request. With none it is a wrong_state error;
// with several, a bad_argument listing each with what it asks and the
// command that answers it, since the answer must name one.
func (m *Manager) onlyPending(id string, decision apitype.Decision) (string, error) {
	pending := m.permits.Pending(id)
	switch len(pending) {
	case 0:
		return "", verbs.WrongState("agent_permit: agent %s has no pending permission request (kaimon status %s shows what it is doing)", id, id)
	case 1:
		return pending[0].RequestID, nil
	}
	var b strings.Builder
	fmt.Fprintf(&b, "agent_permit: agent %s has %d pending permission requests: name the one to answer, with its request_id:", id, len(pending))
	for _, p := range pending {
		fmt.Fprintf(&b, "\n  %s asks for %s: %s", p.RequestID, p.Asks(), verbs.PermitCommand(id, p.RequestID, decision))
	}
	return "", verbs.BadArg("%s", b.String())
}

// asksKeys are the fields of a tool call's input that say what it does,
// in the order they are looked for: the command a shell runs, the file
// it writes or reads, the address it fetches, what it searches for.
var asksKeys = []string{"command", "cmd", "file_path", "path", "url", "pattern", "query"}

// asks is what a permission request asks for, for people (agent_status's
// pending_permissions, list --waiting): the call's title, unless it only
// names the tool (the claude CLI's Bash), else the tool and the telling
// field of its input (Bash: git commit -m x), else its input as it came,
// clipped.
func asks(call *event.ToolCall, tool string) string {
	if call.Title != "" && call.Title != tool {
		return call.Title
	}
	name := cmp.Or(call.Title, tool)
	var in map[string]json.RawMessage
	if json.Unmarshal(call.RawInput, &in) == nil {
		for _, k := range asksKeys {
			var v string
			if json.Unmarshal(in[k], &v) == nil && v != "" {
				return name + ": " + render.Clip(v, 200)
			}
		}
	}
	if len(call.RawInput) == 0 || string(call.RawInput) == "{}" || string(call.RawInput) == "null" {
		return name
	}
	return name + " " + render.Clip(string(call.RawInput), 200)
}
