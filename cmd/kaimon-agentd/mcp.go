package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

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

// followLocal follows every agent of this machine's daemon.
func followLocal(cl *client.Client) func(context.Context, func(mcpserver.Envelope)) error {
	return func(ctx context.Context, emit func(mcpserver.Envelope)) error {
		return followHosts(ctx, []string{fleet.Local}, func(context.Context, string) (*client.Client, error) { return cl, nil }, emit)
	}
}

// followFleet follows every agent of every host (a qualified id for those
// of other hosts, as the fleet's tools take them).
func followFleet(f *fleet.Fleet) func(context.Context, func(mcpserver.Envelope)) error {
	return func(ctx context.Context, emit func(mcpserver.Envelope)) error {
		names, err := f.All()
		if err != nil {
			return err
		}
		return followHosts(ctx, names, f.Client, emit)
	}
}

// mcpRetry is how kaimon mcp waits for a host it cannot reach (or whose
// daemon refused its stream): from 1 s, doubling up to 30 s, for as long
// as it serves. Each host, this machine's too, is followed through its
// control API's stream (follow.Remote), which reconnects by itself when
// the daemon restarts and resumes each agent where it was.
var mcpRetry = follow.Retry{Every: time.Second, Max: 30 * time.Second}

// followHosts follows the hosts names (follow.Merge) until ctx ends. A
// host that cannot be reached is said on stderr, once, and followed once
// it answers: until then its agents' permission requests and changes are
// not reported.
func followHosts(ctx context.Context, names []string, clientOf func(context.Context, string) (*client.Client, error), emit func(mcpserver.Envelope)) error {
	hosts := make([]follow.Host, len(names))
	for i, name := range names {
		hosts[i] = follow.Host{Name: name, Unreachable: mcpRetry, Gone: mcpRetry,
			Dial: follow.RemoteDial(func(ctx context.Context) (*client.Client, error) { return clientOf(ctx, name) }, "agent:")}
	}
	return follow.Merge(ctx, hosts, follow.Sink{
		Emit: func(host string, e *follow.Envelope) error {
			agent := e.Agent
			if !fleet.IsLocal(host) {
				agent = fleet.Qualify(host, agent)
			}
			emit(mcpserver.Envelope{Agent: agent, Kind: e.Kind, Turn: e.Turn, Data: e.Data})
			return nil
		},
		Note: func(n follow.Note) {
			whose := "host " + n.Host + "'s"
			if fleet.IsLocal(n.Host) {
				whose = "this machine's daemon's"
			}
			switch {
			case n.Kind == follow.Unreachable || n.Kind == follow.Gone:
				fmt.Fprintf(os.Stderr, "kaimon mcp: not following %s agents for now: %v; trying again\n", whose, fleet.Cause(n.Err))
			case n.Kind == follow.Connected && (n.After == follow.Unreachable || n.After == follow.Gone):
				fmt.Fprintf(os.Stderr, "kaimon mcp: following %s agents again\n", whose)
			}
		},
	})
}
