package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kaimon/kaimon/internal/agentbin"
)

// TestAgentsCommand: kaimon agents lists every built-in agent in the
// catalogue's order and then the config file's, each with its model
// string, the command it would run, where the program was found (or how
// to install it), the version it reports and the version kaimon tests;
// an acp_agents entry with a built-in name replaces that agent's row.
func TestAgentsCommand(t *testing.T) {
	home := t.TempDir()
	t.Setenv("KAIMON_HOME", home)
	for _, v := range []string{"KAIMON_SOCK_DIR", "KAIMON_CACHE_DIR", "KAIMON_CONFIG"} {
		t.Setenv(v, "")
	}
	for _, p := range agentbin.All() {
		t.Setenv(p.Env, "")
	}
	bin := t.TempDir()
	script := func(dir, name, body string) string {
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		return path
	}
	script(bin, "qwen", `echo 0.24.4`)
	script(bin, "stdio-agent", `echo "stdio-agent 1.2"`)
	// codex-acp exits 2 on --version: its npm package's version is read.
	pkg := filepath.Join(bin, "node_modules", "@zed-industries", "codex-acp")
	script(filepath.Join(pkg, "bin"), "codex-acp.js", `echo "error: unexpected argument '--version' found" >&2; exit 2`)
	if err := os.WriteFile(filepath.Join(pkg, "package.json"), []byte(`{"name": "@zed-industries/codex-acp", "version": "0.16.0"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(pkg, "bin", "codex-acp.js"), filepath.Join(bin, "codex-acp")); err != nil {
		t.Fatal(err)
	}
	gem := script(t.TempDir(), "my-gemini", `echo 0.61.0-wrapped`)
	t.Setenv("PATH", bin)
	cfg := map[string]any{"acp_agents": map[string]any{
		"mine":   map[string]any{"cmd": "stdio-agent", "args": []string{"--stdio"}, "env": map[string]string{"MINE_KEY": "k"}},
		"gemini": map[string]any{"cmd": gem},
	}}
	b, _ := json.Marshal(cfg)
	if err := os.WriteFile(filepath.Join(home, "config.json"), b, 0o600); err != nil {
		t.Fatal(err)
	}

	var out, errb bytes.Buffer
	if code := Run(context.Background(), []string{"kaimon", "agents", "--json"}, strings.NewReader(""), &out, &errb); code != ExitOK {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	var rep agentsReport
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("%v: %s", err, out.String())
	}
	var names []string
	rows := map[string]AgentRow{}
	for _, r := range rep.Agents {
		names = append(names, r.Name)
		if r.Name == "claude" && r.Model != "acp:claude[:MODEL]" {
			rows["claude CLI"] = r
			continue
		}
		if r.Name == "codex" && r.Model == "codex:[MODEL][/EFFORT]" {
			rows["codex CLI"] = r
			continue
		}
		rows[r.Name] = r
	}
	want := append(append([]string{"claude", "codex"}, agentbin.ACPNames...), "mine")
	if strings.Join(names, " ") != strings.Join(want, " ") {
		t.Fatalf("agents %v, want %v", names, want)
	}
	if r := rows["qwen"]; !r.Found || r.Version != "0.24.4" || r.Tested != agentbin.ACP["qwen"].Tested || r.From != "PATH" ||
		strings.Join(r.Command, " ") != filepath.Join(bin, "qwen")+" --acp" || r.Model != "acp:qwen[:MODEL]" {
		t.Errorf("qwen: %+v", r)
	}
	if r := rows["codex"]; !r.Found || r.Version != "@zed-industries/codex-acp@0.16.0" || r.Login != "codex login" || r.Variable != "KAIMON_CODEX_ACP_BIN" {
		t.Errorf("codex: %+v", r)
	}
	if r := rows["copilot"]; r.Found || r.Version != "" || !strings.Contains(r.Fix, "npm install -g @github/copilot") || r.Tested == "" {
		t.Errorf("copilot (not installed): %+v", r)
	}
	if r := rows["gemini"]; !r.Found || !r.Configured || r.Path != gem || r.From != "acp_agents.gemini.cmd" || r.Version != "0.61.0-wrapped" {
		t.Errorf("gemini from the config: %+v", r)
	}
	if r := rows["mine"]; !r.Found || !r.Configured || r.Version != "stdio-agent 1.2" || r.Model != "acp:mine[:MODEL]" ||
		strings.Join(r.Command, " ") != filepath.Join(bin, "stdio-agent")+" --stdio" || strings.Join(r.Env, " ") != "MINE_KEY=k" {
		t.Errorf("mine: %+v", r)
	}
	if r := rows["claude CLI"]; r.Found || !strings.Contains(r.Model, "sonnet") {
		t.Errorf("claude CLI (not installed): %+v", r)
	}
	if len(rep.Models) < 2 || !strings.Contains(rep.Models[0], "claude CLI") || !strings.Contains(strings.Join(rep.Models, "\n"), "acp:<agent>") {
		t.Errorf("models: %q", rep.Models)
	}

	out.Reset()
	if code := Run(context.Background(), []string{"kaimon", "agents"}, strings.NewReader(""), &out, &errb); code != ExitOK {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	text := out.String()
	for _, w := range []string{"AGENT", "TESTED", "acp:mine[:MODEL]", "(config)", "npm install -g @github/copilot", "A model string is one of:"} {
		if !strings.Contains(text, w) {
			t.Errorf("kaimon agents lacks %q:\n%s", w, text)
		}
	}
}
