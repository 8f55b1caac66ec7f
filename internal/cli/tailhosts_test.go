package cli

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/fatih/color"

	"github.com/kaimon/kaimon/internal/event"
	"github.com/kaimon/kaimon/internal/follow"
)

// A merged stream's line is the daemon's bytes with the host's field in
// front and the agent id qualified: the same JSON as decoding, adding
// both and encoding again, for this machine's agents (host local, the id
// bare: it routes here) and a host's.
func TestTailHostWrite(t *testing.T) {
	env := &event.Envelope{Kind: event.AssistantText, Turn: 2, Data: json.RawMessage(`{"delta":true,"content":{"type":"text","text":"\"agent_id\":\"x\""}}`),
		AgentID: "a1", Seq: 7}
	e, err := follow.Encode(env)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ host, agent string }{{"local", "a1"}, {"h1", "h1/a1"}} {
		var b bytes.Buffer
		if err := newTailHost(tc.host, true).write(&b, e); err != nil {
			t.Fatal(err)
		}
		if !bytes.HasPrefix(b.Bytes(), []byte(`{"host":"`+tc.host+`","kind":`)) {
			t.Errorf("host %s: %s, want the host first", tc.host, b.Bytes())
		}
		var got struct {
			Host string `json:"host"`
			event.Envelope
		}
		if err := json.Unmarshal(b.Bytes(), &got); err != nil {
			t.Fatalf("host %s: %s: %v", tc.host, b.Bytes(), err)
		}
		if got.Host != tc.host || got.AgentID != tc.agent || got.Seq != 7 || got.Turn != 2 || !bytes.Equal(got.Data, env.Data) {
			t.Errorf("host %s: %s", tc.host, b.Bytes())
		}
		// Another shape (fields moved) is decoded and encoded again, with
		// the same result.
		moved := &follow.Envelope{Agent: "a1", Seq: 7, Kind: env.Kind, Turn: 2,
			Raw: []byte(`{"agent_id":"a1","seq":7,"kind":"assistant_text","turn":2,"data":` + string(env.Data) + `,"ts":"2026-01-01T00:00:00Z"}`)}
		b.Reset()
		if err := newTailHost(tc.host, true).write(&b, moved); err != nil {
			t.Fatal(err)
		}
		got.Host, got.AgentID = "", ""
		if err := json.Unmarshal(b.Bytes(), &got); err != nil || got.Host != tc.host || got.AgentID != tc.agent {
			t.Errorf("host %s, another shape: %s (%v)", tc.host, b.Bytes(), err)
		}
	}
}

// --pretty in a merged stream shows each line's host with its agent, this
// machine's as local/ID.
func TestTailHostsPretty(t *testing.T) {
	color.NoColor = true
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
