package cli

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"

	"github.com/kaimon/kaimon/internal/server/servertest"
	"github.com/kaimon/kaimon/internal/verbs"
)

// cliOnlyFlags are the flags of verb commands that are no argument of the
// verb table, each with why it exists; any other flag of a verb command
// must be an argument's.
var cliOnlyFlags = map[string]string{
	"json":           "every verb command: print the verb's JSON return",
	noRecursionGuard: "open and run: disallowed_tools = [], which a repeatable --disallow cannot say",
	oneShotFlag:      "run: open a throwaway agent in DIR for the turn",
	allHosts:         "list: every host's agents in one table (fleet.ListAll)",
}

// alsoTakes: run -C DIR opens the agent it runs the turn in, so run takes
// agent_open's flags too.
var alsoTakes = map[string]string{"run": "agent_open"}

// The verb commands' command lines are the table's: each argument of a
// verb is a positional of its command, in the table's order as its usage
// line says, or a flag of the table's name (and alias), and a command has
// no flag and takes no positional the table does not know. An Enum's
// values are in its flag's help.
func TestFlagsMatchTable(t *testing.T) {
	t.Parallel()
	app := NewApp()
	for _, v := range verbs.All {
		cmd := findCommand(app.Commands, v.CLI)
		if cmd == nil {
			t.Errorf("verb %s has no command %q", v.Name, v.CLI)
			continue
		}
		if u := v.ArgsUsage(); cmd.ArgsUsage != u && !strings.HasPrefix(cmd.ArgsUsage, u+" | ") {
			t.Errorf("kaimon %s: positionals %q, the table says %q", v.CLI, cmd.ArgsUsage, u)
		}
		known := map[string]*verbs.Arg{}
		for _, verb := range []*verbs.Verb{v, verbs.ByName(alsoTakes[v.CLI])} {
			if verb == nil {
				continue
			}
			for i := range verb.Args {
				if a := &verb.Args[i]; !verb.IsPositional(a.Name) {
					known[a.FlagName()] = a
				}
			}
		}
		for _, f := range cmd.Flags {
			name := f.Names()[0]
			a, ok := known[name]
			if !ok {
				if _, cliOnly := cliOnlyFlags[name]; !cliOnly {
					t.Errorf("kaimon %s: flag --%s is no argument of %s in the verb table", v.CLI, name, v.Name)
				}
				continue
			}
			if want := slices.DeleteFunc([]string{name, a.Short}, func(s string) bool { return s == "" }); !slices.Equal(f.Names(), want) {
				t.Errorf("kaimon %s: flag %v, the table says %v", v.CLI, f.Names(), want)
			}
			usage := usageOf(f)
			for _, e := range a.Enum {
				if !strings.Contains(usage, e) {
					t.Errorf("kaimon %s: --%s's help %q leaves out the value %s", v.CLI, name, usage, e)
				}
			}
		}
		for _, a := range v.Args {
			switch {
			case v.IsPositional(a.Name):
			case a.Global:
				if hasFlag(cmd, a.FlagName()) || !slices.ContainsFunc(app.Flags, func(f cli.Flag) bool { return f.Names()[0] == a.FlagName() }) {
					t.Errorf("kaimon %s: argument %s is global, but --%s is a flag of the command or no global flag", v.CLI, a.Name, a.FlagName())
				}
			case !hasFlag(cmd, a.FlagName()):
				t.Errorf("kaimon %s: argument %s has no flag --%s", v.CLI, a.Name, a.FlagName())
			}
		}
	}
}

