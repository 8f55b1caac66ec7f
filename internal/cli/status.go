package cli

import (
	"cmp"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/urfave/cli/v2"

	"github.com/kaimon/kaimon/internal/apitype"
	"github.com/kaimon/kaimon/internal/verbs"
)

// statusColor is agent state s in its colour (statusColors).
func (pal *palette) statusColor(s apitype.AgentState) string {
	if c, ok := pal.states[s]; ok {
		return c.Sprint(s)
	}
	return string(s)
}

// statusText is an agent's state for people: its status, and a working
// agent stopped on a permission request says so, since it will not move
// until someone answers. statusLine is the same, colored.
func statusText(st *verbs.AgentStatus) string {
	if asksPermission(st) {
		return string(st.Status) + " (asks permission)"
	}
	return string(st.Status)
}

func (pal *palette) statusLine(st *verbs.AgentStatus) string {
	if asksPermission(st) {
		return pal.magenta.Sprint(statusText(st))
	}
	return pal.statusColor(st.Status)
}

// changes says, after an agent's branch, whether its worktree has
// uncommitted changes or untracked files (kaimon diff shows them).
func changes(st *verbs.AgentStatus) string {
	switch {
	case st.WorktreeError != "":
		return " (" + st.WorktreeError + ")"
	case st.Dirty:
		return " (uncommitted changes)"
	}
	return ""
}

func asksPermission(st *verbs.AgentStatus) bool {
	return len(st.PendingPermissions) > 0 && st.Status != apitype.Dead
}

func statusCmd() *cli.Command {
	return verbCmd("agent_status", &cli.Command{
		Action: func(c *cli.Context) error {
			if err := needVerbArgs(c, "agent_status"); err != nil {
				return err
			}
			cl, err := service(c)
			if err != nil {
				return err
			}
			st, err := cl.Status(c.Context, &verbs.StatusArgs{AgentID: c.Args().First()})
			if err != nil {
				return fail(c, err)
			}
			pal := streamsOf(c).pal
			return emit(c, st, func(w io.Writer) {
				tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
				row := func(k, v string) { fmt.Fprintf(tw, "%s\t%s\n", k, v) }
				row("status", pal.statusLine(st))
				id := cmp.Or(st.AgentID, c.Args().First()) // the whole id, when a prefix named it
				for _, p := range st.PendingPermissions {
					row("permission", fmt.Sprintf("%s asks for %s (denied if unanswered by %s)", p.RequestID, p.Asks(), p.ExpiresAt))
					row("", "answer: "+verbs.PermitCommand(shownID(c, id), p.RequestID, apitype.Allow)+"   (or "+string(apitype.Deny)+")")
				}
				row("model", st.Model)
				row("cwd", st.Cwd)
				row("turn", fmt.Sprint(st.Turn))
				if st.UsageNote != "" {
					row("usage", st.UsageNote)
				} else {
					u := fmt.Sprintf("in %d  out %d  cache read %d  cache write %d", st.Usage.InputTokens, st.Usage.OutputTokens, st.Usage.CacheReadTokens, st.Usage.CacheCreationTokens)
					if st.Usage.ThoughtTokens > 0 {
						u += fmt.Sprintf("  (out includes %d thinking)", st.Usage.ThoughtTokens)
					}
					row("usage", u)
				}
				row("created", st.CreatedAt)
				row("last activity", st.LastActivity)
				row("session", st.SessionID)
				row("transcript", st.Transcript)
				row("event log", st.EventLog)
				row("queues prompts", fmt.Sprint(st.QueuesPrompts))
				if st.Reason != "" {
					row("ended", st.Reason)
				}
				if st.RecordError != "" {
					row("record", pal.red.Sprint(st.RecordError))
				}
				if st.Worktree != "" {
					row("repository", st.Repository)
					row("worktree", st.Worktree)
					row("branch", st.Branch+changes(st))
					row("base", st.BaseCommit)
				}
				tw.Flush()
			})
		},
	})
}
