// Package daemon wires kaimon-agentd together from a Config (its paths,
// config file and environment, config.go): the single-instance lock, the
// session manager with its backends, and the control API, until its
// context is cancelled.
package daemon

import (
	"context"
	"fmt"
	"log"
	"os"
	"strings"
	"syscall"

	"github.com/kaimon/kaimon/internal/bus"
	"github.com/kaimon/kaimon/internal/config"
	"github.com/kaimon/kaimon/internal/proc"
	"github.com/kaimon/kaimon/internal/server"
	"github.com/kaimon/kaimon/internal/session"
)

// Run serves with cfg until ctx is cancelled, then closes every live agent
// (whole process groups, gently then hard) and returns nil.
func Run(ctx context.Context, cfg Config) error {
	paths := cfg.Paths
	// What the daemon was started with, without the config file's
	// programs its agents get besides: what a client can compare with its
	// own environment.
	envPrint := config.EnvFingerprints(cfg.Env)
	if err := os.MkdirAll(paths.SockDir, 0o700); err != nil {
		return fmt.Errorf("creating socket dir: %w", err)
	}
	// One daemon per socket dir: the lock closes the window between "no
	// one answers on the socket" and "we listen on it".
	lock, err := os.OpenFile(paths.LockFile(), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return err
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		return fmt.Errorf("another kaimon-agentd holds %s: %w", lock.Name(), err)
	}
	// Before any agent starts: what an agent leaves behind when it dies
	// is re-parented here, found by its tag and stopped (proc.Start), and
	// reaped here.
	if stopReaper, err := proc.BecomeSubreaper(); err != nil {
		log.Printf("warning: %v; a tool an agent leaves behind is re-parented to init, still stopped but reaped only by init", err)
	} else {
		defer stopReaper()
	}
	ln, err := server.Listen(paths.SockDir, paths.Socket())
	if err != nil {
		return err
	}
	mgr, err := session.New(paths, cfg.File, cfg.AgentEnv(), factory(cfg.File))
	if err != nil {
		ln.Close()
		return err
	}
	// The event bus (ZeroMQ) and the in-process hub of the API's event
	// streams get every envelope, after it is logged.
	queues := bus.Options{QueueBytes: cfg.File.BusQueueBytes}
	events, err := bus.Listen(bus.Endpoints(paths.EventsSocket(), cfg.File.BusEndpoints), queues)
	if err != nil {
		ln.Close()
		return err
	}
	hub := bus.NewLocal(queues)
	mgr.AddPublisher(events)
	mgr.AddPublisher(hub)
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	var stopDoor func()
	srv := &server.Server{Svc: mgr, Counts: mgr, Socket: paths.Socket(), CacheDir: paths.CacheDir, Env: envPrint, Stop: stop}
	srv.Bus, srv.Events = events, hub
	// The MCP door, where owned agents call back into kaimon, before any
	// agent can be opened.
	srv.Door, stopDoor = startDoor(ctx, mgr, paths)
	log.Printf("kaimon-agentd %d listening on %s", os.Getpid(), paths.Socket())
	log.Printf("event bus on %s", strings.Join(events.Endpoints(), ", "))
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ctx, ln) }()
	<-ctx.Done()
	log.Printf("shutting down: closing live agents")
	mgr.Shutdown()
	stopDoor()
	// After the agents, so that their last events (status dead) go out.
	events.Close()
	hub.Close()
	err = <-errc
	log.Printf("stopped")
	return err
}
