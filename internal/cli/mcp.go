package cli

import (
	"log"

	"github.com/mark3labs/mcp-go/server"
	"github.com/urfave/cli/v2"

	"github.com/kaimon/kaimon/internal/mcpserver"
)

// mcpWorkers is how many tool calls `kaimon mcp` runs at once: agent_run
// blocks for a whole turn, so a client driving several agents needs more
// than mcp-go's default of 5.
const mcpWorkers = 32

func mcpCmd() *cli.Command {
	return &cli.Command{
		Name:  "mcp",
		Usage: "Serve kaimon's verbs as MCP tools on stdio, for Claude Code and other MCP clients",
		Description: "Runs an MCP server on stdin/stdout whose tools are the verbs: agent_open, agent_send, agent_run, " +
			"agent_output, agent_status, agent_set_model, agent_list, agent_interrupt, agent_close and agent_permit, " +
			"with the arguments and JSON returns of the CLI's --json. It is a client of kaimon-agentd (started on demand), " +
			"so every MCP client sees the same agents. Register it with Claude Code:\n\n" +
			"   claude mcp add kaimon -- kaimon mcp\n\n" +
			"agent_run sends progress notifications while a turn runs when the call carries a progressToken; " +
			"for long turns, agent_send then agent_output polls without blocking.",
		Flags: []cli.Flag{
			&cli.DurationFlag{Name: "progress", Usage: "interval of agent_run's progress notifications", Value: mcpserver.DefaultProgress},
		},
		Action: func(c *cli.Context) error {
			if err := needArgs(c, 0, "no arguments"); err != nil {
				return err
			}
			cl, err := newClient(c)
			if err != nil {
				return err
			}
			s := server.NewStdioServer(mcpserver.New(cl, mcpserver.Options{Progress: c.Duration("progress")}))
			s.SetErrorLogger(log.New(c.App.ErrWriter, "kaimon mcp: ", log.LstdFlags))
			server.WithWorkerPoolSize(mcpWorkers)(s)
			err = s.Listen(c.Context, c.App.Reader, c.App.Writer)
			if c.Context.Err() != nil {
				return nil // stopped by a signal: not an error
			}
			return err
		},
	}
}
