package cli

import (
	"fmt"
	"io"

	"github.com/urfave/cli/v2"

	"github.com/kaimon/kaimon/internal/verbs"
)

func permitCmd() *cli.Command {
	return verbCmd("agent_permit", &cli.Command{
		ArgsUsage: "ID REQUEST_ID allow|deny",
		Description: "REQUEST_ID is the requestId of the agent's pending permission event (one without a decision), " +
			"from its bus channel or its event log:\n\n" +
			"   kaimon tail agent:$id --from-start --kinds permission\n" +
			"   jq -c 'select(.kind==\"permission\")' \"$(kaimon status $id --json | jq -r .event_log)\"\n\n" +
			"Prints allowed or denied.",
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "always", Usage: "apply the decision to this agent's later requests for the same tool too"},
		},
		Action: func(c *cli.Context) error {
			if err := needArgs(c, 3, "ID REQUEST_ID allow|deny"); err != nil {
				return err
			}
			decision := c.Args().Get(2)
			if decision != verbs.Allow && decision != verbs.Deny {
				return usagef("permit takes allow or deny, not %q", decision)
			}
			cl, err := newClient(c)
			if err != nil {
				return err
			}
			res, err := cl.Permit(c.Context, &verbs.PermitArgs{AgentID: c.Args().Get(0), RequestID: c.Args().Get(1),
				Decision: decision, Always: c.Bool("always")})
			if err != nil {
				return fail(c, err)
			}
			return emit(c, res, func(w io.Writer) {
				if res.Permitted {
					fmt.Fprintln(w, "allowed")
				} else {
					fmt.Fprintln(w, "denied")
				}
			})
		},
	})
}
