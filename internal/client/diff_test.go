package client_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/kaimon/kaimon/internal/client"
	"github.com/kaimon/kaimon/internal/server"
	"github.com/kaimon/kaimon/internal/server/servertest"
	"github.com/kaimon/kaimon/internal/verbs"
)

// diffSvc is a service whose WriteDiff writes what write does.
type diffSvc struct {
	*servertest.Fake
	write func(a *verbs.DiffArgs, w io.Writer) (*verbs.DiffResult, error)
}

func (d *diffSvc) WriteDiff(_ context.Context, a *verbs.DiffArgs, w io.Writer) (*verbs.DiffResult, error) {
	return d.write(a, w)
}

// GET /v1/agents/{id}/diff through a client over a pipe, as over ssh and
// dial-stdio: a diff of megabytes arrives whole with the result in its
// trailer; an error before the first byte is the verb's, typed; one
// after it is an error too, saying how much came, and so is a stream
// that breaks off.
func TestWriteDiffOverAPipe(t *testing.T) {
	chunk := bytes.Repeat([]byte("+a line of a diff\n"), 1<<12) // 72 KiB
	svc := &diffSvc{Fake: &servertest.Fake{}}
	s := &server.Server{Svc: svc, CacheDir: t.TempDir()}
	ln := newPipeListener()
	hs := &http.Server{Handler: s.Handler()}
	served := make(chan struct{})
	go func() { hs.Serve(ln); close(served) }()
	t.Cleanup(func() { hs.Close(); <-served })
	cl := &client.Client{Addr: "a pipe", Dial: ln.dial}
	t.Cleanup(cl.CloseIdleConnections)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	svc.write = func(a *verbs.DiffArgs, w io.Writer) (*verbs.DiffResult, error) {
		if a.AgentID != "a1" || !a.Stat {
			t.Errorf("the service took %+v", a)
		}
		for range 64 {
			if _, err := w.Write(chunk); err != nil {
				return nil, err
			}
		}
		return &verbs.DiffResult{AgentID: "a1", Branch: "kaimon/a1", BaseCommit: "0123abcd", Worktree: "/wt/a\nb"}, nil
	}
	var got bytes.Buffer
	res, err := cl.WriteDiff(ctx, &verbs.DiffArgs{AgentID: "a1", Stat: true}, &got)
	if err != nil || res.Branch != "kaimon/a1" || res.BaseCommit != "0123abcd" || res.Worktree != "/wt/a\nb" || res.Diff != "" {
		t.Fatalf("WriteDiff = %+v, %v", res, err)
	}
	if want := bytes.Repeat(chunk, 64); !bytes.Equal(got.Bytes(), want) {
		t.Fatalf("WriteDiff wrote %d bytes; want the %d the daemon wrote", got.Len(), len(want))
	}

	svc.write = func(*verbs.DiffArgs, io.Writer) (*verbs.DiffResult, error) {
		return nil, verbs.WrongState("agent_diff: agent a1 has no worktree")
	}
	got.Reset()
	_, err = cl.WriteDiff(ctx, &verbs.DiffArgs{AgentID: "a1"}, &got)
	var ve *verbs.Error
	if !errors.As(err, &ve) || ve.Code != verbs.CodeWrongState || ve.Message != "agent_diff: agent a1 has no worktree" || got.Len() != 0 {
		t.Fatalf("an error before the diff: %#v, %d bytes", err, got.Len())
	}

	svc.write = func(_ *verbs.DiffArgs, w io.Writer) (*verbs.DiffResult, error) {
		w.Write(chunk)
		return nil, verbs.Errorf(verbs.CodeInternal, "agent_diff: agent a1: git did not end within 2m0s")
	}
	got.Reset()
	_, err = cl.WriteDiff(ctx, &verbs.DiffArgs{AgentID: "a1"}, &got)
	if !errors.As(err, &ve) || ve.Code != verbs.CodeInternal || !strings.Contains(ve.Message, "git did not end") ||
		!strings.Contains(ve.Message, "after 73728 bytes") || got.Len() != len(chunk) {
		t.Fatalf("an error partway: %#v, %d bytes", err, got.Len())
	}

	svc.write = func(_ *verbs.DiffArgs, w io.Writer) (*verbs.DiffResult, error) {
		w.Write(chunk)
		panic(http.ErrAbortHandler) // the connection ends, with no end of the body
	}
	got.Reset()
	_, err = cl.WriteDiff(ctx, &verbs.DiffArgs{AgentID: "a1"}, &got)
	if err == nil || !strings.Contains(err.Error(), "the diff of agent a1 from a pipe broke off after") {
		t.Fatalf("a stream that breaks off: %v", err)
	}

	// A bad id is refused by the route.
	_, err = cl.WriteDiff(ctx, &verbs.DiffArgs{AgentID: "../x"}, &got)
	if !errors.As(err, &ve) || ve.Code != verbs.CodeBadArgument {
		t.Fatalf("a bad id: %#v", err)
	}
}
