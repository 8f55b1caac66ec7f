package config

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func loadText(t *testing.T, text string) (Config, string, error) {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "config.json")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := Load(path)
	return c, dir, err
}

// acp_agents entries become agentbin rows: a relative cmd path against the
// file's directory, a bare name kept for PATH, env in the program's env, a
// built-in name keeping the agent's other facts.
func TestACPAgentsLoad(t *testing.T) {
	c, dir, err := loadText(t, `{"acp_agents": {
		"mine": {"cmd": "bin/my-agent", "args": ["--acp", "-v"], "env": {"B": "2", "A": "1"}},
		"onpath": {"cmd": "some-agent"},
		"gemini": {"cmd": "/opt/gemini", "env": {"X": "y"}}}}`)
	if err != nil {
		t.Fatal(err)
	}
	ps := c.ACPAgents.Programs()
	if len(ps) != 3 {
		t.Fatalf("programs = %+v", ps)
	}
	g, m, o := ps[0], ps[1], ps[2]
	if g.Name != "gemini" || g.Bin != "/opt/gemini" || !reflect.DeepEqual(g.Args, []string{"--acp"}) || g.Login != "gemini" || g.Tested == "" ||
		!reflect.DeepEqual(g.ProgEnv, []string{"X=y"}) || g.ConfigKey != "acp_agents.gemini.cmd" || !g.Configured {
		t.Errorf("gemini = %+v", g)
	}
	if m.Name != "mine" || m.Bin != filepath.Join(dir, "bin", "my-agent") || !reflect.DeepEqual(m.Args, []string{"--acp", "-v"}) ||
		!reflect.DeepEqual(m.ProgEnv, []string{"A=1", "B=2"}) || m.Tested != "" || m.Env != "" {
		t.Errorf("mine = %+v", m)
	}
	if o.Bin != "some-agent" || len(o.Args) != 0 {
		t.Errorf("onpath = %+v", o)
	}
}

// A bad entry is refused when the file is read, naming acp_agents.NAME.KEY.
func TestACPAgentsRefused(t *testing.T) {
	for text, want := range map[string]string{
		`{"acp_agents": {"x": {"cmd": "a", "argz": []}}}`:          "acp_agents.x.argz: unknown key",
		`{"acp_agents": {"x": {"cmd": "a", "args": ["ok", 3]}}}`:   "acp_agents.x.args[1]: 3 is not a string",
		`{"acp_agents": {"x": {"cmd": "a", "args": "--acp"}}}`:     "acp_agents.x.args",
		`{"acp_agents": {"x": {"cmd": "a", "env": {"K": true}}}}`:  "acp_agents.x.env.K: true is not a string",
		`{"acp_agents": {"x": {"cmd": 7}}}`:                        "acp_agents.x.cmd: 7 is not a string",
		`{"acp_agents": {"x": {"args": []}}}`:                      "acp_agents.x.cmd: missing",
		`{"acp_agents": {"a:b": {"cmd": "a"}}}`:                    "acp_agents.a:b",
		`{"acp_agents": ["x"]}`:                                    "acp_agents: want an object",
		`{"acp_agents": {"x": {"cmd": "a", "env": {"A=B": "c"}}}}`: "acp_agents.x.env",
	} {
		_, _, err := loadText(t, text)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v; want %q", text, err, want)
		}
	}
}