// Each argument of the table reaches its verb from the command line: the
// positionals in the table's order, and each flag to its argument; one
// positional more than the table names is a usage error that calls
// nothing.
func TestCommandLinesReachTheTable(t *testing.T) {
	for _, v := range verbs.All {
		var pos []string
		for _, a := range v.PositionalArgs() {
			pos = append(pos, sample(a))
		}
		t.Run(v.CLI, func(t *testing.T) {
			got := callOf(t, v, append([]string{v.CLI}, pos...))
			for i, a := range v.PositionalArgs() {
				if f := argField(got, a.Name); !f.IsValid() || f.IsZero() {
					t.Errorf("positional %d (%s) did not reach argument %s: %+v", i+1, pos[i], a.Name, got)
				}
			}
			if last := v.PositionalArgs(); len(last) == 0 || last[len(last)-1].Type != verbs.TArray {
				fake := &servertest.Fake{}
				code, _, errs := runService(t, fake, "", append(append([]string{v.CLI}, pos...), "extra")...)
				if code != ExitUsage || len(fake.Calls()) != 0 {
					t.Errorf("kaimon %s with a positional the table does not name: exit %d, %d calls, stderr %q; want a usage error",
						v.CLI, code, len(fake.Calls()), errs)
				}
			}
		})
		for _, verb := range []*verbs.Verb{v, verbs.ByName(alsoTakes[v.CLI])} {
			if verb == nil {
				continue
			}
			for _, a := range verb.Args {
				if verb.IsPositional(a.Name) {
					continue
				}
				t.Run(v.CLI+" --"+a.FlagName(), func(t *testing.T) {
					args := []string{v.CLI, "--" + a.FlagName()}
					if a.Type != verbs.TBoolean {
						args = append(args, sample(&a))
					}
					if a.Name == "resume" {
						args = append(args, "--id", "a1") // --resume names the agent
					}
					if verb != v {
						args = append(args, "-"+oneShotFlag, "/w") // run's open flags open the -C agent
					}
					if a.Name != "all_dead" { // forget takes ids or --all-dead
						args = append(args, pos...)
					}
					if verb != v {
						args = slices.Delete(args, len(args)-len(pos), len(args)-len(pos)+1) // -C stands for the agent id
					}
					got := callOf(t, verb, args)
					if f := argField(got, a.Name); !f.IsValid() || f.IsZero() {
						t.Errorf("%v did not set argument %s: %+v", args, a.Name, got)
					}
				})
			}
		}
	}
}

// sample is a value for argument a that is not its default.
func sample(a *verbs.Arg) string {
	switch {
	case len(a.Enum) > 0:
		for _, e := range a.Enum {
			if e != a.Default {
				return e
			}
		}
	case a.Type == verbs.TInteger:
		return "7"
	case a.Type == verbs.TNumber:
		return "90s" // run's --timeout is a duration
	case a.Placeholder == "DIR":
		return "/w"
	}
	return "x1"
}

// callOf runs args against a fake service and returns the arguments of
// the call of verb it made.
func callOf(t *testing.T, verb *verbs.Verb, args []string) any {
	t.Helper()
	fake := (&servertest.Fake{}).Returns("open", &verbs.OpenResult{AgentID: "t1"}, nil)
	if code, _, errs := runService(t, fake, "", args...); code != ExitOK {
		t.Fatalf("kaimon %v: exit %d, stderr %q", args, code, errs)
	}
	for _, c := range fake.Calls() {
		if c.Verb == verb.Name {
			return c.Args
		}
	}
	t.Fatalf("kaimon %v did not call %s: %+v", args, verb.Name, fake.Calls())
	return nil
}

// argField is the field of args (a *XxxArgs) that holds argument name.
func argField(args any, name string) reflect.Value {
	rv := reflect.ValueOf(args).Elem()
	for i := 0; i < rv.NumField(); i++ {
		if strings.Split(rv.Type().Field(i).Tag.Get("json"), ",")[0] == name {
			return rv.Field(i)
		}
	}
	return reflect.Value{}
}

// The commands that are not verbs say their positionals for completion in
// otherPositionals: every one of them that takes positionals is there.
func TestOtherPositionalsKnown(t *testing.T) {
	t.Parallel()
	for _, c := range NewApp().Commands {
		if v := verbs.ByName(c.Name); (v != nil && v.CLI == c.Name) || c.Hidden {
			continue
		}
		_, known := otherPositionals[c.Name]
		if takes := c.ArgsUsage != ""; takes != known {
			t.Errorf("kaimon %s: positionals %q, but otherPositionals has it: %v", c.Name, c.ArgsUsage, known)
		}
	}
}
