package agents

import (
	"os"
	"path/filepath"
)

// CopilotOffline is the environment, NAME=value, in which the GitHub
// Copilot CLI (copilot --acp) runs against the fake chat completions API
// at apiURL (http://127.0.0.1:PORT/v1, fakeopenai) with model, and reaches
// nothing else: offline, no auto-update, bring-your-own-key with the
// openai provider type. Its state (config, logs, the session-state its
// session/load reads) goes in COPILOT_HOME, home/copilot-home. The caller
// sets HOME and TMPDIR (its node compile cache) inside the test's dir.
//
// The npm package's native binary unpacks a ~235 MB runtime on first run,
// by default under $HOME/.cache/copilot/pkg: with a test's fresh HOME that
// is seconds and 235 MB per run. COPILOT_PKG_CACHE_HOME points it at
// CopilotPkgCache, the runner's own cache (where the runner's copilot
// unpacks anyway), shared by every run of one version.
func CopilotOffline(apiURL, home, model string) []string {
	env := []string{
		"COPILOT_OFFLINE=true",
		"COPILOT_AUTO_UPDATE=false",
		"COPILOT_PROVIDER_BASE_URL=" + apiURL,
		"COPILOT_PROVIDER_TYPE=openai",
		"COPILOT_PROVIDER_API_KEY=sk-fake",
		"COPILOT_MODEL=" + model,
		"COPILOT_HOME=" + filepath.Join(home, "copilot-home"),
	}
	if dir := CopilotPkgCache(); dir != "" {
		env = append(env, "COPILOT_PKG_CACHE_HOME="+dir)
	}
	return env
}

// CopilotPkgCache is where the copilot runtime is unpacked for the tests:
// the runner's own COPILOT_PKG_CACHE_HOME (copilot's variable), else its user cache
// (~/.cache/copilot/pkg, copilot's own default); "" when there is none, and
// copilot then unpacks under its HOME.
func CopilotPkgCache() string {
	if d := os.Getenv("COPILOT_PKG_CACHE_HOME"); d != "" {
		return d
	}
	if d, err := os.UserCacheDir(); err == nil {
		return filepath.Join(d, "copilot", "pkg")
	}
	return ""
}
