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
	writeKaimon(&r, app)
	return r.String()
}

func writeKaimon(r page, app App) {
	r.header(app.Name, "1")
	r.sh("NAME")
	r.line(app.Name + " - " + app.Summary)

	r.sh("SYNOPSIS")
	var global []string
	for _, f := range app.Flags {
		global = append(global, "["+f.Names+"]")
	}
	lines := []synopsisLine{{cmd: app.Name, rest: strings.Join(global, " ") + " COMMAND [options] [ARGS]", italic: []string{"COMMAND", "options", "ARGS"}}}
	each(app.Commands, func(c Command) {
		if len(c.Subcommands) == 0 {
			lines = append(lines, synopsis(c))
		}
	})
	r.synopsis(lines...)

	r.sh("DESCRIPTION")
	r.prose(app.Description)

	r.sh("OPTIONS")
	r.line("These come before the command.")
	for _, f := range app.Flags {
		flag(r, f)
	}

	r.sh("COMMANDS")
	r.line("Every command takes --help (-h). Options may follow the arguments; after --, all is arguments.")
	each(app.Commands, func(c Command) { command(r, c) })

	writeEnv(r)
	writeFiles(r)

	r.sh("EXIT STATUS")
	r.line(exitAbout)
	for _, e := range app.ExitCodes {
		r.item(fmt.Sprint(e.Code), e.Text())
	}

	r.sh("EXAMPLES")
	r.literal(app.Example)

	r.sh("SEE ALSO")
	r.seeAlso(refAgentd, refEvents, refJq)
}

// each visits cmds and their subcommands, parents first.
func each(cmds []Command, f func(Command)) {
	for _, c := range cmds {
		f(c)
		each(c.Subcommands, f)
	}
}

// synopsis is c's usage line.
func synopsis(c Command) synopsisLine {
	return synopsisLine{cmd: c.Path, rest: strings.TrimSpace(strings.TrimPrefix(c.Synopsis, c.Path))}
}

func command(r page, c Command) {
	r.ss(c.Path)
	r.synopsis(synopsis(c))
	r.para()
	r.line(c.Summary + ".")
	if c.Description != "" {
		r.para()
		r.prose(c.Description)
	}
	if len(c.Subcommands) > 0 {
		r.para()
		r.line("Commands:")
		for _, s := range c.Subcommands {
			r.item(strings.TrimPrefix(s.Path, c.Path+" "), s.Summary+".")
		}
	}
	if len(c.Flags) > 0 {
		r.para()
		r.line("Options:")
		for _, f := range c.Flags {
			flag(r, f)
		}
	}
	if c.Example != "" {
		r.para()
		r.line("Example:")
		r.literal(c.Example)
	}
}

func flag(r page, f Flag) {
	text := f.Usage
	if f.Default != "" {
		text += " (default: " + f.Default + ")"
	}
	if len(f.Env) > 0 {
		text += " [$" + strings.Join(f.Env, ", $") + "]"
	}
	r.item(f.Names, text)
}
