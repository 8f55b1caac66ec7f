package session

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/kaimon/kaimon/internal/apitype"
	"github.com/kaimon/kaimon/internal/config"
	"github.com/kaimon/kaimon/internal/event"
	"github.com/kaimon/kaimon/internal/gitwt"
	"github.com/kaimon/kaimon/internal/verbs"
)

// The registry is one small JSON file per agent, its config.AgentFiles
// Record (<cache>/<id>.agent.json),
// holding everything needed to list, report and resume the agent after the
// daemon that ran it is gone. Files rather than an embedded store (bbolt):
// one writer (the daemon, under its lock) and one record per agent need no
// transactions; a file per agent makes each write a whole small file,
// replaced atomically (temp file, fsync, rename, fsync of the dir), so a
// crash leaves the old record or the new one, never a torn one; and a
// person can read or remove a record with cat, jq and rm.

// Record is an agent's durable record: its identity, every agent_open
// option (with the model as last switched), the vendor's session, its
// counters, and its state.
type Record struct {
	// Version is the record's format, RecordVersion when written. A
	// record without it is of the format before versions were written,
	// which is version 1's: it loads as it is.
	Version int `json:"version,omitempty"`

	// OpenArgs are the agent's id and agent_open options as applied (cwd
	// absolute, defaults filled in), the model as last switched.
	verbs.OpenArgs

	// ResolvedModel is what the backend said the model is (sonnet →
	// claude-sonnet-5), "" before it said or when it said the model
	// itself: what status and list show of a dead or resumed agent. An
	// older daemon drops it on its next save, which shows the alias
	// until the agent's next turn, as before it was kept: no reason to
	// refuse that daemon the record (RecordVersion).
	ResolvedModel string `json:"resolved_model,omitempty"`

	SessionID     string `json:"session_id,omitempty"`
	Transcript    string `json:"transcript,omitempty"`
	QueuesPrompts bool   `json:"queues_prompts,omitempty"`

	CreatedAt    time.Time `json:"created_at"`
	LastActivity time.Time `json:"last_activity"`
	Turn         int       `json:"turn"`
	// SeqCeiling is a bound on the seq of every envelope published: the
	// last one for a dead agent, and for a live one a block ahead, reserved
	// before any envelope above the last bound goes out. A daemon that
	// died mid-stream published deltas the log does not keep; the next one
	// numbers on from here, so no seq a subscriber saw is used again.
	SeqCeiling uint64             `json:"seq_ceiling,omitempty"`
	Usage      event.UsageFigures `json:"usage"`
	Status     apitype.AgentState `json:"status"`
	Reason     string             `json:"reason,omitempty"`
	// Git is the agent's worktree: its repository, path, branch and
	// base commit; absent for an agent opened without one.
	Git *gitwt.Info `json:"git,omitempty"`
}

// RecordVersion is the format of the records this daemon writes, and the
// newest it reads. A change that an older daemon would misread (a field
// it would drop on its next save, or read otherwise) raises it.
const RecordVersion = 1

// Reasons a dead agent ended, as agent_status reports them.
const (
	ReasonClosed        = "closed"
	ReasonDaemonExited  = "daemon exited"
	ReasonDaemonCrashed = "daemon crashed"
	ReasonStartFailed   = "failed to start"
	ReasonExited        = "exited"
	// ReasonEventLog: the agent's event log could not be written, so it
	// was stopped rather than run unlogged.
	ReasonEventLog = "event log"
)

// writeRecord replaces the record file atomically and durably.
func writeRecord(path string, r *Record) error {
	r.Version = RecordVersion
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return config.WriteFileAtomic(path, append(b, '\n'), 0o600)
}

// readRecords loads every record in the cache dir. A record that does not
// parse is reported in bad and left where it is, for a person to look at.
func readRecords(paths config.Paths) (recs []*Record, bad []error) {
	dir := paths.CacheDir
	ents, err := os.ReadDir(dir)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, nil
		}
		return nil, []error{err}
	}
	for _, e := range ents {
		name := e.Name()
		path := filepath.Join(dir, name)
		if strings.HasPrefix(name, ".record-") {
			os.Remove(path) // a temp file a crash left between write and rename
			continue
		}
		id, _, ok := config.AgentFileOf(name)
		if e.IsDir() || !ok || paths.Agent(id).Record != path || strings.HasPrefix(name, ".") {
			continue
		}
		b, err := os.ReadFile(path)
		if err != nil {
			bad = append(bad, err)
			continue
		}
		var r Record
		if err := json.Unmarshal(b, &r); err != nil || r.ID != id || r.Version > RecordVersion {
			switch {
			case err != nil:
			case r.ID != id:
				err = errors.New("its id does not match its file name")
			default:
				// Loaded, its next save would write it in this
				// format, dropping what the newer one added: it
				// is not loaded, and an open of its id is refused
				// (Open), so that nothing overwrites it.
				err = fmt.Errorf("its format is version %d, newer than this kaimon-agentd reads (%d): "+
					"run the kaimon that wrote it", r.Version, RecordVersion)
			}
			bad = append(bad, fmt.Errorf("agent record %s: %w (left as it is)", path, err))
			continue
		}
		recs = append(recs, &r)
	}
	return recs, bad
}

// ParseAge reads older_than: a Go duration (90m, 12h) or a number of days
// (7d).
func ParseAge(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if d, ok := strings.CutSuffix(s, "d"); ok {
		if n, err := strconv.ParseFloat(d, 64); err == nil && n > 0 {
			return time.Duration(n * float64(24*time.Hour)), nil
		}
	} else if d, err := time.ParseDuration(s); err == nil && d > 0 {
		return d, nil
	}
	return 0, fmt.Errorf("older_than %q is not an age: write e.g. 7d, 12h or 90m", s)
}
