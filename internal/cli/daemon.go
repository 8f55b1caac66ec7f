package cli

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/urfave/cli/v2"

	"github.com/kaimon/kaimon/internal/apitype"
	"github.com/kaimon/kaimon/internal/client"
)

func daemonCmd() *cli.Command {
	return &cli.Command{
		Name:  "daemon",
		Usage: "Start, stop, restart or show kaimon-agentd",
		Description: "kaimon-agentd owns every agent session and the event bus, one per user. kaimon starts it when " +
			"it is not running (unless --no-autostart), so these are seldom needed; see kaimon-agentd(8).",
		Subcommands: []*cli.Command{
			{
				Name: "start", Usage: "Start kaimon-agentd in the background (no-op if running)",
				Action: func(c *cli.Context) error {
					cl, err := newClient(c)
					if err != nil {
						return err
					}
					if st, err := cl.Ping(c.Context); err == nil {
						fmt.Fprintf(c.App.Writer, "kaimon-agentd already running (pid %d, %s)\n", st.PID, st.Socket)
						return nil
					}
					return startDaemon(c, cl)
				},
			},
			{
				Name: "stop", Usage: "Stop kaimon-agentd, closing every live agent; returns once it has exited",
				Action: func(c *cli.Context) error {
					cl, err := newClient(c)
					if err != nil {
						return err
					}
					return stopDaemon(c, cl)
				},
			},
			{
				Name: "restart", Usage: "Stop kaimon-agentd (closing every live agent) and start it again with this shell's environment",
				Description: "The daemon runs its agents with the environment it was started with (KAIMON_*_BIN, ANTHROPIC_*, PATH, …), " +
					"whoever started it. When kaimon says that environment differs from this one, restart it from here.",
				Action: func(c *cli.Context) error {
					cl, err := newClient(c)
					if err != nil {
						return err
					}
					if err := stopDaemon(c, cl); err != nil {
						return err
					}
					return startDaemon(c, cl)
				},
			},
			{
				Name: "status", Usage: "Show whether kaimon-agentd runs (exit 1 if not)",
				Flags: []cli.Flag{jsonFlag()},
				Action: func(c *cli.Context) error {
					cl, err := newClient(c)
					if err != nil {
						return err
					}
					st, err := cl.Ping(c.Context)
					if err != nil {
						return fail(c, err)
					}
					return emit(c, st, func(w io.Writer) {
						tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
						fmt.Fprintf(tw, "pid\t%d\nversion\t%s\nsocket\t%s\ncache\t%s\nstarted\t%s\nagents\t%d live, %d dead\n",
							st.PID, st.Version, st.Socket, st.CacheDir, st.StartedAt, st.Live, st.Dead)
						if st.Door != "" {
							fmt.Fprintf(tw, "mcp door\t%s\n", st.Door)
						}
						if b := st.Bus; b != nil {
							fmt.Fprintf(tw, "event bus\t%s\nsubscribers\t%d (envelopes published %d, dropped for slow subscribers %d)\n",
								strings.Join(b.Endpoints, " "), b.Subscribers, b.Published, b.Dropped)
						}
						writeFaults(tw, "event log faults", "each stopped its agent", st.LogFaults)
						writeFaults(tw, "record faults", "see each agent's status", st.RecordFaults)
						tw.Flush()
					})
				},
			},
			daemonLogsCmd(), daemonInstallUnitCmd(),
		},
	}
}

// startDaemon starts kaimon-agentd and says where it runs.
func startDaemon(c *cli.Context, cl *client.Client) error {
	if err := cl.StartDaemon(c.Context); err != nil {
		return err
	}
	st, err := cl.Ping(c.Context)
	if err != nil {
		return err
	}
	fmt.Fprintf(c.App.Writer, "kaimon-agentd started (pid %d, %s)\n", st.PID, st.Socket)
	return nil
}

// stopDaemon stops kaimon-agentd and waits for it to exit.
func stopDaemon(c *cli.Context, cl *client.Client) error {
	st, err := cl.StopDaemon(c.Context)
	if err != nil {
		return err
	}
	if st == nil {
		fmt.Fprintln(c.App.Writer, "kaimon-agentd was not running")
	} else {
		fmt.Fprintf(c.App.Writer, "kaimon-agentd stopped (pid %d, live agents closed: %d)\n", st.PID, st.Live)
	}
	return nil
}

// writeFaults writes daemon status's row of failed writes named name
// (nil: the daemon does not report them), saying what each did.
func writeFaults(w io.Writer, name, effect string, f *apitype.LogFaults) {
	switch {
	case f == nil:
	case f.Count == 0:
		fmt.Fprintf(w, "%s\tnone\n", name)
	default:
		fmt.Fprintf(w, "%s\t%d (%s); last: agent %s at %s: %s\n", name, f.Count, effect, f.LastAgent, f.LastAt, f.LastError)
	}
}
