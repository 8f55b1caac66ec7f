// Package cli is the kaimon command line: a thin client of kaimon-agentd
// whose commands are built from the verb table. Output is for people by
// default (short, aligned, coloured on a TTY, NO_COLOR honoured) and exactly
// the verb's JSON return with --json.
package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/urfave/cli/v2"

	"github.com/kaimon/kaimon/internal/client"
	"github.com/kaimon/kaimon/internal/event"
	"github.com/kaimon/kaimon/internal/fleet"
	"github.com/kaimon/kaimon/internal/verbs"
	"github.com/kaimon/kaimon/internal/version"
)

// Exit codes, stable and documented in `kaimon --help` and the man page.
const (
	ExitOK         = 0
	ExitError      = 1
	ExitUsage      = 2
	ExitTurnFailed = 3 // the turn did not complete: an error, the agent or its daemon died in it, or an interrupt
	ExitTimeout    = 4 // the turn did not end within --timeout
	ExitLinkLost   = 5 // the link to another host broke during the command and could not be made again
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
	return runWith(ctx, factory{}, args, stdin, stdout, stderr)
}

// factory makes what the commands reach the daemon with, as gh's
// cmdutil.Factory does: Main runs with its zero value, and a test gives the
// verb commands a fake verbs.Service (or a servertest client) instead.
type factory struct {
	// service is what the verb commands call; nil: a client of the daemon
	// (newClient).
	service func(c *cli.Context) (verbs.Service, error)
	// ios are the run's streams; nil: those runWith is given, as they are
	// (newIOStreams).
	ios *IOStreams
	// clock is what a turn waits by; nil: the real one.
	clock clock
	// keys are a turn's Ctrl-Cs; nil: SIGINT, as Main routes it
	// (catchInterrupts).
	keys <-chan os.Signal
	// trace is told each state a turn is in (turn.trace); nil: nothing.
	trace func(turnState)
}

// factoryKey holds the factory in the app's Metadata, where each command
// finds it at run time: the command tree itself is the same for every run
// (and for the man page and completions made from it).
const factoryKey = "kaimon.factory"

// runWith is Run with the factory f.
func runWith(ctx context.Context, f factory, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if f.ios == nil {
		f.ios = newIOStreams(stdin, stdout, stderr)
	}
	app := NewApp()
	app.Metadata = map[string]any{factoryKey: f}
	app.Reader, app.Writer, app.ErrWriter = f.ios.In, f.ios.Out, f.ios.ErrOut
	err := app.RunContext(ctx, interspersed(app, args))
	if err == nil {
		return ExitOK
	}
	return report(err, f.ios.ErrOut)
}

// report prints err for a person and maps it to an exit code.
func report(err error, stderr io.Writer) int {
	var fe *fleet.UsageError
	if errors.As(err, &fe) {
		err = &usageError{msg: err.Error()}
	}
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
	var le *daemonLostError
	if errors.As(err, &le) {
		return ExitTurnFailed
	}
	var ll *linkLostError
	var fl *fleet.LinkError
	if errors.As(err, &ll) || errors.As(err, &fl) {
		return ExitLinkLost
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

// jsonReported is an error already told: printed as JSON, or said in the
// lines above (doctor's FAIL, run's cancelled turn). report only maps it
// to its exit code.
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
			hostFlag(),
		},
		Before: func(c *cli.Context) error { setColor(c); return nil },
		After:  closeFleet,
		OnUsageError: func(c *cli.Context, err error, isSub bool) error {
			return usagef("%v", err)
		},
		ExitErrHandler: func(c *cli.Context, err error) {}, // report() maps errors to codes
		Commands: []*cli.Command{
			completeCmd(), // hidden: what the completion scripts call
			openCmd(), sendCmd(), runCmd(), chatCmd(), outputCmd(), statusCmd(), listCmd(),
			interruptCmd(), setModelCmd(), closeCmd(), forgetCmd(), diffCmd(), permitCmd(), mcpCmd(), daemonCmd(), completionCmd(), schemaCmd(),
			tailCmd(),
			versionCmd(), doctorCmd(), agentsCmd(),
			hostCmd(), dialStdioCmd(),
			monitorCmd(),
		},
	}
	finishTree(app)
	return app
}

