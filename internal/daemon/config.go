package daemon

import (
	"github.com/kaimon/kaimon/internal/backend/host"
	"github.com/kaimon/kaimon/internal/config"
)

// Config is what a daemon runs with, built once by whoever starts it
// (cmd/kaimon-agentd: LoadConfig of its environment), as containerd's
// server.New takes its config. Nothing in this package reads or sets the
// process's environment: two daemons in one process (a test's) each run
// with their own paths, config file and agents' environment.
type Config struct {
	// Paths are the daemon's directories (cache, sockets, worktrees) and
	// its config file.
	Paths config.Paths
	// File is the config file's content, with the overrides of it that
	// the daemon reads itself applied (config.Config.ApplyEnv).
	File config.Config
	// Env is the environment the daemon was started with: what a client
	// compares with its own (the fingerprints of daemon status), and,
	// with the config file's programs added (AgentEnv), what its agents
	// start with.
	Env []string
}

// LoadConfig builds a daemon's Config from environ, the environment it is
// started with: its paths as config.Resolve finds them there, and its
// config file. A config file that does not parse is an error naming it.
func LoadConfig(environ []string) (Config, error) {
	getenv := func(k string) string { return host.LookupEnv(environ, k) }
	paths, err := config.ResolveEnv(getenv)
	if err != nil {
		return Config{}, err
	}
	file, err := config.Load(paths.ConfigFile)
	if err != nil {
		return Config{}, err
	}
	file.ApplyEnv(getenv)
	return Config{Paths: paths, File: file, Env: environ}, nil
}

// AgentEnv is the environment the daemon's agents start with: Env, with
// each program the config file names (claude_bin, …) as its variable
// where Env does not set that variable (set, it wins over the file). The
// backends read only the variables (host.LookupEnv of their Env): this is
// how they, and what an agent's tools run, see the file.
func (c Config) AgentEnv() []string {
	env := append([]string(nil), c.Env...)
	for _, b := range c.File.ProgramBins() {
		if b.Value != "" && host.LookupEnv(env, b.Env) == "" {
			env = append(env, b.Env+"="+b.Value)
		}
	}
	return env
}
