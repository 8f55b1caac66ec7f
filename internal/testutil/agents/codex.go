package agents

import (
	"fmt"
	"os"
	"path/filepath"
)

// CodexBwrapDir is the directory of the bwrap that @openai/codex ships
// (codex-acp ships none, and Debian's bubblewrap cannot exec
// codex-linux-sandbox): put on PATH so codex's sandboxed commands run.
func CodexBwrapDir() string {
	return filepath.Join(RepoRoot(), "node_modules", "@openai", "codex-linux-x64", "vendor",
		"x86_64-unknown-linux-musl", "codex-resources")
}

// CodexOffline writes home/config.toml, a model provider "fake" at the
// Responses API apiURL (http://127.0.0.1:PORT/v1) and nothing that reaches
// a network, and returns the environment, NAME=value, in which codex-acp
// runs against it with CODEX_HOME=home and its temporary files under tmp.
// path is the PATH to extend with codex's bwrap.
func CodexOffline(apiURL, home, tmp, path string) ([]string, error) {
	cfg := fmt.Sprintf(`model = "gpt-5.4"
model_provider = "fake"
check_for_update_on_startup = false

[model_providers.fake]
name = "fake"
base_url = %q
env_key = "FAKE_API_KEY"
wire_api = "responses"
request_max_retries = 0
stream_max_retries = 0

[analytics]
enabled = false
`, apiURL)
	if err := os.MkdirAll(home, 0o755); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(home, "config.toml"), []byte(cfg), 0o644); err != nil {
		return nil, err
	}
	return []string{
		"CODEX_HOME=" + home,
		"FAKE_API_KEY=sk-fake",
		"TMPDIR=" + tmp,
		"PATH=" + CodexBwrapDir() + string(os.PathListSeparator) + path,
	}, nil
}
