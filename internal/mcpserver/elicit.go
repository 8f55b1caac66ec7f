package mcpserver

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/kaimon/kaimon/internal/apitype"
	"github.com/kaimon/kaimon/internal/event"
	"github.com/kaimon/kaimon/internal/verbs"
)

// MetaPermission is the key, in an elicitation's _meta, of the permission
// request it asks about: {"agent_id", "request_id"}. A client can match
// the elicitation to the agent's permission event with it.
const MetaPermission = "io.kaimon/permission"

type askKey struct{ agent, request string }

// ask is a permission request out to the client as an elicitation.
type ask struct {
	cancel    context.CancelFunc
	wire      any    // the elicitation's JSON-RPC id, once written
	withdrawn string // why, once answered elsewhere
}

// askSchema is what an elicitation asks for besides accept or decline:
// whether the answer holds for the agent's later requests of the tool.
var askSchema = &jsonschema.Schema{
	Type: "object",
	Properties: map[string]*jsonschema.Schema{
		"always": {Type: "boolean", Title: "Always",
			Description: "Give the same answer to this agent's later requests for this tool.",
			Default:     json.RawMessage("false")},
	},
}

// askResolved is askSchema resolved for validating answers, so that what
// is asked and what is checked are one schema.
var askResolved = sync.OnceValues(func() (*jsonschema.Resolved, error) { return askSchema.Resolve(nil) })

// permission handles a permission event: a question of an agent that this
// session asks about goes to the client; a decision withdraws the
// elicitation of its request, if one is out.
func (or *orchestrator) permission(e Envelope) {
	var p event.PermissionData
	if json.Unmarshal(e.Data, &p) != nil || p.RequestID == "" {
		return
	}
	k := askKey{e.Agent, p.RequestID}
	if p.Decision != "" {
		or.withdraw(k, fmt.Sprintf("permission request %s answered elsewhere: %s by %s", p.RequestID, p.Decision.Past(), p.By))
		return
	}
	if or.isModern() {
		// A 2026-07-28 client takes no server-initiated request: its
		// calls that wait on the agent ask it in MRTR rounds (mrtr.go),
		// and agent_permit answers any other. (One flag, modern.go's: a
		// client that probes server/discover and then initializes is a
		// 2025-11-25 client, and is asked here.)
		return
	}
	if !or.elicits(e.Agent) {
		return
	}
	ctx, session := or.sessionContext(or.ctx)
	if session == nil || !clientElicits(session) {
		return
	}
	ctx, cancel := context.WithCancel(ctx)
	a := &ask{cancel: cancel}
	or.mu.Lock()
	if _, dup := or.asks[k]; dup {
		or.mu.Unlock()
		cancel()
		return
	}
	or.asks[k] = a
	task := or.running[e.Agent]
	or.mu.Unlock()
	or.wg.Add(1)
	go func() {
		defer or.wg.Done()
		defer cancel()
		or.elicit(ctx, k, a, p, task)
	}()
}

// elicits says whether agent's permission requests go to the client.
func (or *orchestrator) elicits(agent string) bool {
	switch or.o.Elicit {
	case verbs.ElicitNever:
		return false
	case verbs.ElicitAll:
		return true
	}
	or.mu.Lock()
	defer or.mu.Unlock()
	return or.own[agent]
}

// elicit asks the client about request p and answers the agent with what
// the person chose: accept allows, decline and cancel deny, and an answer
// that does not fit the schema denies with an error in the agent's log. A
// client that does not answer leaves the request to its expiry, and an
// answer given elsewhere first withdraws the question.
func (or *orchestrator) elicit(ctx context.Context, k askKey, a *ask, p event.PermissionData, task string) {
	defer func() {
		or.mu.Lock()
		if or.asks[k] == a {
			delete(or.asks, k)
		}
		or.mu.Unlock()
	}()
	req := mcp.ElicitationRequest{
		Request: mcp.Request{Method: string(mcp.MethodElicitationCreate)},
		Params:  askParams(k, p, task),
	}
	res, err := or.srv.RequestElicitation(ctx, req)
	// Answered (or given up): the decision that follows is this
	// answer's, not one given elsewhere to withdraw the question for.
	or.mu.Lock()
	if or.asks[k] == a {
		delete(or.asks, k)
	}
	or.mu.Unlock()
	if err != nil {
		if ctx.Err() == nil {
			or.errLog.Printf("asking the client about agent %s's permission request %s: %v; it waits for agent_permit or its expiry", k.agent, k.request, err)
		}
		return
	}
	answer := permitAnswer(k, res.ElicitationResponse)
	// The answer outlives the client: a request answered is answered
	// even when the session ends as it is given.
	if _, err := or.svc.Permit(context.WithoutCancel(ctx), &answer); err != nil && verbs.AsError(err).Code != verbs.CodeWrongState {
		or.errLog.Printf("answering agent %s's permission request %s: %v", k.agent, k.request, err)
	}
}

