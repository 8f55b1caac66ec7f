package manpage

import (
	"fmt"
	"strings"
	"text/tabwriter"
)

// What kaimon-agentd(8) and `kaimon-agentd --help` both say.
const (
	agentdSummary  = "the daemon that owns kaimon's agent sessions"
	agentdSynopsis = "kaimon-agentd [--help | --version]"
	agentdAbout    = "kaimon-agentd owns every agent session of one user: it spawns the agent programs (the claude CLI, " +
		"ACP agents, model servers' chat APIs) each in its own process group, runs their status machines, sums their " +
		"token usage, writes each agent's event log and publishes its events on the event bus. The kaimon CLI and " +
		"kaimon mcp talk to it over a unix socket; the agents it owns call back into its MCP door.\n\n" +
		"There is one daemon per socket dir, held by a lock. kaimon starts it when it is not running, so it is seldom " +
		"started by hand; kaimon daemon start, stop, restart and status control it. It takes no arguments: the " +
		"environment and the config file configure it, and it runs its agents with the environment it was started with.\n\n" +
		"On start it reaps the agents a crashed predecessor left behind, found in the pid file by pid and process " +
		"start time, so never a stranger with a reused pid; and it lists the agents of earlier daemons as dead, from " +
		"their records."
	agentdSignals = "SIGTERM and SIGINT stop the daemon: it closes every live agent, stopping each agent's whole process " +
		"group gently (SIGTERM), then hard (SIGKILL) after a grace period; records them as dead; and exits 0. " +
		"kaimon daemon stop asks the same over the socket and returns once the daemon has exited."
)

// AgentdAction is what an argument of kaimon-agentd asks for.
type AgentdAction int

// The arguments' actions; each prints and exits.
const (
	AgentdHelp AgentdAction = iota + 1
	AgentdVersion
)

// AgentdOption is one argument kaimon-agentd takes, under all its spellings.
type AgentdOption struct {
	Args   []string
	Usage  string
	Action AgentdAction
}

// AgentdOptions is the one list of kaimon-agentd's arguments: its main
// parses with it (AgentdArg), and --help and kaimon-agentd(8) document it,
// so that no spelling is accepted without being documented.
var AgentdOptions = []AgentdOption{
	{Args: []string{"-h", "--help", "help"}, Usage: "print this usage and exit", Action: AgentdHelp},
	{Args: []string{"-v", "--version", "version"}, Usage: "print the version and commit and exit", Action: AgentdVersion},
}

// AgentdMCPArg is not an option of kaimon-agentd but how `kaimon mcp`
// runs it: as an MCP server on stdio that is a client of the running
// daemon (kaimon mcp's exec, so that the kaimon CLI links no MCP server and
// its one-line verbs do not pay for its package init), hence absent from
// AgentdOptions and from the documentation, as `kaimon __complete` is.
// Its arguments follow: -progress DURATION.
const AgentdMCPArg = "__mcp"

// AgentdArg is the action of kaimon-agentd's argument arg; false when it
// takes no such argument.
func AgentdArg(arg string) (AgentdAction, bool) {
	for _, o := range AgentdOptions {
		for _, a := range o.Args {
			if a == arg {
				return o.Action, true
			}
		}
	}
	return 0, false
}

func (o AgentdOption) flag() Flag { return Flag{Names: strings.Join(o.Args, ", "), Usage: o.Usage} }

var agentdExit = []ExitCode{
	{Code: 0, Meaning: "stopped by a signal or by kaimon daemon stop"},
	{Code: 1, Meaning: "could not run (another kaimon-agentd holds the socket dir's lock, a path is unusable, the config file does not parse, ...)"},
	{Code: 2, Meaning: "usage (an argument it does not take)"},
}

// AgentdUsage is what `kaimon-agentd --help` prints.
func AgentdUsage() string {
	var b strings.Builder
	fmt.Fprintf(&b, "kaimon-agentd - %s\n\nUSAGE:\n   %s\n\n", agentdSummary, agentdSynopsis)
	for _, p := range strings.Split(agentdAbout, "\n\n") {
		fmt.Fprintf(&b, "%s\n\n", p)
	}
	b.WriteString("OPTIONS:\n")
	for _, o := range AgentdOptions {
		fmt.Fprintf(&b, "   %-22s %s\n", o.flag().Names, o.Usage)
	}
	b.WriteString("\nENVIRONMENT:\n")
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	for _, e := range Env {
		if strings.Contains(e.ReadBy, ByDaemon) {
			if e.Default == "" {
				fmt.Fprintf(tw, "   %s\n", e.Name)
				continue
			}
			fmt.Fprintf(tw, "   %s\tdefault: %s\n", e.Name, e.Default)
		}
	}
	tw.Flush()
	b.WriteString("\nSee kaimon-agentd(8): man kaimon-agentd (man -l man/kaimon-agentd.8 in a checkout).\n")
	return b.String()
}

// Agentd writes kaimon-agentd(8).
func Agentd() string {
	var r roff
	writeAgentd(&r)
	return r.String()
}

func writeAgentd(r page) {
	r.header("kaimon-agentd", "8")
	r.sh("NAME")
	r.line("kaimon-agentd - " + agentdSummary)

	r.sh("SYNOPSIS")
	r.synopsis(synopsisLine{cmd: "kaimon-agentd", rest: strings.TrimPrefix(agentdSynopsis, "kaimon-agentd ")})

	r.sh("DESCRIPTION")
	r.prose(agentdAbout)

	r.sh("OPTIONS")
	for _, o := range AgentdOptions {
		flag(r, o.flag())
	}

	r.sh("SIGNALS")
	r.prose(agentdSignals)

	writeEnv(r, ByDaemon, ByAgents)
	writeFiles(r)

	r.sh("EXIT STATUS")
	for _, e := range agentdExit {
		r.item(fmt.Sprint(e.Code), e.Text())
	}

	r.sh("SEE ALSO")
	r.seeAlso(refKaimon, refEvents)
}
