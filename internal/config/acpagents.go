package config

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"unicode"

	"github.com/kaimon/kaimon/internal/agentbin"
)

// ACPAgents is the config file's acp_agents: other ACP agents, or other
// commands for built-in ones, by the name acp:<NAME> selects them with.
// Each entry is checked when the file is read (UnmarshalJSON): an unknown
// key, a cmd that is not a string, an arg or env value that is not a
// string is refused naming acp_agents.NAME.KEY.
type ACPAgents map[string]ACPAgent

// ACPAgent is one acp_agents entry.
type ACPAgent struct {
	// Cmd is the program: a path (made absolute against the config
	// file's directory when read) or a name looked up on PATH at open.
	Cmd  string
	Args []string
	// Env is set in the program's environment, over the daemon's.
	Env map[string]string
}

// acpAgentKeys are an entry's keys.
var acpAgentKeys = []string{"cmd", "args", "env"}

// UnmarshalJSON reads acp_agents, refusing what is not an agent.
func (a *ACPAgents) UnmarshalJSON(b []byte) error {
	if string(bytes.TrimSpace(b)) == "null" {
		*a = nil
		return nil
	}
	var raw map[string]map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return fmt.Errorf("acp_agents: want an object of agents, each {\"cmd\": …, \"args\": […], \"env\": {…}}: %v", err)
	}
	out := ACPAgents{}
	for name, fields := range raw {
		key := "acp_agents." + name
		if name == "" || strings.ContainsRune(name, ':') || strings.IndexFunc(name, unicode.IsSpace) >= 0 {
			return fmt.Errorf("%s: an agent's name is what acp:NAME selects it by: no colon, no space, not empty", key)
		}
		var ag ACPAgent
		keys := make([]string, 0, len(fields))
		for k := range fields {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			v := fields[k]
			switch k {
			case "cmd":
				if json.Unmarshal(v, &ag.Cmd) != nil {
					return fmt.Errorf("%s.cmd: %s is not a string (the program's path, or its name on PATH)", key, v)
				}
			case "args":
				var items []json.RawMessage
				if json.Unmarshal(v, &items) != nil {
					return fmt.Errorf("%s.args: %s is not an array of strings", key, v)
				}
				ag.Args = []string{}
				for i, it := range items {
					var s string
					if json.Unmarshal(it, &s) != nil {
						return fmt.Errorf("%s.args[%d]: %s is not a string", key, i, it)
					}
					ag.Args = append(ag.Args, s)
				}
			case "env":
				var vals map[string]json.RawMessage
				if json.Unmarshal(v, &vals) != nil {
					return fmt.Errorf("%s.env: %s is not an object of strings", key, v)
				}
				ag.Env = map[string]string{}
				for ek, ev := range vals {
					var s string
					if json.Unmarshal(ev, &s) != nil {
						return fmt.Errorf("%s.env.%s: %s is not a string", key, ek, ev)
					}
					if ek == "" || strings.ContainsRune(ek, '=') {
						return fmt.Errorf("%s.env: %q is not a variable's name", key, ek)
					}
					ag.Env[ek] = s
				}
			default:
				return fmt.Errorf("%s.%s: unknown key (an agent has %s)", key, k, strings.Join(acpAgentKeys, ", "))
			}
		}
		if strings.TrimSpace(ag.Cmd) == "" {
			return fmt.Errorf("%s.cmd: missing: name the agent's program (a path, or a name on PATH)", key)
		}
		out[name] = ag
	}
	*a = out
	return nil
}

// absPaths makes each cmd that is a relative path absolute against dir.
func (a ACPAgents) absPaths(dir string) {
	for n, ag := range a {
		ag.Cmd = absProgram(dir, ag.Cmd)
		a[n] = ag
	}
}

// Programs are the configured agents as agentbin's rows, sorted by name:
// the one form the daemon carries them in (backend.Options.ACPAgents)
// and `kaimon agents` lists. An entry with a built-in agent's name keeps
// that agent's facts and replaces its command: the program, its args
// when given, and env added to the registry's.
func (a ACPAgents) Programs() []agentbin.Program {
	names := make([]string, 0, len(a))
	for n := range a {
		names = append(names, n)
	}
	sort.Strings(names)
	var out []agentbin.Program
	for _, n := range names {
		ag := a[n]
		p, builtin := agentbin.ACP[n]
		if !builtin {
			p = agentbin.Program{Name: n, Title: n}
		}
		p.Bin = ag.Cmd
		if ag.Args != nil || !builtin {
			p.Args = ag.Args
		}
		keys := make([]string, 0, len(ag.Env))
		for k := range ag.Env {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		p.ProgEnv = append([]string{}, p.ProgEnv...)
		for _, k := range keys {
			p.ProgEnv = append(p.ProgEnv, k+"="+ag.Env[k])
		}
		p.Env = ""
		p.ConfigKey = "acp_agents." + n + ".cmd"
		p.Configured = true
		if !builtin {
			p.Install = "set " + p.ConfigKey + " in the config file to the agent's program"
		}
		out = append(out, p)
	}
	return out
}
