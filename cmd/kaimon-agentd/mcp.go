package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/kaimon/kaimon/internal/client"
	"github.com/kaimon/kaimon/internal/fleet"
	"github.com/kaimon/kaimon/internal/mcpserver"
	"github.com/kaimon/kaimon/internal/verbs"
)

// serveMCP is `kaimon mcp` once it has exec'd this binary
// (manpage.AgentdMCPArg): the MCP server on stdio, a client of the running
// daemon (started on demand unless KAIMON_NO_AUTOSTART=1), and of the
// configured hosts' (mcpService). It returns the
// exit code; errors are worded as kaimon's.
func serveMCP(args []string) int {
	fs := flag.NewFlagSet("kaimon mcp", flag.ContinueOnError)
	progress := fs.Duration("progress", mcpserver.DefaultProgress, "interval of agent_run's progress notifications")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := func() error {
		cl, err := client.New()
		if err != nil {
			return err
		}
		svc, instr, err := mcpService(cl)
		if err != nil {
			return err
		}
		if f, ok := svc.(*fleet.Fleet); ok {
			defer f.CloseIdle()
		}
		return mcpserver.ServeStdio(ctx, svc, mcpserver.Options{Progress: *progress, Instructions: instr}, os.Stdin, os.Stdout, os.Stderr)
	}()
	if err != nil {
		fmt.Fprintf(os.Stderr, "kaimon: %s\n", err)
		return 1
	}
	return 0
}

// mcpService is what the MCP server's tools call, and its instructions:
// with no host configured, this machine's daemon alone; with hosts, a
// fleet over this machine and them, so that every tool takes a qualified
// id (HOST/ID), agent_list lists every host's agents and agent_open's host
// places a new one.
func mcpService(cl *client.Client) (verbs.Service, string, error) {
	hosts, err := fleet.LoadHosts(cl.Paths.ConfigFile)
	if err != nil {
		return nil, "", err
	}
	if len(hosts) == 0 {
		return cl, "", nil
	}
	f := &fleet.Fleet{Paths: cl.Paths, Hosts: hosts, Local: cl, Warn: os.Stderr, AllHosts: true}
	return f, mcpserver.HostsInstructions(fleet.Names(hosts)), nil
}
