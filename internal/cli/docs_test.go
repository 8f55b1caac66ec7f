package cli

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode"

	"github.com/urfave/cli/v2"

	"github.com/kaimon/kaimon/internal/manpage"
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

// generated returns the files made from the command tree: the man pages and
// the shell completions. They are committed so that packagers and people
// without the binary have them; this test fails when they are stale.
func generated(t *testing.T) map[string]string {
	app := NewApp()
	out := manPages()
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
// command with every argument reachable from the command line.
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

	// Where a verb argument is not a flag of the same (dashed) name.
	positional := map[string]string{"agent_id": "ID", "text": "TEXT", "cwd": "[DIR]", "model": "MODEL",
		"allowed_tools": "--allow", "disallowed_tools": "--disallow", "timeout": "--timeout",
		"request_id": "REQUEST_ID", "decision": "allow|deny", "agent_ids": "[ID…]"}
	for _, v := range verbs.All {
		var cmd *cli.Command
		for _, c := range app.Commands {
			if c.Name == v.CLI {
				cmd = c
			}
		}
		if cmd == nil {
			t.Errorf("verb %s has no command %q", v.Name, v.CLI)
			continue
		}
		for _, a := range v.Args {
			flagName := strings.ReplaceAll(a.Name, "_", "-")
			found := false
			for _, f := range cmd.Flags {
				for _, n := range f.Names() {
					if n == flagName {
						found = true
					}
				}
			}
			if p, ok := positional[a.Name]; ok && (strings.Contains(cmd.ArgsUsage, p) || hasFlag(cmd, strings.TrimPrefix(p, "--"))) {
				found = true
			}
			if !found {
				t.Errorf("%s: argument %s has no flag or positional in `kaimon %s`", v.Name, a.Name, v.CLI)
			}
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
