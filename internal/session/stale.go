package session

import (
	"log"
	"os"
	"path/filepath"
	"strings"
)

// generatedSuffixes end the names of what a backend generates for a live
// agent in the cache dir and removes when it exits: claude's MCP config
// (<id>-mcp.json) and opencode's config home (<id>-opencode/). Both hold
// the agent's door token.
var generatedSuffixes = []string{"-mcp.json", "-opencode"}

// removeStale removes what backends generated for agents that are no
// longer live: a daemon that crashed, or was killed, left them behind. At
// start no agent is live, so every one of them is stale.
func removeStale(cacheDir string) {
	ents, err := os.ReadDir(cacheDir)
	if err != nil {
		log.Printf("removing stale generated configs: %v", err)
		return
	}
	for _, e := range ents {
		for _, s := range generatedSuffixes {
			id, ok := strings.CutSuffix(e.Name(), s)
			if !ok || !idRE.MatchString(id) {
				continue
			}
			if err := os.RemoveAll(filepath.Join(cacheDir, e.Name())); err != nil {
				log.Printf("removing stale generated config of agent %s: %v", id, err)
			}
		}
	}
}
