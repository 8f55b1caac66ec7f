// Package cli is the kaimon command line: a thin client of kaimon-agentd
// whose commands are built from the verb table. Output is for people by
// default (short, aligned, coloured on a TTY, NO_COLOR honoured) and exactly
// the verb's JSON return with --json.
package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/fatih/color"
	"github.com/urfave/cli/v2"

	"github.com/kaimon/kaimon/internal/backend"
	"github.com/kaimon/kaimon/internal/client"
	"github.com/kaimon/kaimon/internal/event"
	"github.com/kaimon/kaimon/internal/policy"
	"github.com/kaimon/kaimon/internal/verbs"
	"github.com/kaimon/kaimon/internal/version"
)

// Exit codes, stable and documented in `kaimon --help` and the man page.
const (
	ExitOK         = 0
	ExitError      = 1
	ExitUsage      = 2
	ExitTurnFailed = 3 // the agent ended the turn with an error (or died in it)
	ExitTimeout    = 4 // the turn did not end within --timeout
)

// usageError marks an error in the command line itself; help is the
// command whose --help to point at ("kaimon run"), "" for kaimon's.
type usageError struct{ msg, help string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, a ...any) error { return &usageError{msg: fmt.Sprintf(format, a...)} }

// Main runs the CLI with os.Args and returns the exit code.
func Main() int {
	ctx, stop := notifyContext(context.Background())
	defer stop()
	return Run(ctx, os.Args, os.Stdin, os.Stdout, os.Stderr)
}

// Run runs the CLI with args and streams; for tests.
func Run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	app := NewApp()
	app.Reader, app.Writer, app.ErrWriter = stdin, stdout, stderr
	err := app.RunContext(ctx, interspersed(app, args))
	if err == nil {
		return ExitOK
	}
	return report(err, stderr)
}

// report prints err for a person and maps it to an exit code.
func report(err error, stderr io.Writer) int {
	var ue *usageError
	if errors.As(err, &ue) {
		help := ue.help
		if help == "" {
			help = "kaimon"
		}
		fmt.Fprintf(stderr, "kaimon: %s\nRun '%s --help' for usage.\n", ue.msg, help)
		return ExitUsage
	}
	var je *jsonReported
	if errors.As(err, &je) {
		return exitFor(je.err)
	}
	fmt.Fprintf(stderr, "kaimon: %s\n", err)
	return exitFor(err)
}

func exitFor(err error) int {
	var de *detachedError
	if errors.As(err, &de) {
		return ExitDetached
	}
	var ve *verbs.Error
	if errors.As(err, &ve) {
		switch ve.Code {
		case verbs.CodeTurnFailed:
			return ExitTurnFailed
		case verbs.CodeTimeout:
			return ExitTimeout
		}
	}
	return ExitError
}

// jsonReported is an error already printed as JSON.
type jsonReported struct{ err error }

func (e *jsonReported) Error() string { return e.err.Error() }

// NewApp builds the command tree; main, the man page and the completions are
// all made from it.
func NewApp() *cli.App {
	app := &cli.App{
		Name:  "kaimon",
		Usage: "drive headless coding agents from shells, CI jobs and other agents",
		// The commit too: a bug report quoting `kaimon --version` then
		// names the code.
		Version: version.Full(),
		Description: appAbout + "\n\n" + indent(appExample, "   ") +
			"\n\n" + exitCodesText(),
		EnableBashCompletion: false, // completion is __complete (complete.go): never the typed line run
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "no-autostart", Usage: "fail instead of starting kaimon-agentd when it is not running", EnvVars: []string{"KAIMON_NO_AUTOSTART"}},
			&cli.BoolFlag{Name: "no-color", Usage: "no colour in the output (as NO_COLOR=1 or TERM=dumb)"},
		},
		Before: func(c *cli.Context) error { setColor(c.Bool("no-color")); return nil },
		OnUsageError: func(c *cli.Context, err error, isSub bool) error {
			return usagef("%v", err)
		},
		ExitErrHandler: func(c *cli.Context, err error) {}, // report() maps errors to codes
		Commands: []*cli.Command{
			completeCmd(), // hidden: what the completion scripts call
			openCmd(), sendCmd(), runCmd(), outputCmd(), statusCmd(), listCmd(),
			interruptCmd(), setModelCmd(), closeCmd(), forgetCmd(), permitCmd(), mcpCmd(), daemonCmd(), completionCmd(),
			tailCmd(),
			versionCmd(), doctorCmd(),
			monitorCmd(),
		},
	}
	finishTree(app)
	return app
}

