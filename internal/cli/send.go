package cli

import (
	"fmt"
	"io"

	"github.com/urfave/cli/v2"

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
			return cl.Send(c.Context, &verbs.SendArgs{AgentID: a.Get(0), Text: text})
		},
		func(r *verbs.SendResult) string { return fmt.Sprint(r.Turn) })
}
