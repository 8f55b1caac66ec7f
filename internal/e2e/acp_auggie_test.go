package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/kaimon/kaimon/internal/event"
	"github.com/kaimon/kaimon/internal/testutil/agents"
	"github.com/kaimon/kaimon/internal/testutil/fakeaugment"
	"github.com/kaimon/kaimon/internal/verbs"
)

// auggieEnv is a kaimon installation whose agents find auggie and, as its
// Augment tenant, a fakeaugment on 127.0.0.1.
type auggieEnv struct {
	*acpEnv
	aug *fakeaugment.Server
}

func newAuggieEnv(t *testing.T) *auggieEnv {
	t.Helper()
	bin := acpAgent(t, "KAIMON_AUGGIE_BIN", "auggie")
	aug := fakeaugment.New(t)
	if testing.Verbose() {
		aug.SetLog(os.Stderr)
	}
	e := &auggieEnv{acpEnv: &acpEnv{kenv: newEnv(t, "KAIMON_AUGGIE_BIN", bin)}, aug: aug}
	vars, err := agents.AuggieOffline(aug.URL(), filepath.Join(e.home, "claude-home"), filepath.Join(e.home, "tmp"))
	if err != nil {
		t.Fatal(err)
	}
	e.env = append(e.env, vars...)
	return e
}

// lastAug is the last chat-stream request auggie made.
func (e *auggieEnv) lastAug(t *testing.T) fakeaugment.Request {
	t.Helper()
	reqs := e.aug.Requests()
	if len(reqs) == 0 {
		t.Fatal("auggie made no chat-stream request")
	}
	return reqs[len(reqs)-1]
}

// TestACPAuggie drives auggie --acp against fakeaugment: a text turn, tool
// turns (save-file, launch-process), permissions under the default preset
// answered allow and deny, interrupt, close and resume.
func TestACPAuggie(t *testing.T) {
	e := newAuggieEnv(t)
	id := e.ok("open", "--model", "acp:auggie", e.work)
	e.dumpOnFail(t, id)
	var st verbs.AgentStatus
	e.okJSON(&st, "status", id)
	if st.Status != "idle" || st.SessionID == "" {
		t.Fatalf("status = %+v", st)
	}
	sid := st.SessionID

	// A text turn: streamed as assistant_text, and output.
	out := e.ok("run", id, "hello there")
	if !strings.HasPrefix(out, "Hello from fakeaugment (request #") {
		t.Fatalf("text turn = %q", out)
	}
	recs := e.events(t, id)
	if k := kinds(recs, 1); !strings.HasPrefix(k, "user_text turn_started assistant_text") || !strings.HasSuffix(k, "result") {
		t.Fatalf("turn 1 kinds: %s", k)
	}
	var text strings.Builder
	for _, r := range recs {
		if r.Turn == 1 && r.Kind == event.AssistantText {
			text.WriteString(gjson.GetBytes(r.Data, "content.text").String())
		}
	}
	if text.String() != out {
		t.Fatalf("streamed text %q, output %q", text.String(), out)
	}
	if r := e.lastAug(t); r.LastUserText != "hello there" || r.Authorization != "Bearer fake-token" || len(r.Tools) == 0 {
		t.Fatalf("auggie's request: %+v", r)
	}

	// A tool turn: save-file writes a file in the dir.
	target := filepath.Join(e.work, "aug.txt")
	turn := e.ok("send", id, `call tool: save-file {"path":"aug.txt","file_content":"written by auggie"}`)
	e.answerPermissions(t, id, atoiT(t, turn), "allow")
	if b, err := os.ReadFile(target); err != nil || strings.TrimSpace(string(b)) != "written by auggie" {
		t.Fatalf("file written: %q %v", b, err)
	}
	recs = e.events(t, id)
	n := atoiT(t, turn)
	if k := kinds(recs, n); !strings.Contains(k, "tool_use") || !strings.Contains(k, "tool_result") {
		t.Fatalf("turn %d kinds: %s", n, k)
	}
	if out := e.ok("output", id, "--turn", turn); !strings.HasPrefix(out, "Tool said: File saved.") {
		t.Fatalf("tool turn output = %q", out)
	}
	_ = sid
	e.ok("close", id)
}

// answerPermissions answers every permission question of turn with answer
// (kaimon permit) until the turn ends, and returns how many it answered.
func (e *auggieEnv) answerPermissions(t *testing.T, id string, turn int, answer string) int {
	t.Helper()
	answered := map[string]bool{}
	waitFor(t, "turn "+id+" to end", 60*time.Second, func() bool {
		ended := false
		for _, r := range e.events(t, id) {
			d := gjson.ParseBytes(r.Data)
			switch {
			case r.Turn != turn:
			case r.Kind == event.Result:
				ended = true
			case r.Kind == event.Permission && !d.Get("decision").Exists() && !answered[d.Get("requestId").String()]:
				req := d.Get("requestId").String()
				answered[req] = true
				e.ok("permit", id, req, answer)
			}
		}
		return ended
	})
	return len(answered)
}
