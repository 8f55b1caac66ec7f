package cli

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"

	"github.com/urfave/cli/v2"

	"github.com/kaimon/kaimon/internal/agentbin"
	"github.com/kaimon/kaimon/internal/config"
	"github.com/kaimon/kaimon/internal/event"
	"github.com/kaimon/kaimon/internal/manpage"
	"github.com/kaimon/kaimon/internal/testutil/fakeapi"
	"github.com/kaimon/kaimon/internal/verbs"
)

var update = flag.Bool("update", false, "rewrite the generated man pages and completions")

// manPages are the man pages, made from the command tree, the verb table,
// the event kinds and the environment table.
func manPages() map[string]string {
	return map[string]string{
		"man/kaimon.1":        manpage.Kaimon(Manual(NewApp())),
		"man/kaimon-agentd.8": manpage.Agentd(),
		"man/kaimon-events.7": manpage.Events(),
	}
}

// generated returns the files made from the command tree: the man pages,
// the same pages in Markdown (docs/reference, for a reader on the web) and
// the shell completions. They are committed so that packagers and people
// without the binary have them; this test fails when they are stale.
func generated(t *testing.T) map[string]string {
	app := NewApp()
	out := manPages()
	for file, text := range manpage.Reference(Manual(app)) {
		out["docs/reference/"+file] = text
	}
	out["docs/reference/verbs.md"] = manpage.Verbs()
	out["docs/reference/fakeapi-phrases.md"] = fakeapi.PhrasesMarkdown()
	for _, sh := range []string{"bash", "zsh", "fish"} {
		s, err := Completion(app, sh)
		if err != nil {
			t.Fatal(err)
		}
		out["completions/kaimon."+sh] = s
	}
	return out
}

