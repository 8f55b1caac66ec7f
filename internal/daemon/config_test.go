package daemon

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/kaimon/kaimon/internal/backend/host"
)

// LoadConfig reads the environment it is given, not the process's: the
// paths under its KAIMON_HOME, that home's config file, and the
// permission timeout of its KAIMON_PERMISSION_TIMEOUT over the file's.
func TestLoadConfigFromTheGivenEnvironment(t *testing.T) {
	home := t.TempDir()
	if err := os.WriteFile(filepath.Join(home, "config.json"), []byte(`{"permission_timeout": 7, "claude_bin": "bin/claude", "dead_kept": 3}`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		env  []string
		wait time.Duration
	}{
		{[]string{"KAIMON_HOME=" + home}, 7 * time.Second},
		{[]string{"KAIMON_HOME=" + home, "KAIMON_PERMISSION_TIMEOUT=2.5"}, 2500 * time.Millisecond},
		{[]string{"KAIMON_HOME=" + home, "KAIMON_PERMISSION_TIMEOUT=-1"}, 7 * time.Second}, // not positive: the file's
	} {
		cfg, err := LoadConfig(c.env)
		if err != nil {
			t.Fatal(err)
		}
		if cfg.Paths.SockDir != filepath.Join(home, "sock") || cfg.Paths.CacheDir != filepath.Join(home, "cache", "agents") {
			t.Errorf("%q: paths %+v; want them under %s", c.env, cfg.Paths, home)
		}
		if cfg.File.DeadKept != 3 || cfg.File.ClaudeBin != filepath.Join(home, "bin", "claude") {
			t.Errorf("%q: the file read is %+v; want %s's (claude_bin from its directory)", c.env, cfg.File, home)
		}
		if got := cfg.File.PermissionWait(); got != c.wait {
			t.Errorf("%q: a permission request waits %v; want %v", c.env, got, c.wait)
		}
		if !slices.Equal(cfg.Env, c.env) {
			t.Errorf("Env %q; want the environment given, %q", cfg.Env, c.env)
		}
	}
	if _, err := LoadConfig([]string{"KAIMON_HOME=" + home, "KAIMON_CONFIG=" + writeFile(t, "{")}); err == nil {
		t.Error("a config file that does not parse was taken")
	}
}

// The agents' environment is the daemon's, with each program the config
// file names where that environment does not set its variable (set, the
// variable wins; set empty, it counts as unset, as it did for getenv).
func TestAgentEnvAddsTheFilesPrograms(t *testing.T) {
	cfg := Config{Env: []string{"PATH=/bin", "KAIMON_GEMINI_BIN=/env/gemini", "KAIMON_OPENCODE_BIN="}}
	cfg.File.ClaudeBin, cfg.File.GeminiBin, cfg.File.OpencodeBin = "/file/claude", "/file/gemini", "/file/opencode"
	got := cfg.AgentEnv()
	if !slices.Equal(got[:len(cfg.Env)], cfg.Env) || len(got) != len(cfg.Env)+2 {
		t.Errorf("AgentEnv() = %q; want the daemon's environment, then two of the file's programs", got)
	}
	for k, v := range map[string]string{"PATH": "/bin", "KAIMON_CLAUDE_BIN": "/file/claude", "KAIMON_GEMINI_BIN": "/env/gemini", "KAIMON_OPENCODE_BIN": "/file/opencode"} {
		// The last value is the one an agent's program gets (os/exec
		// keeps the last of a duplicate), and the backends read.
		if got := host.LookupEnv(got, k); got != v {
			t.Errorf("an agent's %s is %q; want %q", k, got, v)
		}
	}
	if len(cfg.Env) != 3 {
		t.Errorf("AgentEnv changed the daemon's own Env: %q", cfg.Env)
	}
}

func writeFile(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}
