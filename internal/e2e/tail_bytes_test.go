package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"syscall"
	"testing"

	"github.com/kaimon/kaimon/internal/event"
)

// A kaimon tail stopped for a whole burst (20000 deltas, some 8 MB: more
// envelopes than the bus's queues held when they were counted in
// messages, well within their bytes now) receives every delta of it once
// it goes on; what it prints is the bus's bytes as they came, each line
// what decoding and encoding it again gives (tail's output before it
// passed bytes through); and a replay prints the log's records in that
// same encoding.
func TestTailAbsorbsBurstAndPassesBytes(t *testing.T) {
	const chunks = 20000
	e := newEnv(t)
	id := e.ok("open", e.work)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	raw := startRawSub(t, ctx, e)
	tail := e.tail("agent:" + id)
	e.waitTopic("agent:"+id, 1)
	tail.signal(syscall.SIGSTOP)
	e.ok("run", id, fmt.Sprintf("stream %d chunks", chunks))
	tail.signal(syscall.SIGCONT)
	envs := tail.waitEnvelopes("the turn's result", func(envs []event.Envelope) bool { return hasKind(envs, id, event.Result) })
	if n := countDeltas(envs); n < chunks {
		t.Fatalf("the stopped tail received %d deltas of a burst of %d; stderr:\n%s", n, chunks, tail.stderr.String())
	}
	if strings.Contains(tail.stderr.String(), "lost") {
		t.Fatalf("tail reported a loss: %s", tail.stderr.String())
	}

	// The bus's bodies, as the raw subscriber got them.
	bus, _ := raw.untilFor(t, 0, func([]event.Envelope) bool { return true })
	raw.mu.Lock()
	bodies := raw.bodies[:len(bus)]
	raw.mu.Unlock()
	tail.mu.Lock()
	lines := append([]string{}, tail.lines...)
	tail.mu.Unlock()
	var mine [][]byte
	for i, env := range bus {
		if env.AgentID == id {
			mine = append(mine, bodies[i])
		}
	}
	if len(mine) < len(lines) {
		t.Fatalf("tail printed %d lines, the bus carried %d envelopes of the agent", len(lines), len(mine))
	}
	for i, l := range lines {
		if !bytes.Equal([]byte(l), mine[i]) {
			t.Fatalf("tail's line %d:\n%s\nthe bus's body:\n%s", i, l, mine[i])
		}
		var env event.Envelope
		if err := json.Unmarshal([]byte(l), &env); err != nil {
			t.Fatal(err)
		}
		if again, _ := event.Marshal(&env); string(again) != l {
			t.Fatalf("line %d decoded and encoded again:\n%s\nprinted:\n%s", i, again, l)
		}
	}

	// A replay: the log's records, as tail encoded them before.
	r := e.kaimon("tail", "agent:"+id, "--from-start", "--until-result")
	if r.code != 0 {
		t.Fatalf("replay: %s", r)
	}
	recs := e.logOf(id)
	got := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	// It ends at the result: the idle status after it is not printed.
	if len(got) > len(recs) || recs[len(got)-1].Kind != event.Result {
		t.Fatalf("the replay printed %d lines for %d records, not ending at the result", len(got), len(recs))
	}
	for i := range got {
		env := recs[i].Envelope(id)
		want, _ := event.Marshal(&env)
		if got[i] != string(want) {
			t.Fatalf("replayed line %d:\n%s\nwant\n%s", i, got[i], want)
		}
	}
}
