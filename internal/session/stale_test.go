package session

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/kaimon/kaimon/internal/config"
)

// The configs generated for agents of a daemon that died (they hold door
// tokens) are removed at start: every file of lifetime WhileLive. The
// agents' other files are kept, and so is a file of no agent.
func TestStaleGeneratedRemovedAtStart(t *testing.T) {
	dir := t.TempDir()
	paths := config.Paths{CacheDir: filepath.Join(dir, "cache"), SockDir: dir + "/sock", ConfigFile: dir + "/c.json"}
	if err := os.MkdirAll(paths.CacheDir, 0o700); err != nil {
		t.Fatal(err)
	}
	plantAgentFiles(t, paths, "a1")
	notes := filepath.Join(paths.CacheDir, "notes.txt")
	if err := os.WriteFile(notes, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	m, err := New(paths, config.Defaults(), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Shutdown()
	for _, k := range config.AgentFileKinds {
		_, err := os.Stat(paths.Agent("a1").Path(k))
		if got, want := err == nil, k.Lifetime != config.WhileLive; got != want {
			t.Errorf("a1%s: exists %v, want %v", k.Suffix, got, want)
		}
	}
	if _, err := os.Stat(notes); err != nil {
		t.Errorf("notes.txt: %v", err)
	}
}