// askParams are the elicitation of permission request p of k.agent: a
// message saying what the agent asks to run and what accept and decline
// do, and askSchema. The server-initiated elicitation (a 2025-11-25 client)
// and the input request of an MRTR round (2026-07-28, mrtr.go) are both
// this. task, if any, is the task running the agent's turn.
func askParams(k askKey, p event.PermissionData, task string) mcp.ElicitationParams {
	what := p.ToolCall.Title
	if what == "" {
		what = "a tool"
	}
	msg := fmt.Sprintf("Agent %s asks to run %s", k.agent, what)
	if in := oneLine(string(p.ToolCall.RawInput), 300); in != "" && in != "null" {
		msg += ": " + in
	}
	msg += fmt.Sprintf(".\nAccept to %s it, decline to %s it.", apitype.Allow, apitype.Deny)
	if p.ExpiresAt != "" {
		msg += " Denied if unanswered by " + p.ExpiresAt + "."
	}
	meta := &mcp.Meta{AdditionalFields: map[string]any{MetaPermission: map[string]string{"agent_id": k.agent, "request_id": k.request}}}
	if task != "" {
		meta.AdditionalFields[mcp.RelatedTaskMetaKey] = mcp.RelatedTaskMeta(task)
	}
	return mcp.ElicitationParams{Meta: meta, Message: msg, RequestedSchema: askSchema}
}

// permitAnswer is the answer to k that an elicitation's response gives:
// accept allows (always as its content says), decline and cancel deny, and
// content that does not fit askSchema denies with an error.
func permitAnswer(k askKey, res mcp.ElicitationResponse) verbs.PermitArgs {
	answer := verbs.PermitArgs{AgentID: k.agent, RequestID: k.request, Decision: apitype.Deny}
	if res.Action == mcp.ElicitationResponseActionAccept {
		always, bad := answerOf(res.Content)
		if bad != "" {
			answer.Error = "the MCP client's answer to the elicitation does not fit its schema: " + bad
		} else {
			answer.Decision, answer.Always = apitype.Allow, always
		}
	}
	return answer
}

// answerOf reads an accepted elicitation's content: always, or why the
// content does not fit askSchema.
func answerOf(content any) (always bool, bad string) {
	if content == nil {
		return false, ""
	}
	rs, err := askResolved()
	if err != nil {
		return false, err.Error()
	}
	// Validate sees JSON's types, so the content goes through JSON.
	b, err := json.Marshal(content)
	if err != nil {
		return false, err.Error()
	}
	var inst any
	if err := json.Unmarshal(b, &inst); err != nil {
		return false, err.Error()
	}
	if err := rs.Validate(inst); err != nil {
		return false, strings.TrimSpace(err.Error())
	}
	m, _ := inst.(map[string]any)
	always, _ = m["always"].(bool)
	return always, ""
}

// withdraw ends the elicitation of k, answered elsewhere: the wait for the
// client's answer ends, and the client hears notifications/cancelled for
// it (once it is written, if it is not yet).
func (or *orchestrator) withdraw(k askKey, why string) {
	or.mu.Lock()
	a := or.asks[k]
	if a == nil || a.withdrawn != "" {
		or.mu.Unlock()
		return
	}
	a.withdrawn = why
	wire := a.wire
	or.mu.Unlock()
	a.cancel()
	if wire != nil {
		or.cancelled(wire, why)
	}
}

// written is told by the stdio writer of an elicitation it wrote for k,
// with its JSON-RPC id.
func (or *orchestrator) written(k askKey, id any) {
	or.mu.Lock()
	a := or.asks[k]
	var why string
	if a != nil {
		a.wire = id
		why = a.withdrawn
	}
	or.mu.Unlock()
	if why != "" {
		or.cancelled(id, why)
	}
}

func (or *orchestrator) cancelled(id any, why string) {
	_, session := or.sessionContext(or.ctx)
	if session == nil {
		return
	}
	if err := or.srv.SendNotificationToSpecificClient(session.SessionID(), string(mcp.MethodNotificationCancelled),
		map[string]any{"requestId": id, "reason": why}); err != nil {
		or.errLog.Printf("withdrawing an elicitation: %v", err)
	}
}

// clientElicits says whether the client declared elicitation in form
// mode: {} (form, as 2025-06-18 had it) or with form.
func clientElicits(s server.ClientSession) bool {
	ci, ok := s.(server.SessionWithClientInfo)
	if !ok {
		return false
	}
	caps := ci.GetClientCapabilities()
	return formElicits(&caps)
}

// formElicits says whether caps declare elicitation in form mode: {}
// (form, as 2025-06-18 had it) or with form.
func formElicits(caps *mcp.ClientCapabilities) bool {
	if caps == nil {
		return false
	}
	e := caps.Elicitation
	return e != nil && (e.Form != nil || e.URL == nil)
}
