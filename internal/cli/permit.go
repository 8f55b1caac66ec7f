package cli

import (
	"github.com/urfave/cli/v2"

	"github.com/kaimon/kaimon/internal/apitype"
	"github.com/kaimon/kaimon/internal/verbs"
)

func permitCmd() *cli.Command {
	return lineCmd("agent_permit", &cli.Command{
		Description: "`kaimon status ID` shows the requests an agent waits on, each with the `kaimon permit` line that answers it. " +
			"REQUEST_ID, needed only when it waits on several, is the request_id of one of its pending_permissions in `kaimon status ID --json`, " +
			"and the requestId of its permission event (one without a decision) on the agent's bus channel and in its event log:\n\n" +
			"   kaimon status $id\n" +
			"   kaimon status $id --json | jq -r '.pending_permissions[].request_id'\n" +
			"   kaimon tail agent:$id --from-start --kinds permission\n\n" +
			"Prints " + apitype.Allow.Past() + " or " + apitype.Deny.Past() + ".",
		Flags: verbFlags("agent_permit"),
	}, func(c *cli.Context, cl verbs.Service, _ cli.Args) (*verbs.PermitResult, error) {
		w := verbWords(c, "agent_permit")
		decision := apitype.Decision(w["decision"])
		if !decision.Valid() {
			return nil, usagef("permit takes %s, not %q", apitype.Join(apitype.Decisions, " or "), decision)
		}
		return cl.Permit(c.Context, &verbs.PermitArgs{AgentID: w["agent_id"], RequestID: w["request_id"],
			Decision: decision, Always: c.Bool("always"), Error: c.String("error")})
	}, func(r *verbs.PermitResult) string { return apitype.DecisionOf(r.Permitted).Past() })
}
