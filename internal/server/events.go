package server

import (
	"net/http"
	"os"
	"strconv"
	"time"

	"github.com/kaimon/kaimon/internal/apitype"
	"github.com/kaimon/kaimon/internal/bus"
	"github.com/kaimon/kaimon/internal/config"
	"github.com/kaimon/kaimon/internal/event"
	"github.com/kaimon/kaimon/internal/eventlog"
	"github.com/kaimon/kaimon/internal/verbs"
)

// BusStats is what daemon status reports of the event bus.
type BusStats interface{ Stats() apitype.BusStats }

// serveEvents is GET /v1/agents/{id}/events?since=SEQ&follow=1: the agent's
// envelopes after seq SEQ as NDJSON, one per line. since=latest is the
// agent's last seq at the time of the request (with follow: only what
// happens from now on, the log's history skipped, as `kaimon run` wants).
// The response's headers come once the subscription is in force and that
// seq is fixed, so a client that has them misses nothing it then causes. Without follow it is
// the log (authoritative events only) and ends. With follow it then goes on
// with the live envelopes, deltas included, until the client goes away:
// the live subscription starts before the log is read, and seq joins the
// two with no gap and no duplicate (eventlog.Join), as `kaimon tail --since`
// does over the bus. A client too slow for its queue loses deltas only:
// what the queue dropped is filled from the log when it was authoritative.
func (s *Server) serveEvents(w http.ResponseWriter, r *http.Request) {
	id, err := s.agentID(r)
	if err != nil {
		writeErr(w, err)
		return
	}
	q := r.URL.Query()
	var since uint64
	latest := false
	if v := q.Get("since"); v == "latest" {
		latest = true
	} else if v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			writeErr(w, verbs.BadArg("since must be a seq (a number from 0) or latest, not %q", v))
			return
		}
		since = n
	}
	follow, err := flag(q, "follow")
	if err != nil {
		writeErr(w, err)
		return
	}
	path := config.Paths{CacheDir: s.CacheDir}.Agent(id).Events
	if _, err := os.Stat(path); err != nil {
		// No log yet: only an agent this daemon holds has a stream.
		if _, err := s.Svc.Status(r.Context(), &verbs.StatusArgs{AgentID: id}); err != nil {
			writeErr(w, err)
			return
		}
	}
	var sub *bus.LocalSub
	if follow {
		if s.Events == nil {
			writeErr(w, verbs.Errorf(verbs.CodeUnavailable, "this daemon has no live event stream"))
			return
		}
		sub = s.Events.Subscribe(bus.Topic(id))
		defer sub.Close()
	}
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	var line []byte
	emit := func(e *event.Envelope) error {
		b, err := event.Marshal(e)
		if err != nil {
			return err
		}
		line = append(append(line[:0], b...), '\n')
		_, err = w.Write(line)
		return err
	}
	j := eventlog.NewJoin(id, path, since, emit)
	defer j.Close()
	// A line of the log that is not a record is not skipped unseen.
	j.Bad = func(agent string, b eventlog.Bad) { writeBad(w, agent, path, b) }
	replay := j.Replay
	if latest {
		replay = j.Skip
	}
	if err := replay(); err != nil {
		return
	}
	if !follow {
		// The stream ends here. When no one writes the log any more, a
		// last line without its newline is torn: say so too.
		st, err := s.Svc.Status(r.Context(), &verbs.StatusArgs{AgentID: id})
		if err != nil || st.Status == apitype.Dead {
			j.Torn()
		}
	}
	if err := rc.Flush(); err != nil || !follow {
		return
	}
	for {
		e, err := sub.Next(r.Context())
		if err != nil {
			return // the client went away, or the daemon stops
		}
		if e.AgentID != id {
			continue // an id that merely starts with this one
		}
		fresh, err := j.Live(e.Seq, event.Renumbered(e.Kind, e.Data))
		if err == nil && fresh {
			err = emit(e)
		}
		if err != nil {
			return
		}
		if err := rc.Flush(); err != nil {
			return
		}
	}
}

// writeBad writes the note of a line of agent's log (at path) that is not
// a record: an error envelope of seq 0, which no event of the agent has
// (it is the stream's note, not the agent's event, and a consumer
// resuming from the last seq it saw must not count it).
func writeBad(w http.ResponseWriter, agent, path string, b eventlog.Bad) {
	e := event.NewError(0, "event log "+path+" "+b.Error()+"; skipped",
		map[string]any{"log_line": b.Line, "log_offset": b.Offset, "torn": b.Torn})
	env := event.Envelope{Kind: e.Kind, Turn: e.Turn, Data: e.Data, AgentID: agent, TS: time.Now().UTC()}
	if b, err := event.Marshal(&env); err == nil {
		_, _ = w.Write(append(b, '\n'))
	}
}
