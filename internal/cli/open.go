package cli

import (
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/kaimon/kaimon/internal/backend"
	"github.com/kaimon/kaimon/internal/policy"
	"github.com/kaimon/kaimon/internal/verbs"
)

func openFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "model", Aliases: []string{"m"}, Usage: "model alias or id, optionally with /low|/medium|/high effort", Value: verbs.DefaultModel},
		&cli.StringFlag{Name: "effort", Usage: "thinking effort `LEVEL`: " + strings.Join(backend.Efforts, "|")},
		&cli.StringFlag{Name: "permission", Aliases: []string{"p"}, Usage: "permission `PRESET`: " + strings.Join(policy.PresetNames, "|"), Value: verbs.DefaultPermission},
		&cli.StringFlag{Name: "permission-mode", Usage: "override the preset's claude permission `MODE`: " + strings.Join(policy.PermissionModes, "|")},
		&cli.StringSliceFlag{Name: "allow", Usage: "allow `TOOL` (repeatable); composes with the preset"},
		&cli.BoolFlag{Name: "only", Usage: "make the --allow tools the agent's whole tool set"},
		&cli.StringSliceFlag{Name: "disallow", Usage: "forbid `TOOL` (repeatable); replaces the default recursion guard"},
		&cli.BoolFlag{Name: "no-recursion-guard", Usage: "allow the agent to open and drive agents itself (disallowed_tools = [])"},
		&cli.StringFlag{Name: "mcp-config", Usage: "--mcp-config JSON `FILE` for the agent"},
		&cli.StringFlag{Name: "system-prompt", Usage: "`TEXT` appended to the agent's system prompt"},
		&cli.StringFlag{Name: "id", Usage: "agent id to use (reopening a dead id reuses its slot, with a fresh conversation unless --resume)"},
		&cli.BoolFlag{Name: "resume", Usage: "with --id of a dead agent: reopen it with its conversation; the flags not given come from its record"},
	}
}

// openArgs builds agent_open's arguments from the flags given. A flag left
// out is left out of the request too, so that the daemon applies the
// table's default, or with --resume the agent's record.
func openArgs(c *cli.Context, dir string) (*verbs.OpenArgs, error) {
	given := func(name string) string {
		if !c.IsSet(name) {
			return ""
		}
		return c.String(name)
	}
	a := &verbs.OpenArgs{
		Cwd: dir, Model: given("model"), Effort: c.String("effort"),
		Permission: given("permission"), PermissionMode: c.String("permission-mode"),
		AllowedTools: c.StringSlice("allow"), Only: c.Bool("only"),
		MCPConfig: c.String("mcp-config"), SystemPrompt: c.String("system-prompt"), ID: c.String("id"),
		Resume: c.Bool("resume"),
	}
	if a.Resume && a.ID == "" {
		return nil, usagef("--resume reopens a dead agent with its conversation: name it with --id ID")
	}
	if c.Bool("no-recursion-guard") && c.IsSet("disallow") {
		return nil, usagef("--no-recursion-guard and --disallow contradict each other: pick one")
	}
	if c.Bool("no-recursion-guard") {
		empty := []string{}
		a.DisallowedTools = &empty
	} else if c.IsSet("disallow") {
		d := c.StringSlice("disallow")
		a.DisallowedTools = &d
	}
	if a.MCPConfig != "" {
		if abs, err := absPath(a.MCPConfig); err == nil {
			a.MCPConfig = abs
		}
	}
	if dir == "" {
		return a, nil // --resume: the agent's own cwd
	}
	abs, err := absPath(dir)
	if err != nil {
		return nil, err
	}
	a.Cwd = abs
	return a, nil
}

func openCmd() *cli.Command {
	return verbCmd("agent_open", &cli.Command{
		ArgsUsage: "[DIR]",
		Description: "Prints the new agent's id alone, so that id=$(kaimon open .) works. DIR defaults to the current directory " +
			"(with --resume, to the agent's own).\n\n" +
			"--id of a dead agent reuses its slot: turn numbers and seq continue, and the conversation starts afresh. " +
			"Add --resume to continue its conversation too (claude --resume, ACP session/load); the flags left out come from its record " +
			"(its cwd, model as last switched, preset and tools).",
		Flags: openFlags(),
		Action: func(c *cli.Context) error {
			if c.NArg() > 1 {
				return usagef("open takes at most one DIR (got %d arguments)", c.NArg())
			}
			dir := "."
			if c.Bool("resume") {
				dir = ""
			}
			if c.NArg() == 1 {
				dir = c.Args().First()
			}
			a, err := openArgs(c, dir)
			if err != nil {
				return err
			}
			cl, err := service(c)
			if err != nil {
				return err
			}
			res, err := cl.Open(c.Context, a)
			if err != nil {
				return fail(c, err)
			}
			return emit(c, res, func(w io.Writer) { fmt.Fprintln(w, res.AgentID) })
		},
	})
}

func absPath(p string) (string, error) {
	if p == "" {
		return p, nil
	}
	return filepath.Abs(p)
}
