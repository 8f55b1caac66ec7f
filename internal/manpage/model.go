// Package manpage writes kaimon's manual pages (kaimon(1), kaimon-agentd(8)
// and kaimon-events(7)) from the command tree, the verb table, the event
// kinds, the environment table and the paths the code computes, so that no
// page is kept by hand. It also holds the one table of environment
// variables kaimon reads.
package manpage

// Command is one command of the CLI's tree as its --help and the man page
// show it. internal/cli builds these from the urfave/cli tree.
type Command struct {
	Path        string // "kaimon daemon start"
	Synopsis    string // "kaimon daemon start [options]"
	Summary     string // one line
	Description string // paragraphs split by blank lines; indented lines are literal
	Flags       []Flag
	// Subcommands lists the visible subcommands' Path and Summary.
	Subcommands []Command
	Example     string // shell lines
}

// Flag is one option of a command.
type Flag struct {
	Names   string // "-m, --model MODEL"
	Usage   string
	Default string // "" when there is none worth stating
	Env     []string
}

// App is the CLI as a whole.
type App struct {
	Name        string
	Summary     string
	Description string
	Flags       []Flag // global options
	Commands    []Command
	Example     string
	ExitCodes   []ExitCode
}

// ExitCode is one exit status and what it means.
type ExitCode struct {
	Code    int
	Meaning string
	// JSONCode is the code of the {"error", "code"} object --json writes
	// on stderr for this exit, when it is one code; "" when the exit has
	// the error's own (bad_argument, not_found, …).
	JSONCode string
}

// Text is the meaning with the --json code, as help, man page and
// reference all say it.
func (e ExitCode) Text() string {
	if e.JSONCode == "" {
		return e.Meaning
	}
	return e.Meaning + " (--json: code " + e.JSONCode + ")"
}
