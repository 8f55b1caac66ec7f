package session

import (
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/kaimon/kaimon/internal/config"
	"github.com/kaimon/kaimon/internal/verbs"
)

// agentSuffixes end the names of an agent's files and directories in the
// cache dir: its stderr log, event log, record, generated MCP config and
// opencode config dir (the backends name them so too).
var agentSuffixes = []string{".log", ".events.jsonl", recordSuffix, "-mcp.json", "-opencode"}

// reservedIDs are the ids whose files would be the daemon's own: id
// agentd's stderr log would be the daemon's agentd.log. They are derived
// from the paths, so that a file the daemon adds is covered.
func reservedIDs(paths config.Paths) []string {
	own := []string{paths.DaemonLog(), paths.PidFile(), paths.PidFile() + ".tmp"}
	var ids []string
	for _, p := range own {
		if filepath.Dir(p) != filepath.Clean(paths.CacheDir) {
			continue
		}
		name := filepath.Base(p)
		for _, s := range agentSuffixes {
			if id, ok := strings.CutSuffix(name, s); ok && idRE.MatchString(id) && !slices.Contains(ids, id) {
				ids = append(ids, id)
			}
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
