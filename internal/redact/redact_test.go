package redact

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/kaimon/kaimon/internal/apitype"
	"github.com/kaimon/kaimon/internal/event"
)

const key = "sk-ant-api03-0123456789abcdef"

func TestCredential(t *testing.T) {
	for name, want := range map[string]bool{
		"ANTHROPIC_API_KEY": true, "openai_api_key": true, "GITHUB_TOKEN": true, "Aws_Session_Token": true,
		"AWS_SECRET_ACCESS_KEY": true, "CLIENT_SECRET": true, "PGPASSWORD": true, "db_password_file": true,
		"KEY": false, "KEYBOARD": false, "PATH": false, "ANTHROPIC_BASE_URL": false, "TOKENIZER": false,
		"KAIMON_CLAUDE_BIN": false, "SECRETARY": false,
	} {
		if got := Credential(name); got != want {
			t.Errorf("Credential(%q) = %v, want %v", name, got, want)
		}
	}
}

func TestNew(t *testing.T) {
	if r := New([]string{"PATH=/bin:/usr/bin:/usr/local/bin", "SHORT_TOKEN=1234567", "ANTHROPIC_API_KEY="}); r != nil {
		t.Fatalf("no credential of %d bytes or more, yet a redactor: %+v", MinLen, r.secrets)
	}
	r := New([]string{"PATH=/bin", "ANTHROPIC_API_KEY=" + key, "COPY_TOKEN=" + key, "MY_PASSWORD=hunter2hunter2", "X_KEY=true"},
		Secret{Name: DoorToken, Value: "0123456789abcdef0123"})
	in := "key " + key + " pw hunter2hunter2 door 0123456789abcdef0123 x true path /bin"
	want := "key [redacted ANTHROPIC_API_KEY] pw [redacted MY_PASSWORD] door [redacted kaimon door token] x true path /bin"
	if got := r.String(in); got != want {
		t.Fatalf("String:\n got %q\nwant %q", got, want)
	}
	var nilR *Redactor
	if got := nilR.String(in); got != in {
		t.Fatalf("a nil redactor changed %q", got)
	}
}

// A secret that holds another is replaced whole, not as the other's
// marker with the rest of it left over.
func TestNewLongestFirst(t *testing.T) {
	r := New([]string{"A_TOKEN=abcdefgh", "B_TOKEN=abcdefgh-and-more"})
	if got, want := r.String("abcdefgh-and-more abcdefgh"), "[redacted B_TOKEN] [redacted A_TOKEN]"; got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
}

func TestJSONAndEvent(t *testing.T) {
	weird := `pa"ss\word` + "\n12"
	r := New([]string{"ANTHROPIC_API_KEY=" + key, "DB_PASSWORD=" + weird})
	ev := event.New(event.ToolResult, 3, event.ToolResultData{Update: event.ToolResultUpdate{ToolCallID: "t1", Status: "completed",
		Content: []any{map[string]any{"type": "text", "text": "ANTHROPIC_API_KEY=" + key + "\nDB_PASSWORD=" + weird + "\n"}}}})
	orig := string(ev.Data)
	got := r.Event(ev)
	if string(ev.Data) != orig {
		t.Fatal("Event wrote into the event's data")
	}
	var d event.ToolResultData
	if err := json.Unmarshal(got.Data, &d); err != nil {
		t.Fatalf("redacted data is not JSON: %v: %s", err, got.Data)
	}
	text := d.Update.Content[0].(map[string]any)["text"].(string)
	if want := "ANTHROPIC_API_KEY=[redacted ANTHROPIC_API_KEY]\nDB_PASSWORD=[redacted DB_PASSWORD]\n"; text != want {
		t.Fatalf("text %q, want %q", text, want)
	}
	if got.Kind != ev.Kind || got.Turn != 3 {
		t.Fatalf("kind or turn changed: %+v", got)
	}
	plain := event.New(event.ToolResult, 3, map[string]string{"text": "nothing here"})
	if out := r.Event(plain); &out.Data[0] != &plain.Data[0] {
		t.Fatal("an event without a secret was copied")
	}
}

