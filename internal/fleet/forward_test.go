package fleet

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/kaimon/kaimon/internal/apitype"
	"github.com/kaimon/kaimon/internal/verbs"
	"github.com/kaimon/kaimon/internal/version"
)

// stdioFake is a transport whose dial-stdio is a command that prints
// via-stdio and exits, so a test reads which way a Dial went.
func stdioFake(t *testing.T) *SSH {
	tgt, err := ParseURL("ssh://u@h.invalid")
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "kf")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return &SSH{Name: "h", Target: tgt, ControlDir: dir, Command: "printf via-stdio; :"}
}

// listenForward listens where the master's forwarding would, serving each
// connection with serve.
func listenForward(t *testing.T, s *SSH, serve func(net.Conn)) {
	ln, err := net.Listen("unix", s.forwardPath())
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	t.Cleanup(func() { ln.Close(); <-done })
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			serve(c)
			c.Close()
		}
	}()
}

func readAll(t *testing.T, c net.Conn) string {
	t.Helper()
	defer c.Close()
	b, err := io.ReadAll(c)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// With no forwarding, a Dial is dial-stdio's.
func TestDialWithoutForward(t *testing.T) {
	s := stdioFake(t)
	c, err := s.Dial(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, c); got != "via-stdio" {
		t.Fatalf("read %q, want dial-stdio's", got)
	}
}

// A forwarding that closes the connection unanswered (the master does so
// when sshd denies the channel, or the daemon's socket is gone) is not
// final: the Dial falls back to dial-stdio, and the process's later Dials
// go there straight.
func TestDialForwardClosedFallsBack(t *testing.T) {
	s := stdioFake(t)
	var accepted atomic.Int32
	listenForward(t, s, func(net.Conn) { accepted.Add(1) })
	for range 2 {
		c, err := s.Dial(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if got := readAll(t, c); got != "via-stdio" {
			t.Fatalf("read %q, want dial-stdio's", got)
		}
	}
	if accepted.Load() != 1 || !s.noForward.Load() || s.viaForward.Load() {
		t.Fatalf("the forwarding was tried %d times (want once), noForward %v, viaForward %v", accepted.Load(), s.noForward.Load(), s.viaForward.Load())
	}
}

// A forwarding whose daemon answers the probe is the connection, left at
// the start of the next exchange.
func TestDialForwardAnswered(t *testing.T) {
	s := stdioFake(t)
	listenForward(t, s, func(c net.Conn) {
		r := bufio.NewReader(c)
		req, err := http.ReadRequest(r)
		if err != nil || req.Method != "GET" || req.URL.Path != "/v1/daemon" {
			t.Errorf("the probe: %+v %v", req, err)
			return
		}
		io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}")
		// The next exchange: a byte asked, a word answered.
		if _, err := r.ReadByte(); err == nil {
			io.WriteString(c, "forwarded")
		}
	})
	c, err := s.Dial(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write([]byte("?")); err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, c); got != "forwarded" {
		t.Fatalf("read %q after the probe, want the forwarding's next answer", got)
	}
	if !s.viaForward.Load() {
		t.Error("viaForward is not set: Forward would ask the master again")
	}
}

// kube:// has no master, so no forwarding.
func TestKubeHasNoForward(t *testing.T) {
	tgt, err := ParseURL("kube://p")
	if err != nil {
		t.Fatal(err)
	}
	s := &SSH{Target: tgt, ControlDir: t.TempDir()}
	if p := s.forwardPath(); p != "" {
		t.Errorf("kube://p's forwarding: %q", p)
	}
}

// A warm first exchange is the forwarding's probe itself: the fleet asks
// the daemon's status once, not twice, and the verb that follows goes on
// the probed connection (one connection, two requests in all).
func TestFirstExchangeIsTheProbe(t *testing.T) {
	s := stdioFake(t)
	var conns, statuses, lists atomic.Int32
	listenForward(t, s, func(c net.Conn) {
		conns.Add(1)
		br := bufio.NewReader(c)
		for {
			req, err := http.ReadRequest(br)
			if err != nil {
				return
			}
			body := `{}`
			switch req.URL.Path {
			case "/v1/daemon":
				statuses.Add(1)
				body = `{"pid": 7, "version": "` + version.String() + `", "commit": "` + version.CommitString() + `", "api": ` + strconv.Itoa(apitype.APIVersion) + `, "socket": "/x/agentd.sock"}`
			case "/v1/agent_list":
				lists.Add(1)
				body = `{"agents": []}`
			}
			_, _ = io.Copy(io.Discard, req.Body)
			resp := &http.Response{StatusCode: 200, ProtoMajor: 1, ProtoMinor: 1, ContentLength: int64(len(body)),
				Header: http.Header{"Content-Type": {"application/json"}}, Body: io.NopCloser(strings.NewReader(body))}
			if err := resp.Write(c); err != nil {
				return
			}
		}
	})
	f := &Fleet{Hosts: map[string]Host{"h": {URL: "ssh://u@h.invalid"}}, Default: "h"}
	f.transport = func(string) (*SSH, error) { return s, nil }
	if _, err := f.List(context.Background(), &verbs.ListArgs{}); err != nil {
		t.Fatal(err)
	}
	f.CloseIdle()
	if conns.Load() != 1 || statuses.Load() != 1 || lists.Load() != 1 {
		t.Errorf("connections %d, status requests %d, list requests %d; want 1 each", conns.Load(), statuses.Load(), lists.Load())
	}
}
