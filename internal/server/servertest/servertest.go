// Package servertest serves kaimon-agentd's control API for tests, as
// tailscale's ipn/lapitest does: the real routes (server.Server) over a
// verbs.Service the test chooses, on a socket in t.TempDir(), and a client
// of it. A test of the CLI or of the client then runs against the wire the
// daemon speaks without a daemon, its agents or their processes. Fake is a verbs.Service whose answers the test sets.
package servertest

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/kaimon/kaimon/internal/client"
	"github.com/kaimon/kaimon/internal/config"
	"github.com/kaimon/kaimon/internal/server"
	"github.com/kaimon/kaimon/internal/verbs"
)

// New serves svc on a socket in t.TempDir() and returns a client of it,
// which never starts a daemon. Both end when the test does.
func New(t testing.TB, svc verbs.Service) *client.Client {
	return Serve(t, &server.Server{Svc: svc})
}

// Serve is New for a Server the test has filled in further (an event hub
// for the event streams, Counts for daemon status). Its Socket and CacheDir
// are set here, both in the test's temporary directory; an Env left nil is
// this process's, as a daemon started from this shell would report, so that
// the client adds no environment hint to the errors it gets.
func Serve(t testing.TB, s *server.Server) *client.Client {
	t.Helper()
	dir := TempDir(t)
	paths := config.Paths{CacheDir: filepath.Join(dir, "cache"), SockDir: filepath.Join(dir, "sock")}
	if err := os.MkdirAll(paths.CacheDir, 0o700); err != nil {
		t.Fatal(err)
	}
	s.Socket, s.CacheDir = paths.Socket(), paths.CacheDir
	if s.Env == nil {
		s.Env = config.EnvFingerprints(os.Environ())
	}
	ln, err := server.Listen(paths.SockDir, paths.Socket())
	if err != nil {
		t.Fatalf("servertest: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, ln) }()
	cl := &client.Client{Paths: paths, NoAutostart: true}
	// Cleanups run last first: the client lets go of its connections,
	// then the server stops and its socket goes.
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("servertest: serving: %v", err)
		}
	})
	t.Cleanup(cl.CloseIdleConnections)
	return cl
}

// TempDir is t.TempDir(), unless a long test name makes the path of a
// socket dir in it (<dir>/sock) too long for a unix socket (108 bytes):
// then a shorter directory of the system's temporary one, removed with
// the test as well. (internal/daemon/daemontest keeps its daemon there.)
func TempDir(t testing.TB) string {
	dir := t.TempDir()
	if len(config.Paths{SockDir: filepath.Join(dir, "sock")}.EventsSocket()) < 100 {
		return dir
	}
	dir, err := os.MkdirTemp("", "kaimon-st")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}
