// Command kaimon-agentd is kaimon's daemon: it owns agent sessions, their
// event logs and the control socket the kaimon CLI talks to.
package main

import (
	"context"
	"fmt"
	"log"
	"os"
	"os/signal"
	"syscall"

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
	if err := daemon.Run(ctx); err != nil {
		log.Printf("%v", err)
		os.Exit(1)
	}
}
