// Package agents finds the real agent programs the tests drive: the pinned
// copies .ci/run installs under the repo's node_modules, or the ones named
// by environment or found on PATH.
package agents

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
)

// RepoRoot is the repository's root directory.
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", "..", ".."))
}

// Find returns the program: $envVar, else node_modules/.bin/<name> in the
// repo, else <name> on PATH; "" if none.
func Find(envVar, name string) string {
	if b := os.Getenv(envVar); b != "" {
		return b
	}
	local := filepath.Join(RepoRoot(), "node_modules", ".bin", name)
	if _, err := os.Stat(local); err == nil {
		return local
	}
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	return ""
}

// Claude returns the claude CLI or skips the test; in CI (CI set), where
// .ci/run installs it, its absence fails the test instead of hiding it.
func Claude(t testing.TB) string {
	t.Helper()
	if b := Find("KAIMON_CLAUDE_BIN", "claude"); b != "" {
		return b
	}
	msg := "the claude CLI is not installed: run `npm ci` in the repo root, or set KAIMON_CLAUDE_BIN"
	if os.Getenv("CI") != "" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

// ClaudeOffline is the environment, NAME=value, in which the claude CLI
// (and the claude inside claude-agent-acp) runs against the fake model
// API at apiURL and reaches nothing else, its temporary files (the Bash
// tool's per-session files, which it leaves behind) under tmp.
func ClaudeOffline(apiURL, tmp string) []string {
	return []string{
		"ANTHROPIC_BASE_URL=" + apiURL,
		"ANTHROPIC_API_KEY=sk-fake",
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
		"DISABLE_TELEMETRY=1",
		"DISABLE_AUTOUPDATER=1",
		"CLAUDE_CODE_MAX_RETRIES=0",
		"IS_SANDBOX=1",
		"TMPDIR=" + tmp,
		// The claude bundled in claude-agent-acp reads only this one.
		"CLAUDE_CODE_TMPDIR=" + tmp,
	}
}
