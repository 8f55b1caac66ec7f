package mcpserver

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/url"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/kaimon/kaimon/internal/apitype"
	"github.com/kaimon/kaimon/internal/event"
	"github.com/kaimon/kaimon/internal/verbs"
)

// The agents as resources. An agent's id is path-escaped in its URIs: an
// agent of another host is HOST/ID.
const (
	AgentsURI      = "kaimon://agents"
	agentURIPrefix = "kaimon://agent/"
	outputSuffix   = "/output"
	eventsSuffix   = "/events"
	// MaxEventsResource bounds kaimon://agent/{id}/events: the log's last
	// lines that fit, whole. A long agent's log is far more than a client
	// wants in one read; the whole log is `kaimon tail --from-start`.
	MaxEventsResource = 1 << 20
)

// AgentURI is the resource of agent's status.
func AgentURI(agent string) string { return agentURIPrefix + url.PathEscape(agent) }

// EventSource reads an agent's event log, for kaimon://agent/{id}/events:
// a service that has one (the daemon's client, a fleet) implements it.
type EventSource interface {
	// EventLog returns the agent's envelopes from its log, one JSON object
	// a line.
	EventLog(ctx context.Context, agent string) (io.ReadCloser, error)
}

// addResources registers the agents' resources: the list, and each
// agent's status, last turn's output and event log as templates.
func (or *orchestrator) addResources() {
	or.srv.AddResource(mcp.NewResource(AgentsURI, "agents",
		mcp.WithResourceDescription("Every agent the daemon knows, live and dead: agent_list's result."),
		mcp.WithMIMEType("application/json")), or.readAgents)
	or.srv.AddResourceTemplate(mcp.NewResourceTemplate(agentURIPrefix+"{id}", "agent",
		mcp.WithTemplateDescription("An agent's status and token usage: agent_status's result. Subscribers hear of each status change and turn end."),
		mcp.WithTemplateMIMEType("application/json")), or.readTemplate)
	or.srv.AddResourceTemplate(mcp.NewResourceTemplate(agentURIPrefix+"{id}"+outputSuffix, "agent output",
		mcp.WithTemplateDescription("The text of the agent's last turn (agent_output's text, which=full_turn): partial while it works."),
		mcp.WithTemplateMIMEType("text/plain")), or.readTemplate)
	or.srv.AddResourceTemplate(mcp.NewResourceTemplate(agentURIPrefix+"{id}"+eventsSuffix, "agent events",
		mcp.WithTemplateDescription(fmt.Sprintf("The agent's event log, one envelope a line (kaimon schema events); its last %d MiB.", MaxEventsResource>>20)),
		mcp.WithTemplateMIMEType("application/x-ndjson")), or.readTemplate)
}

// parseURI splits one of an agent's URIs into the agent and what of it.
func parseURI(uri string) (agent, what string, ok bool) {
	rest, found := strings.CutPrefix(uri, agentURIPrefix)
	if !found || rest == "" {
		return "", "", false
	}
	for _, s := range []string{outputSuffix, eventsSuffix} {
		if r, cut := strings.CutSuffix(rest, s); cut {
			rest, what = r, s
			break
		}
	}
	agent, err := url.PathUnescape(rest)
	if err != nil || agent == "" || strings.Contains(rest, "/") {
		return "", "", false
	}
	return agent, what, true
}

// checkURI refuses a URI that names nothing: not one of kaimon's, or of
// an agent the daemon does not know.
func (or *orchestrator) checkURI(ctx context.Context, uri string) error {
	if uri == AgentsURI {
		return nil
	}
	agent, _, ok := parseURI(uri)
	if !ok {
		return fmt.Errorf("no resource %q: kaimon's resources are %s, %s{id}, %s{id}%s and %s{id}%s (an agent's id path-escaped)",
			uri, AgentsURI, agentURIPrefix, agentURIPrefix, outputSuffix, agentURIPrefix, eventsSuffix)
	}
	if _, err := or.svc.Status(ctx, &verbs.StatusArgs{AgentID: agent}); err != nil {
		return fmt.Errorf("resource %q: %s", uri, asTools(verbs.AsError(err).Message))
	}
	return nil
}

func (or *orchestrator) readAgents(ctx context.Context, r mcp.ReadResourceRequest) ([]mcp.ResourceContents, error) {
	l, err := or.svc.List(ctx, &verbs.ListArgs{})
	if err != nil {
		return nil, err
	}
	return jsonContents(r.Params.URI, l)
}

func (or *orchestrator) readTemplate(ctx context.Context, r mcp.ReadResourceRequest) ([]mcp.ResourceContents, error) {
	uri := r.Params.URI
	agent, what, ok := parseURI(uri)
	if !ok {
		return nil, fmt.Errorf("no resource %q", uri)
	}
	switch what {
	case outputSuffix:
		out, err := or.svc.Output(ctx, &verbs.OutputArgs{AgentID: agent, Which: verbs.WhichFullTurn, MaxChars: verbs.DefaultMaxChars})
		if err != nil {
			return nil, resourceErr(uri, err)
		}
		return []mcp.ResourceContents{mcp.TextResourceContents{URI: uri, MIMEType: "text/plain", Text: out.Text}}, nil
	case eventsSuffix:
		src, ok := or.svc.(EventSource)
		if !ok {
			return nil, fmt.Errorf("resource %q: this server cannot read event logs", uri)
		}
		rc, err := src.EventLog(ctx, agent)
		if err != nil {
			return nil, resourceErr(uri, err)
		}
		defer rc.Close()
		text, err := lastLines(rc, MaxEventsResource)
		if err != nil {
			return nil, fmt.Errorf("reading agent %s's event log: %w", agent, err)
		}
		return []mcp.ResourceContents{mcp.TextResourceContents{URI: uri, MIMEType: "application/x-ndjson", Text: text}}, nil
	}
	st, err := or.svc.Status(ctx, &verbs.StatusArgs{AgentID: agent})
	if err != nil {
		return nil, resourceErr(uri, err)
	}
	return jsonContents(uri, st)
}

