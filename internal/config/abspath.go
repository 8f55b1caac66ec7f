package config

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/kaimon/kaimon/internal/agentbin"
)

// Every path setting is made absolute once, here, where it is read: a
// relative one would mean another place to each process that reads it —
// the CLI in the user's directory, the daemon in "/" (it leaves the
// directory it was started from: cmd/kaimon-agentd), git in a repository,
// an agent's tool in the agent's cwd. A variable is taken from the
// directory of the process that reads it first, as a shell would; a
// config file's value from the config file's directory.

// dirVars are the variables Resolve reads, each a directory or file.
func dirVars() []string {
	out := []string{homeVar}
	for _, s := range new(Paths).overrides() {
		out = append(out, s.env)
	}
	return out
}

// programVars are the variables that name a program: those of agentbin's
// table, and the daemon the CLI starts.
func programVars() []string {
	out := []string{"KAIMON_AGENTD_BIN"}
	for _, p := range agentbin.All() {
		out = append(out, p.Env)
	}
	return out
}

// absDir is path, which env set or a default made, absolute against the
// current directory (filepath.Abs fails only when that is gone).
func absDir(env, path string) (string, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", fmt.Errorf("cannot make the path %s absolute (%v): set %s to an absolute path", path, err, env)
	}
	return abs, nil
}

// absProgram is a program setting made absolute against dir when it is a
// path: a bare name ("claude") is looked up on PATH when the program
// runs, as exec does, and stays as it is.
func absProgram(dir, prog string) string {
	if prog == "" || filepath.IsAbs(prog) || !strings.ContainsRune(prog, filepath.Separator) {
		return prog
	}
	return filepath.Join(dir, prog)
}

// AbsEnv rewrites this process's path variables (those Resolve reads, and
// the programs') to absolute values, against the current directory: for
// a daemon before it leaves its directory, so that what it reads later and
// what its agents and their tools inherit (a kaimon an agent runs must
// find the same daemon) mean what they meant where it was started.
func AbsEnv() error {
	cwd, err := os.Getwd()
	if err != nil {
		return fmt.Errorf("cannot make the path settings absolute: %w", err)
	}
	for _, name := range dirVars() {
		if v := os.Getenv(name); v != "" && !filepath.IsAbs(v) {
			if err := os.Setenv(name, filepath.Join(cwd, v)); err != nil {
				return err
			}
		}
	}
	for _, name := range programVars() {
		if v := os.Getenv(name); v != "" {
			if err := os.Setenv(name, absProgram(cwd, v)); err != nil {
				return err
			}
		}
	}
	return nil
}
