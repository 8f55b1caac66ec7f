package cli

import (
	"slices"
	"strings"

	"github.com/urfave/cli/v2"
)

// interspersed moves a command's flags ahead of its positional arguments,
// so that `kaimon run ID TEXT --timeout 1m` works as people write it:
// urfave/cli v2, like the flag package, stops parsing flags at the first
// positional. A global flag (--no-color, --host NAME) given after the command goes
// before it, where urfave/cli looks for it: docs/cli.md says flags may go
// anywhere, and these are flags too. Everything after "--" stays
// positional.
func interspersed(app *cli.App, args []string) []string {
	if len(args) < 2 {
		return args
	}
	out := []string{args[0]}
	i := 1
	globalTakesValue := map[string]bool{}
	for _, f := range app.Flags {
		_, isBool := f.(*cli.BoolFlag)
		for _, n := range f.Names() {
			globalTakesValue[n] = !isBool
		}
	}
	// Global flags (--host with its value) up to the command name.
	for i < len(args) && strings.HasPrefix(args[i], "-") && args[i] != "-" && args[i] != "--" {
		name, _, hasValue := strings.Cut(strings.TrimLeft(args[i], "-"), "=")
		out = append(out, args[i])
		i++
		if !hasValue && globalTakesValue[name] && i < len(args) {
			out = append(out, args[i])
			i++
		}
	}
	if i >= len(args) {
		return args
	}
	cmd := findCommand(app.Commands, args[i])
	out = append(out, args[i])
	i++
	// Descend into subcommands (kaimon daemon start); depth counts them.
	depth := 0
	for cmd != nil && len(cmd.Subcommands) > 0 && i < len(args) {
		sub := findCommand(cmd.Subcommands, args[i])
		if sub == nil {
			break
		}
		cmd = sub
		out = append(out, args[i])
		i++
		depth++
	}
	if cmd == nil {
		return args
	}
	takesValue := map[string]bool{}
	for _, f := range cmd.Flags {
		_, isBool := f.(*cli.BoolFlag)
		for _, n := range f.Names() {
			takesValue[n] = !isBool
		}
	}
	global := map[string]bool{}
	for _, f := range globalsAfter(app, cmd) {
		for _, n := range f.Names() {
			global[n] = true
		}
	}
	var globals, flags, pos []string
	for ; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			pos = append(pos, args[i+1:]...)
			break
		}
		if !strings.HasPrefix(a, "-") || a == "-" {
			pos = append(pos, a)
			continue
		}
		name, _, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if global[name] {
			globals = append(globals, a)
			if !hasValue && globalTakesValue[name] && i+1 < len(args) {
				i++
				globals = append(globals, args[i])
			}
			continue
		}
		flags = append(flags, a)
		if !hasValue && takesValue[name] && i+1 < len(args) {
			i++
			flags = append(flags, args[i])
		}
	}
	if len(globals) > 0 {
		at := len(out) - 1 - depth // just after the global flags already before the command
		out = append(out[:at:at], append(globals, out[at:]...)...)
	}
	out = append(out, flags...)
	if len(pos) > 0 {
		out = append(out, "--")
		out = append(out, pos...)
	}
	return out
}

// globalsAfter are the global flags that may follow cmd's name: every one
// but those cmd has a flag of the same name for (the command's own wins).
// Completion reads the same list.
func globalsAfter(app *cli.App, cmd *cli.Command) []cli.Flag {
	own := map[string]bool{}
	for _, f := range cmd.Flags {
		for _, n := range f.Names() {
			own[n] = true
		}
	}
	var out []cli.Flag
	for _, f := range app.Flags {
		if !slices.ContainsFunc(f.Names(), func(n string) bool { return own[n] }) {
			out = append(out, f)
		}
	}
	return out
}

func findCommand(cmds []*cli.Command, name string) *cli.Command {
	for _, c := range cmds {
		if c.HasName(name) {
			return c
		}
	}
	return nil
}
