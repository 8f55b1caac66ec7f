package cli

import (
	"github.com/urfave/cli/v2"

	"github.com/kaimon/kaimon/internal/apitype"
	"github.com/kaimon/kaimon/internal/verbs"
)

func permitCmd() *cli.Command {
	return lineCmd("agent_permit", &cli.Command{
		Description: "REQUEST_ID is the requestId of the agent's pending permission event (one without a decision), " +
			"from its bus channel or its event log:\n\n" +
			"   kaimon tail agent:$id --from-start --kinds permission\n" +
			"   jq -c 'select(.kind==\"permission\")' \"$(kaimon status $id --json | jq -r .event_log)\"\n\n" +
			"Prints " + apitype.Allow.Past() + " or " + apitype.Deny.Past() + ".",
		Flags: verbFlags("agent_permit"),
	}, func(c *cli.Context, cl verbs.Service, a cli.Args) (*verbs.PermitResult, error) {
		decision := apitype.Decision(a.Get(2))
		if !decision.Valid() {
			return nil, usagef("permit takes %s, not %q", apitype.Join(apitype.Decisions, " or "), decision)
		}
		return cl.Permit(c.Context, &verbs.PermitArgs{AgentID: a.Get(0), RequestID: a.Get(1),
			Decision: decision, Always: c.Bool("always"), Error: c.String("error")})
	}, func(r *verbs.PermitResult) string { return apitype.DecisionOf(r.Permitted).Past() })
}
