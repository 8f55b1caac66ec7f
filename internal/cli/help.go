package cli

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"

	"github.com/urfave/cli/v2"

	"github.com/kaimon/kaimon/internal/manpage"
	"github.com/kaimon/kaimon/internal/suggest"
	"github.com/kaimon/kaimon/internal/verbs"
)

// What kaimon's own help and its man page say of the whole: one place each.
const (
	appAbout = "kaimon opens AI agent sessions (the claude CLI, ACP agents) owned by the kaimon-agentd daemon, " +
		"sends them turns, and reads their normalized {kind, turn, data} events. It starts the daemon when it is not running."
	appExample = "id=$(kaimon open .)\nkaimon run $id 'summarize the failing tests'\n" +
		"turn=$(kaimon send $id 'now fix the first one')\n" +
		"kaimon tail agent:$id --from-start --turn $turn --until-result --no-deltas\n" +
		"kaimon output $id --turn $turn\nkaimon status $id\nkaimon close $id"
	// manAbout follows appAbout in the man page's DESCRIPTION.
	manAbout = "Output is for people by default: short, aligned, coloured on a terminal. With --json a verb's command " +
		"prints exactly the verb's JSON return, the same object the MCP tool of kaimon mcp returns, and an error as " +
		"the API's JSON error object {\"error\", \"code\"} on stderr.\n\n" +
		"Agents are opened with a model string, which also picks the backend: %s\n\n" +
		"A permission preset (--permission) sets what an agent may do without asking: %s. " +
		"A request the preset leaves open waits for kaimon permit.\n\n" +
		"Agents outlive the command that opened them: they live in the daemon until closed or until the daemon " +
		"stops, then stay listed as dead, with their logs, until kaimon forget; kaimon open --id ID --resume " +
		"reopens one with its conversation. Their events are described in kaimon-events(7).\n\n" +
		"Agents on other machines are driven over ssh: kaimon host add NAME ssh://[USER@]HOST[:PORT] names a host, " +
		"--host NAME (or KAIMON_HOST) picks the host of a command, and an id qualified as NAME/ID names its host " +
		"wherever an id goes; ids of another host are printed so. ssh runs kaimon dial-stdio there, which reaches " +
		"that user's own kaimon-agentd over its unix socket: kaimon keeps no credential and nothing listens on a network. " +
		"A host name not configured, or an id qualified with one, is a usage error (exit 2); a host ssh cannot reach " +
		"is an error (exit 1) naming the host and saying what ssh said."
)

// exitCodes says what each exit code means: the one table --help, the man
// page and docs/reference show.
var exitCodes = []manpage.ExitCode{
	{Code: ExitOK, Meaning: "ok"},
	{Code: ExitError, Meaning: "error (bad argument, unknown or dead agent, daemon unreachable, ...)"},
	{Code: ExitUsage, Meaning: "usage (wrong command line)"},
	{Code: ExitTurnFailed, Meaning: "the agent's turn did not complete: it failed (API error, crash, daemon lost) or was interrupted"},
	{Code: ExitTimeout, Meaning: "the turn did not end within --timeout: the partial text is printed and the agent keeps working (run -C's is closed)"},
	{Code: ExitLinkLost, Meaning: "the link to another host broke during the command and could not be made again (a run's agent there may be working on: kaimon status HOST/ID)",
		JSONCode: codeLinkLost},
	{Code: ExitDetached, Meaning: "kaimon run left by a second Ctrl-C (the agent keeps working; run -C's is closed)", JSONCode: codeDetached},
}

// examples of the commands that are not verbs, by path below kaimon; a
// verb's example is its Example in the verb table. Every visible command
// needs one (TestCommandTreeHelp).
var examples = map[string]string{
	"daemon":              "kaimon daemon status",
	"daemon start":        "kaimon daemon start",
	"daemon stop":         "kaimon daemon stop",
	"daemon restart":      "export KAIMON_CLAUDE_BIN=~/bin/claude\nkaimon daemon restart",
	"daemon status":       "kaimon daemon status --json | jq .bus",
	"daemon logs":         "kaimon daemon logs -n 200 | grep refused",
	"daemon install-unit": "kaimon daemon install-unit\nsystemctl --user daemon-reload && systemctl --user enable --now kaimon-agentd",
	"version":             "kaimon version",
	"chat":                "kaimon chat $id           # a line is a turn; Ctrl-C interrupts it, Ctrl-D leaves",
	"monitor":             "kaimon monitor            # q quits, ? shows the keys\nkaimon monitor --once > agents.txt",
	"doctor":              "kaimon doctor || echo 'fix the FAIL lines first'",
	"agents":              "kaimon agents --json | jq -r '.agents[] | select(.found) | .model'",
	"mcp":                 "claude mcp add kaimon -- kaimon mcp",
	"completion":          "kaimon completion bash > ~/.local/share/bash-completion/completions/kaimon",
	"schema":              "kaimon schema events > kaimon-events.schema.json\nkaimon schema verbs | jq '.\"$defs\".agent_status_result.required'",
	"tail":                "kaimon tail agent:$id --from-start --no-deltas | jq -c 'select(.kind==\"result\")'",
	"dial-stdio":          "ssh build1 kaimon dial-stdio   # what kaimon --host build1 runs",
	"host":                "kaimon host add build1 ssh://build1 && kaimon --host build1 open /home/me/src/app",
	"host add":            "kaimon host add build1 ssh://me@build1.example.com:2222 --remote-bin ~/bin/kaimon",
	"host ls":             "kaimon host ls --check || echo 'a host is down'",
	"host rm":             "kaimon host rm build1",
}

