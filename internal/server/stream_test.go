package server

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/kaimon/kaimon/internal/apitype"
	"github.com/kaimon/kaimon/internal/bus"
	"github.com/kaimon/kaimon/internal/config"
	"github.com/kaimon/kaimon/internal/event"
	"github.com/kaimon/kaimon/internal/eventlog"
)

// A bad query of GET /v1/events is a 400 whose message says the accepted
// form, before any stream starts.
func TestStreamBadQuery(t *testing.T) {
	hub := bus.NewLocal(bus.Options{})
	defer hub.Close()
	c, _ := serveEvents(t, &fakeSvc{}, hub)
	for _, tc := range []struct{ query, want string }{
		{"channel=tool:x", "channel must be agent: (every agent) or agent:ID-PREFIX"},
		{"channel=agent:a%20b", "channel must be agent:"},
		{"since=a1", "is not ID:SEQ; the form is since=ID:SEQ,ID:SEQ"},
		{"since=a1:x", `"x" is not a seq (a number from 0); the form is since=ID:SEQ`},
		{"since=a1:-1", "is not a seq"},
		{"since=:3", "is not ID:SEQ"},
		{"since=a1:1,", `since item "" is not ID:SEQ`},
		{"since=a1:1,a1:2", "since names agent a1 twice"},
		{"since=a%2Fb:1", `since names "a/b", which is not an agent id; the form is since=ID:SEQ`},
		{"channel=agent:b&since=a1:1", "since names agent a1, which is not on channel agent:b"},
		{"follow=yes", `follow must be 1 or 0, not "yes"`},
		{"history=2", `history must be 1 or 0, not "2"`},
	} {
		resp, e := do(t, c, "GET", "/v1/events?"+tc.query, nil, 0)
		if resp.StatusCode != 400 || !strings.Contains(e.Message, tc.want) {
			t.Errorf("%s: %d %q, want 400 saying %q", tc.query, resp.StatusCode, e.Message, tc.want)
		}
	}
}

// since=ID:SEQ resumes that agent after SEQ from its log, then live; an
// agent not named starts at the end of its log (said in Kaimon-Since), or
// with history=1 at its start, and one that appears later at its start;
// every line is the bus's encoding of the envelope.
func TestStreamSince(t *testing.T) {
	hub := bus.NewLocal(bus.Options{})
	defer hub.Close()
	svc := &fakeSvc{}
	c, dir := serveEvents(t, svc, hub)
	env := func(agent string, seq uint64, kind event.Kind) *event.Envelope {
		return &event.Envelope{Kind: kind, Turn: 1, Data: json.RawMessage(`{"n":1}`), AgentID: agent, Seq: seq, TS: time.Now().UTC()}
	}
	for _, agent := range []string{"a1", "a2", "a3"} {
		w, _, err := eventlog.Open(config.Paths{CacheDir: dir}.Agent(agent).Events)
		if err != nil {
			t.Fatal(err)
		}
		for seq := uint64(1); seq <= 3; seq++ {
			r := env(agent, seq, event.TurnStarted).Record()
			if err := w.Append(&r); err != nil {
				t.Fatal(err)
			}
		}
		w.Close()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	read := func(query string, n int, publish ...*event.Envelope) ([]string, string) {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctx, "GET", "http://kaimon/v1/events?"+query, nil)
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("%s: status %d", query, resp.StatusCode)
		}
		hub.Publish(publish...) // the headers are here: the subscription is in force
		var got []string
		sc := bufio.NewScanner(resp.Body)
		for len(got) < n && sc.Scan() {
			var e event.Envelope
			if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
				t.Fatalf("%s: line %q: %v", query, sc.Bytes(), err)
			}
			want, _ := event.AppendEnvelope(nil, &e)
			if string(want) != sc.Text() {
				t.Errorf("%s: line %s\nis not the bus's encoding %s", query, sc.Bytes(), want)
			}
			got = append(got, fmt.Sprintf("%s:%d", e.AgentID, e.Seq))
		}
		return got, resp.Header.Get(apitype.StreamSinceHeader)
	}
	// a1 resumes after 1; a2, which the daemon has, starts at its end
	// (3); a3 appears after the request, and comes from its start.
	svc.agents = []string{"a1", "a2"}
	live := []*event.Envelope{env("a1", 3, event.TurnStarted), env("a2", 4, event.ToolInputDelta), env("a1", 5, event.ToolInputDelta), env("a3", 2, event.ToolInputDelta)}
	got, since := read("since=a1:1&follow=1", 6, live...)
	if want := "[a1:2 a1:3 a2:4 a1:5 a3:1 a3:2]"; fmt.Sprint(got) != want {
		t.Errorf("since=a1:1 read %v, want %s", got, want)
	}
	if want := "a1:1,a2:3"; since != want {
		t.Errorf("since=a1:1: %s: %s, want %s", apitype.StreamSinceHeader, since, want)
	}
	if got, _ := read("history=1&since=a2:2", 4); fmt.Sprint(got) != "[a1:1 a1:2 a1:3 a2:3]" {
		t.Errorf("history=1 read %v, want [a1:1 a1:2 a1:3 a2:3]", got)
	}
	got, since = read("channel=agent:a2&history=1&follow=1", 4, env("a1", 4, event.ToolInputDelta), env("a2", 4, event.ToolInputDelta))
	if fmt.Sprint(got) != "[a2:1 a2:2 a2:3 a2:4]" || since != "a2:0" {
		t.Errorf("channel=agent:a2 history=1 read %v from %s, want [a2:1 a2:2 a2:3 a2:4] from a2:0", got, since)
	}
}
