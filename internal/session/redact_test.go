package session

import (
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/kaimon/kaimon/internal/apitype"
	"github.com/kaimon/kaimon/internal/backend"
	"github.com/kaimon/kaimon/internal/event"
	"github.com/kaimon/kaimon/internal/redact"
	"github.com/kaimon/kaimon/internal/verbs"
)

// tokenDoor admits every agent with one token.
type tokenDoor string

func (d tokenDoor) URL() string                    { return "http://127.0.0.1:1/mcp" }
func (d tokenDoor) Admit(o backend.Options) string { return string(d) }
func (d tokenDoor) Revoke(id, token string)        {}

// What an agent prints of its environment and its door token reaches no
// reader redacted only in part: every published envelope, the log, the
// reply and the dead agent's reason have the markers; only what was sent
// to the agent (user_text) is as it was.
func TestAgentOutputRedacted(t *testing.T) {
	const key, tok = "sk-ant-unit-0123456789abcdef", "door0123456789abcdef0123456789"
	r := newRig(t, 10)
	r.m.env = []string{"ANTHROPIC_API_KEY=" + key, "PATH=/bin"}
	r.m.SetDoor(tokenDoor(tok))
	rec := &envRec{}
	r.m.AddPublisher(rec)
	id := r.open(t, "leaky")

	res, err := r.m.Run(bg, decoded(&verbs.RunArgs{AgentID: id, Text: "say " + key}))
	if err != nil || res.Text != "re: say "+redact.Marker("ANTHROPIC_API_KEY") {
		t.Fatalf("run = %+v %v", res, err)
	}
	r.mu.Lock()
	s := r.last
	r.mu.Unlock()
	s.sink.Emit(event.New(event.ToolResult, 1, event.ToolResultData{Update: event.ToolResultUpdate{ToolCallID: "t", Status: "completed",
		Content: []any{map[string]any{"type": "text", "text": "ANTHROPIC_API_KEY=" + key + " token " + tok}}}}))
	s.sink.Exited(errors.New("claude exited with code 1: ANTHROPIC_API_KEY=" + key))

	st, _ := r.m.Status(bg, &verbs.StatusArgs{AgentID: id})
	if st.Status != apitype.Dead || strings.Contains(st.Reason, key) || !strings.Contains(st.Reason, redact.Marker("ANTHROPIC_API_KEY")) {
		t.Fatalf("the dead agent's reason %q", st.Reason)
	}
	rec.mu.Lock()
	evs := rec.evs
	rec.mu.Unlock()
	var marked bool
	for _, e := range evs {
		data := string(e.Data)
		if e.Kind == event.UserText {
			if !strings.Contains(data, key) {
				t.Errorf("what was sent to the agent was changed: %s", data)
			}
			continue
		}
		if strings.Contains(data, key) || strings.Contains(data, tok) {
			t.Errorf("published %s %s", e.Kind, data)
		}
		marked = marked || strings.Contains(data, redact.Marker(redact.DoorToken))
	}
	if !marked {
		t.Error("no envelope has the door token's marker")
	}
	b, err := os.ReadFile(st.EventLog)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(b), key); n != 1 { // the user_text
		t.Fatalf("the log holds the key %d times:\n%s", n, b)
	}
}
