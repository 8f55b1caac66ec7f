// Package apitype holds the words and shapes of kaimon's wire that more
// than one layer names: daemon status (GET /v1/daemon), the bus counters
// in it, and the enumerations that travel as strings (an agent's state, a
// permission decision). It imports nothing of kaimon's and nothing heavy,
// as tailscale's client/tailscale/apitype, so that the event envelope, the
// bus, the verb table and the CLI's client can all use it without the
// client linking the server that fills these in (and with it the bus and
// ZeroMQ).
package apitype

// APIVersion numbers the daemon's HTTP API: it grows when a change would
// make an older client or daemon misread the other (a route or field
// removed or changing meaning; additions do not count). The daemon sends
// it in its status, and a client reaching a daemon on another host
// (internal/fleet) refuses one whose number differs, naming both: the two
// binaries there are upgraded apart.
const APIVersion = 1

// DaemonStatus is GET /v1/daemon.
type DaemonStatus struct {
	PID     int    `json:"pid"`
	Version string `json:"version"`
	// API is the daemon's APIVersion; absent (0) from a daemon older than
	// the number.
	API int `json:"api,omitempty"`
	// Commit is the commit the daemon was built from, when known.
	Commit    string `json:"commit,omitempty"`
	Socket    string `json:"socket"`
	CacheDir  string `json:"cache_dir"`
	StartedAt string `json:"started_at"`
	Live      int    `json:"live"`
	Dead      int    `json:"dead"`
	// Goroutines is the daemon's goroutine count: what a client that
	// went away mid-request or mid-stream leaves behind shows here.
	Goroutines int `json:"goroutines"`
	// Door is the endpoint of the MCP door owned agents call back into;
	// absent when the daemon runs without it.
	Door string `json:"door,omitempty"`
	// Bus is the event bus: endpoints, subscribers, envelopes published
	// and dropped (per subscriber in connections).
	Bus *BusStats `json:"bus,omitempty"`
	// Env fingerprints the environment the daemon started with, as
	// config.EnvFingerprints: names and short hashes, never values, and
	// for a credential (ANTHROPIC_API_KEY) not even a hash: "set". A
	// client compares it with its own to explain errors that come from a
	// daemon started elsewhere. Always present (possibly {}), so that its
	// absence means a daemon too old to report it.
	Env map[string]string `json:"env"`
	// LogFaults are the event log writes that failed since the daemon
	// started; each stopped its agent (status dead, reason "event log:
	// ..."). Absent from a daemon too old to report them.
	LogFaults *LogFaults `json:"log_faults,omitempty"`
	// RecordFaults are the agent record writes that failed since the
	// daemon started; an agent whose record is still behind says so in
	// its status (record_error). Absent from a daemon too old to report
	// them.
	RecordFaults *LogFaults `json:"record_faults,omitempty"`
}

// LogFaults counts failed writes (of event logs, or of records), and
// names the last one.
type LogFaults struct {
	Count     int    `json:"count"`
	LastAgent string `json:"last_agent,omitempty"`
	LastError string `json:"last_error,omitempty"`
	LastAt    string `json:"last_at,omitempty"`
}

// BusStats are the event bus's counters, for daemon status (and the TUI).
type BusStats struct {
	Endpoints   []string `json:"endpoints"`
	Subscribers int      `json:"subscribers"`
	Published   uint64   `json:"published"`
	Dropped     uint64   `json:"dropped"`
	QueueBytes  int      `json:"queue_bytes"` // each subscriber's queue's bound
	// Connections has one entry per connected subscriber.
	Connections []SubscriberStats `json:"connections"`
}

// SubscriberStats describe one subscriber connection of the bus.
type SubscriberStats struct {
	Peer        string   `json:"peer"`
	Topics      []string `json:"topics"`
	Queued      int      `json:"queued"`
	QueuedBytes int      `json:"queued_bytes"`
	Sent        uint64   `json:"sent"`
	Dropped     uint64   `json:"dropped"`
}
