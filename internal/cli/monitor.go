package cli

import (
	"os"

	"github.com/fatih/color"
	"github.com/urfave/cli/v2"

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
			"(a allow, d deny); ? help; q quits.\n\n" +
			"--once prints the table once and exits, for scripts and screenshots:\n\n" +
			"   kaimon monitor --once",
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "once", Usage: "print the agents table once (plain text unless on a terminal) and exit; exits 1 when the daemon is not running"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return usagef("monitor takes no arguments (got %d)", c.NArg())
			}
			cl, err := newClient(c)
			if err != nil {
				return err
			}
			if c.Bool("once") {
				return monitor.Once(c.Context, cl, c.App.Writer, color.NoColor)
			}
			return monitor.Run(c.Context, cl, os.Stdin, c.App.Writer, color.NoColor)
		},
	}
}
