package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/kaimon/kaimon/internal/event"
	"github.com/kaimon/kaimon/internal/follow"
)

// A merged stream's line is the envelope with the host's field in front
// and the agent id qualified (follow's tests try the shapes): this
// machine's agents with host local and the id bare (it routes here), a
// host's qualified, one line each.
func TestTailHostWrite(t *testing.T) {
	t.Parallel()
	env := &event.Envelope{Kind: event.AssistantText, Turn: 2, Data: json.RawMessage(`{"delta":true,"content":{"type":"text","text":"\"agent_id\":\"x\""}}`),
		AgentID: "a1", Seq: 7}
	e, err := follow.Encode(env)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	p := newTailPrinter(&tailOptions{Channels: []string{"agent:"}, AllHosts: true, Out: &b})
	for _, host := range []string{"local", "h1"} {
		if err := p.emitFrom(newTailHost(host, true), e); err != nil {
			t.Fatal(err)
		}
	}
	p.flush()
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	for i, tc := range []struct{ host, agent string }{{"local", "a1"}, {"h1", "h1/a1"}} {
		if i >= len(lines) || !strings.HasPrefix(lines[i], `{"host":"`+tc.host+`","kind":`) {
			t.Fatalf("host %s: %q, want the host's field first", tc.host, b.String())
		}
		var got struct {
			Host string `json:"host"`
			event.Envelope
		}
		if i >= len(lines) || json.Unmarshal([]byte(lines[i]), &got) != nil {
			t.Fatalf("output %q: no line %d", b.String(), i)
		}
		if got.Host != tc.host || got.AgentID != tc.agent || got.Seq != 7 || got.Turn != 2 || !bytes.Equal(got.Data, env.Data) {
			t.Errorf("host %s: %s", tc.host, lines[i])
		}
	}
}

// Output that fails (a closed pipe) is the tail's error, not dropped.
func TestTailHostWriteError(t *testing.T) {
	t.Parallel()
	e, err := follow.Encode(&event.Envelope{Kind: event.Status, Data: json.RawMessage(`{"status":"idle"}`), AgentID: "a1", Seq: 1})
	if err != nil {
		t.Fatal(err)
	}
	p := newTailPrinter(&tailOptions{Channels: []string{"agent:"}, AllHosts: true, Out: failingWriter{}})
	h := newTailHost("h1", true)
	for range 10_000 { // past the printer's buffer
		if err = p.emitFrom(h, e); err != nil {
			break
		}
	}
	if !errors.Is(err, errBrokenPipe) {
		t.Fatalf("writing to a broken output: %v, want its error", err)
	}
}

var errBrokenPipe = errors.New("broken pipe")

type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errBrokenPipe }

// --pretty in a merged stream shows each line's host with its agent, this
// machine's as local/ID.
func TestTailHostsPretty(t *testing.T) {
	t.Parallel() // a printer without IOStreams renders with the plain palette: no global
	var out bytes.Buffer
	p := newTailPrinter(&tailOptions{Channels: []string{"agent:"}, Pretty: true, AllHosts: true, Out: &out})
	for _, host := range []string{"h1", "local"} {
		e, err := follow.Encode(turnEnvelopes("a1", 1)[2])
		if err != nil {
			t.Fatal(err)
		}
		if err := p.emitFrom(newTailHost(host, true), e); err != nil {
			t.Fatal(err)
		}
	}
	if want := "[h1/a1] ── turn 1 ──\n[local/a1] ── turn 1 ──\n"; out.String() != want {
		t.Fatalf("pretty, merged: %q, want %q", out.String(), want)
	}
}
