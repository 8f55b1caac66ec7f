package server

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kaimon/kaimon/internal/bus"
	"github.com/kaimon/kaimon/internal/config"
	"github.com/kaimon/kaimon/internal/event"
	"github.com/kaimon/kaimon/internal/eventlog"
	"github.com/kaimon/kaimon/internal/verbs"
)

// fakeSvc answers the verbs the tests call and records which ran; any
// other panics (the nil embedded Service).
type fakeSvc struct {
	verbs.Service
	mu    sync.Mutex
	calls []string
	// agents is what List answers.
	agents []string
}

func (f *fakeSvc) called(name string) {
	f.mu.Lock()
	f.calls = append(f.calls, name)
	f.mu.Unlock()
}

func (f *fakeSvc) List(context.Context, *verbs.ListArgs) (*verbs.ListResult, error) {
	f.called("agent_list")
	res := &verbs.ListResult{Agents: []verbs.ListEntry{}}
	for _, id := range f.agents {
		res.Agents = append(res.Agents, verbs.ListEntry{AgentID: id})
	}
	return res, nil
}

func (f *fakeSvc) Status(_ context.Context, a *verbs.StatusArgs) (*verbs.AgentStatus, error) {
	f.called("agent_status")
	return &verbs.AgentStatus{Status: "idle"}, nil
}

func (f *fakeSvc) Output(_ context.Context, a *verbs.OutputArgs) (*verbs.OutputResult, error) {
	f.called("agent_output")
	return &verbs.OutputResult{AgentID: a.AgentID}, nil
}

func (f *fakeSvc) Diff(_ context.Context, a *verbs.DiffArgs) (*verbs.DiffResult, error) {
	f.called("agent_diff")
	return &verbs.DiffResult{AgentID: a.AgentID}, nil
}

func (f *fakeSvc) Close(_ context.Context, a *verbs.CloseArgs) (*verbs.CloseResult, error) {
	f.called("agent_close")
	return &verbs.CloseResult{Closed: true}, nil
}

func (f *fakeSvc) Send(_ context.Context, a *verbs.SendArgs) (*verbs.SendResult, error) {
	f.called("agent_send")
	return &verbs.SendResult{Turn: 1}, nil
}

// serve runs a Server for svc on a socket in a temp dir and returns a
// client of it.
func serve(t *testing.T, svc verbs.Service) *http.Client {
	t.Helper()
	c, _ := serveEvents(t, svc, nil)
	return c
}

// serveEvents is serve with an event hub (may be nil); it returns the
// cache dir too, where the agents' logs are.
func serveEvents(t testing.TB, svc verbs.Service, events *bus.Local) (*http.Client, string) {
	t.Helper()
	dir := t.TempDir()
	sock := filepath.Join(dir, "s", "agentd.sock")
	ln, err := Listen(filepath.Dir(sock), sock)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{Svc: svc, Socket: sock, CacheDir: dir, Events: events}
	done := make(chan struct{})
	go func() { s.Serve(ctx, ln); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", sock)
	}}}, dir
}

func do(t *testing.T, c *http.Client, method, path string, body io.Reader, length int64) (*http.Response, verbs.Error) {
	t.Helper()
	req, err := http.NewRequest(method, "http://kaimon"+path, body)
	if err != nil {
		t.Fatal(err)
	}
	if length != 0 {
		req.ContentLength = length
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	var e verbs.Error
	json.NewDecoder(resp.Body).Decode(&e)
	return resp, e
}

// Read-only verbs take GET and POST; every other verb answers GET with
// 405 and Allow: POST, and does not run: GET /v1/agent_close?agent_id=X
// closed the agent.
func TestMethods(t *testing.T) {
	svc := &fakeSvc{}
	c := serve(t, svc)
	for _, v := range verbs.All {
		q := ""
		if len(v.Args) > 0 && v.Args[0].Name == "agent_id" {
			q = "?agent_id=x"
		}
		resp, e := do(t, c, "GET", v.Route()+q, nil, 0)
		if v.ReadOnly {
			if resp.StatusCode == http.StatusMethodNotAllowed {
				t.Errorf("GET %s: 405, but it is read-only", v.Name)
			}
			continue
		}
		if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != "POST" || e.Code != verbs.CodeMethod || !strings.Contains(e.Message, "use POST") {
			t.Errorf("GET %s: status %d, Allow %q, %+v", v.Name, resp.StatusCode, resp.Header.Get("Allow"), e)
		}
	}
	resp, _ := do(t, c, "PUT", "/v1/agent_list", strings.NewReader("{}"), 0)
	if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != "GET, POST" {
		t.Errorf("PUT agent_list: status %d, Allow %q", resp.StatusCode, resp.Header.Get("Allow"))
	}
	if resp, e := do(t, c, "POST", "/v1/agent_close", strings.NewReader(`{"agent_id":"x"}`), 0); resp.StatusCode != 200 {
		t.Errorf("POST agent_close: %d %+v", resp.StatusCode, e)
	}
	svc.mu.Lock()
	defer svc.mu.Unlock()
	if strings.Join(svc.calls, " ") != "agent_output agent_status agent_list agent_diff agent_close" {
		t.Errorf("verbs that ran: %v", svc.calls)
	}
}

// zeros is an endless body.
type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = ' '
	}
	return len(p), nil
}

