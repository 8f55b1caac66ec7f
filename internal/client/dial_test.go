package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/kaimon/kaimon/internal/bus"
	"github.com/kaimon/kaimon/internal/client"
	"github.com/kaimon/kaimon/internal/config"
	"github.com/kaimon/kaimon/internal/event"
	"github.com/kaimon/kaimon/internal/eventlog"
	"github.com/kaimon/kaimon/internal/server"
	"github.com/kaimon/kaimon/internal/server/servertest"
	"github.com/kaimon/kaimon/internal/verbs"
)

// pipeListener hands an http.Server the far ends of the pipes a client's
// Dial makes: a connection that is no socket, as the child's stdin and
// stdout of `ssh HOST kaimon dial-stdio` will be.
type pipeListener struct {
	conns chan net.Conn
	once  sync.Once
	done  chan struct{}
}

func newPipeListener() *pipeListener {
	return &pipeListener{conns: make(chan net.Conn), done: make(chan struct{})}
}

func (l *pipeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *pipeListener) Close() error   { l.once.Do(func() { close(l.done) }); return nil }
func (l *pipeListener) Addr() net.Addr { return pipeAddr{} }

// dial is a Client.Dial: one end of a new pipe, the other to the server.
func (l *pipeListener) dial(ctx context.Context) (net.Conn, error) {
	near, far := net.Pipe()
	select {
	case l.conns <- far:
		return near, nil
	case <-l.done:
		return nil, fmt.Errorf("dial pipe: %w", syscall.ECONNREFUSED)
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

type pipeAddr struct{}

func (pipeAddr) Network() string { return "pipe" }
func (pipeAddr) String() string  { return "pipe" }

// A client whose Dial returns one end of a net.Pipe calls the verbs, gets
// their errors typed, asks daemon status and follows an event stream (the
// log, then live envelopes) through it, with the real server routes at the
// other end: nothing in the client needs a unix socket.
func TestDialOverAPipe(t *testing.T) {
	dir := t.TempDir()
	hub := bus.NewLocal(bus.Options{})
	defer hub.Close()
	fake := (&servertest.Fake{}).
		Returns("agent_list", &verbs.ListResult{Agents: []verbs.ListEntry{{AgentID: "a1", AgentStatus: verbs.AgentStatus{Status: "idle"}}}}, nil).
		Returns("agent_status", &verbs.AgentStatus{Status: "idle"}, nil).
		Returns("agent_run", nil, &verbs.Error{Code: verbs.CodeTurnFailed, Message: "agent a1 turn 1 failed", Text: "partial"})
	s := &server.Server{Svc: fake, CacheDir: dir, Events: hub, Env: config.EnvFingerprints(os.Environ())}
	ln := newPipeListener()
	hs := &http.Server{Handler: s.Handler()}
	served := make(chan struct{})
	go func() { hs.Serve(ln); close(served) }()
	t.Cleanup(func() { hs.Close(); <-served })

	var dials atomic.Int32
	cl := &client.Client{Addr: "a pipe", Dial: func(ctx context.Context) (net.Conn, error) {
		dials.Add(1)
		return ln.dial(ctx)
	}}
	t.Cleanup(cl.CloseIdleConnections)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	if res, err := cl.List(ctx, &verbs.ListArgs{}); err != nil || len(res.Agents) != 1 || res.Agents[0].AgentID != "a1" {
		t.Fatalf("list over the pipe: %+v, %v", res, err)
	}
	_, err := cl.Run(ctx, &verbs.RunArgs{AgentID: "a1", Text: "hi", Timeout: 5})
	var ve *verbs.Error
	if !errors.As(err, &ve) || ve.Code != verbs.CodeTurnFailed || ve.Text != "partial" || ve.Message != "agent a1 turn 1 failed" {
		t.Fatalf("run's error over the pipe: %#v", err)
	}
	if calls := fake.Calls(); len(calls) != 2 || calls[1].Verb != "agent_run" || *calls[1].Args.(*verbs.RunArgs) != (verbs.RunArgs{AgentID: "a1", Text: "hi", Timeout: 5}) {
		t.Fatalf("the service took %+v", calls)
	}
	if st, err := cl.Ping(ctx); err != nil || st.PID != os.Getpid() {
		t.Fatalf("daemon status over the pipe: %+v, %v", st, err)
	}

	// A stream: the log's two envelopes, then one published live.
	lw, _, err := eventlog.Open(config.Paths{CacheDir: dir}.Agent("a1").Events)
	if err != nil {
		t.Fatal(err)
	}
	defer lw.Close()
	env := func(seq uint64) *event.Envelope {
		return &event.Envelope{Kind: event.TurnStarted, Turn: 1, Data: json.RawMessage(`{}`), AgentID: "a1", Seq: seq, TS: time.Now().UTC()}
	}
	for seq := uint64(1); seq <= 2; seq++ {
		r := env(seq).Record()
		if err := lw.Append(&r); err != nil {
			t.Fatal(err)
		}
	}
	w, err := cl.Events(ctx, "a1", 0, true)
	if err != nil {
		t.Fatalf("events over the pipe: %v", err)
	}
	defer w.Close()
	hub.Publish(env(3)) // the subscription is in force once Events returns
	for want := uint64(1); want <= 3; want++ {
		e, err := w.Next()
		if err != nil || e.Seq != want || e.AgentID != "a1" {
			t.Fatalf("stream: want seq %d, got %+v, %v", want, e, err)
		}
	}
	// A verb while the stream is open takes a pipe of its own.
	if _, err := cl.Status(ctx, &verbs.StatusArgs{AgentID: "a1"}); err != nil {
		t.Fatalf("status beside the stream: %v", err)
	}
	if dials.Load() < 2 {
		t.Fatalf("%d dials for a stream and a verb beside it", dials.Load())
	}
}

// A daemon Dial cannot reach is named by Addr, and is never started here:
// it is not this machine's (a start would fail on DaemonBin instead).
func TestDialRefusedIsDownNotStarted(t *testing.T) {
	cl := &client.Client{Addr: "ssh build1", DaemonBin: "/nonexistent/kaimon-agentd",
		Dial: func(context.Context) (net.Conn, error) {
			return nil, fmt.Errorf("dial: %w", syscall.ECONNREFUSED)
		}}
	_, err := cl.List(context.Background(), &verbs.ListArgs{})
	var down *client.DaemonDownError
	if !errors.As(err, &down) || down.Where != "ssh build1" {
		t.Fatalf("list through a refused Dial: %v", err)
	}
	want := "kaimon-agentd is not running (ssh build1): dial: connection refused; is kaimon-agentd running there?"
	if err.Error() != want {
		t.Fatalf("error %q, want %q", err, want)
	}
	// Nor does an explicit start start one here.
	if err := cl.StartDaemon(context.Background()); err == nil || !strings.Contains(err.Error(), "ssh build1") || strings.Contains(err.Error(), "nonexistent") {
		t.Fatalf("StartDaemon through Dial: %v", err)
	}
}

// servertest.New serves a Fake on a socket with the real routes: the
// client's zero transport reaches it, and the Fake records what it took.
func TestServertest(t *testing.T) {
	fake := (&servertest.Fake{}).Returns("open", &verbs.OpenResult{AgentID: "x1"}, nil)
	cl := servertest.New(t, fake)
	res, err := cl.Open(context.Background(), &verbs.OpenArgs{Cwd: "/tmp", Model: "sonnet"})
	if err != nil || res.AgentID != "x1" {
		t.Fatalf("open: %+v, %v", res, err)
	}
	calls := fake.Calls()
	if len(calls) != 1 || calls[0].Verb != "agent_open" || calls[0].Args.(*verbs.OpenArgs).Model != "sonnet" {
		t.Fatalf("the fake took %+v", calls)
	}
}
