package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/kaimon/kaimon/internal/client"
	"github.com/kaimon/kaimon/internal/mcpserver"
)

// serveMCP is `kaimon mcp` once it has exec'd this binary
// (manpage.AgentdMCPArg): the MCP server on stdio, a client of the running
// daemon (started on demand unless KAIMON_NO_AUTOSTART=1). It returns the
// exit code; errors are worded as kaimon's.
func serveMCP(args []string) int {
	fs := flag.NewFlagSet("kaimon mcp", flag.ContinueOnError)
	progress := fs.Duration("progress", mcpserver.DefaultProgress, "interval of agent_run's progress notifications")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cl, err := client.New()
	if err == nil {
		err = mcpserver.ServeStdio(ctx, cl, mcpserver.Options{Progress: *progress}, os.Stdin, os.Stdout, os.Stderr)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "kaimon: %s\n", err)
		return 1
	}
	return 0
}