// exitCodesText is the exit codes as --help lists them, each meaning in
// one column whatever the width of the codes (0 and 130).
func exitCodesText() string {
	var b strings.Builder
	b.WriteString("EXIT CODES:\n")
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	for _, e := range exitCodes {
		fmt.Fprintf(tw, "   %d\t%s\n", e.Code, e.Text())
	}
	tw.Flush()
	return strings.TrimSuffix(b.String(), "\n")
}

func indent(s, by string) string {
	return by + strings.ReplaceAll(s, "\n", "\n"+by)
}

// finishTree gives every command of app its help text, its usage errors
// (one line naming its own --help, exit 2) and, for a command with
// subcommands, a refusal of unknown ones with a suggestion.
func finishTree(app *cli.App) {
	app.Action = func(c *cli.Context) error {
		if c.NArg() > 0 {
			return unknownCommand(app.Commands, app.Name, c.Args().First())
		}
		return cli.ShowAppHelp(c)
	}
	app.CommandNotFound = func(c *cli.Context, name string) { // only `kaimon help NAME` comes here
		report(unknownCommand(app.Commands, app.Name, name), c.App.ErrWriter)
		cli.OsExiter(ExitUsage)
	}
	var walk func(parent string, cmds []*cli.Command)
	walk = func(parent string, cmds []*cli.Command) {
		for _, c := range cmds {
			path := parent + " " + c.Name
			c.HelpName = path
			flags := c.Flags
			c.OnUsageError = func(_ *cli.Context, err error, _ bool) error {
				msg := err.Error()
				if name, ok := strings.CutPrefix(msg, "flag provided but not defined: -"); ok {
					if s := suggestFlag(flags, name); s != "" {
						msg += fmt.Sprintf("; did you mean %q?", s)
					}
				}
				return &usageError{msg: durationValue(flags, msg), help: path}
			}
			if act := c.Action; act != nil {
				noArgs := c.ArgsUsage == "" && len(c.Subcommands) == 0 && !c.Hidden && !c.SkipFlagParsing
				c.Action = func(ctx *cli.Context) error {
					if noArgs && ctx.NArg() > 0 {
						// Rather than ignore them: `daemon start now` must not start anything.
						return &usageError{msg: fmt.Sprintf("%s takes no arguments (got %q)", path, ctx.Args().First()), help: path}
					}
					err := act(ctx)
					var ue *usageError
					if errors.As(err, &ue) && ue.help == "" {
						ue.help = path
					}
					return err
				}
			} else if len(c.Subcommands) > 0 {
				subs := c.Subcommands
				c.Action = func(ctx *cli.Context) error {
					if ctx.NArg() > 0 {
						return unknownCommand(subs, path, ctx.Args().First())
					}
					return cli.ShowSubcommandHelp(ctx)
				}
			}
			walk(path, c.Subcommands)
			if c.CustomHelpTemplate == "" {
				c.CustomHelpTemplate = lazyHelp + path
			}
		}
	}
	walk(app.Name, app.Commands)
	lazyHelpOnce.Do(func() { cli.HelpPrinter = helpPrinter(cli.HelpPrinter) })
}

// lazyHelp, followed by a command's path, is the help template finishTree
// gives a command: helpPrinter makes the help when it is shown. Making
// every command's help at start cost each run of a one-line verb more than
// its request to the daemon.
const lazyHelp = "{{/* kaimon: the help of */}}"

var lazyHelpOnce sync.Once

// helpPrinter wraps urfave/cli's help printer, next, to make the help
// templates finishTree left for later.
func helpPrinter(next func(w io.Writer, templ string, data any)) func(w io.Writer, templ string, data any) {
	return func(w io.Writer, templ string, data any) {
		if path, ok := strings.CutPrefix(templ, lazyHelp); ok {
			templ = helpTemplate(docOf(path))
		}
		next(w, templ, data)
	}
}

