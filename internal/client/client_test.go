package client

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/kaimon/kaimon/internal/apitype"
	"github.com/kaimon/kaimon/internal/config"
	"github.com/kaimon/kaimon/internal/procstat"
	"github.com/kaimon/kaimon/internal/verbs"
)

// fakeDaemon serves h on a control socket in a temporary directory and
// returns a client of it that never autostarts.
func fakeDaemon(t *testing.T, h http.Handler) *Client {
	t.Helper()
	c := &Client{Paths: config.Paths{SockDir: t.TempDir()}, NoAutostart: true}
	ln, err := net.Listen("unix", c.Paths.Socket())
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return c
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(v)
}

// envDaemon answers GET /v1/daemon with env, agent_list with success and
// agent_open and agent_status with the errors given; it counts the GETs.
func envDaemon(t *testing.T, env map[string]string, gets *atomic.Int32) *Client {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/daemon", func(w http.ResponseWriter, r *http.Request) {
		gets.Add(1)
		writeJSON(w, 200, apitype.DaemonStatus{PID: 4242, Env: env})
	})
	mux.HandleFunc("POST /v1/agent_list", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 200, verbs.ListResult{})
	})
	mux.HandleFunc("POST /v1/agent_open", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 503, verbs.Error{Code: verbs.CodeUnavailable, Message: "KAIMON_CLAUDE_BIN=/old is not an executable claude CLI"})
	})
	mux.HandleFunc("POST /v1/agent_status", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 404, verbs.Error{Code: verbs.CodeNotFound, Message: "agent x not found"})
	})
	return fakeDaemon(t, mux)
}

func TestErrorNamesTheEnvironmentThatDiffers(t *testing.T) {
	t.Setenv("KAIMON_CLAUDE_BIN", "/new/claude")
	t.Setenv("ANTHROPIC_API_KEY", "sk-here")
	daemon := config.EnvFingerprints(os.Environ())
	daemon["KAIMON_CLAUDE_BIN"] = config.EnvFingerprints([]string{"KAIMON_CLAUDE_BIN=/old"})["KAIMON_CLAUDE_BIN"]
	delete(daemon, "ANTHROPIC_API_KEY")
	var gets atomic.Int32
	c := envDaemon(t, daemon, &gets)
	ctx := context.Background()

	if _, err := c.List(ctx, &verbs.ListArgs{}); err != nil || gets.Load() != 0 {
		t.Fatalf("a success: %v, %d GET /v1/daemon", err, gets.Load())
	}
	if _, err := c.Status(ctx, &verbs.StatusArgs{AgentID: "x"}); err == nil || strings.Contains(err.Error(), "restart") || gets.Load() != 0 {
		t.Fatalf("an unknown agent: %v, %d GET /v1/daemon", err, gets.Load())
	}
	for i := 0; i < 2; i++ {
		_, err := c.Open(ctx, &verbs.OpenArgs{Cwd: "/"})
		var ve *verbs.Error
		if !errors.As(err, &ve) || ve.Code != verbs.CodeUnavailable {
			t.Fatalf("open: %v", err)
		}
		// The difference and its fix first, then what the daemon said.
		msg := err.Error()
		head, said, _ := strings.Cut(msg, "\n")
		if !strings.HasPrefix(head, "kaimon-agentd (pid 4242) was started with a different ANTHROPIC_API_KEY, KAIMON_CLAUDE_BIN than this environment") ||
			!strings.Contains(head, "`kaimon daemon restart`") || said != "KAIMON_CLAUDE_BIN=/old is not an executable claude CLI" {
			t.Fatalf("open's error does not lead with the difference: %s", msg)
		}
		if strings.Contains(msg, "sk-here") || strings.Contains(msg, "/new/claude") {
			t.Fatalf("the error shows a value: %s", msg)
		}
	}
	if gets.Load() != 1 {
		t.Fatalf("%d GET /v1/daemon for two errors; want 1", gets.Load())
	}
}

func TestErrorWithTheSameEnvironmentIsUnchanged(t *testing.T) {
	t.Setenv("KAIMON_CLAUDE_BIN", "/old")
	var gets atomic.Int32
	c := envDaemon(t, config.EnvFingerprints(os.Environ()), &gets)
	_, err := c.Open(context.Background(), &verbs.OpenArgs{Cwd: "/"})
	if err == nil || err.Error() != "KAIMON_CLAUDE_BIN=/old is not an executable claude CLI" || gets.Load() != 1 {
		t.Fatalf("open: %v (%d GET /v1/daemon)", err, gets.Load())
	}
	// A daemon too old to report its environment says nothing either.
	c = envDaemon(t, nil, &gets)
	if _, err := c.Open(context.Background(), &verbs.OpenArgs{Cwd: "/"}); err == nil || strings.Contains(err.Error(), "restart") {
		t.Fatalf("open with an old daemon: %v", err)
	}
}

// StopDaemon returns only once the daemon's process has exited (here a
// child left unreaped, so a zombie, as a daemon's own parent may leave it),
// not when the daemon answers the stop request.
func TestStopDaemonWaitsForTheProcess(t *testing.T) {
	child := exec.Command("sleep", "60")
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { child.Process.Kill(); child.Wait() })
	const exitAfter = 300 * time.Millisecond
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/daemon", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 200, apitype.DaemonStatus{PID: child.Process.Pid, Live: 2})
	})
	mux.HandleFunc("POST /v1/daemon/stop", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 200, map[string]bool{"stopping": true})
		time.AfterFunc(exitAfter, func() { child.Process.Kill() })
	})
	c := fakeDaemon(t, mux)
	start := time.Now()
	st, err := c.StopDaemon(context.Background())
	if err != nil || st == nil || st.PID != child.Process.Pid || st.Live != 2 {
		t.Fatalf("StopDaemon = %+v, %v", st, err)
	}
	if d := time.Since(start); d < exitAfter {
		t.Fatalf("StopDaemon returned after %s, before the process exited", d)
	}
	if procstat.Running(child.Process.Pid) {
		t.Fatal("procstat.Running says a zombie runs")
	}

	// No daemon: nothing to stop, and none is started.
	c = &Client{Paths: config.Paths{SockDir: t.TempDir()}}
	if st, err := c.StopDaemon(context.Background()); st != nil || err != nil {
		t.Fatalf("StopDaemon without a daemon = %+v, %v", st, err)
	}
}

// Two clients autostart at once: the second's daemon finds the lock held
// and exits. StartDaemon then waits for the first one's socket rather than
// failing, however long that daemon takes to load; with the lock free, a
// daemon that exits at start is an error at once.
func TestStartDaemonWaitsForTheOneHoldingTheLock(t *testing.T) {
	dir := t.TempDir()
	loser := filepath.Join(dir, "loser")
	if err := os.WriteFile(loser, []byte("#!/bin/sh\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	c := &Client{Paths: config.Paths{SockDir: dir, CacheDir: dir}, DaemonBin: loser}
	if err := c.StartDaemon(context.Background()); err == nil || !strings.Contains(err.Error(), "exited at start") {
		t.Fatalf("a daemon that exits with the lock free: %v", err)
	}
	lock, err := os.OpenFile(c.Paths.LockFile(), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		t.Fatal(err)
	}
	go func() {
		time.Sleep(2500 * time.Millisecond) // longer than the old 2 s grace
		ln, err := net.Listen("unix", c.Paths.Socket())
		if err != nil {
			return
		}
		t.Cleanup(func() { ln.Close() })
	}()
	if err := c.StartDaemon(context.Background()); err != nil {
		t.Fatalf("while another daemon holds the lock and comes up: %v", err)
	}
}
