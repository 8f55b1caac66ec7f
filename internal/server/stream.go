package server

import (
	"context"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/kaimon/kaimon/internal/apitype"
	"github.com/kaimon/kaimon/internal/bus"
	"github.com/kaimon/kaimon/internal/config"
	"github.com/kaimon/kaimon/internal/event"
	"github.com/kaimon/kaimon/internal/eventlog"
	"github.com/kaimon/kaimon/internal/follow"
	"github.com/kaimon/kaimon/internal/verbs"
)

// serveStream is GET /v1/events?channel=agent:PREFIX&follow=1&since=…&history=1:
// the envelopes of every agent whose id starts with PREFIX ("agent:" is
// every agent), agents that appear later included, as NDJSON, each line
// the bytes the daemon encodes for its event bus (event.AppendEnvelope).
// It is the bus's stream for a client that reaches the daemon only through
// its control socket: a daemon on another host, over ssh (nothing listens
// on a network for it).
//
// Each agent's envelopes come in seq order with no gap and no duplicate:
// the daemon joins its live envelopes with its log by seq, with the same
// follower `kaimon tail` runs over the bus (follow.Follower), server-side.
// Where to start, per agent:
//
//   - an agent named in since=ID:SEQ,ID:SEQ,… (apitype.FormatSince): its
//     log after SEQ, then live. A client that lost its connection resumes
//     so, naming for each agent the last seq it has, and gets each
//     envelope once. An agent named that this daemon has no log of (it was
//     forgotten meanwhile) is skipped: since says where the client is, it
//     does not ask for that agent.
//   - any other the daemon has at the request, with history=1: its log
//     from the start, then live.
//   - any other the daemon has at the request, without history: after the
//     end of its log as it is then ("from now").
//   - one that appears later: from the start of its log, all of which is
//     new.
//
// The headers come once the subscription is in force, so a client that has
// them misses nothing it then causes. Among them, Kaimon-Since
// (apitype.StreamSinceHeader) says where the stream starts each agent it
// knows of, in the since form: a client that resumes sends those positions
// for the agents it has seen nothing of yet, and history=1, which then
// starts only the agents that appeared meanwhile at their start; so not
// one of their events is lost to the broken connection either. Without follow the stream is the
// logs that since and history ask for, and ends.
//
// A client too slow for its queue loses deltas only: the subscription's
// bounded queue drops its oldest (so no agent ever waits for this writer),
// and what it dropped is filled from the log when it was authoritative.
// There is no marker of the loss: what is missing between two seqs of an
// agent is what was lost (the seqs of an agent's envelopes are
// consecutive), which is how follow.Follower reports Lost for a stream
// without a log, as the per-agent route's clients read it. A line of a log
// that is not a record is told by an error envelope of seq 0, as in GET
// /v1/agents/{id}/events.
func (s *Server) serveStream(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	channel := "agent:"
	if v, ok := q["channel"]; ok {
		channel = v[0]
	}
	prefix, ok := strings.CutPrefix(channel, "agent:")
	if !ok || (prefix != "" && !verbs.ValidAgentID(prefix)) {
		writeErr(w, verbs.BadArg("channel must be agent: (every agent) or agent:ID-PREFIX, not %q", channel))
		return
	}
	since, err := parseSince(q.Get("since"), prefix)
	if err != nil {
		writeErr(w, err)
		return
	}
	history, err := flag(q, "history")
	if err != nil {
		writeErr(w, err)
		return
	}
	following, err := flag(q, "follow")
	if err != nil {
		writeErr(w, err)
		return
	}
	var src follow.Source = endSource{}
	if following {
		if s.Events == nil {
			writeErr(w, verbs.Errorf(verbs.CodeUnavailable, "this daemon has no live event stream"))
			return
		}
		sub := s.Events.Subscribe(channel)
		src = &hubSource{ctx: r.Context(), sub: sub}
	}
	paths := config.Paths{CacheDir: s.CacheDir}
	logOf := func(agent string) string { return paths.Agent(agent).Events }
	f := follow.New(src)
	defer f.Close()
	f.Log, f.FromStart = logOf, true
	f.Bad = func(agent string, b eventlog.Bad) { writeBad(w, agent, logOf(agent), b) }
	// A log that cannot be read to fill a gap ends neither the stream nor
	// the other agents': that agent goes on from its live envelope.
	f.LogError = func(string, error) error { return nil }
	// Where each agent starts: those named after their seq; the others
	// the daemon has now at their log's start (history) or end. Listed
	// after subscribing, so an agent that appears meanwhile is both listed
	// and live, and joined once.
	lr, err := s.Svc.List(r.Context(), &verbs.ListArgs{})
	if err != nil {
		writeErr(w, err)
		return
	}
	start := map[string]uint64{}
	var replay []string
	for id, seq := range since {
		if _, err := os.Stat(logOf(id)); err == nil {
			start[id] = seq
			replay = append(replay, id)
		} // else no log: nothing to replay (and nothing live either)
	}
	for _, a := range lr.Agents {
		id := a.AgentID
		if _, named := since[id]; named || !strings.HasPrefix(id, prefix) {
			continue
		}
		if history {
			start[id] = 0
			replay = append(replay, id)
			continue
		}
		if seq, err := f.Skip(id); err == nil {
			start[id] = seq
		}
	}
	slices.Sort(replay)
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set(apitype.StreamSinceHeader, apitype.FormatSince(start))
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	f.Idle = rc.Flush
	var line []byte
	emit := func(e *follow.Envelope) error {
		line = append(append(line[:0], e.Raw...), '\n')
		_, err := w.Write(line)
		return err
	}
	for _, id := range replay {
		if err := f.Replay(id, start[id], emit); err != nil {
			return
		}
	}
	if err := rc.Flush(); err != nil || !following {
		return
	}
	_ = f.Run(r.Context(), emit) // ends when the client goes away, or the daemon stops
}