// docOf describes the command at path (from "kaimon"). It reads a fresh
// tree: the command whose help is shown has been through urfave/cli's
// setup, which adds its own help flag and command (and rewrites HelpName).
func docOf(path string) manpage.Command {
	app := NewApp()
	cmds := app.Commands
	var c *cli.Command
	for _, name := range strings.Fields(path)[1:] {
		c = nil
		for _, sub := range cmds {
			if sub.Name == name {
				c = sub
			}
		}
		if c == nil {
			break
		}
		cmds = c.Subcommands
	}
	if c == nil { // not a path finishTree gave
		return manpage.Command{Path: path}
	}
	return commandDoc(app, path, c)
}

// unknownCommand is the usage error for name among cmds, with the nearest
// name when one is near enough.
func unknownCommand(cmds []*cli.Command, parent, name string) error {
	msg := fmt.Sprintf("unknown command %q", name)
	if parent != "kaimon" {
		msg = fmt.Sprintf("unknown command %q for '%s'", name, parent)
	}
	if s := suggestCommand(cmds, name); s != "" {
		msg += fmt.Sprintf("; did you mean %q?", s)
	}
	return &usageError{msg: msg, help: parent}
}

// suggestCommand returns the visible command name nearest to name, or ""
// when none is near. One-letter aliases (help's h) are no candidates: a
// single letter is near anything by Jaro-Winkler's measure, and "did you
// mean h" helps nobody who typed a word.
func suggestCommand(cmds []*cli.Command, name string) string {
	var names []string
	for _, c := range cmds {
		if c.Hidden {
			continue
		}
		for _, n := range c.Names() {
			if len(n) > 1 {
				names = append(names, n)
			}
		}
	}
	return suggest.Nearest(name, names, 0.7) // below 0.7, the "nearest" is a guess, not a typo
}

// durationValue says what a duration flag takes, in place of the flag
// package's bare "parse error" (`invalid value "30" for flag -timeout:
// parse error`), and suggests the value with its unit when it was a
// number of seconds (did you mean "30s"?); any other message is returned
// as it is. (Parsed by hand: a package-level regexp is work at every
// start of the CLI.)
func durationValue(flags []cli.Flag, msg string) string {
	rest, ok := strings.CutPrefix(msg, "invalid value ")
	if rest, ok2 := strings.CutSuffix(rest, ": parse error"); ok && ok2 {
		quoted, name, ok := strings.Cut(rest, " for flag -")
		value, err := strconv.Unquote(quoted)
		if !ok || err != nil {
			return msg
		}
		for _, f := range flags {
			if _, ok := f.(*cli.DurationFlag); !ok || !slices.Contains(f.Names(), name) {
				continue
			}
			msg = fmt.Sprintf("--%s takes a duration with its unit, as 90s or 5m (got %q)", name, value)
			if v, err := strconv.ParseFloat(value, 64); err == nil && v > 0 {
				msg += fmt.Sprintf("; did you mean %q?", value+"s")
			}
		}
	}
	return msg
}

// suggestFlag returns the visible flag nearest to name (given without its
// dashes), dashed, or "" when none is near.
func suggestFlag(flags []cli.Flag, name string) string {
	var names []string
	for _, f := range flags {
		if vf, ok := f.(cli.VisibleFlag); !ok || vf.IsVisible() {
			names = append(names, f.Names()...)
		}
	}
	best := suggest.Nearest(strings.TrimLeft(name, "-"), names, 0.8) // flags are short: demand more than of commands
	switch {
	case best == "":
		return ""
	case len(best) == 1:
		return "-" + best
	}
	return "--" + best
}

// commandDoc describes c (at path) for its --help and the man page.
func commandDoc(app *cli.App, path string, c *cli.Command) manpage.Command {
	d := manpage.Command{Path: path, Summary: c.Usage, Description: c.Description}
	switch {
	case len(c.VisibleCommands()) > 0:
		d.Synopsis = path + " COMMAND [options]"
	case c.ArgsUsage != "":
		d.Synopsis = path + " [options] " + c.ArgsUsage
	default:
		d.Synopsis = path + " [options]"
	}
	for _, f := range c.Flags {
		if fd, ok := flagDoc(f); ok {
			d.Flags = append(d.Flags, fd)
		}
	}
	if !c.HideHelp {
		d.Flags = append(d.Flags, manpage.Flag{Names: "-h, --help", Usage: "show this help"})
	}
	for _, s := range c.Subcommands {
		if !s.Hidden {
			d.Subcommands = append(d.Subcommands, commandDoc(app, path+" "+s.Name, s))
		}
	}
	rel := strings.TrimPrefix(path, app.Name+" ")
	if v := verbs.ByName(rel); v != nil && v.CLI == rel {
		d.Example = v.Example
	} else {
		d.Example = examples[rel]
	}
	return d
}

