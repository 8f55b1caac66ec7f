package cli

import (
	"fmt"
	"io"

	"github.com/urfave/cli/v2"

	"github.com/kaimon/kaimon/internal/verbs"
)

func diffCmd() *cli.Command {
	return verbCmd("agent_diff", &cli.Command{
		Description: "Prints the patch alone on stdout, so that `kaimon diff ID > agent.patch` and `kaimon diff ID | git apply` work; " +
			"nothing when the agent changed nothing. The agent must have been opened with --worktree.",
		Flags: verbFlags("agent_diff"),
		Action: func(c *cli.Context) error {
			if err := needVerbArgs(c, "agent_diff"); err != nil {
				return err
			}
			cl, err := service(c)
			if err != nil {
				return err
			}
			res, err := cl.Diff(c.Context, &verbs.DiffArgs{AgentID: c.Args().First(), Stat: c.Bool("stat")})
			if err != nil {
				return fail(c, err)
			}
			return emit(c, res, func(w io.Writer) {
				io.WriteString(w, res.Diff)
				if res.Diff == "" {
					fmt.Fprintf(c.App.ErrWriter, "(no changes on %s since %.12s)\n", res.Branch, res.BaseCommit)
				}
			})
		},
	})
}
