package cli

import (
	"fmt"
	"io"
	"path/filepath"
	"slices"

	"github.com/urfave/cli/v2"

	"github.com/kaimon/kaimon/internal/verbs"
)

// noRecursionGuard is the one flag of open that is not an argument of the
// table: the command line's way to pass disallowed_tools = [], which a
// repeatable --disallow cannot say.
const noRecursionGuard = "no-recursion-guard"

// openFlags are agent_open's flags, from the table, with
// --no-recursion-guard beside the --disallow it contradicts.
func openFlags() []cli.Flag {
	flags := verbFlags("agent_open")
	disallow := verbs.ByName("agent_open").Arg("disallowed_tools").FlagName()
	i := slices.IndexFunc(flags, func(f cli.Flag) bool { return f.Names()[0] == disallow })
	return slices.Insert(flags, i+1, cli.Flag(&cli.BoolFlag{Name: noRecursionGuard,
		Usage: "allow the agent to open and drive agents itself (disallowed_tools = [])"}))
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
		Resume: c.Bool("resume"), Fork: c.String("fork"), Worktree: c.Bool("worktree"), Branch: c.String("branch"), Base: c.String("base"),
	}
	// The global --host places a new agent (KAIMON_HOST, a default, is
	// the fleet's); host is the one Global argument of agent_open.
	if c.IsSet(verbs.ByName("agent_open").Arg("host").FlagName()) {
		a.Host = c.String("host")
	}
	if a.Resume && a.ID == "" {
		return nil, usagef("--resume reopens a dead agent with its conversation: name it with --id ID")
	}
	if a.Resume && a.Fork != "" {
		return nil, usagef("--fork and --resume contradict each other: --resume continues an agent's own conversation, --fork a copy of it in a new agent; give one")
	}
	if c.Bool(noRecursionGuard) && c.IsSet("disallow") {
		return nil, usagef("--no-recursion-guard and --disallow contradict each other: pick one")
	}
	if c.Bool(noRecursionGuard) {
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
		return a, nil // --resume: the agent's own cwd; --fork: the forked one's
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
		Description: "Prints the new agent's id alone, so that id=$(kaimon open .) works. DIR defaults to the current directory " +
			"(with --resume, to the agent's own).\n\n" +
			"--id of a dead agent reuses its slot: turn numbers and seq continue, and the conversation starts afresh. " +
			"Add --resume to continue its conversation too (claude --resume, ACP session/load); the flags left out come from its record " +
			"(its cwd, model as last switched, preset and tools).\n\n" +
			"--fork ID opens a new agent that continues a copy of ID's conversation, ID going on unchanged; the flags left out come from ID's record, " +
			"DIR too unless given. With --worktree the new branch starts from ID's branch, and stderr says when ID's uncommitted changes did not come along.\n\n" +
			"On another host (--host NAME, or --id NAME/ID) DIR and --mcp-config are absolute paths on that host, and the id is printed as NAME/ID.\n\n" +
			"With --host any (or KAIMON_HOST=any) the agent goes to the reachable host, this machine or a configured one, " +
			"with the fewest working agents, then the fewest live ones (ties: local, then the names in order), so that a loop of opens " +
			"spreads over the hosts; the id printed is qualified as HOST/ID.",
		Flags: openFlags(),
		Action: func(c *cli.Context) error {
			if c.NArg() > 1 {
				return usagef("open takes at most one DIR (got %d arguments)", c.NArg())
			}
			dir := "."
			if c.Bool("resume") || c.String("fork") != "" {
				dir = ""
			}
			if c.NArg() == 1 {
				dir = c.Args().First()
			}
			if err := checkRemotePaths(c, dir); err != nil {
				return err
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
			if !c.Bool("json") {
				// stdout is the id alone: id=$(kaimon open --fork …) works.
				for _, w := range res.Warnings {
					fmt.Fprintf(c.App.ErrWriter, "kaimon: warning: %s\n", w)
				}
			}
			return emit(c, res, func(w io.Writer) { fmt.Fprintln(w, res.AgentID) })
		},
	})
}

// checkRemotePaths refuses a relative DIR, or a relative --mcp-config, for
// an agent opened on another host (--host, or --id NAME/ID): this
// machine's directory means nothing there, and the file is read there.
func checkRemotePaths(c *cli.Context, dir string) error {
	host, remote := remoteHost(c, c.String("id"))
	if !remote {
		return nil
	}
	if dir != "" && !filepath.IsAbs(dir) {
		return usagef("open on host %s takes DIR as an absolute path there (got %q): this machine's directory means nothing on %s", host, dir, host)
	}
	if f := verbs.ByName("agent_open").Arg("mcp_config").FlagName(); c.IsSet(f) && !filepath.IsAbs(c.String(f)) {
		return usagef("open on host %s takes --%s as an absolute path there (got %q): the agent reads it on %s", host, f, c.String(f), host)
	}
	return nil
}

func absPath(p string) (string, error) {
	if p == "" {
		return p, nil
	}
	return filepath.Abs(p)
}
