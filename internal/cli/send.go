package cli

import (
	"errors"
	"fmt"
	"io"

	"github.com/urfave/cli/v2"

	"github.com/kaimon/kaimon/internal/fleet"
	"github.com/kaimon/kaimon/internal/verbs"
)

func readText(c *cli.Context, s string) (string, error) {
	if s != "-" {
		return s, nil
	}
	b, err := io.ReadAll(c.App.Reader)
	if err != nil {
		return "", fmt.Errorf("reading the text from stdin: %w", err)
	}
	return string(b), nil
}

func sendCmd() *cli.Command {
	return lineCmd("agent_send", &cli.Command{Description: "TEXT - reads the text from stdin. Prints the turn number."},
		func(c *cli.Context, cl verbs.Service, a cli.Args) (*verbs.SendResult, error) {
			text, err := readText(c, a.Get(1))
			if err != nil {
				return nil, err
			}
			r, err := cl.Send(c.Context, &verbs.SendArgs{AgentID: a.Get(0), Text: text})
			var le *fleet.LinkError
			if errors.As(err, &le) {
				return nil, &sendLinkError{le: le, id: shownID(c, a.Get(0))}
			}
			return r, err
		},
		func(r *verbs.SendResult) string { return fmt.Sprint(r.Turn) })
}

// sendLinkError is a send whose host's link broke before its answer came:
// the turn may have reached the agent, or not, and only the host can say
// (sending it again might run it twice).
type sendLinkError struct {
	le *fleet.LinkError
	id string // as shown: HOST/ID
}

func (e *sendLinkError) Error() string {
	return fmt.Sprintf("the link to host %s broke during the send (%s): whether agent %s got the turn is not known here; "+
		"once the host answers, `kaimon status %s` shows its last turn and `kaimon output %s` its reply", e.le.Host, e.le.Said(), e.id, e.id, e.id)
}

func (e *sendLinkError) Unwrap() error { return e.le }
