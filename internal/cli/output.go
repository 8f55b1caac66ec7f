package cli

import (
	"fmt"
	"io"

	"github.com/urfave/cli/v2"

	"github.com/kaimon/kaimon/internal/verbs"
)

func outputCmd() *cli.Command {
	return verbCmd("agent_output", &cli.Command{
		Flags: verbFlags("agent_output"),
		Action: func(c *cli.Context) error {
			if err := needVerbArgs(c, "agent_output"); err != nil {
				return err
			}
			cl, err := service(c)
			if err != nil {
				return err
			}
			res, err := cl.Output(c.Context, &verbs.OutputArgs{AgentID: c.Args().First(), Turn: c.Int("turn"),
				Which: c.String("which"), IncludeTools: c.Bool("include-tools"), MaxChars: c.Int("max-chars")})
			if err != nil {
				return fail(c, err)
			}
			return emit(c, res, func(w io.Writer) {
				fmt.Fprintln(w, res.Text)
				if !res.Done {
					fmt.Fprintf(c.App.ErrWriter, "(turn %d still running: partial output)\n", res.Turn)
				}
				if res.Truncated {
					fmt.Fprintf(c.App.ErrWriter, "(truncated: %d characters dropped; raise --max-chars)\n", res.DroppedChars)
				}
				for _, e := range res.LogErrors {
					fmt.Fprintf(c.App.ErrWriter, "kaimon: output: %s; skipped, so this output may lack it\n", e)
				}
			})
		},
	})
}
