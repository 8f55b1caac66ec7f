package cli

import (
	"fmt"
	"io"

	"github.com/urfave/cli/v2"

	"github.com/kaimon/kaimon/internal/verbs"
)

func forgetCmd() *cli.Command {
	return verbCmd("agent_forget", &cli.Command{
		Description: "Forgets the dead agents named, or with --all-dead every dead agent; --older-than narrows either to those idle " +
			"that long (alone, it selects every dead agent that old). Prints the ids forgotten, one a line.",
		Flags: verbFlags("agent_forget"),
		Action: func(c *cli.Context) error {
			a := &verbs.ForgetArgs{AgentIDs: c.Args().Slice(), AllDead: c.Bool("all-dead"), OlderThan: c.String("older-than"), Logs: c.Bool("logs")}
			if len(a.AgentIDs) == 0 && !a.AllDead && a.OlderThan == "" {
				return usagef("forget takes the ids of dead agents, or --all-dead, or --older-than AGE")
			}
			if len(a.AgentIDs) > 0 && a.AllDead {
				return usagef("forget takes ids or --all-dead, not both")
			}
			cl, err := service(c)
			if err != nil {
				return err
			}
			res, err := cl.Forget(c.Context, a)
			if err != nil {
				return fail(c, err)
			}
			return emit(c, res, func(w io.Writer) {
				for _, id := range res.Forgotten {
					fmt.Fprintln(w, id)
				}
				if len(res.Forgotten) == 0 {
					fmt.Fprintln(c.App.ErrWriter, "no dead agent matched: nothing forgotten")
				}
			})
		},
	})
}
