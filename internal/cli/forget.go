package cli

import (
	"fmt"
	"io"

	"github.com/urfave/cli/v2"

	"github.com/kaimon/kaimon/internal/verbs"
)

func forgetCmd() *cli.Command {
	return verbCmd("agent_forget", &cli.Command{
		Description: "Forgets the dead agents named, or with --all-dead every dead agent; --older-than narrows either to those idle " +
			"that long (alone, it selects every dead agent that old). Prints the ids forgotten, one a line. " +
			// What becomes of worktrees and branches is the verb's doc,
			// below: here only how the command says it.
			"An agent kept for its worktree's changes is named on stderr with its worktree, and the exit code is 1; a branch kept is named on stderr.",
		Flags: verbFlags("agent_forget"),
		Action: func(c *cli.Context) error {
			a := &verbs.ForgetArgs{AgentIDs: c.Args().Slice(), AllDead: c.Bool("all-dead"), OlderThan: c.String("older-than"), Logs: c.Bool("logs"),
				Force: c.Bool("force"), DeleteBranch: c.Bool("delete-branch")}
			if len(a.AgentIDs) == 0 && !a.AllDead && a.OlderThan == "" {
				return usagef("forget takes the ids of dead agents, or --all-dead, or --older-than AGE")
			}
			if len(a.AgentIDs) > 0 && a.AllDead {
				return usagef("forget takes ids or --all-dead, not both")
			}
			cl, err := service(c)
			if err != nil {
				return err
			}
			res, err := cl.Forget(c.Context, a)
			if err != nil {
				return fail(c, err)
			}
			err = emit(c, res, func(w io.Writer) {
				for _, id := range res.Forgotten {
					fmt.Fprintln(w, id)
				}
				for _, b := range res.BranchesKept {
					fmt.Fprintf(c.App.ErrWriter, "kaimon: agent %s's branch %s is kept in %s: it is not merged into its base (git branch -D %s, or forget --delete-branch next time)\n",
						b.AgentID, b.Branch, b.Repository, b.Branch)
				}
				for _, k := range res.Kept {
					fmt.Fprintf(c.App.ErrWriter, "kaimon: agent %s is kept: %s\n", k.AgentID, k.Reason)
				}
				if len(res.Forgotten) == 0 && len(res.Kept) == 0 {
					fmt.Fprintln(c.App.ErrWriter, "no dead agent matched: nothing forgotten")
				}
			})
			if err == nil && len(res.Kept) > 0 {
				// Not everything asked for went: a script must know.
				return &jsonReported{err: fmt.Errorf("%d agent(s) kept for the work in their worktrees", len(res.Kept))}
			}
			return err
		},
	})
}