// resourceErr is the error of reading uri, in the tools' words.
func resourceErr(uri string, err error) error {
	return fmt.Errorf("resource %q: %s", uri, asTools(verbs.AsError(err).Message))
}

// lastLines reads r and keeps its last whole lines that fit in max bytes.
func lastLines(r io.Reader, max int) (string, error) {
	var keep []byte
	buf := make([]byte, 64<<10)
	for {
		n, err := r.Read(buf)
		keep = append(keep, buf[:n]...)
		if len(keep) > 2*max {
			keep = trimToLines(keep, max)
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return "", err
		}
	}
	return string(trimToLines(keep, max)), nil
}

func trimToLines(b []byte, max int) []byte {
	if len(b) <= max {
		return b
	}
	b = b[len(b)-max:]
	if i := bytes.IndexByte(b, '\n'); i >= 0 {
		return b[i+1:]
	}
	return nil
}

func jsonContents(uri string, v any) ([]mcp.ResourceContents, error) {
	b, err := event.Marshal(v)
	if err != nil {
		return nil, err
	}
	return []mcp.ResourceContents{mcp.TextResourceContents{URI: uri, MIMEType: "application/json", Text: string(b)}}, nil
}

// agentResource is agent's entry in resources/list. It does not say the
// agent's state, which would be stale at its next change: the resource
// is read for that.
func agentResource(agent string) mcp.Resource {
	return mcp.NewResource(AgentURI(agent), "agent "+agent,
		mcp.WithResourceDescription("Agent "+agent+"'s status and token usage (agent_status)."),
		mcp.WithMIMEType("application/json"))
}

// syncAgents makes the listed resources the daemon's agents as they are
// now: at the start, and before each resources/list, so that a list is
// never stale (an agent forgotten by another client goes from it). An
// agent an event told of since the daemon was asked is left as the event
// left it: the answer may predate its open.
func (or *orchestrator) syncAgents(ctx context.Context) {
	or.mu.Lock()
	asked := or.gen
	or.mu.Unlock()
	l, err := or.svc.List(ctx, &verbs.ListArgs{})
	if err != nil {
		return
	}
	now := map[string]bool{}
	for _, a := range l.Agents {
		now[a.AgentID] = true
	}
	or.mu.Lock()
	var gone []string
	var add []server.ServerResource
	for id, gen := range or.agents {
		if !now[id] && gen <= asked {
			delete(or.agents, id)
			gone = append(gone, AgentURI(id))
		}
	}
	for id := range now {
		if _, ok := or.agents[id]; !ok {
			or.agents[id] = asked
			add = append(add, server.ServerResource{Resource: agentResource(id), Handler: or.readTemplate})
		}
	}
	or.mu.Unlock()
	if len(gone) > 0 {
		or.srv.DeleteResources(gone...)
	}
	if len(add) > 0 {
		or.srv.AddResources(add...)
	}
}

// status is an agent's status event: an agent opened (starting) or closed
// (dead) changes the list of resources (mcp-go sends list_changed as its
// resource is added again), and every change is an update to the agent's
// subscribers.
func (or *orchestrator) status(agent string, st apitype.AgentState) {
	or.mu.Lock()
	_, known := or.agents[agent]
	or.gen++
	or.agents[agent] = or.gen
	or.mu.Unlock()
	if !known || st == apitype.Starting || st == apitype.Dead {
		or.srv.AddResource(agentResource(agent), or.readTemplate)
	}
	or.updated(agent)
}

// updated tells the subscribers of agent's resources, and of the list,
// that they changed.
func (or *orchestrator) updated(agent string) {
	uri := AgentURI(agent)
	// The resources an agent's change changes: its own three and the list.
	changed := []string{uri, uri + outputSuffix, uri + eventsSuffix, AgentsURI}
	or.mu.Lock()
	var uris []string
	for _, u := range changed {
		if or.subs[u] {
			uris = append(uris, u)
		}
	}
	or.mu.Unlock()
	for _, u := range uris {
		or.srv.SendNotificationToAllClients(string(mcp.MethodNotificationResourceUpdated), map[string]any{"uri": u})
	}
	// A 2026-07-28 client's subscriptions are its listen streams'.
	for _, u := range changed {
		or.notifyListens(string(mcp.MethodNotificationResourceUpdated), map[string]any{"uri": u}, func(l *listen) bool { return l.uris[u] })
	}
}

// forgotten takes forgotten agents out of the list of resources.
func (or *orchestrator) forgotten(ids []string) {
	var uris []string
	or.mu.Lock()
	for _, id := range ids {
		delete(or.agents, id)
		uris = append(uris, AgentURI(id))
	}
	or.mu.Unlock()
	if len(uris) > 0 {
		or.srv.DeleteResources(uris...)
	}
}
