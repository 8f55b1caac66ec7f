package session

import (
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/kaimon/kaimon/internal/config"
	"github.com/kaimon/kaimon/internal/verbs"
)

// reservedIDs are the ids whose files would be the daemon's own: id
// agentd's stderr log would be the daemon's agentd.log. They are derived
// from the paths, so that a file the daemon adds is covered.
func reservedIDs(paths config.Paths) []string {
	return agentIDsOf(paths.CacheDir, paths.DaemonFiles())
}

// agentIDsOf are the agent ids that files, were they in cacheDir, would
// be a file of (config.AgentFileKinds), sorted.
func agentIDsOf(cacheDir string, files []string) []string {
	var ids []string
	for _, p := range files {
		if filepath.Dir(p) != filepath.Clean(cacheDir) {
			continue
		}
		if id, _, ok := config.AgentFileOf(filepath.Base(p)); ok && idRE.MatchString(id) && !slices.Contains(ids, id) {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	return ids
}

// checkID refuses an agent id that is malformed or reserved.
func (m *Manager) checkID(id string) error {
	if !idRE.MatchString(id) {
		return verbs.BadArg("agent_open: id %q must be 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit", id)
	}
	if r := reservedIDs(m.paths); slices.Contains(r, id) {
		return verbs.BadArg("agent_open: id %q is reserved: its files would overwrite the daemon's own in %s (reserved ids: %s)", id, m.paths.CacheDir, strings.Join(r, ", "))
	}
	return nil
}
