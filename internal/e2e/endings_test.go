package e2e

import (
	"encoding/json"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/kaimon/kaimon/internal/event"
	"github.com/kaimon/kaimon/internal/testutil/agents"
	"github.com/kaimon/kaimon/internal/verbs"
)

// standin is the misbehaving claude of testdata/standin-claude.sh, doing
// what mode says (hangup, mute) on the first user message.
func standin(t *testing.T, mode string) *kenv {
	return newEnv(t, "KAIMON_CLAUDE_BIN", filepath.Join(agents.RepoRoot(), "internal", "e2e", "testdata", "standin-claude.sh"),
		"KAIMON_STANDIN", mode)
}

// errorsOf is the messages of the error events in the agent's log.
func (e *kenv) errorsOf(id string) []string {
	var out []string
	for _, r := range e.logOf(id) {
		if r.Kind == event.Error {
			var d struct{ Message string }
			mustJSON(e.t.(*testing.T), r.Data, &d)
			out = append(out, d.Message)
		}
	}
	return out
}

// An interrupt the agent does not acknowledge is an error: exit 1, an
// error event in the log, and a hint to close the agent. With no turn in
// flight it is still "nothing to interrupt", exit 0.
func TestInterruptNotAcknowledged(t *testing.T) {
	e := standin(t, "mute")
	id := e.ok("open", e.work)
	if out := e.ok("interrupt", id); out != "nothing to interrupt" {
		t.Fatalf("interrupt with no turn: %q", out)
	}
	e.ok("send", id, "hello")
	r := e.fails(1, "interrupt failed: claude did not acknowledge the interrupt", "interrupt", id)
	if !strings.Contains(r.stderr, "kaimon close "+id) {
		t.Fatalf("the failed interrupt does not say what to do: %s", r)
	}
	// --json: the API's error object, with its code.
	r = e.kaimon("interrupt", id, "--json")
	var ve verbs.Error
	if r.code != 1 || json.Unmarshal([]byte(r.stderr), &ve) != nil || ve.Code != verbs.CodeUnavailable {
		t.Fatalf("interrupt --json: %s", r)
	}
	n := 0
	for _, msg := range e.errorsOf(id) {
		if strings.HasPrefix(msg, "interrupt failed: claude did not acknowledge") {
			n++
		}
	}
	if n != 2 {
		t.Fatalf("the log has %d interrupt error events, want 2: %q", n, e.errorsOf(id))
	}
	var st verbs.AgentStatus
	if e.okJSON(&st, "status", id); st.Status != "working" {
		t.Fatalf("after the failed interrupts the agent is %s, want working (its turn runs on)", st.Status)
	}
	e.ok("close", id)
}

// An agent that closes its stdout but lives on can never end its turn: it
// is stopped (its whole group), the turn fails and the agent is dead.
func TestAgentClosesStdout(t *testing.T) {
	e := standin(t, "hangup")
	id := e.ok("open", e.work)
	pids := e.agentPIDs(t)
	if len(pids) != 1 {
		t.Fatalf("pids.json: %v", pids)
	}
	e.fails(3, "closed its stdout but kept running", "run", id, "hello", "--timeout", "60s")
	var st verbs.AgentStatus
	if e.okJSON(&st, "status", id); st.Status != "dead" {
		t.Fatalf("status %s, want dead", st.Status)
	}
	if pids[0].Alive() {
		t.Fatalf("the stand-in (pid %d) still runs", pids[0].PID)
	}
	var kinds []string
	log := e.logOf(id)
	for _, r := range log {
		kinds = append(kinds, string(r.Kind))
	}
	last := log[len(log)-1]
	if got := strings.Join(kinds, " "); !strings.Contains(got, "turn_started error result") || last.Kind != event.Status || !strings.Contains(string(last.Data), `"dead"`) {
		t.Fatalf("the log: %s, ending %s", got, last.Data)
	}
	if msgs := e.errorsOf(id); len(msgs) != 1 || !strings.HasPrefix(msgs[0], "claude closed its stdout but kept running, so kaimon stopped it") {
		t.Fatalf("error events: %q", msgs)
	}
}

// tail --until-result ends at once when its result cannot come: 1 for an
// agent nobody opened, 3 for a dead one whose log lacks the result, and
// when the agent dies while tail waits. A replay of an unknown agent is an
// error unless --wait.
func TestTailEndsPromptly(t *testing.T) {
	e := newEnv(t)
	e.fails(1, "no agent nosuch: see `kaimon list`", "tail", "agent:nosuch", "--until-result")
	e.fails(1, "give --wait to wait for it", "tail", "agent:nosuch", "--from-start")
	e.fails(1, "no agent nosuch", "tail", "agent:nosuch", "--since", "4", "--kinds", "result")

	id := e.ok("open", e.work)
	e.ok("run", id, "hello there")
	// Waiting live for a turn not sent yet, when the agent is closed.
	waiting := e.tail("agent:"+id, "--turn", "2", "--until-result")
	e.waitTopic("agent:"+id, 1)
	e.ok("close", id)
	if code := waiting.wait(); code != 3 || !strings.Contains(waiting.stderr.String(), "its last turn was 1, turn 2 will never come") {
		t.Fatalf("tail waiting on a turn of an agent closed meanwhile exited %d (want 3): %s", code, waiting.stderr.String())
	}

	// The agent is dead now.
	e.fails(3, "is dead: its last turn was 1, turn 2 will never come", "tail", "agent:"+id, "--from-start", "--turn", "2", "--until-result")
	e.fails(3, "add --from-start", "tail", "agent:"+id, "--turn", "1", "--until-result")
	r := e.kaimon("tail", "agent:"+id, "--from-start", "--turn", "1", "--until-result", "--kinds", "result")
	if r.code != 0 || !strings.Contains(r.stdout, `"kind":"result","turn":1`) {
		t.Fatalf("the replayed result of a dead agent's turn: %s", r)
	}
	// Past the result, the log has none for it.
	seq := e.logOf(id)[len(e.logOf(id))-1].Seq
	e.fails(3, "turn 1 has no result after seq", "tail", "agent:"+id, "--since", strconv.FormatUint(seq, 10), "--turn", "1", "--until-result")
}
