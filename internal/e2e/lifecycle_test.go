package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kaimon/kaimon/internal/event"
	"github.com/kaimon/kaimon/internal/verbs"
	"github.com/tidwall/gjson"
)

// TestLifecycle walks one real claude agent through every verb, the way a
// shell script would: open → run (text) → run (tool turns the CLI really
// executes) → output in each mode → status → interrupt → set-model → close →
// reopen the dead id.
func TestLifecycle(t *testing.T) {
	e := newEnv(t)

	// open autostarts the daemon and prints the id alone.
	id := e.ok("open", e.work, "--allow", "Bash")
	if id == "" || strings.ContainsAny(id, " \n") {
		t.Fatalf("open printed %q, want the id alone", id)
	}
	var st verbs.AgentStatus
	e.okJSON(&st, "status", id)
	if st.Status != "idle" || st.Cwd != e.work || st.Model != "sonnet" || !st.QueuesPrompts {
		t.Fatalf("fresh status = %+v", st)
	}

	// A text turn.
	out := e.ok("run", id, "hello there")
	if !strings.HasPrefix(out, "Hello from fakeapi (request #") {
		t.Fatalf("run text = %q", out)
	}
	// A tool turn: the CLI runs Bash for real (allowed by --allow Bash).
	if out := e.ok("run", id, "please use a tool"); out != "Tool said: hi. Done." {
		t.Fatalf("tool turn = %q", out)
	}
	// A Write, allowed by the default preset's acceptEdits, creates a file.
	target := filepath.Join(e.work, "out.txt")
	if out := e.ok("run", id, "please write a file "+target); !strings.Contains(out, "File created successfully") {
		t.Fatalf("write turn = %q", out)
	}
	if b, err := os.ReadFile(target); err != nil || string(b) != "written by fakeapi\n" {
		t.Fatalf("file the agent wrote: %q, %v", b, err)
	}

	// output in each mode.
	var o verbs.OutputResult
	e.okJSON(&o, "output", id, "--turn", "2")
	if o.Text != "Tool said: hi. Done." || !o.Done || o.Turn != 2 || o.Which != "last_message" || o.Status != "idle" || o.Usage.InputTokens == 0 {
		t.Fatalf("output last_message = %+v", o)
	}
	e.okJSON(&o, "output", id, "--turn", "2", "--which", "full_turn")
	if o.Text != "I will run a command.\n\nTool said: hi. Done." {
		t.Fatalf("output full_turn = %q", o.Text)
	}
	e.okJSON(&o, "output", id, "--turn", "2", "--which", "full_turn", "--include-tools")
	if !strings.Contains(o.Text, "→ Bash") || !strings.Contains(o.Text, "← Bash completed: hi") {
		t.Fatalf("output full_turn with tools = %q", o.Text)
	}
	e.okJSON(&o, "output", id, "--which", "all", "--max-chars", "30")
	if !strings.HasPrefix(o.Text, "— turn 1 —\nHello from fakeapi") || !o.Truncated || o.DroppedChars == 0 || len([]rune(o.Text)) != 30 {
		t.Fatalf("output all, cut = %+v", o)
	}
	if human := e.ok("output", id); !strings.HasPrefix(human, "Tool said: File created successfully at: "+target) {
		t.Fatalf("human output = %q", human)
	}

	// status: usage summed over three turns, session and transcript real.
	e.okJSON(&st, "status", id)
	if st.Turn != 3 || st.Usage.InputTokens < 3*100 || st.Usage.OutputTokens == 0 || st.Usage.CostUSD != 0 {
		t.Fatalf("status after 3 turns = %+v", st)
	}
	if st.SessionID == "" {
		t.Fatal("no session_id")
	}
	if _, err := os.Stat(st.Transcript); err != nil {
		t.Fatalf("transcript %s: %v", st.Transcript, err)
	}

	// interrupt a slow turn: the agent survives and the next turn works.
	turn := e.ok("send", id, "please be slow")
	if turn != "4" {
		t.Fatalf("send printed %q, want 4", turn)
	}
	waitFor(t, "partial output of the slow turn", 30*time.Second, func() bool {
		var p verbs.OutputResult
		e.okJSON(&p, "output", id)
		return p.Turn == 4 && !p.Done && strings.Contains(p.Text, "chunk1")
	})
	if got := e.ok("interrupt", id); got != "interrupted" {
		t.Fatalf("interrupt = %q", got)
	}
	waitFor(t, "the interrupted turn to end", 30*time.Second, func() bool {
		var p verbs.OutputResult
		e.okJSON(&p, "output", id, "--turn", "4")
		return p.Done
	})
	var ir verbs.InterruptResult
	e.okJSON(&ir, "interrupt", id)
	if ir.Interrupted {
		t.Fatal("interrupting an idle agent reported true")
	}
	if out := e.ok("run", id, "hello again"); !strings.HasPrefix(out, "Hello from fakeapi") {
		t.Fatalf("turn after interrupt = %q", out)
	}

	// set-model: acknowledged, and the next turn's request uses it.
	if got := e.ok("set-model", id, "claude-opus-4-8"); got != "switched" {
		t.Fatalf("set-model = %q", got)
	}
	e.ok("run", id, "say exactly: on opus")
	if m := lastModel(e); m != "claude-opus-4-8" {
		t.Fatalf("model of the turn after set-model = %q", m)
	}
	e.okJSON(&st, "status", id)
	if st.Model != "claude-opus-4-8" {
		t.Fatalf("status model = %q", st.Model)
	}

	// close keeps the slot as dead; a send to it is a clear error.
	if got := e.ok("close", id); got != "closed" {
		t.Fatalf("close = %q", got)
	}
	e.okJSON(&st, "status", id)
	if st.Status != "dead" {
		t.Fatalf("status after close = %q", st.Status)
	}
	e.fails(1, "is dead", "send", id, "anyone there?")
	var l verbs.ListResult
	e.okJSON(&l, "list")
	if len(l.Agents) != 1 || l.Agents[0].AgentID != id || l.Agents[0].AgentStatus.Status != "dead" {
		t.Fatalf("list = %+v", l)
	}
	// Output of a dead agent still reads.
	e.okJSON(&o, "output", id, "--turn", "1")
	if !strings.HasPrefix(o.Text, "Hello from fakeapi") || o.Status != "dead" {
		t.Fatalf("output of dead agent = %+v", o)
	}

	// Reopening the dead id reuses the slot; turn numbers continue.
	if got := e.ok("open", "--id", id, e.work); got != id {
		t.Fatalf("reopen printed %q, want %q", got, id)
	}
	var sr verbs.SendResult
	e.okJSON(&sr, "send", id, "hello after reopen")
	if sr.Turn != 7 {
		t.Fatalf("first turn after reopen = %d, want 7", sr.Turn)
	}
	e.fails(1, "already open", "open", "--id", id, e.work)

	checkLog(t, e, id)
}