func TestError(t *testing.T) {
	r := New([]string{"ANTHROPIC_API_KEY=" + key})
	base := errors.New("agent program not found")
	err := r.Error(fmt.Errorf("%w: its stderr ends:\nANTHROPIC_API_KEY=%s", base, key))
	if strings.Contains(err.Error(), key) || !strings.Contains(err.Error(), Marker("ANTHROPIC_API_KEY")) {
		t.Fatalf("error %q", err)
	}
	if !errors.Is(err, base) {
		t.Fatal("the redacted error lost what it wraps")
	}
	clean := errors.New("nothing secret")
	if r.Error(clean) != clean || r.Error(nil) != nil {
		t.Fatal("an error without a secret was wrapped")
	}
}

// streamed runs evs through a Stream of r and returns what it publishes.
func streamed(r *Redactor, evs ...event.Event) []event.Event {
	s := r.Stream()
	var out []event.Event
	for _, ev := range evs {
		out = append(out, s.Events(ev)...)
	}
	return out
}

func textDeltas(kind event.Kind, turn int, chunks ...string) []event.Event {
	var evs []event.Event
	for _, c := range chunks {
		evs = append(evs, event.NewText(kind, turn, true, c))
	}
	return evs
}

// joined is the text of the deltas of kind in evs, concatenated, and the
// text of its complete block.
func joined(t *testing.T, evs []event.Event, kind event.Kind) (deltas, block string) {
	t.Helper()
	for _, ev := range evs {
		if ev.Kind != kind {
			continue
		}
		if event.IsDelta(ev.Data) {
			deltas += event.TextOf(ev.Data)
		} else {
			block = event.TextOf(ev.Data)
		}
	}
	return deltas, block
}

// A key the model repeats streams in pieces: no delta has it whole, yet
// none of its pieces past the first character or so reaches a subscriber
// unredacted, and the deltas still join to the complete block.
func TestStreamSplitSecret(t *testing.T) {
	r := New([]string{"ANTHROPIC_API_KEY=" + key})
	full := "The key is " + key + ", see?"
	var chunks []string
	for i := 0; i < len(full); i += 3 {
		chunks = append(chunks, full[i:min(i+3, len(full))])
	}
	evs := append(textDeltas(event.AssistantText, 2, chunks...), event.NewText(event.AssistantText, 2, false, full),
		event.New(event.Result, 2, event.ResultData{StopReason: apitype.StopEndTurn}))
	out := streamed(r, evs...)
	deltas, block := joined(t, out, event.AssistantText)
	want := "The key is [redacted ANTHROPIC_API_KEY], see?"
	if deltas != want || block != want {
		t.Fatalf("deltas %q, block %q, want both %q", deltas, block, want)
	}
	// No piece of the key reaches a subscriber: every tail that might
	// begin it was held until it proved whole (or not).
	for _, ev := range out {
		text := event.TextOf(ev.Data)
		for i := 0; i+4 <= len(key); i++ {
			if strings.Contains(text, key[i:i+4]) {
				t.Fatalf("a delta holds %q of the key: %q", key[i:i+4], text)
			}
		}
		if ev.Turn != 2 {
			t.Fatalf("an event of turn %d: %s", ev.Turn, ev.Data)
		}
	}
	if last := out[len(out)-1]; last.Kind != event.Result {
		t.Fatalf("the result is not last: %s %s", last.Kind, last.Data)
	}
}

// A secret that begins with another is held until it is told apart, and
// the deltas add up to the block as String has it.
func TestStreamSecretBeginningWithAnother(t *testing.T) {
	r := New([]string{"A_TOKEN=abcdefgh", "B_TOKEN=abcdefgh-and-more"})
	for _, tail := range []string{"-and-more!", " and more"} {
		full := "x abcdefgh" + tail
		evs := append(textDeltas(event.AssistantText, 1, "x abc", "defgh", tail), event.NewText(event.AssistantText, 1, false, full))
		deltas, block := joined(t, streamed(r, evs...), event.AssistantText)
		if want := r.String(full); deltas != want || block != want {
			t.Errorf("deltas %q, block %q, want both %q", deltas, block, want)
		}
	}
}