// flagDoc describes f, with its default stated once: a flag's own
// DefaultText, else its value when that is not the zero value.
func flagDoc(f cli.Flag) (manpage.Flag, bool) {
	df, ok := f.(cli.DocGenerationFlag)
	if !ok {
		return manpage.Flag{}, false
	}
	if vf, ok := f.(cli.VisibleFlag); ok && !vf.IsVisible() {
		return manpage.Flag{}, false
	}
	placeholder, usage := unquoteUsage(df.GetUsage())
	var short, long []string
	for _, n := range f.Names() {
		if len(n) == 1 {
			short = append(short, "-"+n)
		} else {
			long = append(long, "--"+n)
		}
	}
	names := strings.Join(append(short, long...), ", ")
	if df.TakesValue() {
		if placeholder == "" {
			placeholder = valueName(f)
		}
		names += " " + placeholder
	}
	def := strings.Trim(df.GetDefaultText(), `"`)
	if _, isBool := f.(*cli.BoolFlag); isBool && def == "false" || def == "0" || def == "[]" {
		def = ""
	}
	return manpage.Flag{Names: names, Usage: usage, Default: def, Env: df.GetEnvVars()}, true
}

// valueName names a flag's value in usage lines: the verb table's
// placeholder for it, N for numbers, DURATION for durations, else the
// flag's name in capitals.
func valueName(f cli.Flag) string {
	if p := tablePlaceholder(f.Names()[0]); p != "" {
		return p
	}
	switch f.(type) {
	case *cli.IntFlag, *cli.Int64Flag, *cli.UintFlag, *cli.Uint64Flag:
		return "N"
	case *cli.DurationFlag:
		return "DURATION"
	}
	return strings.ToUpper(strings.ReplaceAll(f.Names()[0], "-", "_"))
}

// helpText renders d as --help prints it.
func helpText(d manpage.Command) string {
	var b strings.Builder
	fmt.Fprintf(&b, "NAME:\n   %s - %s\n\nUSAGE:\n   %s\n", d.Path, d.Summary, d.Synopsis)
	if d.Description != "" {
		fmt.Fprintf(&b, "\nDESCRIPTION:\n%s\n", indent(d.Description, "   "))
	}
	table := func(title string, rows [][2]string) {
		fmt.Fprintf(&b, "\n%s:\n", title)
		tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
		for _, r := range rows {
			fmt.Fprintf(tw, "   %s\t%s\n", r[0], r[1])
		}
		tw.Flush()
	}
	if len(d.Subcommands) > 0 {
		var rows [][2]string
		for _, s := range d.Subcommands {
			rows = append(rows, [2]string{strings.TrimPrefix(s.Path, d.Path+" "), s.Summary})
		}
		table("COMMANDS", rows)
	}
	var rows [][2]string
	for _, f := range d.Flags {
		u := f.Usage
		if f.Default != "" {
			u += " (default: " + f.Default + ")"
		}
		if len(f.Env) > 0 {
			u += " [$" + strings.Join(f.Env, ", $") + "]"
		}
		rows = append(rows, [2]string{f.Names, u})
	}
	table("OPTIONS", rows)
	if d.Example != "" {
		fmt.Fprintf(&b, "\nEXAMPLE:\n%s\n", indent(d.Example, "   "))
	}
	return strings.ReplaceAll(b.String(), "\n   \n", "\n\n")
}

// helpTemplate is d's help as a text/template urfave/cli prints: the text
// itself, with any "{{" quoted.
func helpTemplate(d manpage.Command) string {
	return strings.ReplaceAll(helpText(d), "{{", `{{"{{"}}`)
}

// Manual describes the app for its man page.
func Manual(app *cli.App) manpage.App {
	var modelDoc string
	for _, a := range verbs.ByName("agent_open").Args {
		if a.Name == "model" {
			modelDoc = a.Doc
		}
	}
	desc := appAbout + "\n\n" + fmt.Sprintf(manAbout, modelDoc, strings.Join(verbs.PresetNames, ", "))
	m := manpage.App{Name: app.Name, Summary: app.Usage, Description: desc, Example: appExample, ExitCodes: exitCodes}
	for _, f := range app.Flags {
		if fd, ok := flagDoc(f); ok {
			m.Flags = append(m.Flags, fd)
		}
	}
	for _, c := range app.Commands {
		if !c.Hidden {
			m.Commands = append(m.Commands, commandDoc(app, app.Name+" "+c.Name, c))
		}
	}
	return m
}

// unquoteUsage splits a flag's usage into the `NAME` of its value and the
// text without the backquotes, as urfave/cli's help does (its function for
// it is not exported).
func unquoteUsage(usage string) (name, text string) {
	before, rest, ok := strings.Cut(usage, "`")
	if !ok {
		return "", usage
	}
	name, after, ok := strings.Cut(rest, "`")
	if !ok {
		return "", usage
	}
	return name, before + name + after
}
