package agents

import (
	"encoding/json"
	"os"
	"path/filepath"
)

// KiloModel is the model string of the provider KiloOffline configures
// (acp:kilo:fake/fake-model); fake/fake-model-2 is its other model.
const KiloModel = "fake/fake-model"

// KiloOffline makes the directories under home that kilo (`kilo acp`,
// @kilocode/cli, a fork of opencode) writes to — HOME, the XDG dirs (its
// session database is in $XDG_DATA_HOME/kilo, which a resume reads) and
// TMPDIR — and returns the environment, NAME=value, in which it runs
// against the fake OpenAI-compatible API at apiURL
// (http://127.0.0.1:PORT/v1) and reaches nothing else: no model catalogue,
// no share, no default plugins (npm packages it would install), no Claude
// Code import, no session ingest, and npm pointed at a dead port. The
// provider is opencode's own config shape, given inline in
// KILO_CONFIG_CONTENT, the user's config as far as kaimon is concerned.
func KiloOffline(apiURL, home string) ([]string, error) {
	var env []string
	for _, kd := range [][2]string{{"HOME", "home"}, {"XDG_CONFIG_HOME", "xdg-config"}, {"XDG_DATA_HOME", "xdg-data"},
		{"XDG_STATE_HOME", "xdg-state"}, {"XDG_CACHE_HOME", "xdg-cache"}, {"TMPDIR", "tmp"}} {
		p := filepath.Join(home, kd[1])
		if err := os.MkdirAll(p, 0o755); err != nil {
			return nil, err
		}
		env = append(env, kd[0]+"="+p)
	}
	cfg, err := json.Marshal(map[string]any{
		"$schema": "https://kilo.ai/config.json",
		"provider": map[string]any{"fake": map[string]any{
			"npm": "@ai-sdk/openai-compatible", "name": "Fake",
			"options": map[string]any{"baseURL": apiURL, "apiKey": "x"},
			"models":  map[string]any{"fake-model": map[string]any{"name": "Fake Model"}, "fake-model-2": map[string]any{"name": "Fake Model 2"}},
		}},
		"model":       KiloModel,
		"small_model": KiloModel,
		"autoupdate":  false,
		"share":       "disabled",
	})
	if err != nil {
		return nil, err
	}
	return append(env,
		"KILO_CONFIG_CONTENT="+string(cfg),
		"KILO_DISABLE_MODELS_FETCH=1",
		"KILO_DISABLE_SHARE=1",
		"KILO_DISABLE_DEFAULT_PLUGINS=1",
		"KILO_DISABLE_CLAUDE_CODE=1",
		"KILO_DISABLE_SESSION_INGEST=1",
		"KILO_DISABLE_AUTOUPDATE=1",
		"KILO_DISABLE_LSP_DOWNLOAD=1",
		"npm_config_registry=http://127.0.0.1:9",
	), nil
}
