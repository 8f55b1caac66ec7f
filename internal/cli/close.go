package cli

import (
	"github.com/urfave/cli/v2"

	"github.com/kaimon/kaimon/internal/verbs"
)

func closeCmd() *cli.Command {
	return lineCmd("agent_close", &cli.Command{},
		func(c *cli.Context, cl verbs.Service, a cli.Args) (*verbs.CloseResult, error) {
			return cl.Close(c.Context, &verbs.CloseArgs{AgentID: a.Get(0)})
		},
		func(r *verbs.CloseResult) string { return pick(r.Closed, "closed", "already closed") })
}
