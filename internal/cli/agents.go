package cli

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/urfave/cli/v2"

	"github.com/kaimon/kaimon/internal/agentbin"
	"github.com/kaimon/kaimon/internal/apitype"
	"github.com/kaimon/kaimon/internal/config"
)

// AgentRow is one agent of `kaimon agents`: a row of agentbin's
// catalogue, or an acp_agents entry of the config file, with where its
// program was found (as its backend finds it) and the version it reports.
type AgentRow struct {
	Name  string `json:"name"`  // acp:<name>; "claude" for the claude CLI
	Title string `json:"title"` // the registry's display name
	ID    string `json:"id,omitempty"`
	// Model is the model string that selects the agent.
	Model string `json:"model"`
	// Command is what kaimon would run: the program (its path when found,
	// else its name) and its args; Env what it sets in its environment.
	Command []string `json:"command"`
	Env     []string `json:"env,omitempty"`
	// Variable names the program instead of PATH (KAIMON_*_BIN); "" for
	// a configured agent, which its config key names.
	Variable string `json:"variable,omitempty"`
	// Found says whether the program is there and answered --version;
	// Path is where it is and From what named it: the variable, the
	// config key, or PATH.
	Found bool   `json:"found"`
	Path  string `json:"path,omitempty"`
	From  string `json:"from,omitempty"`
	// Version is the first line of its --version.
	Version string `json:"version,omitempty"`
	// Tested is the version of Package kaimon's end-to-end tests drive;
	// "" for a configured agent.
	Tested     string `json:"tested,omitempty"`
	Package    string `json:"package,omitempty"`
	Login      string `json:"login,omitempty"`
	Configured bool   `json:"configured"`
	// Problem and Fix say what is wrong when Found is false, and how to
	// install or point at the program.
	Problem string `json:"problem,omitempty"`
	Fix     string `json:"fix,omitempty"`
}

// agentsReport is `kaimon agents --json`.
type agentsReport struct {
	Agents []AgentRow `json:"agents"`
	// Models are the forms a model string takes, the claude CLI's first.
	Models []string `json:"models"`
}

func agentsCmd() *cli.Command {
	return &cli.Command{
		Name:  "agents",
		Usage: "List the agents kaimon can drive: model string, program, version, the version kaimon tests",
		Description: "One row per agent kaimon knows: the claude CLI, the Codex CLI (codex:, over its app-server protocol) and the built-in ACP agents (" + strings.Join(agentbin.ACPNames, ", ") +
			"), then the config file's acp_agents. Each row has the model string that selects it, the command kaimon would run, " +
			"where the program was found (its KAIMON_*_BIN variable, the config file's key, or PATH) or how to install it, " +
			"the version it reports (--version), and the version kaimon's end-to-end tests drive. A missing program is not " +
			"an error: only the agents you use need theirs. kaimon doctor checks the same programs. Last, the forms a model " +
			"string takes (the claude CLI's, then each prefix's).",
		Flags: []cli.Flag{jsonFlag()},
		Action: func(c *cli.Context) error {
			if err := needArgs(c, 0, "no arguments"); err != nil {
				return err
			}
			paths, err := config.Resolve()
			if err != nil {
				return err
			}
			cfg, err := config.Load(paths.ConfigFile)
			if err != nil {
				return err // it names the file, the key and what to do
			}
			rep := agentsReport{Agents: agentRows(c, agentPrograms(cfg, paths.ConfigFile)), Models: modelForms()}
			return emit(c, rep, func(w io.Writer) { printAgents(w, rep) })
		},
	}
}

// agentRows finds every program (at once) and makes its row.
func agentRows(c *cli.Context, ps []agentProgram) []AgentRow {
	found := findPrograms(c.Context, ps)
	rows := make([]AgentRow, len(ps))
	for i, p := range ps {
		f := found[i]
		r := AgentRow{Name: p.prog.Name, Title: p.prog.Title, ID: p.prog.ID, Model: p.model, Env: p.prog.ProgEnv, Variable: p.env,
			Found: f.status == checkOK, Path: f.path, From: f.from, Version: f.version,
			Tested: p.prog.Tested, Package: p.prog.Package, Login: p.prog.Login, Configured: p.prog.Configured}
		switch p.env {
		case agentbin.Claude.Env: // the claude CLI, not acp:claude
			r.Model = strings.Join(apitype.ModelAliases, ", ") + ", claude-…"
		case agentbin.Codex.Env: // the Codex CLI, not acp:codex
			r.Model += "[MODEL][/EFFORT]"
		default:
			r.Model += "[:MODEL]"
		}
		prog := p.name
		if f.path != "" {
			prog = f.path
		}
		r.Command = append([]string{prog}, p.prog.Args...)
		if !r.Found {
			r.Problem, r.Fix = f.problem, f.fix
		}
		rows[i] = r
	}
	return rows
}

// modelForms are the forms of a model string, from the backends' table.
func modelForms() []string {
	out := []string{apitype.Claude.Doc}
	for _, p := range apitype.ModelPrefixes {
		out = append(out, p.Doc)
	}
	return out
}

func printAgents(w io.Writer, rep agentsReport) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "AGENT\tMODEL\tVERSION\tTESTED\tCOMMAND")
	for _, r := range rep.Agents {
		version, cmd := r.Version, strings.Join(r.Command, " ")
		if r.Found {
			cmd += "  (" + r.From + ")"
		} else {
			version = "-"
			cmd = r.Problem + ": " + r.Fix
		}
		tested := r.Tested
		if r.Configured {
			tested = "(config)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", r.Name, r.Model, version, orDash(tested), cmd)
	}
	tw.Flush()
	fmt.Fprintln(w, "\nA model string is one of:")
	for _, m := range rep.Models {
		fmt.Fprintln(w, "  "+m)
	}
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