// parseSince reads the since parameter of GET /v1/events: the agents must
// be agent ids on the channel's prefix.
func parseSince(v, prefix string) (map[string]uint64, error) {
	since, err := apitype.ParseSince(v)
	if err != nil {
		return nil, verbs.BadArg("%v", err)
	}
	for id := range since {
		if !verbs.ValidAgentID(id) {
			return nil, verbs.BadArg("since names %q, which is not an agent id; the form is %s", id, apitype.SinceForm)
		}
		if !strings.HasPrefix(id, prefix) {
			return nil, verbs.BadArg("since names agent %s, which is not on channel agent:%s", id, prefix)
		}
	}
	return since, nil
}

// flag reads a boolean query parameter; absent is false.
func flag(q map[string][]string, name string) (bool, error) {
	v := ""
	if vs := q[name]; len(vs) > 0 {
		v = vs[0]
	}
	if v == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, verbs.BadArg("%s must be 1 or 0, not %q", name, v)
	}
	return b, nil
}

// hubSource is a subscription to the daemon's event hub as a follower's
// Source: each envelope encoded as the bus encodes it.
type hubSource struct {
	ctx context.Context
	sub *bus.LocalSub
	buf []byte
}

func (h *hubSource) Next() ([]byte, error) {
	for {
		e, err := h.sub.Next(h.ctx)
		if err != nil {
			return nil, err
		}
		if h.buf, err = event.AppendEnvelope(h.buf[:0], e); err == nil {
			return h.buf, nil
		}
		// An envelope the bus could not encode either: the bus skips it
		// too, and the log (when it is authoritative) fills its place.
	}
}

func (h *hubSource) Ready() bool  { return h.sub.Buffered() }
func (h *hubSource) Close() error { h.sub.Close(); return nil }

// endSource is the live stream of a request that does not follow: none.
type endSource struct{}

func (endSource) Next() ([]byte, error) { return nil, bus.ErrClosed }
func (endSource) Ready() bool           { return false }
func (endSource) Close() error          { return nil }