// service returns what a verb command calls: the run's factory's, by
// default the fleet, which routes each call to the host its id names
// (NAME/ID), else to --host's.
func service(c *cli.Context) (verbs.Service, error) {
	if f, _ := c.App.Metadata[factoryKey].(factory); f.service != nil {
		return f.service(c)
	}
	return fleetOf(c)
}

// streamsOf returns the run's streams (factory.ios). A command run without
// runWith (a test's bare App) gets its App's writers, as they are.
func streamsOf(c *cli.Context) *IOStreams {
	if f, _ := c.App.Metadata[factoryKey].(factory); f.ios != nil {
		return f.ios
	}
	return newIOStreams(c.App.Reader, c.App.Writer, c.App.ErrWriter)
}

// setColor turns colour off for the run when --no-color says so; the
// environment (NO_COLOR, TERM=dumb) and a stdout that is no terminal have
// already (newIOStreams).
func setColor(c *cli.Context) {
	if c.Bool("no-color") {
		streamsOf(c).setColor(false)
	}
}

// newClient is the client of the chosen host's daemon (--host,
// KAIMON_HOST, else this machine's).
func newClient(c *cli.Context) (*client.Client, error) {
	f, err := fleetOf(c)
	if err != nil {
		return nil, err
	}
	return f.Client(c.Context, "")
}

// localClient is this machine's daemon's client.
func localClient(c *cli.Context) (*client.Client, error) {
	cl, err := client.New()
	if err != nil {
		return nil, err
	}
	if c.Bool("no-autostart") {
		cl.NoAutostart = true
	}
	return cl, nil
}

// jsonFlag is --json. A flag is made anew for each command tree: urfave/cli
// writes what it parsed into the flag itself, so one shared by two runs
// at once (tests side by side) would be a race.
func jsonFlag() *cli.BoolFlag {
	return &cli.BoolFlag{Name: "json", Usage: "print exactly the verb's JSON return"}
}

// verbCmd fills a command's name, help and positionals' usage from the
// verb table.
func verbCmd(name string, cmd *cli.Command) *cli.Command {
	v := verbs.ByName(name)
	cmd.Name = v.CLI
	cmd.Usage = v.Summary
	if cmd.ArgsUsage == "" {
		cmd.ArgsUsage = v.ArgsUsage()
	}
	desc := v.Doc + "\n\nWith --json it prints the " + v.Name + " return: " + v.Returns
	if cmd.Description != "" {
		desc = cmd.Description + "\n\n" + desc
	}
	cmd.Description = desc
	cmd.Flags = append(cmd.Flags, jsonFlag())
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
	var fe *fleet.UsageError
	if c.Bool("json") && !errors.As(err, &ue) && !errors.As(err, &fe) {
		var ve *verbs.Error
		var down *client.DaemonDownError
		var sshErr *fleet.Error
		var de *detachedError
		var le *daemonLostError
		var ll *linkLostError
		var fl *fleet.LinkError
		switch {
		case errors.As(err, &de):
			ve = &verbs.Error{Code: codeDetached, Message: err.Error()}
		case errors.As(err, &le):
			ve = &verbs.Error{Code: verbs.CodeTurnFailed, Message: err.Error()}
		case errors.As(err, &ll), errors.As(err, &fl):
			ve = &verbs.Error{Code: codeLinkLost, Message: err.Error()}
		case errors.As(err, &ve):
		case errors.As(err, &down), errors.As(err, &sshErr):
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

// lineCmd builds the command of a verb that takes exactly the positionals
// the table names for it and whose answer, for people, is one line.
func lineCmd[R any](verb string, cmd *cli.Command,
	call func(c *cli.Context, cl verbs.Service, args cli.Args) (R, error), line func(R) string) *cli.Command {
	cmd.Action = func(c *cli.Context) error {
		if err := needVerbArgs(c, verb); err != nil {
			return err
		}
		cl, err := service(c)
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

func pick(b bool, yes, no string) string {
	if b {
		return yes
	}
	return no
}