// A body over verbs.MaxBody is 413 naming the limit, whether its
// Content-Length says so or it comes chunked; it was cut at 16 MiB and
// answered "unexpected end of JSON input".
func TestOversizedBody(t *testing.T) {
	svc := &fakeSvc{}
	c := serve(t, svc)
	for name, length := range map[string]int64{"content-length": 50 << 20, "chunked": -1} {
		resp, e := do(t, c, "POST", "/v1/agent_send", io.LimitReader(zeros{}, 50<<20), length)
		if resp.StatusCode != http.StatusRequestEntityTooLarge || e.Code != verbs.CodeTooLarge || !strings.Contains(e.Message, "16 MiB") {
			t.Errorf("%s: status %d %+v", name, resp.StatusCode, e)
		}
	}
	// Just under the limit is read and decoded.
	body := `{"agent_id":"x","text":"` + strings.Repeat("a", verbs.MaxBody-40) + `"}`
	if resp, e := do(t, c, "POST", "/v1/agent_send", strings.NewReader(body), 0); resp.StatusCode != 200 {
		t.Errorf("a body of %d bytes: %d %+v", len(body), resp.StatusCode, e)
	}
}

// since=latest follows from the agent's end as it was at the request: none
// of the log, then what is published after (a stale seq is not repeated).
func TestEventsSinceLatest(t *testing.T) {
	hub := bus.NewLocal(bus.Options{})
	defer hub.Close()
	c, dir := serveEvents(t, &fakeSvc{}, hub)
	w, _, err := eventlog.Open(config.Paths{CacheDir: dir}.Agent("a1").Events)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	env := func(seq uint64) *event.Envelope {
		return &event.Envelope{Kind: event.TurnStarted, Turn: 1, Data: json.RawMessage(`{}`), AgentID: "a1", Seq: seq, TS: time.Now().UTC()}
	}
	for seq := uint64(1); seq <= 3; seq++ {
		r := env(seq).Record()
		if err := w.Append(&r); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	read := func(query string, publish ...uint64) []uint64 {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctx, "GET", "http://kaimon/v1/agents/a1/events?"+query, nil)
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("%s: status %d", query, resp.StatusCode)
		}
		// The headers are here: the subscription is in force.
		for _, seq := range publish {
			hub.Publish(env(seq))
		}
		var seqs []uint64
		dec := json.NewDecoder(resp.Body)
		for len(seqs) < 3 {
			var e event.Envelope
			if err := dec.Decode(&e); err != nil {
				t.Fatalf("%s: after %v: %v", query, seqs, err)
			}
			seqs = append(seqs, e.Seq)
			if e.Seq == 6 {
				break
			}
		}
		return seqs
	}
	if got := read("since=latest&follow=1", 2, 3, 4, 5, 6); fmt.Sprint(got) != "[4 5 6]" {
		t.Fatalf("since=latest read seqs %v, want [4 5 6]", got)
	}
	if got := read("since=0&follow=1"); fmt.Sprint(got) != "[1 2 3]" {
		t.Fatalf("since=0 read seqs %v, want the log's [1 2 3]", got)
	}
	if resp, e := do(t, c, "GET", "/v1/agents/a1/events?since=last", nil, 0); resp.StatusCode != 400 || !strings.Contains(e.Message, "latest") {
		t.Fatalf("since=last: %d %+v", resp.StatusCode, e)
	}
}
