package cli

import (
	"bytes"
	"context"
	"encoding/json"
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
	cfg := config.Config{ClaudeBin: "/c", OpencodeBin: "/o", ClaudeACPBin: "/ca", GeminiBin: "/g",
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
