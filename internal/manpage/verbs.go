package manpage

import (
	"fmt"
	"strings"

	"github.com/kaimon/kaimon/internal/verbs"
)

// Verbs writes docs/reference/verbs.md from the verb table: each verb as
// its three doors take it (the CLI command, the MCP tool, the control
// API's route), with its arguments, the flag each is on the command line,
// and their defaults as Decode applies them.
func Verbs() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s\n\n# The verbs\n\n", GeneratedNote)
	b.WriteString("Every verb is one command of `kaimon`, one MCP tool of `kaimon mcp` and of the daemon's door, " +
		"and one route of the control API (`POST /v1/<verb>`; a read-only verb takes `GET` with query parameters too), " +
		"with the same arguments and the same JSON result (what `--json` prints). " +
		"`kaimon schema verbs` has their JSON Schema; [kaimon(1)](kaimon.md) has each command's flags and examples.\n\n")
	for _, v := range verbs.All {
		fmt.Fprintf(&b, "- [%s](#%s): %s\n", v.Name, Anchor(v.Name), v.Summary)
	}
	for _, v := range verbs.All {
		fmt.Fprintf(&b, "\n## %s\n\n%s.\n\n", v.Name, v.Summary)
		route := "POST /v1/" + v.Name
		if v.ReadOnly {
			route = "GET or " + route
		}
		fmt.Fprintf(&b, "CLI `kaimon %s`, MCP tool `%s`, route `%s`", v.CLI, v.Name, route)
		switch {
		case v.ReadOnly:
			b.WriteString(" (read-only)")
		case v.Destructive:
			b.WriteString(" (destructive)")
		}
		fmt.Fprintf(&b, ".\n\n%s\n\n", mdLine(v.Doc))
		if len(v.Args) > 0 {
			b.WriteString("| argument | on the command line | type | default | meaning |\n|---|---|---|---|---|\n")
			for _, a := range v.Args {
				fmt.Fprintf(&b, "| `%s`%s | %s | %s | %s | %s |\n", a.Name, required(a), onCommandLine(v, a),
					argType(a), cell(argDefault(a)), cell(argDoc(a)))
			}
			b.WriteString("\n")
		}
		fmt.Fprintf(&b, "Returns `%s`.\n", v.Returns)
		if v.Example != "" {
			fmt.Fprintf(&b, "\n```sh\n%s\n```\n", v.Example)
		}
	}
	return b.String()
}

func required(a verbs.Arg) string {
	switch {
	case a.Required:
		return " (required)"
	case len(a.RequiredUnless) > 0:
		return " (required unless " + strings.Join(a.RequiredUnless, " or ") + ")"
	}
	return ""
}

// onCommandLine is how the CLI takes a: positional by its placeholder, or
// its flag.
func onCommandLine(v *verbs.Verb, a verbs.Arg) string {
	if v.IsPositional(a.Name) {
		return "`" + a.ValueName() + "` (argument)"
	}
	flag := "`--" + a.FlagName() + "`"
	if a.Short != "" {
		flag = "`-" + a.Short + "`, " + flag
	}
	if a.Global {
		flag += " (global)"
	}
	return flag
}

func argType(a verbs.Arg) string {
	if len(a.Enum) > 0 {
		return "one of " + "`" + strings.Join(a.Enum, "`, `") + "`"
	}
	if a.Range != nil {
		return fmt.Sprintf("%s, %v to %v", a.Type, a.Range.Min, a.Range.Max)
	}
	return a.Type
}

func argDefault(a verbs.Arg) string {
	switch d := a.Default.(type) {
	case nil:
		return ""
	case []string:
		if len(d) == 0 {
			return "`[]`"
		}
		return "`" + strings.Join(d, ", ") + "`"
	}
	return fmt.Sprintf("`%v`", a.Default)
}

// argDoc is the argument's doc for a reader of both doors: the MCP one,
// and the flag's where it differs.
func argDoc(a verbs.Arg) string {
	if a.FlagDoc == "" || a.FlagDoc == a.Doc {
		return mdLine(a.Doc)
	}
	return mdLine(a.Doc) + " On the command line: " + mdLine(a.FlagDoc)
}

// cell makes s fit a table's cell.
func cell(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "|", `\|`), "\n", " ")
}
