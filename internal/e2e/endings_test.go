package e2e

import (
	"strconv"
	"strings"
	"testing"
)

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
