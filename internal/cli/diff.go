package cli

import (
	"fmt"
	"io"

	"github.com/urfave/cli/v2"

	"github.com/kaimon/kaimon/internal/verbs"
)

func diffCmd() *cli.Command {
	return verbCmd("agent_diff", &cli.Command{
		Description: "Prints the patch alone on stdout, so that `kaimon diff ID > agent.patch` and `kaimon diff ID | git apply` work; " +
			"nothing when the agent changed nothing. The agent must have been opened with --worktree. " +
			"The diff streams from the daemon as git makes it, whole, whatever its size; with --json it is agent_diff's answer, cut as the tool's is. " +
			"git apply refuses a patch that names a file by its size alone: apply the rest with git apply --exclude=FILE, and copy the file from the worktree.",
		Flags: verbFlags("agent_diff"),
		Action: func(c *cli.Context) error {
			if err := needVerbArgs(c, "agent_diff"); err != nil {
				return err
			}
			svc, err := service(c)
			if err != nil {
				return err
			}
			a := &verbs.DiffArgs{AgentID: c.Args().First(), Stat: c.Bool("stat")}
			if c.Bool("json") {
				res, err := svc.Diff(c.Context, a)
				if err != nil {
					return fail(c, err)
				}
				return emit(c, res, nil)
			}
			dw, ok := svc.(verbs.DiffWriter)
			if !ok {
				return fmt.Errorf("kaimon diff: %T cannot stream a diff", svc)
			}
			out := &counter{w: c.App.Writer}
			res, err := dw.WriteDiff(c.Context, a, out)
			if err != nil {
				return fail(c, err)
			}
			if out.n == 0 {
				fmt.Fprintf(c.App.ErrWriter, "(no changes on %s since %.12s)\n", res.Branch, res.BaseCommit)
			}
			return nil
		},
	})
}

// counter is a writer that counts what it passes on.
type counter struct {
	w io.Writer
	n int64
}

func (c *counter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}
