package session

import (
	"log"
	"os"

	"github.com/kaimon/kaimon/internal/config"
)

// removeStale removes what backends generated for agents that are no
// longer live (the files of lifetime config.WhileLive: claude's MCP
// config, opencode's config home, each holding the agent's door token): a
// daemon that crashed, or was killed, left them behind. At start no agent
// is live, so every one of them is stale.
func removeStale(paths config.Paths) {
	ents, err := os.ReadDir(paths.CacheDir)
	if err != nil {
		log.Printf("removing stale generated configs: %v", err)
		return
	}
	for _, e := range ents {
		id, k, ok := config.AgentFileOf(e.Name())
		if !ok || k.Lifetime != config.WhileLive || !idRE.MatchString(id) {
			continue
		}
		if err := os.RemoveAll(paths.Agent(id).Path(k)); err != nil {
			log.Printf("removing stale generated config of agent %s: %v", id, err)
		}
	}
}
