package e2e

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/kaimon/kaimon/internal/event"
	"github.com/kaimon/kaimon/internal/testutil/agents"
)

var updateExample = flag.Bool("update-example", false, "record examples/hello.events.jsonl again, from the real claude CLI")

// exampleLog is the recorded session shipped in examples/.
func exampleLog() string {
	return filepath.Join(agents.RepoRoot(), "examples", "hello.events.jsonl")
}

// turnEvents is a log's turn events as kind, turn and data: seq, ts and
// agent_id dropped, and the status, user_text and turn_started a session
// makes itself left out.
func turnEvents(recs []event.Record) []event.Event {
	var out []event.Event
	for _, r := range recs {
		if r.Turn > 0 && r.Kind != event.Status && r.Kind != event.UserText && r.Kind != event.TurnStarted {
			out = append(out, event.Event{Kind: r.Kind, Turn: r.Turn, Data: r.Data})
		}
	}
	return out
}

func readLog(t *testing.T, path string) []event.Record {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []event.Record
	for _, line := range bytes.Split(b, []byte("\n")) {
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var r event.Record
		if err := json.Unmarshal(line, &r); err != nil {
			t.Fatalf("%s: %q: %v", path, line, err)
		}
		out = append(out, r)
	}
	return out
}

// The example replayed through the real daemon: the same authoritative
// events come out (in the agent's log) as went in, turn by turn, and a
// `kaimon tail` started before the sends shows assistant_text deltas that
// add up to the authoritative block that follows them.
func TestReplayExampleThroughDaemon(t *testing.T) {
	e := newEnv(t)
	in := turnEvents(readLog(t, exampleLog()))
	id := e.ok("open", e.work, "--model", "replay:"+exampleLog()+"?speed=0")
	tail := e.tail("agent:" + id)
	e.waitTopic("agent:"+id, 1)

	lastText := map[int]string{}
	for _, ev := range in {
		if ev.Kind == event.AssistantText {
			var d event.TextData
			if err := json.Unmarshal(ev.Data, &d); err != nil {
				t.Fatal(err)
			}
			lastText[ev.Turn] = d.Content.Text
		}
	}
	for n := 1; n <= 2; n++ {
		if got := e.ok("run", id, "not the recorded prompt"); got != lastText[n] {
			t.Fatalf("turn %d: run printed %q, want the recorded %q", n, got, lastText[n])
		}
	}
	out := turnEvents(e.logOf(id))
	if len(out) != len(in) {
		t.Fatalf("%d turn events out, %d recorded", len(out), len(in))
	}
	for i := range in {
		if out[i].Kind != in[i].Kind || out[i].Turn != in[i].Turn || !bytes.Equal(out[i].Data, in[i].Data) {
			t.Fatalf("event %d out: %s/%d %s; recorded: %s/%d %s", i, out[i].Kind, out[i].Turn, out[i].Data, in[i].Kind, in[i].Turn, in[i].Data)
		}
	}

	envs := tail.waitEnvelopes("both results", func(envs []event.Envelope) bool {
		k := 0
		for _, env := range envs {
			if env.Kind == event.Result {
				k++
			}
		}
		return k == 2
	})
	var acc string
	deltas, blocks := 0, 0
	for _, env := range envs {
		if env.Kind != event.AssistantText {
			continue
		}
		var d event.TextData
		if err := json.Unmarshal(env.Data, &d); err != nil {
			t.Fatal(err)
		}
		if d.Delta {
			acc += d.Content.Text
			deltas++
			continue
		}
		if acc != d.Content.Text {
			t.Fatalf("turn %d: deltas %q before the block %q", env.Turn, acc, d.Content.Text)
		}
		acc = ""
		blocks++
	}
	if deltas <= blocks || blocks != 3 {
		t.Fatalf("tail showed %d deltas for %d assistant_text blocks", deltas, blocks)
	}
	e.ok("close", id)
}

// A relative recording is found in the agent's cwd; a resumed agent goes
// on with the next recorded turn, renumbered; past the last one a turn
// fails saying so; a recording that is not there fails the open.
func TestReplayResume(t *testing.T) {
	e := newEnv(t)
	b, err := os.ReadFile(exampleLog())
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(e.work, "rec.events.jsonl"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	id := e.ok("open", e.work, "--model", "replay:rec.events.jsonl?speed=0")
	e.ok("run", id, "one")
	e.ok("close", id)
	e.ok("open", "--id", id, "--resume")
	var st struct {
		SessionID string `json:"session_id"`
	}
	e.okJSON(&st, "status", id)
	if st.SessionID != "replay@1" {
		t.Fatalf("resumed at %q", st.SessionID)
	}
	if got := e.ok("run", id, "two"); got != "Tool said: hi. Done." {
		t.Fatalf("the resumed agent's turn 2 printed %q", got)
	}
	r := e.kaimon("run", id, "three")
	if r.code != 3 || !strings.Contains(r.stderr, "turn 3 failed: the recording has no turn 3") {
		t.Fatalf("a turn past the recording: %s", r)
	}
	turns := map[int]bool{}
	for _, ev := range turnEvents(e.logOf(id)) {
		turns[ev.Turn] = true
	}
	if !turns[1] || !turns[2] || !turns[3] || len(turns) != 3 {
		t.Fatalf("the log's turns: %v", turns)
	}
	e.ok("close", id)
	r = e.kaimon("open", e.work, "--model", "replay:missing.events.jsonl")
	if r.code == 0 || !strings.Contains(r.stderr, "no recording at "+filepath.Join(e.work, "missing.events.jsonl")) {
		t.Fatalf("open of a missing recording: %s", r)
	}
}

// toolIDs are the fake model API's tool call ids, drawn at random.
var toolIDs = regexp.MustCompile(`toolu_fake[0-9a-f]+`)

// The example is what kaimon records today of the real claude CLI
// against the fake model API, a text turn and a tool turn (tool call ids
// aside); -update-example records it again, with the paths of this run
// made generic.
func TestReplayExampleIsCurrent(t *testing.T) {
	e := newEnv(t)
	id := e.ok("open", e.work, "--allow", "Bash")
	e.ok("run", id, "hello there")
	e.ok("run", id, "please use a tool")
	e.ok("close", id)
	raw, err := os.ReadFile(e.paths().Agent(id).Events)
	if err != nil {
		t.Fatal(err)
	}
	// Longest first: the project and claude's HOME are under e.home.
	for _, p := range [][2]string{{e.work, "/home/you/project"}, {filepath.Join(e.home, "claude-home"), "/home/you"}, {e.home, "/home/you/tmp"}} {
		raw = bytes.ReplaceAll(raw, []byte(p[0]), []byte(p[1]))
	}
	if *updateExample {
		if err := os.WriteFile(exampleLog(), raw, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("recorded %s", exampleLog())
		return
	}
	fresh := filepath.Join(t.TempDir(), "fresh.events.jsonl")
	if err := os.WriteFile(fresh, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	norm := func(evs []event.Event) string {
		var b strings.Builder
		for _, ev := range evs {
			b.WriteString(string(ev.Kind) + " " + toolIDs.ReplaceAllString(string(ev.Data), "toolu_fakeID") + "\n")
		}
		return b.String()
	}
	got, want := norm(turnEvents(readLog(t, fresh))), norm(turnEvents(readLog(t, exampleLog())))
	if got != want {
		t.Fatalf("the real CLI now records (go test ./internal/e2e -run TestReplayExampleIsCurrent -update-example to take it):\n%s\nthe example has:\n%s", got, want)
	}
}
