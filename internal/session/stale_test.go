package session

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/kaimon/kaimon/internal/config"
)

// The configs generated for agents of a daemon that died (they hold door
// tokens) are removed at start; the agents' logs are kept.
func TestStaleGeneratedRemovedAtStart(t *testing.T) {
	dir := t.TempDir()
	cache := filepath.Join(dir, "cache")
	for _, p := range []string{"a1-mcp.json", "b2-opencode/plugin/kaimon-bridge.js", "a1.log", "a1.events.jsonl", "notes.txt"} {
		p = filepath.Join(cache, p)
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("{}\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	m, err := New(config.Paths{CacheDir: cache, SockDir: dir + "/sock", ConfigFile: dir + "/c.json"}, config.Defaults(), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Shutdown()
	for p, want := range map[string]bool{"a1-mcp.json": false, "b2-opencode": false, "a1.log": true, "a1.events.jsonl": true, "notes.txt": true} {
		_, err := os.Stat(filepath.Join(cache, p))
		if got := err == nil; got != want {
			t.Errorf("%s: exists %v, want %v", p, got, want)
		}
	}
}
