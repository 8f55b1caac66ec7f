package cli

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/kaimon/kaimon/internal/verbs"
)

// oneShotFlag is run's -C DIR: it opens a throwaway agent, which stands
// for the positional agent_id.
const oneShotFlag = "C"

func runCmd() *cli.Command {
	// timeout is by hand: seconds in the table's JSON, a duration here.
	flags := append([]cli.Flag{
		&cli.DurationFlag{Name: "timeout", Usage: "how long to wait for the turn to end", Value: time.Duration(verbs.DefaultTimeout) * time.Second},
		&cli.StringFlag{Name: oneShotFlag, Usage: "open a throwaway agent in `DIR`, run one turn, close it"},
	}, openFlags()...)
	v := verbs.ByName("agent_run")
	oneShotUsage := "-" + oneShotFlag + " DIR " + v.ArgsUsage("agent_id")
	return verbCmd("agent_run", &cli.Command{
		ArgsUsage: v.ArgsUsage() + " | " + oneShotUsage,
		Description: "Prints the assistant's final text of the turn. Exits 3 if the turn failed, 4 on timeout " +
			"(the partial text is printed, and the agent keeps working). TEXT - reads stdin.\n" +
			"On another host, a link that breaks during the turn is made again (3 tries) and the turn followed to its end; " +
			"one that cannot be made again exits 5 (the agent may be working on there: `kaimon status HOST/ID`).\n" +
			"With -C DIR (no ID) it opens an agent in DIR with the open flags, runs one turn, and closes it.\n\n" +
			"On a terminal the turn renders as it happens: the text as it streams, thoughts dimmed, a line per tool call " +
			"and its result, a permission request asked there when stdin is a terminal too (y allows, n denies, a allows " +
			"for good; Ctrl-D tells it with the `kaimon permit` command instead, as without a terminal), a spinner while " +
			"the agent is silent, and the turn's usage on stderr at the end. Piped, stdout gets the final text alone, " +
			"and a permission request is told on stderr with the command that answers it.\n\n" +
			"Ctrl-C interrupts the turn (exit 3 when it ends so); a second Ctrl-C leaves it running and exits 130. " +
			"With -C the agent is closed either way: a second Ctrl-C closes it at once, a third stops waiting for that.",
		Flags: flags,
		Action: func(c *cli.Context) error {
			cl, err := service(c)
			if err != nil {
				return err
			}
			timeout := c.Duration("timeout")
			if timeout <= 0 {
				return usagef("--timeout must be positive")
			}
			var id, textArg string
			oneShot := c.IsSet(oneShotFlag)
			if oneShot {
				if err := needArgs(c, len(v.Positional)-1, v.ArgsUsage("agent_id")+" with -"+oneShotFlag+" DIR"); err != nil {
					return err
				}
				textArg = c.Args().Get(0)
			} else {
				if err := needArgs(c, len(v.Positional), v.ArgsUsage()+" (or "+oneShotUsage+")"); err != nil {
					return err
				}
				id, textArg = c.Args().Get(0), c.Args().Get(1)
			}
			text, err := readText(c, textArg)
			if err != nil {
				return err
			}
			if oneShot {
				if err := checkRemotePaths(c, c.String(oneShotFlag)); err != nil {
					return err
				}
				a, err := openArgs(c, c.String(oneShotFlag))
				if err != nil {
					return err
				}
				res, err := cl.Open(c.Context, a)
				if err != nil {
					return fail(c, err)
				}
				id = res.AgentID
			}
			err = runTurn(c, cl, id, text, timeout, oneShot)
			var de *detachedError
			detached := errors.As(err, &de)
			// A lost daemon took its agent with it: closing that would
			// only start another daemon. A lost link leaves no way to
			// close it: the error says so.
			var le *daemonLostError
			var ll *linkLostError
			if oneShot && errors.As(err, &ll) {
				ll.throwaway = true
			}
			if oneShot && !errors.As(err, &le) && ll == nil {
				if detached && !c.Bool("json") {
					fmt.Fprintf(c.App.ErrWriter, "kaimon: closing agent %s, run -C's throwaway (Ctrl-C again to stop waiting)\n", id)
				}
				closed := closeThrowaway(c.Context, cl, id)
				if detached {
					de.throwaway, de.closed = true, closed
				}
			}
			if detached {
				return fail(c, de) // runTurn leaves it to us: -C changes its words
			}
			return err
		},
	})
}

// closeThrowaway closes run -C's agent, even when the run was interrupted
// (ctx may be over) or detached from; a further Ctrl-C stops waiting for
// it. It says whether the agent is closed.
func closeThrowaway(ctx context.Context, cl verbs.Service, id string) bool {
	cctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	sigs, release := catchInterrupts(ctx)
	defer release()
	go func() {
		select {
		case <-sigs:
			cancel()
		case <-cctx.Done():
		}
	}()
	_, err := cl.Close(cctx, &verbs.CloseArgs{AgentID: id})
	return err == nil
}