func newClient(c *cli.Context) (*client.Client, error) {
	cl, err := client.New()
	if err != nil {
		return nil, err
	}
	if c.Bool("no-autostart") {
		cl.NoAutostart = true
	}
	return cl, nil
}

var jsonFlag = &cli.BoolFlag{Name: "json", Usage: "print exactly the verb's JSON return"}

// verbCmd fills a command's name and help from the verb table.
func verbCmd(name string, cmd *cli.Command) *cli.Command {
	v := verbs.ByName(name)
	cmd.Name = v.CLI
	cmd.Usage = v.Summary
	desc := v.Doc + "\n\nWith --json it prints the " + v.Name + " return: " + v.Returns
	if cmd.Description != "" {
		desc = cmd.Description + "\n\n" + desc
	}
	cmd.Description = desc
	cmd.Flags = append(cmd.Flags, jsonFlag)
	return cmd
}

// emit prints a verb's result: as JSON with --json, else via human.
func emit(c *cli.Context, res any, human func(w io.Writer)) error {
	if c.Bool("json") {
		b, err := event.Marshal(res)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(c.App.Writer, "%s\n", b)
		return err
	}
	human(c.App.Writer)
	return nil
}

// fail reports a verb error; with --json as the API's JSON error object on
// stderr, so a script can parse both streams.
func fail(c *cli.Context, err error) error {
	var ue *usageError
	if c.Bool("json") && !errors.As(err, &ue) {
		var ve *verbs.Error
		var down *client.DaemonDownError
		var de *detachedError
		switch {
		case errors.As(err, &de):
			ve = &verbs.Error{Code: codeDetached, Message: err.Error()}
		case errors.As(err, &ve):
		case errors.As(err, &down):
			ve = &verbs.Error{Code: verbs.CodeUnavailable, Message: err.Error()}
		default:
			ve = &verbs.Error{Code: verbs.CodeInternal, Message: err.Error()}
		}
		b, _ := json.Marshal(ve)
		fmt.Fprintf(c.App.ErrWriter, "%s\n", b)
		return &jsonReported{err: err}
	}
	return err
}

func needArgs(c *cli.Context, n int, names string) error {
	if c.NArg() != n {
		return usagef("%s takes %s (got %d argument(s))", c.Command.Name, names, c.NArg())
	}
	return nil
}

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
			cl, err := newClient(c)
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

func readText(c *cli.Context, s string) (string, error) {
	if s != "-" {
		return s, nil
	}
	b, err := io.ReadAll(c.App.Reader)
	if err != nil {
		return "", fmt.Errorf("reading the text from stdin: %w", err)
	}
	return string(b), nil
}

func sendCmd() *cli.Command {
	return lineCmd("agent_send", "ID TEXT", &cli.Command{Description: "TEXT - reads the text from stdin. Prints the turn number."},
		func(c *cli.Context, cl *client.Client, a cli.Args) (*verbs.SendResult, error) {
			text, err := readText(c, a.Get(1))
			if err != nil {
				return nil, err
			}
			return cl.Send(c.Context, &verbs.SendArgs{AgentID: a.Get(0), Text: text})
		},
		func(r *verbs.SendResult) string { return fmt.Sprint(r.Turn) })
}

