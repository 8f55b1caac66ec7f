package acp

import (
	"context"
	"errors"
	"fmt"
	"time"

	sdk "github.com/coder/acp-go-sdk"

	"github.com/kaimon/kaimon/internal/backend"
	"github.com/kaimon/kaimon/internal/event"
)

// client is kaimon's side of the ACP connection: what the agent calls.
// session/update notifications arrive one at a time, in order; requests
// (permission, fs/*) each on their own goroutine.
type client struct{ b *Backend }

var _ sdk.Client = (*client)(nil)

// SessionUpdate maps an update to events.
func (c *client) SessionUpdate(ctx context.Context, n sdk.SessionNotification) error {
	b := c.b
	b.life.Lock()
	defer b.life.Unlock()
	if b.life.Exited() || b.loading {
		return nil
	}
	out := b.m.Update(n)
	for _, ev := range out.Events {
		b.sink.Emit(ev)
	}
	if out.Model != "" {
		b.infoMu.Lock()
		b.curModel = out.Model
		b.infoMu.Unlock()
	}
	return nil
}

// RequestPermission raises the agent's question through the session's
// Asker: the preset decides what it can (answering allow_once or
// reject_once from the options offered), the rest waits for agent_permit;
// one of the agent's Questions, about no tool call, is refused.
// An interrupt or the agent's exit answers "cancelled".
func (c *client) RequestPermission(ctx context.Context, p sdk.RequestPermissionRequest) (sdk.RequestPermissionResponse, error) {
	b := c.b
	cancelled := sdk.RequestPermissionResponse{Outcome: sdk.NewRequestPermissionOutcomeCancelled()}
	id := string(p.ToolCall.ToolCallId)
	refused, question := b.agent.Questions[id]
	if b.agent.AnnouncesBeforeAsk && !question {
		// The announce that names the tool may still be queued behind
		// this request (notifications and requests are handled apart).
		deadline := time.Now().Add(announceWait)
		for {
			b.life.Lock()
			known := b.m.Knows(id)
			b.life.Unlock()
			if known || time.Now().After(deadline) {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	b.life.Lock()
	if b.life.Exited() {
		b.life.Unlock()
		return cancelled, nil
	}
	var evs []event.Event
	var call event.ToolCall
	var tool string
	if question {
		evs, call = b.m.Question(p.ToolCall)
		tool = call.Title
	} else {
		evs, call, tool = b.m.Permission(p.ToolCall)
	}
	for _, ev := range evs {
		b.sink.Emit(ev)
	}
	turn := b.m.Current()
	b.life.Unlock()

	opts := make([]event.PermissionOption, 0, len(p.Options))
	for _, o := range p.Options {
		opts = append(opts, event.PermissionOption{OptionID: string(o.OptionId), Name: o.Name, Kind: string(o.Kind)})
	}
	if b.opts.Ask == nil {
		return cancelled, nil
	}
	actx, done := b.registerAsk(ctx)
	defer done()
	d := b.opts.Ask(actx, backend.PermissionRequest{Turn: turn, Tool: tool, Call: call, Options: opts, Accepted: b.acceptedEdit(tool, call), Refused: refused})
	if d.By == event.DecidedByCancelled {
		return cancelled, nil
	}
	opt := d.Option(opts)
	if opt == "" {
		// No option of the kind decided: refusing is the safe answer.
		return cancelled, nil
	}
	return sdk.RequestPermissionResponse{Outcome: sdk.NewRequestPermissionOutcomeSelected(sdk.PermissionOptionId(opt))}, nil
}

// registerAsk derives the context of one permission request: it ends when
// the request is withdrawn (ctx), the turn is interrupted, or the process
// is gone.
func (b *Backend) registerAsk(ctx context.Context) (context.Context, func()) {
	return b.asks.Begin(ctx, "")
}

// cancelAsks ends every pending permission request (an interrupt).
func (b *Backend) cancelAsks() { b.asks.CancelAll() }

// ReadTextFile reads inside the cwd only (fs.go); a missing file reads as
// empty.
func (c *client) ReadTextFile(ctx context.Context, p sdk.ReadTextFileRequest) (sdk.ReadTextFileResponse, error) {
	text, err := c.b.jail.Read(p.Path, p.Line, p.Limit)
	if err != nil {
		c.b.logRefusal("fs/read_text_file", p.Path, err)
		return sdk.ReadTextFileResponse{}, sdk.NewInvalidParams(map[string]any{"error": err.Error(), "path": p.Path})
	}
	return sdk.ReadTextFileResponse{Content: text}, nil
}

// WriteTextFile writes inside the cwd only.
func (c *client) WriteTextFile(ctx context.Context, p sdk.WriteTextFileRequest) (sdk.WriteTextFileResponse, error) {
	if err := c.b.jail.Write(p.Path, p.Content); err != nil {
		c.b.logRefusal("fs/write_text_file", p.Path, err)
		return sdk.WriteTextFileResponse{}, sdk.NewInvalidParams(map[string]any{"error": err.Error(), "path": p.Path})
	}
	return sdk.WriteTextFileResponse{}, nil
}

// logRefusal publishes a refused fs callback as an error event, so that a
// confinement at work is visible on the stream.
func (b *Backend) logRefusal(method, path string, err error) {
	b.life.Lock()
	defer b.life.Unlock()
	if !b.life.Exited() {
		b.sink.Emit(event.NewError(b.m.Current(), "kaimon refused "+method+" "+path+": "+err.Error(),
			map[string]any{"method": method, "path": path}))
	}
}

// Kaimon declares no terminal capability; an agent that asks anyway is
// told so.
var errNoTerminal = errors.New("kaimon offers no terminals (clientCapabilities.terminal is false)")

func (c *client) CreateTerminal(context.Context, sdk.CreateTerminalRequest) (sdk.CreateTerminalResponse, error) {
	return sdk.CreateTerminalResponse{}, errNoTerminal
}
func (c *client) KillTerminal(context.Context, sdk.KillTerminalRequest) (sdk.KillTerminalResponse, error) {
	return sdk.KillTerminalResponse{}, errNoTerminal
}
func (c *client) TerminalOutput(context.Context, sdk.TerminalOutputRequest) (sdk.TerminalOutputResponse, error) {
	return sdk.TerminalOutputResponse{}, errNoTerminal
}
func (c *client) ReleaseTerminal(context.Context, sdk.ReleaseTerminalRequest) (sdk.ReleaseTerminalResponse, error) {
	return sdk.ReleaseTerminalResponse{}, errNoTerminal
}
func (c *client) WaitForTerminalExit(context.Context, sdk.WaitForTerminalExitRequest) (sdk.WaitForTerminalExitResponse, error) {
	return sdk.WaitForTerminalExitResponse{}, errNoTerminal
}

// mcpServers is session/new's MCP servers: kaimon's door as server
// "kaimon" over HTTP with the agent's id and token in headers, then the
// servers of the caller's mcp_config (a claude --mcp-config file), which
// may not name a server kaimon.
func (b *Backend) mcpServers(caps sdk.McpCapabilities) ([]sdk.McpServer, error) {
	out := []sdk.McpServer{}
	if b.opts.Door != nil {
		if !caps.Http && !b.agent.HTTPMCP {
			return nil, fmt.Errorf("acp:%s does not take HTTP MCP servers, so it cannot reach kaimon's door", b.agent.Name)
		}
		out = append(out, sdk.McpServer{Http: &sdk.McpServerHttpInline{Type: "http", Name: "kaimon", Url: b.opts.Door.URL,
			Headers: []sdk.HttpHeader{{Name: "Authorization", Value: "Bearer " + b.opts.Door.Token}, {Name: backend.HeaderAgent, Value: b.opts.ID}}}})
	}
	servers, err := b.opts.CallerMCPServers()
	if err != nil {
		return nil, err
	}
	for name, s := range servers {
		var hs []sdk.HttpHeader
		for k, v := range s.Headers {
			hs = append(hs, sdk.HttpHeader{Name: k, Value: v})
		}
		if hs == nil {
			hs = []sdk.HttpHeader{}
		}
		switch {
		case s.Command != "":
			var env []sdk.EnvVariable
			for k, v := range s.Env {
				env = append(env, sdk.EnvVariable{Name: k, Value: v})
			}
			if env == nil {
				env = []sdk.EnvVariable{}
			}
			args := s.Args
			if args == nil {
				args = []string{}
			}
			out = append(out, sdk.McpServer{Stdio: &sdk.McpServerStdio{Name: name, Command: s.Command, Args: args, Env: env}})
		case s.Type == "sse":
			out = append(out, sdk.McpServer{Sse: &sdk.McpServerSseInline{Type: "sse", Name: name, Url: s.URL, Headers: hs}})
		case s.URL != "":
			out = append(out, sdk.McpServer{Http: &sdk.McpServerHttpInline{Type: "http", Name: name, Url: s.URL, Headers: hs}})
		}
	}
	return out, nil
}
