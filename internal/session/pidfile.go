package session

import (
	"encoding/json"
	"errors"
	"log"
	"os"
	"sync"
	"time"

	"github.com/kaimon/kaimon/internal/proc"
)

// pidFile records live agent children (<cache>/pids.json) with pid and
// process start time, so a restarted daemon reaps its own leftovers and
// never a stranger that reused a pid.
type pidFile struct {
	mu   sync.Mutex
	path string
	tmp  string                   // written, then renamed to path
	live map[string]proc.Identity // agent id → child
}

type pidEntry struct {
	AgentID string `json:"agent_id"`
	proc.Identity
}

func readPidFile(path string) ([]pidEntry, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var entries []pidEntry
	if err := json.Unmarshal(b, &entries); err != nil {
		return nil, err
	}
	return entries, nil
}

// reap kills the process groups a previous daemon left behind, where the
// recorded identity still matches, and returns how many it stopped.
func reap(path string) int {
	entries, err := readPidFile(path)
	if err != nil {
		log.Printf("pid file %s unreadable, not reaping: %v", path, err)
		return 0
	}
	n := 0
	for _, e := range entries {
		if proc.KillGroup(e.Identity, 3*time.Second) {
			log.Printf("reaped leftover agent %s (pid %d)", e.AgentID, e.PID)
			n++
		}
	}
	return n
}

func (p *pidFile) set(id string, ident proc.Identity) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.live[id] = ident
	p.writeLocked()
}

func (p *pidFile) remove(id string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.live, id)
	p.writeLocked()
}

func (p *pidFile) writeLocked() {
	entries := make([]pidEntry, 0, len(p.live))
	for id, ident := range p.live {
		entries = append(entries, pidEntry{AgentID: id, Identity: ident})
	}
	b, _ := json.Marshal(entries)
	tmp := p.tmp
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		log.Printf("writing pid file: %v", err)
		return
	}
	if err := os.Rename(tmp, p.path); err != nil {
		log.Printf("writing pid file: %v", err)
	}
}
