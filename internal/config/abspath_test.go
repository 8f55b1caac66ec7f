package config

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// Every path setting is absolute once read, taken from the directory of
// the process that reads it (a variable) or the config file's (a key): a
// relative KAIMON_WORKTREE_DIR was git's to read against the repository.
func TestPathSettingsAreMadeAbsolute(t *testing.T) {
	withRunUser(t)
	for _, k := range append(dirVars(), programVars()...) {
		t.Setenv(k, os.Getenv(k)) // restored when the test ends, AbsEnv or not
	}
	dir := t.TempDir()
	t.Chdir(dir)
	for k, v := range map[string]string{"KAIMON_CACHE_DIR": "c", "KAIMON_CONFIG": "conf/config.json",
		"KAIMON_SOCK_DIR": "s", "KAIMON_WORKTREE_DIR": "wt"} {
		t.Setenv(k, v)
	}
	p, err := Resolve()
	want := Paths{CacheDir: filepath.Join(dir, "c"), ConfigFile: filepath.Join(dir, "conf", "config.json"),
		SockDir: filepath.Join(dir, "s"), WorktreeDir: filepath.Join(dir, "wt")}
	if err != nil || p != want {
		t.Fatalf("Resolve with relative variables = %+v, %v; want %+v", p, err, want)
	}
	t.Setenv("KAIMON_WORKTREE_DIR", "")
	t.Setenv("KAIMON_HOME", "kh")
	if p, err := Resolve(); err != nil || p.WorktreeDir != filepath.Join(dir, "kh", "worktrees") || p.SockDir != filepath.Join(dir, "s") {
		t.Fatalf("relative KAIMON_HOME: %+v, %v", p, err)
	}

	// What a daemon inherits and passes on is made absolute before it
	// leaves its directory; a program named without a slash is a name
	// on PATH, and stays one.
	t.Setenv("KAIMON_WORKTREE_DIR", "wt")
	t.Setenv("KAIMON_CLAUDE_BIN", "./bin/claude")
	t.Setenv("KAIMON_GEMINI_BIN", "node_modules/.bin/gemini")
	t.Setenv("KAIMON_OPENCODE_BIN", "opencode")
	t.Setenv("KAIMON_AGENTD_BIN", "/abs/kaimon-agentd")
	printed := EnvFingerprints(os.Environ())
	if err := AbsEnv(); err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]string{"KAIMON_HOME": filepath.Join(dir, "kh"), "KAIMON_CACHE_DIR": filepath.Join(dir, "c"),
		"KAIMON_WORKTREE_DIR": filepath.Join(dir, "wt"), "KAIMON_CLAUDE_BIN": filepath.Join(dir, "bin", "claude"),
		"KAIMON_GEMINI_BIN": filepath.Join(dir, "node_modules", ".bin", "gemini"), "KAIMON_OPENCODE_BIN": "opencode",
		"KAIMON_AGENTD_BIN": "/abs/kaimon-agentd"} {
		if got := os.Getenv(k); got != v {
			t.Errorf("after AbsEnv, %s=%q, want %q", k, got, v)
		}
	}
	// The client's relative value, where the daemon was started, is the
	// daemon's absolute one: no difference to warn of.
	if d := EnvDiff(printed, EnvFingerprints(os.Environ())); len(d) != 0 {
		t.Errorf("fingerprints differ after AbsEnv: %v", d)
	}
	t.Chdir(t.TempDir())
	t.Setenv("KAIMON_CLAUDE_BIN", "./bin/claude")
	if d := EnvDiff(printed, EnvFingerprints(os.Environ())); !reflect.DeepEqual(d, []string{"KAIMON_CLAUDE_BIN"}) {
		t.Errorf("./bin/claude from another directory: EnvDiff = %v, want KAIMON_CLAUDE_BIN", d)
	}

	// The config file's paths are its directory's.
	conf := filepath.Join(dir, "conf")
	if err := os.MkdirAll(conf, 0o700); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(conf, "config.json")
	if err := os.WriteFile(path, []byte(`{"claude_bin":"bin/claude","opencode_bin":"opencode","claude_acp_bin":"/x/acp",`+
		`"bus_endpoints":["ipc://bus.sock","tcp://127.0.0.1:5556","ipc:///abs.sock"]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if c.ClaudeBin != filepath.Join(conf, "bin", "claude") || c.OpencodeBin != "opencode" || c.ClaudeACPBin != "/x/acp" || c.GeminiBin != "" {
		t.Errorf("programs from the config file: claude %q, opencode %q, acp %q, gemini %q", c.ClaudeBin, c.OpencodeBin, c.ClaudeACPBin, c.GeminiBin)
	}
	if want := []string{"ipc://" + filepath.Join(conf, "bus.sock"), "tcp://127.0.0.1:5556", "ipc:///abs.sock"}; !reflect.DeepEqual(c.BusEndpoints, want) {
		t.Errorf("bus_endpoints = %v, want %v", c.BusEndpoints, want)
	}
}
