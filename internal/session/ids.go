package session

import (
	"errors"
	"fmt"
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

// prefixMatchesShown is how many of the agents an ambiguous prefix
// matches its error names: enough to see which characters tell them
// apart, without a wall of ids when the prefix is one character.
const prefixMatchesShown = 10

// ResolveAgentID is the whole id of the agent id names (lookupLocked),
// for the routes that name an agent in their path (its events, its
// diff), which then read its files by that id. It implements
// verbs.AgentResolver.
func (m *Manager) ResolveAgentID(id string) (string, error) {
	ag, err := m.get(id)
	if err != nil {
		return "", err
	}
	return ag.id, nil
}

var _ verbs.AgentResolver = (*Manager)(nil)

// lookupLocked is the one place an agent id given by a caller is
// resolved: the agent of that id, or else the one agent whose id starts
// with it, as git and docker take a unique prefix of an id. Every verb
// about an existing agent comes here (through get), so the CLI, MCP, the
// door and other hosts' clients all take a prefix; an id to create
// (agent_open's id) is never resolved. A whole id wins over its being
// the prefix of a longer one. A prefix of several is a bad_argument
// naming them; of none, not_found. m.mu is held.
func (m *Manager) lookupLocked(id string) (*Agent, error) {
	if ag := m.agents[id]; ag != nil {
		return ag, nil
	}
	if _, err := os.Stat(m.paths.Agent(id).Events); err == nil {
		// The id is whole: an agent forgotten with its log kept, or one
		// of an earlier daemon's. It names that one, not a live agent
		// whose id merely starts with it.
		return nil, verbs.NotFound("no agent %q: see `kaimon list` for the agents kaimon knows", id)
	}
	var matches []string
	for other := range m.agents {
		if strings.HasPrefix(other, id) {
			matches = append(matches, other)
		}
	}
	switch len(matches) {
	case 0:
		return nil, verbs.NotFound("no agent %q: see `kaimon list` for the agents kaimon knows", id)
	case 1:
		return m.agents[matches[0]], nil
	}
	sort.Strings(matches)
	shown := matches
	more := ""
	if len(shown) > prefixMatchesShown {
		shown, more = shown[:prefixMatchesShown], fmt.Sprintf(" and %d more", len(matches)-prefixMatchesShown)
	}
	return nil, verbs.BadArg("agent id %q is ambiguous: it is the start of %d agents' ids (%s%s); type more of the id",
		id, len(matches), strings.Join(shown, ", "), more)
}