func TestGeneratedDocsAreFresh(t *testing.T) {
	root := filepath.Join("..", "..")
	for path, want := range generated(t) {
		full := filepath.Join(root, path)
		if *update {
			if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(full, []byte(want), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		got, err := os.ReadFile(full)
		if err != nil || string(got) != want {
			t.Errorf("%s is stale: run `go test ./internal/cli -run TestGeneratedDocsAreFresh -update`", path)
		}
	}
}

// Every command has well-formed help, and every verb of the table has its
// command, with --json (its arguments' flags and positionals are
// TestFlagsMatchTable's).
func TestCommandTreeHelp(t *testing.T) {
	app := NewApp()
	var walk func(prefix string, cmds []*cli.Command)
	walk = func(prefix string, cmds []*cli.Command) {
		for _, c := range cmds {
			name := prefix + c.Name
			if c.Usage == "" {
				t.Errorf("%s: no usage line", name)
			} else if r := []rune(c.Usage); !unicode.IsUpper(r[0]) || strings.HasSuffix(c.Usage, ".") {
				t.Errorf("%s: usage %q should start upper-case and not end with a period", name, c.Usage)
			}
			for _, f := range c.Flags {
				if df, ok := f.(cli.DocGenerationFlag); ok && df.GetUsage() == "" {
					t.Errorf("%s: flag %v has no usage", name, f.Names())
				}
			}
			walk(name+" ", c.Subcommands)
		}
	}
	walk("", app.Commands)
	testHelpAndUsageErrors(t, app)

	for _, v := range verbs.All {
		cmd := findCommand(app.Commands, v.CLI)
		if cmd == nil {
			t.Errorf("verb %s has no command %q", v.Name, v.CLI)
			continue
		}
		if !hasFlag(cmd, "json") {
			t.Errorf("kaimon %s has no --json", v.CLI)
		}
	}
}

func hasFlag(c *cli.Command, name string) bool {
	for _, f := range c.Flags {
		for _, n := range f.Names() {
			if n == name {
				return true
			}
		}
	}
	return false
}

// run runs kaimon in process with args (after "kaimon"); with no daemon
// and autostart off, so that a command that wrongly reaches for the daemon
// fails instead of starting one.
func run(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	t.Setenv("KAIMON_HOME", t.TempDir())
	t.Setenv("KAIMON_NO_AUTOSTART", "1")
	// A command that wrongly acts on stray arguments writes here, not in
	// the user's home.
	t.Setenv("HOME", t.TempDir())
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	// `daemon start` starts a daemon whatever autostart says: one that went
	// wrong must fail, not leave a daemon behind.
	t.Setenv("KAIMON_AGENTD_BIN", filepath.Join(t.TempDir(), "no-kaimon-agentd"))
	var out, errb bytes.Buffer
	code = Run(context.Background(), append([]string{"kaimon"}, args...), strings.NewReader(""), &out, &errb)
	return code, out.String(), errb.String()
}

// oneUsageError checks a usage error: nothing on stdout, exit 2, and on
// stderr one line then the pointer to the command's own help.
func oneUsageError(t *testing.T, args []string, help string) string {
	t.Helper()
	code, out, errs := run(t, args...)
	lines := strings.Split(strings.TrimSuffix(errs, "\n"), "\n")
	pointer := "Run '" + help + " --help' for usage."
	if code != ExitUsage || out != "" || len(lines) != 2 || !strings.HasPrefix(lines[0], "kaimon: ") || lines[1] != pointer {
		t.Errorf("kaimon %s: want exit 2, no output and one line + %q on stderr; got exit %d, stdout %q, stderr %q",
			strings.Join(args, " "), pointer, code, out, errs)
	}
	return lines[0]
}

// testHelpAndUsageErrors walks every visible command: --help shows its
// usage line with its arguments and an example; a bad flag, stray
// arguments and (for a command with subcommands) an unknown subcommand are
// usage errors naming its own help.
func testHelpAndUsageErrors(t *testing.T, app *cli.App) {
	var walk func(path []string, cmds []*cli.Command)
	walk = func(path []string, cmds []*cli.Command) {
		for _, c := range cmds {
			if c.Hidden || c.Name == "help" {
				continue
			}
			args := append(append([]string{}, path...), c.Name)
			name := "kaimon " + strings.Join(args, " ")

			code, out, errs := run(t, append(args, "--help")...)
			usage := name + " [options]"
			if c.ArgsUsage != "" {
				usage += " " + c.ArgsUsage
			}
			if len(c.Subcommands) > 0 {
				usage = name + " COMMAND [options]"
			}
			if code != 0 || errs != "" || !strings.Contains(out, "USAGE:\n   "+usage+"\n") || !strings.Contains(out, "\nEXAMPLE:\n   ") {
				t.Errorf("%s --help: want exit 0, the usage line %q and an EXAMPLE (a verb's Example in internal/verbs, "+
					"else an entry in examples, internal/cli/help.go); got exit %d, stderr %q, stdout:\n%s", name, usage, code, errs, out)
			}
			for _, s := range c.Subcommands {
				if !s.Hidden && !strings.Contains(out, "\n   "+s.Name+"  ") {
					t.Errorf("%s --help does not list its subcommand %s:\n%s", name, s.Name, out)
				}
			}

			oneUsageError(t, append(args, "--no-such-flag"), name)
			if !strings.Contains(c.ArgsUsage, "…") && !strings.Contains(c.ArgsUsage, "...") {
				// No command takes nine arguments.
				oneUsageError(t, append(args, "a", "b", "c", "d", "e", "f", "g", "h", "i"), name)
			}
			if len(c.Subcommands) > 0 {
				oneUsageError(t, append(args, "no-such-command"), name)
				// `kaimon help daemon` lists the subcommands as `kaimon daemon --help` does.
				if _, helped, _ := run(t, append([]string{"help"}, args...)...); helped != out {
					t.Errorf("kaimon help %s differs from %s --help:\n%s", strings.Join(args, " "), name, helped)
				}
			}
			walk(args, c.Subcommands)
		}
	}
	walk(nil, app.Commands)
	oneUsageError(t, []string{"--no-such-flag"}, "kaimon")
}

// An unknown command, subcommand or flag suggests the nearest one, when one
// is near; a duration without its unit says what a duration is.
func TestUnknownCommandSuggestsTheNearest(t *testing.T) {
	for _, tc := range []struct {
		args       []string
		help, want string
	}{
		{[]string{"sned", "x", "hi"}, "kaimon", `kaimon: unknown command "sned"; did you mean "send"?`},
		{[]string{"stauts"}, "kaimon", `kaimon: unknown command "stauts"; did you mean "status"?`},
		{[]string{"daemon", "strat"}, "kaimon daemon", `kaimon: unknown command "strat" for 'kaimon daemon'; did you mean "start"?`},
		{[]string{"rnu", "x", "hi"}, "kaimon", `kaimon: unknown command "rnu"; did you mean "run"?`}, // a swap
		{[]string{"xyzzy"}, "kaimon", `kaimon: unknown command "xyzzy"`},                             // nothing near: no guess
		{[]string{"kitchen"}, "kaimon", `kaimon: unknown command "kitchen"`},                         // not help's alias h
		{[]string{"x"}, "kaimon", `kaimon: unknown command "x"`},                                     // no one-letter guess either
		{[]string{"hlep"}, "kaimon", `kaimon: unknown command "hlep"; did you mean "help"?`},
		{[]string{"output", "x", "--whcih", "all"}, "kaimon output", `kaimon: flag provided but not defined: -whcih; did you mean "--which"?`},
		{[]string{"status", "--bogus", "x"}, "kaimon status", `kaimon: flag provided but not defined: -bogus`},
		{[]string{"list", "--al"}, "kaimon list", `kaimon: flag provided but not defined: -al; did you mean "--all-hosts"?`}, // the one flag it begins
		{[]string{"run", "x", "hi", "--tiemout", "3"}, "kaimon run", `kaimon: flag provided but not defined: -tiemout; did you mean "--timeout"?`},
		{[]string{"run", "--timeout", "30", "x", "hi"}, "kaimon run", `kaimon: --timeout takes a duration with its unit, as 90s or 5m (got "30"); did you mean "30s"?`},
		{[]string{"run", "--timeout", "soon", "x", "hi"}, "kaimon run", `kaimon: --timeout takes a duration with its unit, as 90s or 5m (got "soon")`},
		{[]string{"run", "--timeout", "-3", "x", "hi"}, "kaimon run", `kaimon: --timeout takes a duration with its unit, as 90s or 5m (got "-3")`},
	} {
		if got := oneUsageError(t, tc.args, tc.help); got != tc.want {
			t.Errorf("kaimon %s: got %q, want %q", strings.Join(tc.args, " "), got, tc.want)
		}
	}
}

// The exit codes of --help are a table: every meaning starts in one
// column, 130's too.
func TestExitCodesAligned(t *testing.T) {
	t.Parallel()
	col := -1
	for _, l := range strings.Split(exitCodesText(), "\n")[1:] {
		code := strings.Fields(l)[0]
		at := strings.Index(l, code) + len(code)
		at += len(l[at:]) - len(strings.TrimLeft(l[at:], " "))
		if col == -1 {
			col = at
		}
		if at != col {
			t.Errorf("exit code %s's meaning starts at column %d, the others' at %d:\n%s", code, at, col, exitCodesText())
		}
	}
}

// The man pages render without a warning, and say what they must.
func TestManPagesRender(t *testing.T) {
	if _, err := exec.LookPath("man"); err != nil {
		msg := "man is missing: scripts/setup-test.sh installs man-db and groff-base"
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	root := filepath.Join("..", "..")
	rendered := map[string]string{}
	for path := range manPages() {
		cmd := exec.Command("man", "--warnings", "-l", filepath.Join(root, path))
		cmd.Env = append(os.Environ(), "MANWIDTH=80", "MANPAGER=cat", "PAGER=cat")
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		if err := cmd.Run(); err != nil || errb.Len() > 0 {
			t.Errorf("man --warnings -l %s: %v\n%s", path, err, errb.String())
		}
		if out.Len() == 0 {
			t.Errorf("man -l %s rendered nothing", path)
		}
		rendered[path] = out.String()
	}

	page := rendered["man/kaimon.1"]
	for _, section := range []string{"NAME", "SYNOPSIS", "DESCRIPTION", "COMMANDS", "ENVIRONMENT", "FILES", "EXIT STATUS", "EXAMPLES", "SEE ALSO"} {
		if !strings.Contains(page, "\n"+section+"\n") {
			t.Errorf("kaimon.1 has no %s section", section)
		}
	}
	for _, e := range manpage.Env {
		if !tagged(page, e.Name) {
			t.Errorf("kaimon.1 does not document %s", e.Name)
		}
	}
	for _, c := range Manual(NewApp()).Commands {
		// The page writes … as ... so that it renders in any locale.
		if !strings.Contains(page, "\n   "+c.Path+"\n       "+strings.ReplaceAll(c.Synopsis, "…", "...")+"\n") {
			t.Errorf("kaimon.1 has no subsection for %s with its usage line %q", c.Path, c.Synopsis)
		}
	}
	if strings.Contains(page, "(default: the latest) (default: 0)") || strings.Contains(page, "\n   __complete\n") ||
		strings.Contains(page, "kaimon __complete [") {
		t.Errorf("kaimon.1 states a default twice or shows a hidden command")
	}
	for _, k := range event.Kinds {
		if !tagged(rendered["man/kaimon-events.7"], string(k)) {
			t.Errorf("kaimon-events.7 does not document the kind %s", k)
		}
	}
}

// tagged says whether a rendered page has a tagged paragraph (.TP) for tag:
// the tag alone on its line, or a short one followed by its text.
func tagged(page, tag string) bool {
	return strings.Contains(page, "\n       "+tag+"\n") || strings.Contains(page, "\n       "+tag+" ")
}

// With no daemon, `daemon status` says so and how to start one, exit 1;
// it does not claim autostart is off when nobody turned it off.
func TestDaemonStatusWhenDown(t *testing.T) {
	for _, off := range []bool{false, true} {
		t.Run(fmt.Sprintf("no-autostart=%v", off), func(t *testing.T) {
			t.Setenv("KAIMON_HOME", t.TempDir())
			t.Setenv("KAIMON_NO_AUTOSTART", "")
			t.Setenv("KAIMON_AGENTD_BIN", filepath.Join(t.TempDir(), "no-kaimon-agentd"))
			args := []string{"kaimon", "daemon", "status"}
			if off {
				args = []string{"kaimon", "--no-autostart", "daemon", "status"}
			}
			var out, errb bytes.Buffer
			code := Run(context.Background(), args, strings.NewReader(""), &out, &errb)
			msg := errb.String()
			if code != ExitError || out.Len() != 0 || !strings.Contains(msg, "kaimon-agentd is not running") ||
				!strings.Contains(msg, "start it with `kaimon daemon start`") || strings.Contains(msg, "autostart is off") != off {
				t.Errorf("%s: exit %d, stdout %q, stderr %q", strings.Join(args, " "), code, out.String(), msg)
			}
		})
	}
}

// docFiles are the README and every page of docs/, by path from the
// repository's root.
func docFiles(t *testing.T) map[string]string {
	t.Helper()
	root := filepath.Join("..", "..")
	out := map[string]string{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() && rel != "." && rel != "docs" && !strings.HasPrefix(rel, "docs"+string(filepath.Separator)) {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(path, ".md") {
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			out[filepath.ToSlash(rel)] = string(b)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if out["README.md"] == "" || len(out) < 10 {
		t.Fatalf("found %d pages of docs, README.md among them: %v", len(out), slices.Collect(maps.Keys(out)))
	}
	return out
}

// Every link of the README and docs/ to a file of the repository leads
// to one, and one with a #fragment to a heading of it: the README's
// sections moved into docs/, and a link left pointing where a section was
// fails here.
func TestDocsLinks(t *testing.T) {
	t.Parallel()
	pages := docFiles(t)
	anchors := map[string]map[string]bool{}
	for path, text := range pages {
		anchors[path] = map[string]bool{}
		fence := false
		for _, l := range strings.Split(text, "\n") {
			if strings.HasPrefix(l, "```") {
				fence = !fence
			}
			if h, ok := strings.CutPrefix(strings.TrimLeft(l, "#"), " "); ok && !fence && strings.HasPrefix(l, "#") {
				anchors[path][manpage.Anchor(h)] = true
			}
		}
	}
	link := regexp.MustCompile(`\]\(([^)\s]+)\)`)
	for path, text := range pages {
		for _, m := range link.FindAllStringSubmatch(text, -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			file, frag, _ := strings.Cut(target, "#")
			if file == "" {
				file = path
			} else {
				file = filepath.ToSlash(filepath.Clean(filepath.Join(filepath.Dir(path), file)))
			}
			if _, err := os.Stat(filepath.Join("..", "..", file)); err != nil {
				t.Errorf("%s links to %s, which is not there", path, target)
				continue
			}
			if frag != "" && !anchors[file][frag] {
				t.Errorf("%s links to %s: %s has no heading #%s", path, target, file, frag)
			}
		}
	}
}

// The README stays short: a newcomer's page, whose details are in docs/.
func TestREADMEIsShort(t *testing.T) {
	t.Parallel()
	readme := docFiles(t)["README.md"]
	if n := strings.Count(readme, "\n"); n > 200 {
		t.Errorf("README.md has %d lines: move the details to a page of docs/ and link it", n)
	}
	// The exit codes are one table, in the code: a page links to it.
	for path, text := range docFiles(t) {
		if strings.Contains(text, "\n| 130 |") && !strings.HasPrefix(path, "docs/reference/") {
			t.Errorf("%s keeps a table of exit codes: link docs/reference/kaimon.md#exit-status instead", path)
		}
	}
}

// The guides state the defaults the code has: a default changed in its
// constant and not in the prose fails here, naming the page.
func TestGuidesStateTheDefaults(t *testing.T) {
	t.Parallel()
	pages := docFiles(t)
	for _, c := range []struct{ page, says string }{
		{"docs/daemon.md", fmt.Sprintf("| %d s, `permission_timeout` in the config |", config.DefaultPermissionTimeout)},
		{"docs/daemon.md", "`" + config.DefaultOllamaURL + "`"},
		{"docs/daemon.md", "`" + config.DefaultVMLXURL + "`"},
		{"docs/local-models.md", "else `" + config.DefaultOllamaURL + "`"},
		{"docs/local-models.md", "else `" + config.DefaultVMLXURL + "`"},
		{"docs/local-models.md", fmt.Sprintf("`local_max_rounds` requests (default %d)", config.DefaultLocalMaxRounds)},
		{"docs/permissions.md", fmt.Sprintf("default %d; `KAIMON_PERMISSION_TIMEOUT`", config.DefaultPermissionTimeout)},
		{"docs/events.md", fmt.Sprintf("default %d) is box-downsampled", config.DefaultAgentImageMaxLongEdge)},
	} {
		if !strings.Contains(strings.Join(strings.Fields(pages[c.page]), " "), c.says) {
			t.Errorf("%s does not say %q, as the code has it", c.page, c.says)
		}
	}
}

// The README's table of the agents kaimon drives has a row for each
// built-in ACP agent of agentbin's catalogue, in its order: an agent added
// there and not to the table fails here.
func TestREADMENamesEveryAgent(t *testing.T) {
	t.Parallel()
	readme := docFiles(t)["README.md"]
	_, table, ok := strings.Cut(readme, "| model string | agent |")
	if !ok {
		t.Fatal("README.md has no table of the agents it drives")
	}
	table, _, _ = strings.Cut(table, "\n\n")
	var listed []string
	for _, m := range regexp.MustCompile("(?m)^\\| `acp:([a-z]+)\\[:MODEL\\]`").FindAllStringSubmatch(table, -1) {
		listed = append(listed, m[1])
	}
	if !slices.Equal(listed, agentbin.ACPNames) {
		t.Errorf("README.md's table lists the ACP agents %v, internal/agentbin %v", listed, agentbin.ACPNames)
	}
}
