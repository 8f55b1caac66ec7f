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
	"github.com/kaimon/kaimon/internal/config"
)

// TestAgentProgramsHaveConfigKeys: every backend's program variable has its
// row in config.ProgramBins, so that doctor and the daemon (which gives
// its agents those rows: daemon.Config.AgentEnv) agree.
func TestAgentProgramsHaveConfigKeys(t *testing.T) {
	t.Parallel()
	cfg := config.Config{ClaudeBin: "/c", CodexBin: "/cx", OpencodeBin: "/o", ClaudeACPBin: "/ca", GeminiBin: "/g",
		CodexACPBin: "/x", QwenBin: "/q", CopilotBin: "/p", KiloBin: "/k", AuggieBin: "/a"}
	for _, p := range agentPrograms(cfg, "/k/config.json") {
		if p.cfgKey == "" || p.cfg == "" {
			t.Errorf("%s (%s): no config key in config.ProgramBins", p.name, p.env)
		}
	}
}

// TestDoctorAgentSource: a bad program path is reported with where it came
// from, and a fix that applies to that source.
func TestDoctorAgentSource(t *testing.T) {
	bad := t.TempDir() + "/no-such-claude"
	p := agentPrograms(config.Config{ClaudeBin: bad}, "/k/config.json")[0]
	if p.env != agentbin.Claude.Env {
		t.Fatalf("first program is %s, want the claude CLI", p.env)
	}

	t.Setenv(agentbin.Claude.Env, "")
	ch := checkAgent(context.Background(), p)
	if ch.Status != checkFail || !strings.Contains(ch.Detail, "claude_bin") || !strings.Contains(ch.Detail, "/k/config.json") ||
		strings.Contains(ch.Detail, agentbin.Claude.Env) {
		t.Errorf("from the config file: detail %q (%s), want claude_bin in /k/config.json and no %s", ch.Detail, ch.Status, agentbin.Claude.Env)
	}
	if !strings.Contains(ch.Fix, "claude_bin in /k/config.json") || strings.Contains(ch.Fix, "unset") {
		t.Errorf("from the config file: fix %q, want one about claude_bin in the file", ch.Fix)
	}

	t.Setenv(agentbin.Claude.Env, bad+"-env")
	ch = checkAgent(context.Background(), p)
	if ch.Status != checkFail || !strings.Contains(ch.Detail, agentbin.Claude.Env+"="+bad+"-env") || !strings.Contains(ch.Detail, "environment") {
		t.Errorf("from the environment: detail %q (%s)", ch.Detail, ch.Status)
	}
	if !strings.Contains(ch.Fix, "unset it") {
		t.Errorf("from the environment: fix %q, want unset", ch.Fix)
	}
}

// TestDoctorRightAfterInstall: no agent program and no daemon yet are the
// normal states of a fresh install, not failures: doctor says so (a
// warning, and information: the first command starts the daemon) and
// exits 0. With autostart off, the daemon's absence is a warning.
func TestDoctorRightAfterInstall(t *testing.T) {
	t.Setenv("KAIMON_HOME", t.TempDir())
	for _, v := range []string{"KAIMON_SOCK_DIR", "KAIMON_CACHE_DIR", "KAIMON_CONFIG", "KAIMON_NO_AUTOSTART"} {
		t.Setenv(v, "")
	}
	for _, p := range agentPrograms(config.Config{}, "") {
		t.Setenv(p.env, "")
	}
	t.Setenv("PATH", t.TempDir()) // no agent program on it

	for _, tc := range []struct {
		args         []string
		daemonStatus string
	}{
		{[]string{"kaimon", "doctor", "--json"}, checkInfo},
		{[]string{"kaimon", "--no-autostart", "doctor", "--json"}, checkWarn},
	} {
		var out, errb bytes.Buffer
		code := Run(context.Background(), tc.args, strings.NewReader(""), &out, &errb)
		var rep doctorReport
		if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
			t.Fatalf("%v: %v\n%s%s", tc.args, err, out.String(), errb.String())
		}
		checks := map[string]Check{}
		for _, c := range rep.Checks {
			checks[c.Check] = c
			if c.Status == checkFail {
				t.Errorf("%v: %+v is a FAIL", tc.args, c)
			}
		}
		if code != ExitOK || !rep.OK {
			t.Errorf("%v: exit %d, ok %v; want 0 and true", tc.args, code, rep.OK)
		}
		if c := checks["agents"]; c.Status != checkWarn || !strings.Contains(c.Detail, "replay:") {
			t.Errorf("%v: agents %+v, want a warning naming the models that need no program", tc.args, c)
		}
		if c := checks["daemon"]; c.Status != tc.daemonStatus || !strings.Contains(c.Detail, "not running") || !strings.Contains(c.Fix, "kaimon daemon start") {
			t.Errorf("%v: daemon %+v, want %s saying how to start it", tc.args, c, tc.daemonStatus)
		}
	}
}

