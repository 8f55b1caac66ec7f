// Command kaimon-agentd is kaimon's daemon: it owns agent sessions, their
// event logs and the control socket the kaimon CLI talks to.
package main

import (
	"context"
	"fmt"
	"log"
	"os"
	"os/signal"
	"runtime/pprof"
	"syscall"

	"github.com/kaimon/kaimon/internal/config"
	"github.com/kaimon/kaimon/internal/daemon"
	"github.com/kaimon/kaimon/internal/manpage"
	"github.com/kaimon/kaimon/internal/version"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == manpage.AgentdMCPArg {
		os.Exit(serveMCP(os.Args[2:]))
	}
	if len(os.Args) > 1 {
		switch action, _ := manpage.AgentdArg(os.Args[1]); action {
		case manpage.AgentdVersion:
			fmt.Println("kaimon-agentd", version.Full())
			return
		case manpage.AgentdHelp:
			fmt.Print(manpage.AgentdUsage())
			return
		default:
			fmt.Fprintf(os.Stderr, "kaimon-agentd: unknown argument %q: it takes none but --help and --version\nRun 'kaimon-agentd --help' for usage.\n", os.Args[1])
			os.Exit(2)
		}
	}
	log.SetFlags(log.LstdFlags | log.Lmicroseconds)
	log.SetPrefix("kaimon-agentd: ")
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	stopProfile := cpuProfile(os.Getenv("KAIMON_AGENTD_CPUPROFILE"))
	if err := leaveDir(); err != nil {
		stopProfile()
		log.Printf("%v", err)
		os.Exit(1)
	}
	// The one read of the environment and the config file: Run and
	// what it runs read neither.
	cfg, err := daemon.LoadConfig(os.Environ())
	if err == nil {
		err = daemon.Run(ctx, cfg)
	}
	stopProfile()
	if err != nil {
		log.Printf("%v", err)
		os.Exit(1)
	}
}

// leaveDir makes the path settings of the environment absolute against
// the directory the daemon was started in (which a client that started it
// chose, being there), then changes to "/": the daemon outlives that
// directory, must not hold its file system busy, and must read nothing
// relative against it. A relative path an API caller sends is refused
// (session), not taken from here. The CPU profile is already open; the
// daemon's Config is built after (daemon.LoadConfig), of the absolute
// values.
func leaveDir() error {
	if err := config.AbsEnv(); err != nil {
		return err
	}
	return os.Chdir("/")
}

// cpuProfile starts a CPU profile of the daemon into path, when set, and
// returns what ends it: the daemon's own cost measured where it runs, for
// `go tool pprof` (BENCHMARKS.md). A profile that cannot start is logged
// and the daemon runs without it.
func cpuProfile(path string) (stop func()) {
	if path == "" {
		return func() {}
	}
	f, err := os.Create(path)
	if err == nil {
		err = pprof.StartCPUProfile(f)
		if err != nil {
			f.Close()
		}
	}
	if err != nil {
		log.Printf("KAIMON_AGENTD_CPUPROFILE: %v; running without a profile", err)
		return func() {}
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}
}