func lastModel(e *kenv) string {
	reqs := e.api.Requests()
	for i := len(reqs) - 1; i >= 0; i-- {
		if strings.Contains(reqs[i].LastUserText, "on opus") {
			return reqs[i].Model
		}
	}
	return ""
}

// checkLog reads the agent's JSONL log and checks the envelope rules: only
// authoritative events, seq strictly increasing, every kind of a tool turn
// present in the spec's order, and turn numbers on every event of a turn.
func checkLog(t *testing.T, e *kenv, id string) {
	t.Helper()
	path := e.paths().Agent(id).Events
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var last uint64
	kinds := map[int][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
		var r event.Record
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		if r.Seq <= last {
			t.Fatalf("seq %d after %d", r.Seq, last)
		}
		last = r.Seq
		if r.TS.IsZero() {
			t.Fatalf("record without ts: %s", line)
		}
		if !event.Authoritative(r.Kind, r.Data) {
			t.Fatalf("log holds a delta: %s", line)
		}
		if r.Kind != event.Status {
			kinds[r.Turn] = append(kinds[r.Turn], string(r.Kind))
		}
	}
	// Turn 2 is the tool turn.
	got := strings.Join(kinds[2], " ")
	want := "user_text turn_started assistant_text tool_use tool_use tool_result assistant_text usage result"
	if got != want {
		t.Errorf("turn 2 kinds in the log:\n got %s\nwant %s", got, want)
	}
	if !strings.Contains(string(raw), `"stopReason":"cancelled"`) {
		t.Error("the interrupted turn's result is not cancelled in the log")
	}
	// user_text carries its own turn's text.
	for _, line := range strings.Split(string(raw), "\n") {
		if gjson.Get(line, "kind").String() == "user_text" && gjson.Get(line, "turn").Int() == 2 {
			if txt := gjson.Get(line, "data.content.text").String(); txt != "please use a tool" {
				t.Errorf("turn 2 user_text = %q", txt)
			}
		}
	}
}

// The one-liner for scripts: open, run one turn, close. And TEXT "-" reads
// stdin.
func TestRunOneShotAndStdin(t *testing.T) {
	e := newEnv(t)
	r := e.kaimonIn(e.work, nil, "run", "-C", e.work, "say exactly: one shot")
	if r.code != 0 || r.stdout != "one shot\n" {
		t.Fatalf("run -C: %s", r)
	}
	var l verbs.ListResult
	e.okJSON(&l, "list")
	if len(l.Agents) != 1 || l.Agents[0].AgentStatus.Status != "dead" {
		t.Fatalf("after run -C the agent should be closed: %+v", l.Agents)
	}
	id := e.ok("open", ".")
	if r := e.kaimonIn(e.work, []byte("say exactly: from stdin"), "run", id, "-"); r.code != 0 || r.stdout != "from stdin\n" {
		t.Fatalf("run with stdin text: %s", r)
	}
	var st verbs.AgentStatus
	e.okJSON(&st, "status", id)
	if st.Cwd != e.work {
		t.Fatalf("open . in %s gave cwd %s", e.work, st.Cwd)
	}
	// A failed one-shot still closes its agent, and exits 3.
	r = e.kaimonIn(e.work, nil, "run", "-C", e.work, "please fail")
	if r.code != 3 {
		t.Fatalf("failed one-shot: %s", r)
	}
	e.okJSON(&l, "list")
	for _, a := range l.Agents {
		if a.AgentID != id && a.AgentStatus.Status != "dead" {
			t.Fatalf("one-shot agent left %s", a.AgentStatus.Status)
		}
	}
}
