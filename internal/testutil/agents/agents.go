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
