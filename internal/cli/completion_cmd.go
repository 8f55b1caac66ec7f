package cli

import (
	"io"
	"strings"

	"github.com/urfave/cli/v2"
)

func completionCmd() *cli.Command {
	return &cli.Command{
		Name:      "completion",
		Usage:     "Print a shell completion script (" + strings.Join(Shells[:len(Shells)-1], ", ") + " or " + Shells[len(Shells)-1] + ")",
		ArgsUsage: strings.Join(Shells, "|"),
		Description: "Load it in the shell's startup file:\n\n" +
			"   bash: source <(kaimon completion bash)\n" +
			"   zsh:  source <(kaimon completion zsh)   (after compinit)\n" +
			"   fish: kaimon completion fish | source\n\n" +
			"The scripts ask `kaimon __complete` for candidates, which never runs a verb nor starts the daemon; " +
			"agent ids are offered when kaimon-agentd is running.",
		Action: func(c *cli.Context) error {
			if err := needArgs(c, 1, "one shell: "+strings.Join(Shells, ", ")); err != nil {
				return err
			}
			s, err := Completion(c.App, c.Args().First())
			if err != nil {
				return usagef("%v", err)
			}
			_, err = io.WriteString(c.App.Writer, s)
			return err
		},
	}
}
