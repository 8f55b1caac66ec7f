package cli

import (
	"github.com/urfave/cli/v2"

	"github.com/kaimon/kaimon/internal/fleet"
	"github.com/kaimon/kaimon/internal/monitor"
)

func monitorCmd() *cli.Command {
	return &cli.Command{
		Name:  "monitor",
		Usage: "Watch every agent in a full-screen terminal UI",
		Description: "A table of every agent the daemon knows, live and dead (status, model, cwd, turn, tokens, last activity), " +
			"and the selected agent's live feed. It follows the event bus, and waits for the daemon when it is not running; " +
			"it never starts it.\n\n" +
			"Keys: ↑/↓ or j/k select; x closes a live agent or forgets a dead one (after y; a forgotten agent cannot be resumed); " +
			"enter shows the agent's whole history, live (pgup/pgdn, g/G, / to search, n/N for the next/previous match, esc back); " +
			"p answers a waiting permission " +
			"(a allow, d deny); s types a turn for the agent (enter sends it, queued behind a turn in flight; esc gives it up); " +
			"i interrupts its turn; ? help; q quits. While the daemon cannot be reached its rows show their last known " +
			"state with a ? (working?), counted as unknown, not live.\n\n" +
			"--once prints the table once and exits, for scripts and screenshots:\n\n" +
			"   kaimon monitor --once\n\n" +
			"--all-hosts watches this machine and every host of `kaimon host ls` in one table, with a HOST column; " +
			"another host's agents come through its daemon's event stream over ssh, and an action on a row (x, p, s, i) " +
			"goes to that agent's host. A host that cannot be reached is named in the header, its rows kept as last " +
			"seen (with a ?), until it answers again. --host NAME watches that one host the same way.",
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "once", Usage: "print the agents table once (plain text unless on a terminal) and exit; exits 1 when the daemon is not running"},
			&cli.BoolFlag{Name: "all-hosts", Usage: "watch this machine and every configured host in one table, with a HOST column"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return usagef("monitor takes no arguments (got %d)", c.NArg())
			}
			f, err := fleetOf(c)
			if err != nil {
				return err
			}
			var names []string
			switch {
			case c.Bool("all-hosts") && f.Pinned:
				return usagef("--all-hosts watches every host, and --host names one: drop one of them")
			case c.Bool("all-hosts"):
				if names, err = f.All(); err != nil {
					return err
				}
			case !fleet.IsLocal(f.Default):
				names = []string{f.Default} // another host: through its event stream
			}
			if names != nil {
				f.Local.NoAutostart = true // the monitor never starts a daemon
				if c.Bool("once") {
					return monitor.OnceHosts(c.Context, f, names, c.App.Writer, c.App.ErrWriter, !streamsOf(c).ColorEnabled())
				}
				return monitor.RunHosts(c.Context, f, names, streamsOf(c).In, c.App.Writer, !streamsOf(c).ColorEnabled())
			}
			cl, err := f.Client(c.Context, "")
			if err != nil {
				return err
			}
			if c.Bool("once") {
				return monitor.Once(c.Context, cl, c.App.Writer, !streamsOf(c).ColorEnabled())
			}
			return monitor.Run(c.Context, cl, streamsOf(c).In, c.App.Writer, !streamsOf(c).ColorEnabled())
		},
	}
}
