// Package daemontest runs a real kaimon-agentd in a test's process, from
// a daemon.Config: what internal/server/servertest does for the control
// API over a fake service, for the whole daemon (its session manager,
// backends, event bus and MCP door), as containerd's tests run a server
// from a config. It is beside internal/daemon rather than in servertest,
// whose users include packages the daemon links (internal/mcpserver's
// tests), which could not import it.
package daemontest

import (
	"context"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/kaimon/kaimon/internal/client"
	"github.com/kaimon/kaimon/internal/config"
	"github.com/kaimon/kaimon/internal/daemon"
	"github.com/kaimon/kaimon/internal/server/servertest"
)

// New runs a real daemon (daemon.Run: the session manager, its
// backends, the event bus, the MCP door) in this process with cfg, and
// returns a client of it, which never starts one. Each path cfg leaves
// empty is one in a temporary directory of the test's, laid out as under
// KAIMON_HOME (the socket dir short enough for a unix socket); a zero File
// is config.Defaults(). Env is the daemon's whole environment, none of
// this process's: give PATH for an agent whose program is looked up on
// it. Nothing of the process's is read or changed, so two of them run
// side by side, each with its own settings.
//
// The daemon is up when New returns, and stops when the test ends: its
// live agents closed, its sockets gone, its directories removed with the
// test's.
func New(t testing.TB, cfg daemon.Config) *client.Client {
	t.Helper()
	dir := servertest.TempDir(t)
	p := &cfg.Paths
	for _, d := range []struct {
		field *string
		def   string
	}{
		{&p.CacheDir, filepath.Join(dir, "cache", "agents")},
		{&p.ConfigFile, filepath.Join(dir, "config.json")},
		{&p.SockDir, filepath.Join(dir, "sock")},
		{&p.WorktreeDir, filepath.Join(dir, "worktrees")},
	} {
		if *d.field == "" {
			*d.field = d.def
		}
	}
	if reflect.ValueOf(cfg.File).IsZero() {
		cfg.File = config.Defaults()
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- daemon.Run(ctx, cfg) }()
	cl := &client.Client{Paths: cfg.Paths, NoAutostart: true}
	// Cleanups run last first: the client lets go of its connections,
	// then the daemon stops.
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("daemontest: the daemon: %v", err)
		}
	})
	t.Cleanup(cl.CloseIdleConnections)
	waitUp(t, cl, done)
	return cl
}

// waitUp waits until the daemon answers, or fails the test if Run ends
// first (its error says why: the lock held, a socket it cannot bind). The
// daemon listens before it loads its agents, and answers once it serves;
// its start is not timed here, only bounded.
func waitUp(t testing.TB, cl *client.Client, done chan error) {
	t.Helper()
	bound := time.After(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err := cl.Ping(ctx)
		cancel()
		if err == nil {
			return
		}
		select {
		case err := <-done:
			done <- err // for the cleanup, which waits for it
			t.Fatalf("daemontest: the daemon ended before it answered: %v", err)
		case <-bound:
			t.Fatalf("daemontest: the daemon does not answer: %v", err)
		case <-time.After(10 * time.Millisecond):
		}
	}
}
