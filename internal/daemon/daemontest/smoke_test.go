package daemontest_test

import (
	"bufio"
	"context"
	"errors"
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

	"github.com/kaimon/kaimon/internal/daemon"
	"github.com/kaimon/kaimon/internal/daemon/daemontest"
	"github.com/kaimon/kaimon/internal/event"
	"github.com/kaimon/kaimon/internal/verbs"
)

// The daemon in this process, from a Config of a temporary home, with a
// replay agent (examples/hello.events.jsonl): it opens the agent, runs a
// turn whose events stream to a client, closes it, and shuts down when
// the test that started it ends (New's cleanup), leaving no socket bound,
// no descriptor open, its lock free and no goroutine of its own behind.
func TestDaemonSmoke(t *testing.T) {
	example, err := filepath.Abs("../../../examples/hello.events.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	home := t.TempDir()
	log.SetOutput(io.Discard) // the daemon's own log
	t.Cleanup(func() { log.SetOutput(os.Stderr) })
	// Its environment is given, not this process's (which it neither
	// reads nor changes).
	cfg, err := daemon.LoadConfig([]string{"KAIMON_HOME=" + home})
	if err != nil {
		t.Fatal(err)
	}
	paths := cfg.Paths
	// The runtime's signal loop, once started, lives as long as the
	// process: start it before counting, as kaimon-agentd's main does
	// (signal.NotifyContext) before Run, which notifies SIGCHLD.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGCHLD)
	signal.Stop(sigs)
	fds0, g0 := openFDs(t), runtime.NumGoroutine()

	t.Run("serve", func(t *testing.T) {
		cl := daemontest.New(t, cfg)
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		o, err := cl.Open(ctx, &verbs.OpenArgs{Cwd: t.TempDir(), Model: "replay:" + example + "?speed=0"})
		if err != nil {
			t.Fatalf("open: %v", err)
		}
		w, err := cl.EventsFromNow(ctx, o.AgentID)
		if err != nil {
			t.Fatalf("events: %v", err)
		}
		res, err := cl.Run(ctx, &verbs.RunArgs{AgentID: o.AgentID, Text: "hello there"})
		const want = "Hello from fakeapi (request #1)."
		if err != nil || res.Text != want {
			t.Fatalf("run: %+v, %v; want the recorded text %q", res, err, want)
		}
		var streamed strings.Builder
		for {
			e, err := w.Next()
			if err != nil {
				t.Fatalf("the stream ended before the turn's result: %v", err)
			}
			if e.Kind == event.AssistantText {
				streamed.WriteString(string(e.Data))
			}
			if e.Kind == event.Result && e.Turn == 1 {
				break
			}
		}
		w.Close()
		if !strings.Contains(streamed.String(), "Hello") {
			t.Errorf("the stream carried no assistant text: %q", streamed.String())
		}
		if c, err := cl.Close(ctx, &verbs.CloseArgs{AgentID: o.AgentID}); err != nil || !c.Closed {
			t.Fatalf("close: %+v, %v", c, err)
		}
		if st, err := cl.Status(ctx, &verbs.StatusArgs{AgentID: o.AgentID}); err != nil || st.Status != "dead" || st.Turn != 1 {
			t.Fatalf("status after close: %+v, %v", st, err)
		}
	})

	// The subtest's cleanups have stopped the daemon (Run returned nil,
	// or they failed the subtest) and let go of the client's connections.
	for _, s := range []string{paths.Socket(), paths.EventsSocket()} {
		if _, err := os.Stat(s); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s is left behind (%v)", s, err)
		}
	}
	if bound := boundUnder(t, home); len(bound) > 0 {
		t.Errorf("sockets still bound: %v", bound)
	}
	if left := leftFDs(t, fds0); len(left) > 0 {
		t.Errorf("descriptors left open: %v", left)
	}
	lock, err := os.OpenFile(paths.LockFile(), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		t.Errorf("the daemon's lock is still held: %v", err)
	}
	goroutinesSettle(t, g0)
}

// openFDs maps this process's open descriptors to what they are.
func openFDs(t *testing.T) map[string]string {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("no /proc/self/fd: %v", err)
	}
	fds := map[string]string{}
	for _, e := range ents {
		target, err := os.Readlink(filepath.Join("/proc/self/fd", e.Name()))
		if err == nil {
			fds[e.Name()] = target
		}
	}
	return fds
}

// leftFDs lists the descriptors open now that were not before.
func leftFDs(t *testing.T, before map[string]string) []string {
	var left []string
	for fd, target := range openFDs(t) {
		if before[fd] != target {
			left = append(left, fd+" "+target)
		}
	}
	slices.Sort(left)
	return left
}

// boundUnder lists the unix sockets of this network namespace bound at a
// path under dir.
func boundUnder(t *testing.T, dir string) []string {
	t.Helper()
	f, err := os.Open("/proc/net/unix")
	if err != nil {
		t.Skipf("no /proc/net/unix: %v", err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if n := len(fields); n >= 8 && strings.HasPrefix(fields[n-1], dir+"/") {
			out = append(out, fields[n-1])
		}
	}
	return out
}

// goroutinesSettle fails the test unless the goroutine count comes back
// to what it was before the daemons ran. Goroutines that a closed
// connection ends go on their own schedule: they are waited for, with a
// bound, and the dump shows those left.
func goroutinesSettle(t *testing.T, before int) {
	t.Helper()
	bound := time.After(10 * time.Second)
	for runtime.NumGoroutine() > before {
		select {
		case <-bound:
			buf := make([]byte, 1<<20)
			t.Errorf("%d goroutines after the daemons stopped, %d before:\n%s", runtime.NumGoroutine(), before, buf[:runtime.Stack(buf, true)])
			return
		case <-time.After(10 * time.Millisecond):
		}
	}
}