func runCmd() *cli.Command {
	flags := append([]cli.Flag{
		&cli.DurationFlag{Name: "timeout", Usage: "how long to wait for the turn to end", Value: time.Duration(verbs.DefaultTimeout) * time.Second},
		&cli.StringFlag{Name: "C", Usage: "open a throwaway agent in `DIR`, run one turn, close it"},
	}, openFlags()...)
	return verbCmd("agent_run", &cli.Command{
		ArgsUsage: "ID TEXT | -C DIR TEXT",
		Description: "Prints the assistant's final text of the turn. Exits 3 if the turn failed, 4 on timeout " +
			"(the partial text is printed, and the agent keeps working). TEXT - reads stdin.\n" +
			"With -C DIR (no ID) it opens an agent in DIR with the open flags, runs one turn, and closes it.\n\n" +
			"On a terminal the turn renders as it happens: the text as it streams, thoughts dimmed, a line per tool call " +
			"and its result, a permission request with the `kaimon permit` command that answers it, a spinner while " +
			"the agent is silent, and the turn's usage on stderr at the end. Piped, stdout gets the final text alone.\n\n" +
			"Ctrl-C interrupts the turn (exit 3 when it ends so); a second Ctrl-C leaves it running and exits 130. " +
			"With -C the agent is closed either way: a second Ctrl-C closes it at once, a third stops waiting for that.",
		Flags: flags,
		Action: func(c *cli.Context) error {
			cl, err := newClient(c)
			if err != nil {
				return err
			}
			timeout := c.Duration("timeout")
			if timeout <= 0 {
				return usagef("--timeout must be positive")
			}
			var id, textArg string
			oneShot := c.IsSet("C")
			if oneShot {
				if err := needArgs(c, 1, "TEXT with -C DIR"); err != nil {
					return err
				}
				textArg = c.Args().Get(0)
			} else {
				if err := needArgs(c, 2, "ID TEXT (or -C DIR TEXT)"); err != nil {
					return err
				}
				id, textArg = c.Args().Get(0), c.Args().Get(1)
			}
			text, err := readText(c, textArg)
			if err != nil {
				return err
			}
			if oneShot {
				a, err := openArgs(c, c.String("C"))
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
			if oneShot {
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
func closeThrowaway(ctx context.Context, cl *client.Client, id string) bool {
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

func outputCmd() *cli.Command {
	return verbCmd("agent_output", &cli.Command{
		ArgsUsage: "ID",
		Flags: []cli.Flag{
			&cli.IntFlag{Name: "turn", Usage: "turn number", DefaultText: "the latest"},
			&cli.StringFlag{Name: "which", Usage: "last_message | full_turn | all", Value: verbs.DefaultWhich},
			&cli.BoolFlag{Name: "include-tools", Usage: "interleave one-line tool call summaries (full_turn, all)"},
			&cli.IntFlag{Name: "max-chars", Usage: "cut the text to N characters", Value: verbs.DefaultMaxChars},
		},
		Action: func(c *cli.Context) error {
			if err := needArgs(c, 1, "ID"); err != nil {
				return err
			}
			cl, err := newClient(c)
			if err != nil {
				return err
			}
			res, err := cl.Output(c.Context, &verbs.OutputArgs{AgentID: c.Args().First(), Turn: c.Int("turn"),
				Which: c.String("which"), IncludeTools: c.Bool("include-tools"), MaxChars: c.Int("max-chars")})
			if err != nil {
				return fail(c, err)
			}
			return emit(c, res, func(w io.Writer) {
				fmt.Fprintln(w, res.Text)
				if !res.Done {
					fmt.Fprintf(c.App.ErrWriter, "(turn %d still running: partial output)\n", res.Turn)
				}
				if res.Truncated {
					fmt.Fprintf(c.App.ErrWriter, "(truncated: %d characters dropped; raise --max-chars)\n", res.DroppedChars)
				}
				for _, e := range res.LogErrors {
					fmt.Fprintf(c.App.ErrWriter, "kaimon: output: %s; skipped, so this output may lack it\n", e)
				}
			})
		},
	})
}

func statusColor(s string) string {
	switch s {
	case "idle":
		return color.GreenString(s)
	case "working":
		return color.YellowString(s)
	case "starting":
		return color.CyanString(s)
	case "dead":
		return color.New(color.Faint).Sprint(s)
	}
	return s
}

// statusText is an agent's state for people: its status, and a working
// agent stopped on a permission request says so, since it will not move
// until someone answers. statusLine is the same, colored.
func statusText(st *verbs.Status) string {
	if asksPermission(st) {
		return st.Status + " (asks permission)"
	}
	return st.Status
}

func statusLine(st *verbs.Status) string {
	if asksPermission(st) {
		return color.MagentaString(statusText(st))
	}
	return statusColor(st.Status)
}

func asksPermission(st *verbs.Status) bool {
	return len(st.PendingPermissions) > 0 && st.Status != "dead"
}

func statusCmd() *cli.Command {
	return verbCmd("agent_status", &cli.Command{
		ArgsUsage: "ID",
		Action: func(c *cli.Context) error {
			if err := needArgs(c, 1, "ID"); err != nil {
				return err
			}
			cl, err := newClient(c)
			if err != nil {
				return err
			}
			st, err := cl.Status(c.Context, &verbs.StatusArgs{AgentID: c.Args().First()})
			if err != nil {
				return fail(c, err)
			}
			return emit(c, st, func(w io.Writer) {
				tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
				row := func(k, v string) { fmt.Fprintf(tw, "%s\t%s\n", k, v) }
				row("status", statusLine(st))
				for _, p := range st.PendingPermissions {
					row("permission", fmt.Sprintf("%s asks for %s (denied at %s)", p.RequestID, p.Title, p.ExpiresAt))
					row("", "answer: "+verbs.PermitCommand(c.Args().First(), p.RequestID, verbs.Allow)+"   (or "+verbs.Deny+")")
				}
				row("model", st.Model)
				row("cwd", st.Cwd)
				row("turn", fmt.Sprint(st.Turn))
				row("usage", fmt.Sprintf("in %d  out %d  cache read %d  cache write %d", st.Usage.InputTokens, st.Usage.OutputTokens, st.Usage.CacheReadTokens, st.Usage.CacheCreationTokens))
				row("created", st.CreatedAt)
				row("last activity", st.LastActivity)
				row("session", st.SessionID)
				row("transcript", st.Transcript)
				row("event log", st.EventLog)
				row("queues prompts", fmt.Sprint(st.QueuesPrompts))
				if st.Reason != "" {
					row("ended", st.Reason)
				}
				tw.Flush()
			})
		},
	})
}

func listCmd() *cli.Command {
	return verbCmd("agent_list", &cli.Command{
		Action: func(c *cli.Context) error {
			if err := needArgs(c, 0, "no arguments"); err != nil {
				return err
			}
			cl, err := newClient(c)
			if err != nil {
				return err
			}
			res, err := cl.List(c.Context, &verbs.ListArgs{})
			if err != nil {
				return fail(c, err)
			}
			return emit(c, res, func(w io.Writer) {
				if len(res.Agents) == 0 {
					fmt.Fprintln(c.App.ErrWriter, "no agents (open one with `kaimon open DIR`)")
					return
				}
				writeAgents(w, res.Agents)
			})
		},
	})
}

// writeAgents writes agent_list's table for people. It is aligned
// uncolored and the status colored after: tabwriter counts a color's
// escape bytes as width, which shifted every column after the status.
func writeAgents(w io.Writer, agents []verbs.ListEntry) {
	var table bytes.Buffer
	tw := tabwriter.NewWriter(&table, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSTATUS\tMODEL\tTURN\tTOKENS IN/OUT\tCWD")
	for _, a := range agents {
		status := statusText(&a.Status)
		if a.Reason != "" {
			status += " (" + a.Reason + ")"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d/%d\t%s\n", a.AgentID, status, a.Model, a.Turn,
			a.Usage.InputTokens, a.Usage.OutputTokens, a.Cwd)
	}
	tw.Flush()
	lines := strings.SplitAfter(table.String(), "\n")
	at := strings.Index(lines[0], "STATUS") // where every row's status begins
	for i, a := range agents {
		l, plain := lines[i+1], statusText(&a.Status)
		lines[i+1] = l[:at] + statusLine(&a.Status) + l[at+len(plain):]
	}
	io.WriteString(w, strings.Join(lines, ""))
}

// lineCmd builds the command of a verb whose arguments are the positionals
// named in argsUsage and whose answer, for people, is one line.
func lineCmd[R any](verb, argsUsage string, cmd *cli.Command,
	call func(c *cli.Context, cl *client.Client, args cli.Args) (R, error), line func(R) string) *cli.Command {
	cmd.ArgsUsage = argsUsage
	cmd.Action = func(c *cli.Context) error {
		if err := needArgs(c, len(strings.Fields(argsUsage)), argsUsage); err != nil {
			return err
		}
		cl, err := newClient(c)
		if err != nil {
			return err
		}
		res, err := call(c, cl, c.Args())
		if err != nil {
			return fail(c, err)
		}
		return emit(c, res, func(w io.Writer) { fmt.Fprintln(w, line(res)) })
	}
	return verbCmd(verb, cmd)
}

func interruptCmd() *cli.Command {
	return lineCmd("agent_interrupt", "ID", &cli.Command{
		Description: "Prints \"interrupted\", or \"nothing to interrupt\" when no turn was running (both exit 0). An agent " +
			"that refuses the interrupt or does not acknowledge it in time is an error (exit 1, and an error event in " +
			"its log): its turn may still be running; wait for it, or stop the agent with `kaimon close ID`.",
	},
		func(c *cli.Context, cl *client.Client, a cli.Args) (*verbs.InterruptResult, error) {
			return cl.Interrupt(c.Context, &verbs.InterruptArgs{AgentID: a.Get(0)})
		},
		func(r *verbs.InterruptResult) string {
			return pick(r.Interrupted, "interrupted", "nothing to interrupt")
		})
}

func setModelCmd() *cli.Command {
	return lineCmd("agent_set_model", "ID MODEL", &cli.Command{},
		func(c *cli.Context, cl *client.Client, a cli.Args) (*verbs.SetModelResult, error) {
			return cl.SetModel(c.Context, &verbs.SetModelArgs{AgentID: a.Get(0), Model: a.Get(1)})
		},
		func(r *verbs.SetModelResult) string {
			return pick(r.Switched, "switched", "not switched (the agent refused; close and reopen it with --model)")
		})
}

func forgetCmd() *cli.Command {
	return verbCmd("agent_forget", &cli.Command{
		ArgsUsage: "[ID…]",
		Description: "Forgets the dead agents named, or with --all-dead every dead agent; --older-than narrows either to those idle " +
			"that long (alone, it selects every dead agent that old). Prints the ids forgotten, one a line.",
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "all-dead", Usage: "forget every dead agent"},
			&cli.StringFlag{Name: "older-than", Usage: "only dead agents idle longer than `AGE` (7d, 12h, 90m)"},
			&cli.BoolFlag{Name: "logs", Usage: "remove their event and stderr logs too"},
		},
		Action: func(c *cli.Context) error {
			a := &verbs.ForgetArgs{AgentIDs: c.Args().Slice(), AllDead: c.Bool("all-dead"), OlderThan: c.String("older-than"), Logs: c.Bool("logs")}
			if len(a.AgentIDs) == 0 && !a.AllDead && a.OlderThan == "" {
				return usagef("forget takes the ids of dead agents, or --all-dead, or --older-than AGE")
			}
			if len(a.AgentIDs) > 0 && a.AllDead {
				return usagef("forget takes ids or --all-dead, not both")
			}
			cl, err := newClient(c)
			if err != nil {
				return err
			}
			res, err := cl.Forget(c.Context, a)
			if err != nil {
				return fail(c, err)
			}
			return emit(c, res, func(w io.Writer) {
				for _, id := range res.Forgotten {
					fmt.Fprintln(w, id)
				}
				if len(res.Forgotten) == 0 {
					fmt.Fprintln(c.App.ErrWriter, "no dead agent matched: nothing forgotten")
				}
			})
		},
	})
}

func closeCmd() *cli.Command {
	return lineCmd("agent_close", "ID", &cli.Command{},
		func(c *cli.Context, cl *client.Client, a cli.Args) (*verbs.CloseResult, error) {
			return cl.Close(c.Context, &verbs.CloseArgs{AgentID: a.Get(0)})
		},
		func(r *verbs.CloseResult) string { return pick(r.Closed, "closed", "already closed") })
}

func pick(b bool, yes, no string) string {
	if b {
		return yes
	}
	return no
}

func daemonCmd() *cli.Command {
	return &cli.Command{
		Name:  "daemon",
		Usage: "Start, stop, restart or show kaimon-agentd",
		Description: "kaimon-agentd owns every agent session and the event bus, one per user. kaimon starts it when " +
			"it is not running (unless --no-autostart), so these are seldom needed; see kaimon-agentd(8).",
		Subcommands: []*cli.Command{
			{
				Name: "start", Usage: "Start kaimon-agentd in the background (no-op if running)",
				Action: func(c *cli.Context) error {
					cl, err := newClient(c)
					if err != nil {
						return err
					}
					if st, err := cl.Ping(c.Context); err == nil {
						fmt.Fprintf(c.App.Writer, "kaimon-agentd already running (pid %d, %s)\n", st.PID, st.Socket)
						return nil
					}
					return startDaemon(c, cl)
				},
			},
			{
				Name: "stop", Usage: "Stop kaimon-agentd, closing every live agent; returns once it has exited",
				Action: func(c *cli.Context) error {
					cl, err := newClient(c)
					if err != nil {
						return err
					}
					return stopDaemon(c, cl)
				},
			},
			{
				Name: "restart", Usage: "Stop kaimon-agentd (closing every live agent) and start it again with this shell's environment",
				Description: "The daemon runs its agents with the environment it was started with (KAIMON_*_BIN, ANTHROPIC_*, PATH, …), " +
					"whoever started it. When kaimon says that environment differs from this one, restart it from here.",
				Action: func(c *cli.Context) error {
					cl, err := newClient(c)
					if err != nil {
						return err
					}
					if err := stopDaemon(c, cl); err != nil {
						return err
					}
					return startDaemon(c, cl)
				},
			},
			{
				Name: "status", Usage: "Show whether kaimon-agentd runs (exit 1 if not)",
				Flags: []cli.Flag{jsonFlag},
				Action: func(c *cli.Context) error {
					cl, err := newClient(c)
					if err != nil {
						return err
					}
					st, err := cl.Ping(c.Context)
					if err != nil {
						return fail(c, err)
					}
					return emit(c, st, func(w io.Writer) {
						tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
						fmt.Fprintf(tw, "pid\t%d\nversion\t%s\nsocket\t%s\ncache\t%s\nstarted\t%s\nagents\t%d live, %d dead\n",
							st.PID, st.Version, st.Socket, st.CacheDir, st.StartedAt, st.Live, st.Dead)
						if st.Door != "" {
							fmt.Fprintf(tw, "mcp door\t%s\n", st.Door)
						}
						if b := st.Bus; b != nil {
							fmt.Fprintf(tw, "event bus\t%s\nsubscribers\t%d (envelopes published %d, dropped for slow subscribers %d)\n",
								strings.Join(b.Endpoints, " "), b.Subscribers, b.Published, b.Dropped)
						}
						if f := st.LogFaults; f != nil {
							if f.Count == 0 {
								fmt.Fprintf(tw, "event log faults\tnone\n")
							} else {
								fmt.Fprintf(tw, "event log faults\t%d (each stopped its agent); last: agent %s at %s: %s\n",
									f.Count, f.LastAgent, f.LastAt, f.LastError)
							}
						}
						tw.Flush()
					})
				},
			},
			daemonLogsCmd(), daemonInstallUnitCmd(),
		},
	}
}

// startDaemon starts kaimon-agentd and says where it runs.
func startDaemon(c *cli.Context, cl *client.Client) error {
	if err := cl.StartDaemon(c.Context); err != nil {
		return err
	}
	st, err := cl.Ping(c.Context)
	if err != nil {
		return err
	}
	fmt.Fprintf(c.App.Writer, "kaimon-agentd started (pid %d, %s)\n", st.PID, st.Socket)
	return nil
}

// stopDaemon stops kaimon-agentd and waits for it to exit.
func stopDaemon(c *cli.Context, cl *client.Client) error {
	st, err := cl.StopDaemon(c.Context)
	if err != nil {
		return err
	}
	if st == nil {
		fmt.Fprintln(c.App.Writer, "kaimon-agentd was not running")
	} else {
		fmt.Fprintf(c.App.Writer, "kaimon-agentd stopped (pid %d, live agents closed: %d)\n", st.PID, st.Live)
	}
	return nil
}

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

func absPath(p string) (string, error) {
	if p == "" {
		return p, nil
	}
	return filepath.Abs(p)
}
