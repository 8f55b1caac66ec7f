package cli

import (
	"github.com/urfave/cli/v2"

	"github.com/kaimon/kaimon/internal/verbs"
)

func setModelCmd() *cli.Command {
	return lineCmd("agent_set_model", &cli.Command{},
		func(c *cli.Context, cl verbs.Service, a cli.Args) (*verbs.SetModelResult, error) {
			return cl.SetModel(c.Context, &verbs.SetModelArgs{AgentID: a.Get(0), Model: a.Get(1)})
		},
		func(r *verbs.SetModelResult) string {
			return pick(r.Switched, "switched", "not switched (the agent refused; close and reopen it with --model)")
		})
}
