package session

import (
	"errors"
	"os"
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

// idDraws is how many ids freshID draws before it gives up: with 8 hex
// digits, a cache dir would need billions of agents for even two draws in
// a row to collide, so running out says the source is broken.
const idDraws = 16

// freshID draws an id for an open that named none (m.newID): one whose
// slot is empty and that no file of config.AgentFileKinds in the cache dir
// is of. A drawn id of a dead agent would otherwise reopen its slot, and
// one of a forgotten agent whose log was kept would continue that log.
// reserve still refuses an id an open took since (reserveFresh).
func (m *Manager) freshID() (string, error) {
	for range idDraws {
		id := m.newID()
		if !idRE.MatchString(id) || slices.Contains(reservedIDs(m.paths), id) {
			continue
		}
		if !m.idUsed(id) {
			return id, nil
		}
	}
	return "", verbs.Errorf(verbs.CodeInternal, "agent_open: no unused agent id in %d draws; give one (kaimon open --id ID)", idDraws)
}

// idUsed says whether id has a slot, a forget at it, or any file in the
// cache dir. A file that cannot be looked at counts as used.
func (m *Manager) idUsed(id string) bool {
	m.mu.Lock()
	used := m.agents[id] != nil || m.forgetting[id]
	m.mu.Unlock()
	if used {
		return true
	}
	f := m.paths.Agent(id)
	for _, k := range config.AgentFileKinds {
		if _, err := os.Lstat(f.Path(k)); !errors.Is(err, os.ErrNotExist) {
			return true
		}
	}
	return false
}
