package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"sync"
	"syscall"

	"github.com/kaimon/kaimon/internal/client"
	"github.com/kaimon/kaimon/internal/fleet"
	"github.com/kaimon/kaimon/internal/follow"
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
	elicit := fs.String("elicit", verbs.ElicitOwn, verbs.ElicitDoc)
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if err := verbs.CheckElicit(*elicit); err != nil {
		fmt.Fprintf(os.Stderr, "kaimon: %s\n", err)
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
		o := mcpserver.Options{Progress: *progress, Instructions: instr, Elicit: *elicit, Follow: followLocal(cl),
			StateKey: cl.Paths.MCPStateKey(), StateUsed: cl.Paths.MCPStateUsed()}
		if f, ok := svc.(*fleet.Fleet); ok {
			defer f.CloseIdle()
			o.Follow = followFleet(f)
		}
		return mcpserver.ServeStdio(ctx, svc, o, os.Stdin, os.Stdout, os.Stderr)
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
	// URLs stays false: a client names configured hosts, local or any,
	// never a URL (which would reach wherever it says with the person's
	// ssh keys and kube contexts).
	f := &fleet.Fleet{Paths: cl.Paths, Hosts: hosts, Local: cl, Warn: os.Stderr, AllHosts: true}
	return f, mcpserver.HostsInstructions(fleet.Names(hosts)), nil
}

// followLocal follows every agent of this machine's daemon through its
// control API's stream (follow.Remote), which reconnects when the daemon
// restarts and resumes each agent where it was.
func followLocal(cl *client.Client) func(context.Context, func(mcpserver.Envelope)) error {
	return func(ctx context.Context, emit func(mcpserver.Envelope)) error {
		return followHost(ctx, cl, emit, func(id string) string { return id })
	}
}

// followFleet follows every agent of every host (a qualified id for those
// of other hosts, as the fleet's tools take them). A host that cannot be
// reached when the server starts is not followed: its agents' permission
// requests and changes are not reported, and the server says so.
func followFleet(f *fleet.Fleet) func(context.Context, func(mcpserver.Envelope)) error {
	return func(ctx context.Context, emit func(mcpserver.Envelope)) error {
		names, err := f.All()
		if err != nil {
			return err
		}
		var mu sync.Mutex // emit is called from one host at a time
		var wg sync.WaitGroup
		for _, name := range names {
			wg.Add(1)
			go func() {
				defer wg.Done()
				cl, err := f.Client(ctx, name)
				if err == nil {
					err = followHost(ctx, cl, func(e mcpserver.Envelope) {
						mu.Lock()
						defer mu.Unlock()
						emit(e)
					}, func(id string) string {
						if fleet.IsLocal(name) {
							return id
						}
						return fleet.Qualify(name, id)
					})
				}
				if err != nil && ctx.Err() == nil {
					fmt.Fprintf(os.Stderr, "kaimon mcp: not following host %s's agents: %v\n", name, err)
				}
			}()
		}
		wg.Wait()
		return nil
	}
}

func followHost(ctx context.Context, cl *client.Client, emit func(mcpserver.Envelope), shown func(string) string) error {
	fw, err := follow.Remote(ctx, cl, "agent:", follow.RemoteOptions{})
	if err != nil {
		return err
	}
	err = fw.Run(ctx, func(e *follow.Envelope) error {
		emit(mcpserver.Envelope{Agent: shown(e.Agent), Kind: e.Kind, Turn: e.Turn, Data: e.Data})
		return nil
	})
	if ctx.Err() != nil {
		return nil
	}
	return err
}
