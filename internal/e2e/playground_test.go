package e2e

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kaimon/kaimon/internal/testutil/agents"
)

// TestPlayground: scripts/playground.sh builds, serves the fake model API
// and runs a command in the playground's environment (here a real claude
// agent through kaimon, kaimon found on PATH), prints the variables that
// reach the playground from another terminal, and leaves nothing behind
// when the command ends: no daemon, agent or fake API, no directory.
func TestPlayground(t *testing.T) {
	parallel(t)
	needClaude(t)
	// Never let the script's npm ci run from a test: it replaces
	// node_modules.
	if _, err := os.Stat(filepath.Join(agents.RepoRoot(), "node_modules", ".bin", "claude")); err != nil {
		t.Skipf("no claude CLI in node_modules (playground.sh would run npm ci): %v", err)
	}
	bin := t.TempDir()
	env := append(scriptEnv(t, t.TempDir()), "PLAYGROUND_BIN="+bin)
	r := runScript(t, env, 5*time.Minute, "playground.sh", "sh", "-c",
		`echo "dir=$PLAYGROUND_DIR"; kaimon run -C . "please use a tool"`)
	if r.code != 0 {
		t.Fatalf("playground.sh: %s", r)
	}
	first, rest, _ := strings.Cut(r.stdout, "\n")
	dir, ok := strings.CutPrefix(first, "dir=")
	if !ok || dir == "" || rest != "Tool said: hi. Done.\n" {
		t.Fatalf("playground.sh's command printed %q, want its dir and the tool turn's text", r.stdout)
	}
	for _, want := range []string{"export KAIMON_HOME=" + dir + "/kaimon\n", "export ANTHROPIC_BASE_URL=http://127.0.0.1:", "export PATH=" + bin + ":"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("playground.sh does not print %q:\n%s", want, r.stderr)
		}
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("playground.sh left %s behind (%v)", dir, err)
	}
	if left := processesWithEnv("KAIMON_HOME=" + dir + "/kaimon"); len(left) > 0 {
		t.Errorf("playground.sh left processes: %s", describe(left))
	}
	fakeapi := []byte(filepath.Join(bin, "fakeapi") + "\x00")
	ents, _ := os.ReadDir("/proc")
	for _, ent := range ents {
		if b, err := os.ReadFile("/proc/" + ent.Name() + "/cmdline"); err == nil && bytes.HasPrefix(b, fakeapi) {
			t.Errorf("playground.sh left its fake API running (pid %s)", ent.Name())
		}
	}
}
