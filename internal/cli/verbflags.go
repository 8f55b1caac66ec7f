package cli

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/urfave/cli/v2"

	"github.com/kaimon/kaimon/internal/verbs"
)

// verbFlags are the flags of verb's arguments that the CLI does not take as
// positionals, made from the verb table: the flag's name and alias, its
// default, and its usage from the argument's doc, with an Enum's values.
// Only the plain types are made here (string, enum, integer, boolean,
// array of strings); an argument whose command line differs from its JSON
// (agent_run's timeout: seconds in JSON, a duration on the command line) is
// a flag its command makes by hand, of the same name (TestFlagsMatchTable).
// A Global argument has none: kaimon's global flag of its name sets it.
func verbFlags(verb string) []cli.Flag {
	v := verbs.ByName(verb)
	var out []cli.Flag
	for i := range v.Args {
		a := &v.Args[i]
		if v.IsPositional(a.Name) || a.Global {
			continue
		}
		name, usage := a.FlagName(), flagUsage(v, a)
		var aliases []string
		if a.Short != "" {
			aliases = []string{a.Short}
		}
		switch a.Type {
		case verbs.TString:
			f := &cli.StringFlag{Name: name, Aliases: aliases, Usage: usage}
			if d, ok := a.Default.(string); ok {
				f.Value = d
			}
			out = append(out, f)
		case verbs.TInteger:
			f := &cli.IntFlag{Name: name, Aliases: aliases, Usage: usage}
			if d, ok := a.Default.(int); ok {
				f.Value = d
			}
			out = append(out, f)
		case verbs.TBoolean:
			out = append(out, &cli.BoolFlag{Name: name, Aliases: aliases, Usage: usage})
		case verbs.TArray:
			out = append(out, &cli.StringSliceFlag{Name: name, Aliases: aliases, Usage: usage})
		}
	}
	return out
}

// flagUsage is argument a of v's doc as a flag's usage reads: lower-case
// and without the final period like the other flags' usage, naming v's
// other arguments by their flags (allowed_tools is --allow here), and with
// the values an Enum allows, so that the help cannot go stale when the
// table grows one.
func flagUsage(v *verbs.Verb, a *verbs.Arg) string {
	doc := a.Doc
	if a.FlagDoc != "" {
		doc = a.FlagDoc
	}
	u := strings.TrimSuffix(doc, ".")
	for _, o := range v.Args {
		if strings.Contains(o.Name, "_") && !v.IsPositional(o.Name) {
			u = strings.ReplaceAll(u, o.Name, "--"+o.FlagName())
		}
	}
	// Lower-case the first word unless it is a name (MCP, JSON).
	if r, n := utf8.DecodeRuneInString(u); n > 0 {
		if r2, _ := utf8.DecodeRuneInString(u[n:]); !unicode.IsUpper(r2) {
			u = string(unicode.ToLower(r)) + u[n:]
		}
	}
	if a.Type == verbs.TArray {
		u += " (repeatable)"
	}
	if len(a.Enum) > 0 {
		u += "; one of: " + strings.Join(a.Enum, ", ")
	}
	return u
}

// tablePlaceholder is the placeholder the verb table gives the value of
// the flag named name (TOOL for --allow), or "".
func tablePlaceholder(name string) string {
	for _, v := range verbs.All {
		for _, a := range v.Args {
			if a.FlagName() == name && a.Placeholder != "" && !v.IsPositional(a.Name) {
				return a.Placeholder
			}
		}
	}
	return ""
}

// needVerbArgs checks that the command line holds the positionals the
// table names for verb: all of them, or all but the one it may leave out
// (verbs.Verb.PositionalsFor).
func needVerbArgs(c *cli.Context, verb string) error {
	v := verbs.ByName(verb)
	if v.PositionalsFor(c.NArg()) != nil {
		return nil
	}
	names := v.ArgsUsage()
	if names == "" {
		names = "no arguments"
	}
	return usagef("%s takes %s (got %d argument(s))", c.Command.Name, names, c.NArg())
}

// verbWords maps the command line's positionals to the table's arguments
// of verb they fill, by name; one left out is "". needVerbArgs has checked
// that they fit.
func verbWords(c *cli.Context, verb string) map[string]string {
	out := map[string]string{}
	for i, a := range verbs.ByName(verb).PositionalsFor(c.NArg()) {
		out[a.Name] = c.Args().Get(i)
	}
	return out
}
