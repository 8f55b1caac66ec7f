package cli

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/kaimon/kaimon/internal/apitype"
	"github.com/kaimon/kaimon/internal/verbs"
)

// chatCmd is `kaimon chat ID`: a conversation with a live agent on a
// terminal, as claude-squad's attach or docker attach give one. Each line
// typed is a turn, rendered as `kaimon run` renders it (its permission
// requests asked inline), then the prompt comes back. It is made of the
// same turn as run (turn.go), not of a verb: nothing in it is a new call
// to the daemon.
func chatCmd() *cli.Command {
	return &cli.Command{
		Name:      "chat",
		Usage:     "Talk with an agent on the terminal: a turn per line, its reply as it streams",
		ArgsUsage: "AGENT_ID",
		Description: "Opens a conversation with a live agent (HOST/ID on another host): each line you type is sent " +
			"as a turn, its reply renders as `kaimon run` renders it (text as it streams, a line per tool call, " +
			"permission requests asked inline: y, n or a), then the prompt comes back.\n\n" +
			"Ctrl-C interrupts the turn under way (a second one leaves it running and ends the chat); at the prompt it " +
			"does nothing but say how to leave. Ctrl-D leaves, also in the middle of a turn: the agent goes on with it " +
			"(kaimon chat ID comes back). Needs a terminal: for a script, `kaimon run ID TEXT` is one turn.",
		Flags: []cli.Flag{
			&cli.DurationFlag{Name: "timeout", Usage: "how long to wait for each turn to end", Value: time.Duration(verbs.DefaultTimeout) * time.Second},
		},
		Action: func(c *cli.Context) error {
			if err := needArgs(c, 1, "AGENT_ID"); err != nil {
				return err
			}
			ios := streamsOf(c)
			if !ios.IsStdoutTTY() || !ios.IsStdinTTY() {
				return errors.New("kaimon chat needs a terminal (stdin and stdout); for a script, `kaimon run ID TEXT` runs one turn")
			}
			cl, err := service(c)
			if err != nil {
				return err
			}
			return runChat(c, cl, c.Args().First(), c.Duration("timeout"))
		},
	}
}

// chatPrompt is what the chat shows where the person types.
const chatPrompt = "> "

func runChat(c *cli.Context, cl verbs.Service, id string, timeout time.Duration) error {
	if timeout <= 0 {
		return usagef("--timeout must be positive")
	}
	ios := streamsOf(c)
	shown := shownID(c, id)
	st, err := cl.Status(c.Context, &verbs.StatusArgs{AgentID: id})
	if err != nil {
		return fail(c, err)
	}
	if st.Status == apitype.Dead {
		return fmt.Errorf("agent %s is dead (%s): `kaimon open --id %s --resume` continues its conversation, then chat with it", shown, st.Reason, shown)
	}
	fmt.Fprintln(ios.ErrOut, ios.pal.faint.Sprintf("chat with agent %s (%s in %s): a line is a turn; Ctrl-C interrupts it, Ctrl-D leaves with the agent still running",
		shown, st.Model, st.Cwd))
	// Ctrl-C is the chat's for all of it: a turn's, or the prompt's.
	keys, release := keysOf(c)
	defer release()
	lines := ios.Lines()
	for {
		fmt.Fprint(ios.Out, ios.pal.bold.Sprint(chatPrompt))
		var text string
		select {
		case <-c.Context.Done():
			fmt.Fprintln(ios.Out)
			return nil
		case <-keys:
			fmt.Fprintln(ios.Out) // past the terminal's echoed ^C
			fmt.Fprintln(ios.ErrOut, ios.pal.faint.Sprint("(Ctrl-D leaves the chat; the agent goes on)"))
			continue
		case l, ok := <-lines:
			if !ok {
				fmt.Fprintln(ios.Out)
				fmt.Fprintln(ios.ErrOut, ios.pal.faint.Sprintf("left the chat; agent %s goes on (kaimon chat %s comes back)", shown, shown))
				return nil
			}
			text = l.text
		}
		if strings.TrimSpace(text) == "" {
			continue
		}
		t := newTurn(c, cl, id, text, timeout)
		t.leave = ios.inputEnded()
		err := t.run(c, func() (<-chan os.Signal, func()) { return keys, func() {} })
		var de *detachedError
		var je *jsonReported
		switch {
		case errors.As(err, &de):
			// A second Ctrl-C, or Ctrl-D: the agent goes on with the turn.
			fmt.Fprintf(ios.ErrOut, "kaimon: %v\n", err)
			return nil
		case errors.As(err, &je): // told already (a cancelled turn's usage line)
		case err != nil:
			// The turn failed, or timed out: say so, and go on talking.
			fmt.Fprintf(ios.ErrOut, "kaimon: %v\n", err)
			if isLost(err) {
				return &jsonReported{err: err}
			}
		}
	}
}

// isLost says whether err leaves nothing to chat with: the daemon or the
// link to the agent's host went away.
func isLost(err error) bool {
	var le *daemonLostError
	var ll *linkLostError
	return errors.As(err, &le) || errors.As(err, &ll)
}
