package cli

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/kaimon/kaimon/internal/manpage"
	"github.com/kaimon/kaimon/internal/verbs"
)

func mcpCmd() *cli.Command {
	return &cli.Command{
		Name:  "mcp",
		Usage: "Serve kaimon's verbs as MCP tools on stdio, for Claude Code and other MCP clients",
		Description: "Runs an MCP server on stdin/stdout whose tools are the verbs: agent_open, agent_send, agent_run, " +
			"agent_output, agent_status, agent_set_model, agent_list, agent_interrupt, agent_close and agent_permit, " +
			"with the arguments and JSON returns of the CLI's --json. It is a client of kaimon-agentd (started on demand), " +
			"so every MCP client sees the same agents. With hosts configured (kaimon host add), it serves them too: agent_list lists every host's agents, " +
			"agent_open takes host (a name, local or any), and the other tools take the HOST/ID it returns. Register it with Claude Code:\n\n" +
			"   claude mcp add kaimon -- kaimon mcp\n\n" +
			"agent_run sends progress notifications while a turn runs when the call carries a progressToken; " +
			"for long turns, agent_send then agent_output polls without blocking.\n\n" +
			"Every tool declares an outputSchema and returns structuredContent beside its JSON text (kaimon schema verbs). " +
			"For a client that orchestrates, it does more, by what the client declared at initialize:\n\n" +
			"   elicitation: an agent's permission request goes to the person at the client (--elicit: the agents this session opened or runs a turn of, all, or never): " +
			"accept allows the tool call, decline or cancel denies it; answered elsewhere first (kaimon permit, the monitor), the question is withdrawn (notifications/cancelled).\n" +
			"   tasks: agent_run called as a task returns at once; tasks/get says working, input_required while a permission request waits, completed, failed or cancelled; " +
			"tasks/result gives what the blocking call would have; tasks/cancel interrupts the turn. A client that goes away leaves its turns running in the daemon.\n" +
			"   resources: kaimon://agents, kaimon://agent/{id} (status), kaimon://agent/{id}/output (the last turn's text) and kaimon://agent/{id}/events (its event log); " +
			"a subscriber hears notifications/resources/updated at each status change and turn end, and every client notifications/resources/list_changed when agents open, close or are forgotten.\n\n" +
			"A 2026-07-28 client (server/discover) is sent no request: its agent_run, when the turn meets a permission request and the call's _meta declares elicitation.form, " +
			"returns resultType input_required with the same question as an input request and a requestState; the retry with inputResponses answers it and waits on the same turn " +
			"to its end or the next round (--elicit holds here too: an agent it does not ask about is asked in no round). The state is sealed with a key in the cache dir (mcp-state.key), so a retry reaches a kaimon mcp started since; one altered or used before is refused. " +
			"Such a client subscribes with subscriptions/listen (resourceSubscriptions, resourcesListChanged): each notification is tagged with the stream's id. " +
			"Declaring the tasks extension (io.modelcontextprotocol/tasks), its agent_run returns a task at once: tasks/get gives its state and, at the end, its result; " +
			"tasks/update answers its input requests; tasks/cancel interrupts the turn when it is the task's own (a task whose prompt still waits behind another turn is cancelled and that turn left alone); a listen stream with taskIds hears notifications/tasks.\n\n" +
			"All of it follows the daemon's event stream; nothing polls.",
		Flags: []cli.Flag{
			&cli.DurationFlag{Name: "progress", Usage: "interval of agent_run's progress notifications", Value: verbs.DefaultProgressSeconds * time.Second},
			&cli.StringFlag{Name: "elicit", Value: verbs.ElicitOwn, Usage: verbs.ElicitDoc},
		},
		Action: func(c *cli.Context) error {
			if err := needArgs(c, 0, "no arguments"); err != nil {
				return err
			}
			cl, err := newClient(c)
			if err != nil {
				return err
			}
			// The server is kaimon-agentd's (manpage.AgentdMCPArg), which
			// links the MCP library anyway: its package init costs
			// milliseconds, which every `kaimon list` would pay were it
			// linked here.
			bin, err := cl.DaemonPath()
			if err != nil {
				return fmt.Errorf("kaimon mcp runs kaimon-agentd's MCP server: %w", err)
			}
			if err := verbs.CheckElicit(c.String("elicit")); err != nil {
				return usagef("%s", err)
			}
			argv := []string{bin, manpage.AgentdMCPArg, "-progress", c.Duration("progress").String(), "-elicit", c.String("elicit")}
			env := os.Environ()
			if cl.NoAutostart {
				env = append(withoutEnv(env, "KAIMON_NO_AUTOSTART"), "KAIMON_NO_AUTOSTART=1")
			}
			if streamsOf(c).areTheProcess() {
				// The same process goes on as the server: the MCP client's
				// signals, pipes and wait reach it as they reached kaimon.
				err := syscall.Exec(bin, argv, env)
				return fmt.Errorf("kaimon mcp runs kaimon-agentd's MCP server, and %s could not be run: %w (set KAIMON_AGENTD_BIN to kaimon-agentd)", bin, err)
			}
			// Run in-process with other streams (tests): a child on them.
			cmd := exec.CommandContext(c.Context, bin, argv[1:]...)
			cmd.Env = env
			cmd.Stdin, cmd.Stdout, cmd.Stderr = c.App.Reader, c.App.Writer, c.App.ErrWriter
			cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
			cmd.WaitDelay = 5 * time.Second
			if err := cmd.Run(); err != nil && c.Context.Err() == nil {
				return fmt.Errorf("kaimon-agentd's MCP server: %w", err)
			}
			return nil
		},
	}
}

// withoutEnv is env without the entries of the variable name.
func withoutEnv(env []string, name string) []string {
	out := env[:0:0]
	for _, kv := range env {
		if !strings.HasPrefix(kv, name+"=") {
			out = append(out, kv)
		}
	}
	return out
}
