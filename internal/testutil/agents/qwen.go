package agents

import (
	"encoding/json"
	"os"
	"path/filepath"
)

// QwenModel is the model qwen-code is told to use (OPENAI_MODEL): any id
// the fake answers; qwen offers it as its one model,
// "$runtime|openai|fake-model(openai)".
const QwenModel = "fake-model"

// QwenModel2 is the other model qwen's settings offer.
const QwenModel2 = "fake-model-2"

// QwenOffline prepares home (a directory the caller owns and removes) for
// qwen-code (`qwen --acp`) to run against the fake chat completions API at
// apiURL (fakeopenai's URL, ending in /v1) and reach nothing else, and
// returns its environment, NAME=value: the OpenAI key, base URL and model
// (without a key qwen answers -32000 "Authentication required"), HOME and
// QWEN_HOME in home (sessions, memory, usage records: qwen's
// ~/.qwen), and TMPDIR in home/tmp (qwen leaves its qwen-socks-* dirs
// there). Its settings turn off usage statistics, telemetry and the
// update check, and list the fake's two models as the openai provider's.
func QwenOffline(apiURL, home string) ([]string, error) {
	qhome := filepath.Join(home, ".qwen")
	tmp := filepath.Join(home, "tmp")
	for _, d := range []string{qhome, tmp} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}
	settings, _ := json.MarshalIndent(map[string]any{
		"privacy":   map[string]any{"usageStatisticsEnabled": false},
		"telemetry": map[string]any{"enabled": false},
		"general":   map[string]any{"enableAutoUpdate": false},
		// The fake's two models, so that a model can be picked at open
		// and switched (qwen refuses a model no provider lists).
		"modelProviders": map[string]any{"openai": []any{
			map[string]any{"id": QwenModel, "name": QwenModel, "envKey": "OPENAI_API_KEY", "baseUrl": apiURL},
			map[string]any{"id": QwenModel2, "name": QwenModel2, "envKey": "OPENAI_API_KEY", "baseUrl": apiURL},
		}},
		"model":    map[string]any{"name": QwenModel},
		"security": map[string]any{"auth": map[string]any{"selectedType": "openai"}},
	}, "", "  ")
	if err := os.WriteFile(filepath.Join(qhome, "settings.json"), settings, 0o644); err != nil {
		return nil, err
	}
	return []string{
		"OPENAI_API_KEY=sk-fake",
		"OPENAI_BASE_URL=" + apiURL,
		"OPENAI_MODEL=" + QwenModel,
		"QWEN_USAGE_STATISTICS_ENABLED=false",
		"HOME=" + home,
		"QWEN_HOME=" + qhome,
		"TMPDIR=" + tmp,
	}, nil
}