// TestDoctorPointsAtTheCheckout: after scripts/demo.sh the pinned claude
// CLI is in the checkout's node_modules/.bin, which no PATH names; doctor
// says where it is and how to point kaimon at it, and where there is none
// it advises installing the pinned version, never the latest.
func TestDoctorPointsAtTheCheckout(t *testing.T) {
	root := t.TempDir()
	pin := agentbin.Claude.Package + "@" + agentbin.Claude.Tested
	pkg := filepath.Join(root, "node_modules", agentbin.Claude.Package)
	for _, f := range []struct {
		path, text string
		mode       os.FileMode
	}{
		{filepath.Join(root, "package.json"), "{}", 0o644},
		{filepath.Join(root, "bin", "kaimon"), "#!/bin/sh\n", 0o755},
		{filepath.Join(pkg, "package.json"), `{"name":"` + agentbin.Claude.Package + `","version":"` + agentbin.Claude.Tested + `"}`, 0o644},
		{filepath.Join(pkg, "cli.js"), "#!/bin/sh\necho " + agentbin.Claude.Tested + " '(Claude Code)'\n", 0o755},
	} {
		if err := os.MkdirAll(filepath.Dir(f.path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(f.path, []byte(f.text), f.mode); err != nil {
			t.Fatal(err)
		}
	}
	local := agentbin.Claude.InCheckout(root)
	if err := os.MkdirAll(filepath.Dir(local), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join("..", agentbin.Claude.Package, "cli.js"), local); err != nil {
		t.Fatal(err)
	}
	if got := checkoutOf(filepath.Join(root, "bin", "kaimon")); got != root {
		t.Errorf("the checkout of %s/bin/kaimon is %q", root, got)
	}
	if got := checkoutOf(filepath.Join(t.TempDir(), "kaimon")); got != "" {
		t.Errorf("a kaimon outside a checkout has the checkout %q", got)
	}

	t.Setenv(agentbin.Claude.Env, "")
	t.Setenv("PATH", t.TempDir())
	p := agentPrograms(config.Config{}, "/k/config.json")[0]
	p.local = ""
	ch := checkAgent(context.Background(), p)
	if ch.Status != checkWarn || !strings.Contains(ch.Fix, "npm install -g "+pin+"`") {
		t.Errorf("no program anywhere: %+v, want a warning advising `npm install -g %s`", ch, pin)
	}
	p.local = local
	ch = checkAgent(context.Background(), p)
	if ch.Status != checkWarn || !strings.Contains(ch.Detail, "the pinned "+pin+" at "+local) {
		t.Errorf("the pinned one in the checkout: detail %q (%s), want it named with its path", ch.Detail, ch.Status)
	}
	if want := "export " + agentbin.Claude.Env + "=" + local; !strings.Contains(ch.Fix, want) || strings.Contains(ch.Fix, "npm install") {
		t.Errorf("the pinned one in the checkout: fix %q, want %q and no install", ch.Fix, want)
	}
}
