package agents

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
)

// AuggieOffline is the environment, NAME=value, in which auggie (`auggie
// --acp`) runs against fakeaugment at tenantURL (its URL(),
// http://127.0.0.1:PORT/) and reaches nothing else: logged in by
// AUGMENT_SESSION_AUTH (without it auggie answers session/new with -32000
// "run `auggie login`"), no update check, its HOME home and its log
// (augment-log.txt, which it leaves behind) under tmp. It writes
// home/.augment/settings.json with indexing denied in the noIndex
// directories (everywhere when none are given), so that a first prompt
// there asks no "Workspace Indexing" permission (a question with no tool
// call) and nothing is uploaded for indexing; elsewhere auggie asks.
func AuggieOffline(tenantURL, home, tmp string, noIndex ...string) ([]string, error) {
	auth, err := json.Marshal(map[string]any{"accessToken": "fake-token", "tenantURL": tenantURL, "scopes": []string{"email"}})
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(home, ".augment")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	if len(noIndex) == 0 {
		noIndex = []string{"/"}
	}
	settings, _ := json.Marshal(map[string]any{"indexingDenyDirs": noIndex})
	if err := os.WriteFile(filepath.Join(dir, "settings.json"), settings, 0o600); err != nil {
		return nil, fmt.Errorf("auggie settings: %w", err)
	}
	return []string{
		"AUGMENT_SESSION_AUTH=" + string(auth),
		"AUGMENT_DISABLE_AUTO_UPDATE=1",
		"HOME=" + home,
		"TMPDIR=" + tmp,
	}, nil
}
