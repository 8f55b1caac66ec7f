package daemontest_test

import (
	"context"
	"io"
	"log"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kaimon/kaimon/internal/apitype"
	"github.com/kaimon/kaimon/internal/client"
	"github.com/kaimon/kaimon/internal/config"
	"github.com/kaimon/kaimon/internal/daemon"
	"github.com/kaimon/kaimon/internal/daemon/daemontest"
	"github.com/kaimon/kaimon/internal/verbs"
)

// Two daemons with different Configs run in one process at once, and
// neither sees the other's settings: its own sockets and agents, its own
// config file's programs in its agents' environment, its own environment
// in its status. Neither changes the process's environment, and once the
// test ends no goroutine of theirs is left.
func TestTwoDaemonsInOneProcess(t *testing.T) {
	log.SetOutput(io.Discard) // the daemons' own log
	t.Cleanup(func() { log.SetOutput(os.Stderr) })
	example, err := filepath.Abs("../../../examples/hello.events.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	// The runtime's signal loop, once started, lives as long as the
	// process: start it before counting (the daemons notify SIGCHLD).
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGCHLD)
	signal.Stop(sigs)
	environ, g0 := os.Environ(), runtime.NumGoroutine()

	t.Run("side by side", func(t *testing.T) {
		nowhere := t.TempDir() // a PATH with no claude CLI on it
		// A names its claude CLI in its config file, B in its
		// environment: each is what its own agents are started with.
		fileA := config.Defaults()
		fileA.ClaudeBin = filepath.Join(t.TempDir(), "claude-of-a")
		binB := filepath.Join(t.TempDir(), "claude-of-b")
		a := daemontest.New(t, daemon.Config{File: fileA, Env: []string{"PATH=" + nowhere}})
		b := daemontest.New(t, daemon.Config{Env: []string{"PATH=" + nowhere, "KAIMON_CLAUDE_BIN=" + binB}})

		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		sa, sb := ping(ctx, t, a), ping(ctx, t, b)
		if sa.Socket == sb.Socket || sa.CacheDir == sb.CacheDir {
			t.Fatalf("the daemons share a socket or a cache dir: %s, %s; %s, %s", sa.Socket, sb.Socket, sa.CacheDir, sb.CacheDir)
		}
		if _, ok := sa.Env["KAIMON_CLAUDE_BIN"]; ok {
			t.Errorf("A was started without KAIMON_CLAUDE_BIN, yet reports it: %v", sa.Env)
		}
		if _, ok := sb.Env["KAIMON_CLAUDE_BIN"]; !ok {
			t.Errorf("B was started with KAIMON_CLAUDE_BIN, yet does not report it: %v", sb.Env)
		}

		o, err := a.Open(ctx, &verbs.OpenArgs{Cwd: t.TempDir(), Model: "replay:" + example + "?speed=0"})
		if err != nil {
			t.Fatalf("open in A: %v", err)
		}
		if l, err := b.List(ctx, &verbs.ListArgs{}); err != nil || len(l.Agents) != 0 {
			t.Errorf("B lists %+v (%v); want none of A's agents", l, err)
		}
		if l, err := a.List(ctx, &verbs.ListArgs{}); err != nil || len(l.Agents) != 1 || l.Agents[0].AgentID != o.AgentID {
			t.Errorf("A lists %+v (%v); want its agent %s", l, err, o.AgentID)
		}

		for _, c := range []struct {
			name      string
			cl        *client.Client
			want, not string
		}{{"A", a, fileA.ClaudeBin, binB}, {"B", b, binB, fileA.ClaudeBin}} {
			_, err := c.cl.Open(ctx, &verbs.OpenArgs{Cwd: t.TempDir(), Model: "sonnet"})
			if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), c.not) {
				t.Errorf("a claude agent in %s: %v; want the refusal of its own claude CLI %s", c.name, err, c.want)
			}
		}
	})

	if now := os.Environ(); !slices.Equal(now, environ) {
		t.Errorf("the daemons changed the process's environment:\nbefore %q\nafter  %q", environ, now)
	}
	goroutinesSettle(t, g0)
}

func ping(ctx context.Context, t *testing.T, cl *client.Client) *apitype.DaemonStatus {
	t.Helper()
	st, err := cl.Ping(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return st
}
