package manpage

import (
	"fmt"
	"strings"
)

// exitAbout opens kaimon(1)'s EXIT STATUS.
const exitAbout = "With --json an error is written to stderr as the API's JSON error object {\"error\": \"...\", \"code\": \"...\"}."

// source is the .TH footer's source field: no version, so that a page
// does not change with every build.
const source = "kaimon"

// Kaimon writes kaimon(1) from the CLI's tree.
func Kaimon(app App) string {
	var r roff
	r.header(app.Name, "1", source, "kaimon manual")

	r.sh("NAME")
	r.line(app.Name + " - " + app.Summary)

	r.sh("SYNOPSIS")
	r.raw(".nf")
	var global []string
	for _, f := range app.Flags {
		global = append(global, "["+f.Names+"]")
	}
	r.raw(`\fB%s\fR %s \fICOMMAND\fR [\fIoptions\fR] [\fIARGS\fR]`, esc(app.Name), esc(strings.Join(global, " ")))
	each(app.Commands, func(c Command) {
		if len(c.Subcommands) == 0 {
			r.raw(`%s`, synopsis(c))
		}
	})
	r.raw(".fi")

	r.sh("DESCRIPTION")
	r.prose(app.Description)

	r.sh("OPTIONS")
	r.line("These come before the command.")
	for _, f := range app.Flags {
		flag(&r, f)
	}

	r.sh("COMMANDS")
	r.line("Every command takes --help (-h). Options may follow the arguments; after --, all is arguments.")
	each(app.Commands, func(c Command) { command(&r, c) })

	writeEnv(&r)
	writeFiles(&r)

	r.sh("EXIT STATUS")
	r.line(exitAbout)
	for _, e := range app.ExitCodes {
		r.item(fmt.Sprint(e.Code), e.Text())
	}

	r.sh("EXAMPLES")
	r.literal(app.Example)

	r.sh("SEE ALSO")
	r.raw(`.BR kaimon\-agentd (8),`)
	r.raw(`.BR kaimon\-events (7),`)
	r.raw(`.BR jq (1)`)
	return r.String()
}

// each visits cmds and their subcommands, parents first.
func each(cmds []Command, f func(Command)) {
	for _, c := range cmds {
		f(c)
		each(c.Subcommands, f)
	}
}

// synopsis is c's usage line with its path in bold.
func synopsis(c Command) string {
	rest := strings.TrimPrefix(c.Synopsis, c.Path)
	return `\fB` + esc(c.Path) + `\fR` + esc(rest)
}

func command(r *roff, c Command) {
	r.ss(c.Path)
	r.raw("%s", synopsis(c))
	r.raw(".PP")
	r.line(c.Summary + ".")
	if c.Description != "" {
		r.raw(".PP")
		r.prose(c.Description)
	}
	if len(c.Subcommands) > 0 {
		r.raw(".PP")
		r.line("Commands:")
		for _, s := range c.Subcommands {
			r.item(strings.TrimPrefix(s.Path, c.Path+" "), s.Summary+".")
		}
	}
	if len(c.Flags) > 0 {
		r.raw(".PP")
		r.line("Options:")
		for _, f := range c.Flags {
			flag(r, f)
		}
	}
	if c.Example != "" {
		r.raw(".PP")
		r.line("Example:")
		r.literal(c.Example)
	}
}

func flag(r *roff, f Flag) {
	text := f.Usage
	if f.Default != "" {
		text += " (default: " + f.Default + ")"
	}
	if len(f.Env) > 0 {
		text += " [$" + strings.Join(f.Env, ", $") + "]"
	}
	r.item(f.Names, text)
}
