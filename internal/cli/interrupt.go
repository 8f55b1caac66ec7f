package cli

import (
	"github.com/urfave/cli/v2"

	"github.com/kaimon/kaimon/internal/verbs"
)

func interruptCmd() *cli.Command {
	return lineCmd("agent_interrupt", &cli.Command{
		Description: "Prints \"interrupted\", or \"nothing to interrupt\" when no turn was running (both exit 0). An agent " +
			"that refuses the interrupt or does not acknowledge it in time is an error (exit 1, and an error event in " +
			"its log): its turn may still be running; wait for it, or stop the agent with `kaimon close ID`.",
	},
		func(c *cli.Context, cl verbs.Service, a cli.Args) (*verbs.InterruptResult, error) {
			return cl.Interrupt(c.Context, &verbs.InterruptArgs{AgentID: a.Get(0)})
		},
		func(r *verbs.InterruptResult) string {
			return pick(r.Interrupted, "interrupted", "nothing to interrupt")
		})
}