// A tail that only looks like a secret's beginning is held until the
// next event, then goes out as it was, ahead of it: nothing is lost.
func TestStreamHeldTailFlushed(t *testing.T) {
	r := New([]string{"ANTHROPIC_API_KEY=" + key})
	evs := append(textDeltas(event.AssistantText, 1, "ask", " me; sk-an"), event.NewText(event.AssistantText, 1, false, "ask me; sk-an"),
		event.NewText(event.Thought, 1, true, "hm"))
	out := streamed(r, evs...)
	var got []string
	for _, ev := range out {
		got = append(got, fmt.Sprintf("%s %v %q", ev.Kind, event.IsDelta(ev.Data), event.TextOf(ev.Data)))
	}
	want := []string{
		`assistant_text true "a"`,       // "sk" might begin the key
		`assistant_text true "sk me; "`, // it did not; "sk-an" might
		`assistant_text true "sk-an"`,   // flushed before the block
		`assistant_text false "ask me; sk-an"`,
		`thought true "hm"`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("published:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// A Whole secret (the door token) holds nothing back: the deltas go
// out as they came, and one that has it whole is redacted.
func TestStreamWholeSecret(t *testing.T) {
	const tok = "d00r70ken0123456789abcdef"
	r := New(nil, Secret{Name: DoorToken, Value: tok, Whole: true})
	evs := textDeltas(event.AssistantText, 1, "a d", "00r7", " and "+tok+".")
	out := streamed(r, evs...)
	var got []string
	for _, ev := range out {
		got = append(got, event.TextOf(ev.Data))
	}
	if want := []string{"a d", "00r7", " and [redacted kaimon door token]."}; strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("deltas %q, want %q", got, want)
	}
	if &out[0].Data[0] != &evs[0].Data[0] {
		t.Fatal("a delta without a secret was rebuilt")
	}
}

// A tool's streamed input is JSON text: the secret is matched as JSON
// has it, per call.
func TestStreamToolInput(t *testing.T) {
	r := New([]string{"GITHUB_TOKEN=ghp_0123456789"})
	evs := []event.Event{
		event.NewToolInputDelta(1, "c1", `{"command":"curl -H 'auth: ghp_01`),
		event.NewToolInputDelta(1, "c1", `23456789' x"}`),
		event.New(event.ToolUse, 1, event.ToolUseData{Call: event.ToolCall{ToolCallID: "c1", RawInput: json.RawMessage(`{"command":"curl -H 'auth: ghp_0123456789' x"}`)}}),
	}
	var partial string
	var use []byte
	for _, ev := range streamed(r, evs...) {
		switch ev.Kind {
		case event.ToolInputDelta:
			var d event.ToolInputDeltaData
			mustJSON(t, ev.Data, &d)
			if d.ToolCallID != "c1" {
				t.Fatalf("delta of call %q", d.ToolCallID)
			}
			partial += d.PartialJSON
		case event.ToolUse:
			use = ev.Data
		}
	}
	if want := `{"command":"curl -H 'auth: [redacted GITHUB_TOKEN]' x"}`; partial != want {
		t.Fatalf("partial input %q, want %q", partial, want)
	}
	if strings.Contains(string(use), "ghp_0123456789") || !strings.Contains(string(use), "[redacted GITHUB_TOKEN]") {
		t.Fatalf("tool_use %s", use)
	}
}

// What the user sent is the agent's input: it is left as it is.
func TestStreamKeepsUserText(t *testing.T) {
	r := New([]string{"ANTHROPIC_API_KEY=" + key})
	ev := event.NewText(event.UserText, 1, false, "use "+key)
	if out := streamed(r, ev); len(out) != 1 || string(out[0].Data) != string(ev.Data) {
		t.Fatalf("user_text became %v", out)
	}
}

func mustJSON(t *testing.T, b []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%v: %s", err, b)
	}
}

// BenchmarkStreamDeltas is the price per streamed delta of an agent with
// a credential in its environment (most of what a turn publishes).
func BenchmarkStreamDeltas(b *testing.B) {
	s := New([]string{"ANTHROPIC_API_KEY=" + key, "GITHUB_TOKEN=ghp_0123456789"}).Stream()
	ev := event.NewText(event.AssistantText, 1, true, "a chunk of some forty bytes of plain text")
	b.ReportAllocs()
	for b.Loop() {
		_ = s.Events(ev)
	}
}
