package cli

import (
	"bytes"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/urfave/cli/v2"

	"github.com/kaimon/kaimon/internal/fleet"
	"github.com/kaimon/kaimon/internal/verbs"
)

// allHosts is list's flag that lists every host's agents in one table.
const allHosts = "all-hosts"

func listCmd() *cli.Command {
	return verbCmd("agent_list", &cli.Command{
		Description: "With --" + allHosts + " it lists the agents of this machine and of every configured host (kaimon host ls) in one table " +
			"with a HOST column, their ids qualified as HOST/ID (bare on local). The hosts are asked at once, each within " +
			fmt.Sprint(fleet.ListTimeout) + ": a host that fails is reported with its error on stderr (with --json, in \"hosts\") " +
			"while the others' agents are listed, and the exit code is 1.",
		Flags: []cli.Flag{&cli.BoolFlag{Name: allHosts, Usage: "list the agents of this machine and every configured host, with a HOST column"}},
		Action: func(c *cli.Context) error {
			if err := needVerbArgs(c, "agent_list"); err != nil {
				return err
			}
			if c.Bool(allHosts) {
				return listAllHosts(c)
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
				writeAgents(w, streamsOf(c).pal, res.Agents, false)
			})
		},
	})
}

// listAllHosts is list --all-hosts: every host's agents, each host's error
// on stderr (or in the JSON's hosts), exit 1 when any host failed.
func listAllHosts(c *cli.Context) error {
	if c.IsSet("host") {
		return usagef("--%s lists every host: drop --host", allHosts)
	}
	f, err := fleetOf(c)
	if err != nil {
		return err
	}
	res, err := f.ListAll(c.Context)
	if err != nil {
		return fail(c, err)
	}
	err = emit(c, res, func(w io.Writer) {
		if len(res.Agents) > 0 {
			writeAgents(w, streamsOf(c).pal, res.Agents, true)
		} else if fleet.Failed(res) == nil {
			fmt.Fprintln(c.App.ErrWriter, "no agents on any host (open one with `kaimon open DIR`)")
		}
		for _, h := range res.Hosts {
			if h.Error != "" {
				fmt.Fprintf(c.App.ErrWriter, "kaimon: %s\n", h.Error)
			}
		}
	})
	if err != nil {
		return err
	}
	if err := fleet.Failed(res); err != nil {
		return &jsonReported{err: err} // said above, or in the JSON
	}
	return nil
}

// branchMark is an agent's branch for the list: "-" without a worktree,
// a * after it when the worktree has changes, a ! when git could not say.
func branchMark(st *verbs.AgentStatus) string {
	switch {
	case st.Worktree == "":
		return "-"
	case st.WorktreeError != "":
		return st.Branch + "!"
	case st.Dirty:
		return st.Branch + "*"
	}
	return st.Branch
}

// writeAgents writes agent_list's table for people. It is aligned
// uncolored and the status colored after: tabwriter counts a color's
// escape bytes as width, which shifted every column after the status.
// pal colours it; withHost puts each agent's host in a first column.
func writeAgents(w io.Writer, pal *palette, agents []verbs.ListEntry, withHost bool) {
	var table bytes.Buffer
	tw := tabwriter.NewWriter(&table, 0, 0, 2, ' ', 0)
	if withHost {
		fmt.Fprint(tw, "HOST\t")
	}
	// A BRANCH column only when an agent has a worktree: its branch, and
	// a * when the worktree has uncommitted changes or untracked files
	// (as shell prompts mark a dirty checkout).
	branches := slices.ContainsFunc(agents, func(a verbs.ListEntry) bool { return a.Worktree != "" })
	if branches {
		fmt.Fprintln(tw, "ID\tSTATUS\tMODEL\tTURN\tTOKENS IN/OUT\tBRANCH\tCWD")
	} else {
		fmt.Fprintln(tw, "ID\tSTATUS\tMODEL\tTURN\tTOKENS IN/OUT\tCWD")
	}
	for _, a := range agents {
		status := statusText(&a.AgentStatus)
		if a.Reason != "" {
			status += " (" + a.Reason + ")"
		}
		if withHost {
			fmt.Fprintf(tw, "%s\t", a.Host)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d/%d\t", a.AgentID, status, a.Model, a.Turn,
			a.Usage.InputTokens, a.Usage.OutputTokens)
		if branches {
			fmt.Fprintf(tw, "%s\t", branchMark(&a.AgentStatus))
		}
		fmt.Fprintf(tw, "%s\n", a.Cwd)
	}
	tw.Flush()
	lines := strings.SplitAfter(table.String(), "\n")
	at := strings.Index(lines[0], "STATUS") // where every row's status begins
	for i, a := range agents {
		l, plain := lines[i+1], statusText(&a.AgentStatus)
		lines[i+1] = l[:at] + pal.statusLine(&a.AgentStatus) + l[at+len(plain):]
	}
	io.WriteString(w, strings.Join(lines, ""))
}
