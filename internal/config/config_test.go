package config

import (
	"os"
	"os/user"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// withRunUser points the runtime root at a temporary directory for one
// test, and clears the variables Resolve must not depend on or that would
// override the default.
func withRunUser(t *testing.T) (root, home string) {
	t.Helper()
	root, home = t.TempDir(), t.TempDir()
	old := runUserDir
	runUserDir = root
	t.Cleanup(func() { runUserDir = old })
	for _, k := range []string{"KAIMON_HOME", "KAIMON_SOCK_DIR", "KAIMON_CACHE_DIR", "KAIMON_CONFIG"} {
		t.Setenv(k, "")
	}
	t.Setenv("HOME", home)
	return root, home
}

func TestSockDirFromUIDNotEnv(t *testing.T) {
	root, home := withRunUser(t)
	uid := os.Getuid()
	fallback := filepath.Join(home, ".cache", "kaimon", "sock")
	// XDG_RUNTIME_DIR is what a shell has and an MCP client's child lacks:
	// it must change nothing.
	for _, xdg := range []string{"", filepath.Join(root, "xdg")} {
		t.Setenv("XDG_RUNTIME_DIR", xdg)
		p, err := Resolve()
		if err != nil || p.SockDir != fallback {
			t.Fatalf("no %s/<uid>, XDG_RUNTIME_DIR=%q: sock dir %q %v, want %q", root, xdg, p.SockDir, err, fallback)
		}
	}
	run := filepath.Join(root, strconv.Itoa(uid))
	if err := os.Mkdir(run, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, xdg := range []string{"", filepath.Join(root, "xdg")} {
		t.Setenv("XDG_RUNTIME_DIR", xdg)
		p, err := Resolve()
		if want := filepath.Join(run, "kaimon"); err != nil || p.SockDir != want {
			t.Fatalf("with %s, XDG_RUNTIME_DIR=%q: sock dir %q %v, want %q", run, xdg, p.SockDir, err, want)
		}
		if p.CacheDir != filepath.Join(home, ".cache", "kaimon", "agents") || p.ConfigFile != filepath.Join(home, ".config", "kaimon", "config.json") {
			t.Fatalf("paths %+v", p)
		}
	}
	t.Setenv("KAIMON_SOCK_DIR", filepath.Join(root, "mine"))
	if p, _ := Resolve(); p.SockDir != filepath.Join(root, "mine") {
		t.Fatalf("KAIMON_SOCK_DIR ignored: %q", p.SockDir)
	}
	t.Setenv("KAIMON_SOCK_DIR", "")
	t.Setenv("KAIMON_HOME", filepath.Join(root, "kh"))
	if p, _ := Resolve(); p.SockDir != filepath.Join(root, "kh", "sock") {
		t.Fatalf("KAIMON_HOME: sock dir %q", p.SockDir)
	}
}

func TestDefaultSockDirWantsOurDirectory(t *testing.T) {
	root, home := t.TempDir(), "/h"
	fallback := "/h/.cache/kaimon/sock"
	other := os.Getuid() + 1
	// <root>/<other> exists but we own it, not uid other: someone else's.
	if err := os.Mkdir(filepath.Join(root, strconv.Itoa(other)), 0o700); err != nil {
		t.Fatal(err)
	}
	if got := defaultSockDir(root, other, home); got != fallback {
		t.Errorf("a runtime dir owned by another uid: %q", got)
	}
	// A file, not a directory.
	if err := os.WriteFile(filepath.Join(root, strconv.Itoa(os.Getuid())), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if got := defaultSockDir(root, os.Getuid(), home); got != fallback {
		t.Errorf("a runtime path that is a file: %q", got)
	}
}

func TestResolveWithoutHOME(t *testing.T) {
	withRunUser(t)
	os.Unsetenv("HOME") // t.Setenv restores it
	u, err := user.Current()
	if err != nil || u.HomeDir == "" {
		t.Skipf("no passwd entry here: %v", err)
	}
	p, err := Resolve()
	if err != nil || p.CacheDir != filepath.Join(u.HomeDir, ".cache", "kaimon", "agents") {
		t.Fatalf("without HOME: %+v %v, want paths under %s", p, err, u.HomeDir)
	}
}

func TestResolveRefusesTooLongSocketPath(t *testing.T) {
	_, home := withRunUser(t)
	long := filepath.Join(home, strings.Repeat("d", 100))
	t.Setenv("HOME", long)
	if _, err := Resolve(); err == nil || !strings.Contains(err.Error(), "set KAIMON_SOCK_DIR") {
		t.Fatalf("a socket path over %d bytes: %v", maxSocketPath, err)
	}
	t.Setenv("KAIMON_SOCK_DIR", home)
	if _, err := Resolve(); err != nil {
		t.Fatalf("KAIMON_SOCK_DIR set: %v", err)
	}
}

func TestEnvFingerprints(t *testing.T) {
	env := []string{"ANTHROPIC_API_KEY=sk-secret", "ANTHROPIC_BASE_URL=http://127.0.0.1:1", "KAIMON_CLAUDE_BIN=/bin/claude",
		"KAIMON_AGENTD_BIN=/bin/kaimon-agentd", "KAIMON_HOME=/k", "PATH=/bin", "ANTHROPIC_MODEL="}
	fp := EnvFingerprints(env)
	var names []string
	for k, v := range fp {
		names = append(names, k)
		if strings.Contains(v, "sk-secret") || len(v) != 12 && k != "ANTHROPIC_API_KEY" {
			t.Errorf("%s fingerprint %q", k, v)
		}
	}
	// No fingerprint of a key: only that it is set.
	if got := fp["ANTHROPIC_API_KEY"]; got != CredentialSet {
		t.Errorf("ANTHROPIC_API_KEY fingerprint %q, want %q", got, CredentialSet)
	}
	if d := EnvDiff(fp, EnvFingerprints([]string{"ANTHROPIC_API_KEY=sk-other", "ANTHROPIC_BASE_URL=http://127.0.0.1:1", "KAIMON_CLAUDE_BIN=/bin/claude"})); len(d) != 0 {
		t.Errorf("another key than the daemon's is not told apart, yet EnvDiff = %v", d)
	}
	if d := EnvDiff(fp, EnvFingerprints([]string{"ANTHROPIC_BASE_URL=http://127.0.0.1:1", "KAIMON_CLAUDE_BIN=/bin/claude"})); !reflect.DeepEqual(d, []string{"ANTHROPIC_API_KEY"}) {
		t.Errorf("a key unset in one environment: EnvDiff = %v", d)
	}
	old := map[string]string{"ANTHROPIC_API_KEY": "0123456789ab", "ANTHROPIC_BASE_URL": fp["ANTHROPIC_BASE_URL"], "KAIMON_CLAUDE_BIN": fp["KAIMON_CLAUDE_BIN"]}
	if d := EnvDiff(old, fp); len(d) != 0 {
		t.Errorf("a daemon that still gives a hash of the key: EnvDiff = %v", d)
	}
	sort.Strings(names)
	if want := []string{"ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "KAIMON_CLAUDE_BIN"}; !reflect.DeepEqual(names, want) {
		t.Fatalf("fingerprinted %v, want %v", names, want)
	}
	other := EnvFingerprints([]string{"ANTHROPIC_API_KEY=sk-secret", "ANTHROPIC_BASE_URL=http://127.0.0.1:2", "KAIMON_OPENCODE_BIN=/bin/oc"})
	if got, want := EnvDiff(fp, other), []string{"ANTHROPIC_BASE_URL", "KAIMON_CLAUDE_BIN", "KAIMON_OPENCODE_BIN"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("EnvDiff = %v, want %v", got, want)
	}
	if d := EnvDiff(fp, EnvFingerprints(env)); len(d) != 0 {
		t.Fatalf("EnvDiff of equal environments = %v", d)
	}
}

// TestProgramBinsCoverConfig keeps the table whole: every *_bin key of the
// config file has a row, with its own value, and every row's variable is one
// Relevant counts as an agent program.
func TestProgramBinsCoverConfig(t *testing.T) {
	var c Config
	v := reflect.ValueOf(&c).Elem()
	keys := map[string]bool{}
	for i := 0; i < v.NumField(); i++ {
		key, _, _ := strings.Cut(v.Type().Field(i).Tag.Get("json"), ",")
		if strings.HasSuffix(key, "_bin") {
			keys[key] = true
			v.Field(i).SetString("/x/" + key)
		}
	}
	rows := c.ProgramBins()
	if len(rows) != len(keys) {
		t.Errorf("ProgramBins has %d rows, Config has %d *_bin keys (%v)", len(rows), len(keys), keys)
	}
	for _, b := range rows {
		if !keys[b.Key] {
			t.Errorf("row %s: no config key %q", b.Env, b.Key)
		}
		if b.Value != "/x/"+b.Key {
			t.Errorf("row %s: value %q is not the %s field's", b.Env, b.Value, b.Key)
		}
		if !Relevant(b.Env) {
			t.Errorf("row %s: not a variable Relevant names", b.Env)
		}
		if got, ok := c.ProgramBin(b.Env); !ok || got != b {
			t.Errorf("ProgramBin(%s) = %v, %v", b.Env, got, ok)
		}
	}
}

// The local model keys: local_max_rounds defaults to 24, ollama_think and
// ollama_keep_alive take what Ollama takes and refuse the rest by name.
func TestLocalModelKeys(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config.json")
	load := func(body string) (Config, error) {
		if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return Load(path)
	}
	c, err := load(`{}`)
	if err != nil || c.LocalMaxRounds != DefaultLocalMaxRounds || DefaultLocalMaxRounds != 24 {
		t.Fatalf("defaults: %+v %v", c, err)
	}
	c, err = load(`{"ollama_url":"http://h:1","ollama_think":"high","ollama_keep_alive":"10m","vmlx_url":"http://v/v1","vmlx_api_key":"k","local_max_rounds":3}`)
	if err != nil || c.OllamaURL != "http://h:1" || string(c.OllamaThink) != `"high"` || string(c.OllamaKeepAlive) != `"10m"` ||
		c.VMLXURL != "http://v/v1" || c.VMLXAPIKey != "k" || c.LocalMaxRounds != 3 {
		t.Fatalf("set: %+v %v", c, err)
	}
	for _, ok := range []string{`{"ollama_think":false}`, `{"ollama_keep_alive":-1}`, `{"ollama_keep_alive":300}`} {
		if _, err := load(ok); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
	for body, key := range map[string]string{`{"ollama_think":"very"}`: "ollama_think", `{"ollama_keep_alive":"soon"}`: "ollama_keep_alive"} {
		if _, err := load(body); err == nil || !strings.Contains(err.Error(), key) || !strings.Contains(err.Error(), path) {
			t.Errorf("%s: %v", body, err)
		}
	}
}

func TestRelevantModelServers(t *testing.T) {
	for name, want := range map[string]bool{"KAIMON_OLLAMA_URL": true, "KAIMON_VMLX_URL": true, "OLLAMA_HOST": true,
		"KAIMON_CLAUDE_BIN": true, "KAIMON_HOME": false, "KAIMON_AGENTD_BIN": false} {
		if Relevant(name) != want {
			t.Errorf("Relevant(%s) = %v", name, !want)
		}
	}
}
