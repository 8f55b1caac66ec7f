package cli

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/urfave/cli/v2"

	"github.com/kaimon/kaimon/internal/verbs"
)

func listCmd() *cli.Command {
	return verbCmd("agent_list", &cli.Command{
		Action: func(c *cli.Context) error {
			if err := needVerbArgs(c, "agent_list"); err != nil {
				return err
			}
			cl, err := service(c)
			if err != nil {
				return err
			}
			res, err := cl.List(c.Context, &verbs.ListArgs{})
			if err != nil {
				return fail(c, err)
			}
			return emit(c, res, func(w io.Writer) {
				if len(res.Agents) == 0 {
					fmt.Fprintln(c.App.ErrWriter, "no agents (open one with `kaimon open DIR`)")
					return
				}
				writeAgents(w, res.Agents)
			})
		},
	})
}

// writeAgents writes agent_list's table for people. It is aligned
// uncolored and the status colored after: tabwriter counts a color's
// escape bytes as width, which shifted every column after the status.
func writeAgents(w io.Writer, agents []verbs.ListEntry) {
	var table bytes.Buffer
	tw := tabwriter.NewWriter(&table, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSTATUS\tMODEL\tTURN\tTOKENS IN/OUT\tCWD")
	for _, a := range agents {
		status := statusText(&a.AgentStatus)
		if a.Reason != "" {
			status += " (" + a.Reason + ")"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d/%d\t%s\n", a.AgentID, status, a.Model, a.Turn,
			a.Usage.InputTokens, a.Usage.OutputTokens, a.Cwd)
	}
	tw.Flush()
	lines := strings.SplitAfter(table.String(), "\n")
	at := strings.Index(lines[0], "STATUS") // where every row's status begins
	for i, a := range agents {
		l, plain := lines[i+1], statusText(&a.AgentStatus)
		lines[i+1] = l[:at] + statusLine(&a.AgentStatus) + l[at+len(plain):]
	}
	io.WriteString(w, strings.Join(lines, ""))
}
