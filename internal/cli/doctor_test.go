package cli

import (
	"context"
	"strings"
	"testing"

	"github.com/kaimon/kaimon/internal/backend/claude"
	"github.com/kaimon/kaimon/internal/config"
)

// TestAgentProgramsHaveConfigKeys: every backend's program variable has its
// row in config.ProgramBins, so that doctor and daemon.Run agree.
func TestAgentProgramsHaveConfigKeys(t *testing.T) {
	cfg := config.Config{ClaudeBin: "/c", OpencodeBin: "/o", ClaudeACPBin: "/ca", GeminiBin: "/g"}
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
	if p.env != claude.BinEnv {
		t.Fatalf("first program is %s, want the claude CLI", p.env)
	}

	t.Setenv(claude.BinEnv, "")
	ch := checkAgent(context.Background(), p)
	if ch.Status != checkFail || !strings.Contains(ch.Detail, "claude_bin") || !strings.Contains(ch.Detail, "/k/config.json") ||
		strings.Contains(ch.Detail, claude.BinEnv) {
		t.Errorf("from the config file: detail %q (%s), want claude_bin in /k/config.json and no %s", ch.Detail, ch.Status, claude.BinEnv)
	}
	if !strings.Contains(ch.Fix, "claude_bin in /k/config.json") || strings.Contains(ch.Fix, "unset") {
		t.Errorf("from the config file: fix %q, want one about claude_bin in the file", ch.Fix)
	}

	t.Setenv(claude.BinEnv, bad+"-env")
	ch = checkAgent(context.Background(), p)
	if ch.Status != checkFail || !strings.Contains(ch.Detail, claude.BinEnv+"="+bad+"-env") || !strings.Contains(ch.Detail, "environment") {
		t.Errorf("from the environment: detail %q (%s)", ch.Detail, ch.Status)
	}
	if !strings.Contains(ch.Fix, "unset it") {
		t.Errorf("from the environment: fix %q, want unset", ch.Fix)
	}
}
