package cli

import (
	"bytes"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/urfave/cli/v2"

	"github.com/kaimon/kaimon/internal/apitype"
	"github.com/kaimon/kaimon/internal/fleet"
	"github.com/kaimon/kaimon/internal/render"
	"github.com/kaimon/kaimon/internal/verbs"
)

// allHosts is list's flag that lists every host's agents in one table.
const allHosts = "all-hosts"

// waiting is list's flag (the table's waiting) that lists the agents
// waiting on a person: an inbox, a row per request.
const waiting = "waiting"

func listCmd() *cli.Command {
	return verbCmd("agent_list", &cli.Command{
		Description: "With --" + allHosts + " it lists the agents of this machine and of every configured host (kaimon host ls) in one table " +
			"with a HOST column, their ids qualified as HOST/ID (bare on local). The hosts are asked at once, each within " +
			fmt.Sprint(fleet.ListTimeout) + ": a host that fails is reported with its error on stderr (with --json, in \"hosts\") " +
			"while the others' agents are listed, and the exit code is 1.\n\n" +
			"With --" + waiting + " it is an inbox: a row per permission request an agent waits on, with what it asks, " +
			"when it is denied if unanswered, and the `kaimon permit` line that answers it (with --" + allHosts + ", every host's).",
		Flags: append(verbFlags("agent_list"), &cli.BoolFlag{Name: allHosts, Usage: "list the agents of this machine and every configured host, with a HOST column"}),
		Action: func(c *cli.Context) error {
			if err := needVerbArgs(c, "agent_list"); err != nil {
				return err
			}
			a := &verbs.ListArgs{Waiting: c.Bool(waiting)}
			if c.Bool(allHosts) {
				return listAllHosts(c, a)
			}
			cl, err := service(c)
			if err != nil {
				return err
			}
			res, err := cl.List(c.Context, a)
			if err != nil {
				return fail(c, err)
			}
			return emit(c, res, func(w io.Writer) { writeList(c, w, a, res, false) })
		},
	})
}

// writeList writes agent_list's answer for people: the agents' table, or
// with --waiting the requests they wait on.
func writeList(c *cli.Context, w io.Writer, a *verbs.ListArgs, res *verbs.ListResult, withHost bool) {
	switch {
	case len(res.Agents) == 0 && a.Waiting:
		fmt.Fprintln(c.App.ErrWriter, "no agent waits on a person")
	case len(res.Agents) == 0 && withHost:
		fmt.Fprintln(c.App.ErrWriter, "no agents on any host (open one with `kaimon open DIR`)")
	case len(res.Agents) == 0:
		fmt.Fprintln(c.App.ErrWriter, "no agents (open one with `kaimon open DIR`)")
	case a.Waiting:
		writeWaiting(w, streamsOf(c).pal, res.Agents)
	default:
		writeAgents(w, streamsOf(c).pal, res.Agents, withHost)
	}
}

// listAllHosts is list --all-hosts: every host's agents, each host's error
// on stderr (or in the JSON's hosts), exit 1 when any host failed.
func listAllHosts(c *cli.Context, a *verbs.ListArgs) error {
	if c.IsSet("host") {
		return usagef("--%s lists every host: drop --host", allHosts)
	}
	f, err := fleetOf(c)
	if err != nil {
		return err
	}
	res, err := f.ListAll(c.Context, a)
	if err != nil {
		return fail(c, err)
	}
	err = emit(c, res, func(w io.Writer) {
		if len(res.Agents) > 0 || fleet.Failed(res) == nil {
			writeList(c, w, a, res, true)
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

// writeWaiting writes list --waiting's table: a row per pending request,
// the agent as a command takes it (HOST/ID on another host), what it asks,
// until when it waits (local time), and the line that allows it.
func writeWaiting(w io.Writer, pal *palette, agents []verbs.ListEntry) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "AGENT\tASKS\tWAITS UNTIL\tANSWER")
	for _, a := range agents {
		for _, p := range a.PendingPermissions {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", a.AgentID, render.Clip(p.Asks(), 60), until(p.ExpiresAt),
				verbs.PermitCommand(a.AgentID, p.RequestID, apitype.Allow)+"   (or "+string(apitype.Deny)+")")
		}
	}
	tw.Flush()
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
