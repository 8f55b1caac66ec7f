package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/kaimon/kaimon/internal/client"
	"github.com/kaimon/kaimon/internal/event"
)

// hintDelay is how long a run goes before it watches for permission
// requests.
const hintDelay = 750 * time.Millisecond

// hintPermissions tells the person waiting on `kaimon run` when the agent
// stops to ask permission, and how to answer, instead of leaving them with
// a run that seems to hang. It follows the agent's event stream until ctx
// ends and reports only questions asked after since.
func hintPermissions(ctx context.Context, cl *client.Client, id string, since time.Time, w io.Writer) {
	// Most turns end quickly and never ask; a person answering a question
	// takes seconds anyway. Waiting a moment before watching keeps the
	// common turn free of the stream's cost.
	select {
	case <-ctx.Done():
		return
	case <-time.After(hintDelay):
	}
	watch, err := cl.Events(ctx, id, 0, true)
	if err != nil {
		return // a hint is a courtesy: the run itself reports errors
	}
	go func() { <-ctx.Done(); watch.Close() }()
	for {
		env, err := watch.Next()
		if err != nil {
			return
		}
		if env.Kind != event.Permission || env.TS.Before(since) {
			continue
		}
		var p event.PermissionData
		if json.Unmarshal(env.Data, &p) != nil || p.Decision != "" {
			continue
		}
		input := string(p.ToolCall.RawInput)
		if len(input) > 200 {
			input = input[:200] + "…"
		}
		fmt.Fprintf(w, "kaimon: agent %s asks permission for %s %s\n  answer: kaimon permit %s %s allow   (or deny; waits until %s)\n",
			id, p.ToolCall.Title, input, id, p.RequestID, p.ExpiresAt)
	}
}
