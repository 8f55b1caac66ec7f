package claude

import (
	"context"
	"encoding/json"
	"os"

	"github.com/tidwall/gjson"

	"github.com/kaimon/kaimon/internal/apitype"
	"github.com/kaimon/kaimon/internal/backend"
)

// Under --permission-prompt-tool stdio the CLI sends each permission check
// as a control_request {subtype: can_use_tool, tool_name, input,
// tool_use_id, …} and waits for a control_response whose response is
// {behavior: allow, updatedInput} or {behavior: deny, message}. What the
// CLI allows by itself (the allowlist, the permission mode) never asks.

// permissionAnswer is the response of a can_use_tool control request.
type permissionAnswer struct {
	Behavior     string          `json:"behavior"` // allow | deny
	UpdatedInput json.RawMessage `json:"updatedInput,omitempty"`
	Message      string          `json:"message,omitempty"`
}

// startAsk raises a can_use_tool request as a permission request (through
// Options.Ask, which may block for minutes) on its own goroutine, and
// answers the CLI with the decision.
func (b *Backend) startAsk(req ControlRequest, turn int) {
	ctx, done := b.asks.Begin(context.Background(), req.RequestID)
	go func() {
		defer done()
		r := gjson.ParseBytes(req.Request)
		tool := r.Get("tool_name").String()
		input := r.Get("input").Raw
		if input == "" {
			input = "{}"
		}
		call := toolCall(r.Get("tool_use_id").String(), tool, input)
		call.Status = apitype.ToolPending
		d := b.opts.Ask(ctx, backend.PermissionRequest{Turn: turn, Tool: tool, Call: call})
		ans := permissionAnswer{Behavior: "deny", Message: d.Message}
		if d.Allow {
			ans = permissionAnswer{Behavior: "allow", UpdatedInput: json.RawMessage(input)}
		}
		if ctx.Err() != nil && b.asks.Stopped() {
			return // the process is gone: nobody to answer
		}
		_ = b.writeJSON(controlResponse{Type: "control_response", Response: controlResponseBody{
			Subtype: "success", RequestID: req.RequestID, Response: ans,
		}})
	}()
}

// cancelAsk ends the wait for a request the CLI withdrew.
func (b *Backend) cancelAsk(id string) { b.asks.Cancel(id) }

// removeMCPConfig removes the agent's generated MCP config: its token is
// revoked with the agent anyway, but a secret need not outlive its use.
func (b *Backend) removeMCPConfig() {
	if b.mcpConfig != "" {
		os.Remove(b.mcpConfig)
	}
}
