// Package follow follows agents' envelopes as they happen, for `kaimon
// tail`, `kaimon monitor` and the merged tail of many hosts (Remote): it
// reads live envelopes from a Source (the local daemon's event bus) and
// joins each agent's with its event log by seq (eventlog.Join), so that a
// consumer sees every authoritative event once and in order even when the
// source dropped some for a slow reader, and hears of the deltas lost.
//
// It hands each envelope on as the bytes the daemon encoded
// (event.AppendEnvelope), with the few fields a consumer filters on read
// from those bytes without decoding the rest: printing an envelope costs a
// copy, not a decode and an encode, which is what lets one tail keep up
// with an agent at full speed. A log record (a replay, or what fills a
// gap) is encoded the same way, so a consumer cannot tell the two apart.
package follow

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"time"

	"github.com/kaimon/kaimon/internal/bus"
	"github.com/kaimon/kaimon/internal/client"
	"github.com/kaimon/kaimon/internal/event"
	"github.com/kaimon/kaimon/internal/eventlog"
)

// Envelope is one envelope followed.
type Envelope struct {
	Agent string
	Seq   uint64
	Kind  event.Kind
	Turn  int
	// Raw is the envelope's JSON object, without a newline, as the daemon
	// encoded it; Data is its data field, within Raw. Both are valid only
	// until emit returns.
	Raw  []byte
	Data []byte
	// agentAt and agentEnd are where the agent id's JSON string stands
	// in Raw, quotes included, as the parser found it; 0, 0 when it is
	// not known.
	agentAt, agentEnd int
}

// AppendHosted appends e to dst as a stream of many hosts shows it: a
// "host" field first, and agent (the id qualified with its host) in place
// of its agent id, the rest e's bytes as they are. An envelope whose agent
// id the parser did not place (or that has a host field already) is
// decoded and encoded again instead: a stream is read as JSON, not trusted
// to a shape.
func (e *Envelope) AppendHosted(dst []byte, host, agent string) ([]byte, error) {
	if e.agentEnd > e.agentAt && e.agentAt > 0 && len(e.Raw) > 1 && e.Raw[0] == '{' {
		dst = append(dst, `{"host":`...)
		dst = appendString(dst, host)
		dst = append(dst, ',')
		dst = append(dst, e.Raw[1:e.agentAt]...)
		dst = appendString(dst, agent)
		return append(dst, e.Raw[e.agentEnd:]...), nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(e.Raw, &m); err != nil {
		return dst, fmt.Errorf("envelope of agent %s seq %d: %w", e.Agent, e.Seq, err)
	}
	delete(m, "host") // a host field there already is replaced, first
	m["agent_id"], _ = json.Marshal(agent)
	b, err := json.Marshal(m)
	if err != nil {
		return dst, err
	}
	dst = append(dst, `{"host":`...)
	dst = appendString(dst, host)
	dst = append(dst, ',')
	return append(dst, b[1:]...), nil
}

// appendString appends s as a JSON string: between quotes as it is when
// nothing in it needs escaping (printable ASCII without a quote or a
// backslash, as ids and host names are), else as encoding/json has it.
func appendString(dst []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' {
			b, _ := json.Marshal(s)
			return append(dst, b...)
		}
	}
	dst = append(dst, '"')
	dst = append(dst, s...)
	return append(dst, '"')
}

// Decode decodes the whole envelope, for a consumer that renders it.
func (e *Envelope) Decode() (*event.Envelope, error) {
	var env event.Envelope
	if err := json.Unmarshal(e.Raw, &env); err != nil {
		return nil, fmt.Errorf("envelope of agent %s seq %d: %w", e.Agent, e.Seq, err)
	}
	return &env, nil
}

// Emit receives the envelopes followed, each agent's in seq order; an
// error ends the follow with that error.
type Emit func(*Envelope) error

// Source is where live envelopes come from: the local daemon's event bus
// (Dial), or any transport that delivers the daemon's envelopes as it
// encoded them.
type Source interface {
	// Next returns the next live envelope's JSON; the bytes are the
	// follower's until the next call. An error ends the follow.
	Next() ([]byte, error)
	// Ready reports whether Next would return without waiting on the
	// transport. When it would wait, the follower first calls Idle: the
	// moment for a consumer to flush what it wrote.
	Ready() bool
	Close() error
}

// SourceError is the error that ended a follow because its source failed
// (the daemon went away), as opposed to an error of emit or of a log.
type SourceError struct{ Err error }

func (e *SourceError) Error() string { return e.Err.Error() }
func (e *SourceError) Unwrap() error { return e.Err }

// Follower follows one source. Set its fields before Replay or Run; it is
// used by one goroutine.
type Follower struct {
	// Log is the path of an agent's event log, for Replay and for filling
	// the gaps of the live stream. Nil for a source that joins by itself
	// (a daemon's events route): envelopes are then handed on as they
	// come.
	Log func(agent string) string
	// FromStart joins an agent first seen live from the start of its log,
	// not at that envelope: the daemon's GET /v1/events, whose agents
	// first seen live appeared after the request, so that all of their
	// log is new. An agent Replay or Skip started is not affected.
	FromStart bool
	// Only, if set, is the one agent followed: envelopes of the agents
	// whose ids merely start with it (a channel is a prefix) are skipped.
	Only string
	// Lost, if set, hears of deltas lost in a gap of the live stream: n
	// envelopes of seq from..to that the log does not hold. Without a Log
	// (a source that joined already, which filled every gap it could),
	// what is missing between two seqs of an agent is that loss.
	Lost func(agent string, from, to uint64, n int)
	// Bad, if set, hears of each line of a log that is not a record.
	Bad func(agent string, b eventlog.Bad)
	// LogError, if set, decides what a log that cannot be read to fill a
	// gap does: nil hands on the live envelope and starts that agent's
	// join afresh, an error ends the follow. Unset, the error ends it.
	LogError func(agent string, err error) error
	// Idle, if set, is called whenever the source has nothing ready,
	// before the follower waits on it.
	Idle func() error

	src   Source
	emit  Emit
	joins map[string]*eventlog.Join
	names map[string]string // agent ids seen, when there is no Log
	lasts map[string]uint64 // each agent's last seq, when there is no Log
	// starts holds where Skip starts the agents not joined yet.
	starts map[string]uint64
	live   Envelope // the live envelope being handed on
	rec    Envelope // a log record being handed on
	buf    []byte   // rec's encoding
}

// New follows src.
func New(src Source) *Follower {
	return &Follower{src: src, joins: map[string]*eventlog.Join{}, names: map[string]string{}, lasts: map[string]uint64{}, starts: map[string]uint64{}}
}

// subscribeTimeout bounds the wait for the bus to confirm subscriptions.
const subscribeTimeout = 15 * time.Second

// Dial subscribes to channels (prefixes: "agent:" for every agent,
// "agent:ID" for one) on the event bus of cl's daemon and returns once
// the subscriptions are in force: whatever is published from then on
// reaches the follower, so a log read after Dial returns misses nothing.
// The follower joins with the logs in cl's cache directory. Cancelling
// ctx ends it.
func Dial(ctx context.Context, cl *client.Client, channels []string) (*Follower, error) {
	sub, err := bus.Dial(ctx, "ipc://"+cl.Paths.EventsSocket())
	if err != nil {
		return nil, err
	}
	for _, ch := range channels {
		if err := sub.Subscribe(ch); err != nil {
			sub.Close()
			return nil, fmt.Errorf("subscribing to %s: %w", ch, err)
		}
	}
	if err := sub.Sync(subscribeTimeout); err != nil {
		sub.Close()
		return nil, err
	}
	f := New(busSource{sub})
	paths := cl.Paths
	f.Log = func(agent string) string { return paths.Agent(agent).Events }
	return f, nil
}

// Follow follows channels of cl's daemon until emit fails, the daemon goes
// away (a SourceError) or ctx ends (its error).
func Follow(ctx context.Context, cl *client.Client, channels []string, emit Emit) error {
	f, err := Dial(ctx, cl, channels)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Run(ctx, emit)
}

// busSource is the event bus as a Source: each message's body is an
// envelope.
type busSource struct{ sub *bus.Subscriber }

func (s busSource) Next() ([]byte, error) {
	m, err := s.sub.Next()
	return m.Body, err
}

func (s busSource) Ready() bool  { return s.sub.Buffered() }
func (s busSource) Close() error { return s.sub.Close() }

// Replay emits agent's log after seq since, before anything live: call it
// after Dial and before Run. Run then goes on from the last seq replayed.
func (f *Follower) Replay(agent string, since uint64, emit Emit) error {
	if f.Log == nil {
		return errors.New("follow: this source has no log to replay")
	}
	f.emit = emit
	j := f.join(agent, since, false)
	return j.Replay()
}

// Skip starts agent at the end of its log as it is now: what Run hands on
// of it is what comes after, and Skip returns the seq it starts after (a
// stream "from now" that can say where now is, so that a client can
// resume it). It reads the log's end now and holds nothing open until the
// agent's first live envelope: an idle agent costs a map entry, not a
// file and a buffer. Call it after Dial, before Run.
func (f *Follower) Skip(agent string) (uint64, error) {
	if f.Log == nil {
		return 0, errors.New("follow: this source has no log to skip")
	}
	c := eventlog.NewCursor(f.Log(agent))
	last, _, err := c.SkipToEnd()
	c.Close()
	if err != nil {
		return 0, err
	}
	f.starts[agent] = last
	return last, nil
}

// Lasts returns, for each agent the follower has handed on an envelope
// of (or started with Skip or Replay, or its source started: Remote's
// agents), the seq it is at: where a follow of the same daemon begun anew
// resumes that agent (Replay, or RemoteOptions.Since) after a break. Call
// it before Close, which lets the joins go.
func (f *Follower) Lasts() map[string]uint64 {
	out := map[string]uint64{}
	if s, ok := f.src.(interface{ lasts() map[string]uint64 }); ok {
		maps.Copy(out, s.lasts())
	}
	for a, seq := range f.starts {
		out[a] = seq
	}
	for a, seq := range f.lasts {
		out[a] = seq
	}
	for a, j := range f.joins {
		out[a] = j.Last()
	}
	return out
}

// Torn reports a last line of agent's log without its newline to Bad:
// call it after Replay when no one writes that log any more (the agent is
// dead), where such a line can only be torn.
func (f *Follower) Torn(agent string) {
	if j := f.joins[agent]; j != nil {
		j.Torn()
	}
}

// Run hands every live envelope to emit, joined with the logs, until emit
// or a log fails (that error), the source fails (a SourceError), or ctx
// ends (its error).
func (f *Follower) Run(ctx context.Context, emit Emit) error {
	f.emit = emit
	stop := context.AfterFunc(ctx, func() { f.src.Close() })
	defer stop()
	for {
		if f.Idle != nil && !f.src.Ready() {
			if err := f.Idle(); err != nil {
				return err
			}
		}
		raw, err := f.src.Next()
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return &SourceError{Err: err}
		}
		if err := f.take(raw); err != nil {
			return err
		}
	}
}

// take hands on one live envelope, after what its agent's log holds
// before it and was not handed on yet.
func (f *Follower) take(raw []byte) error {
	e := &f.live
	agent, ok := parse(raw, e)
	if !ok {
		return nil // not an envelope
	}
	if f.Only != "" && string(agent) != f.Only {
		return nil
	}
	if f.Log == nil {
		name, ok := f.names[string(agent)]
		if !ok {
			name = string(agent)
			f.names[name] = name
		}
		e.Agent = name
		if e.Seq == 0 {
			return f.emit(e) // the stream's note, not the agent's event
		}
		// The source joined already: what it skipped was lost. Each
		// agent's last seq is kept either way, for Lasts.
		if last, seen := f.lasts[name]; !seen || e.Seq > last {
			f.lasts[name] = e.Seq
			if f.Lost != nil && seen && e.Seq > last+1 && !event.Renumbered(e.Kind, e.Data) {
				f.Lost(name, last+1, e.Seq-1, int(e.Seq-last-1))
			}
		}
		return f.emit(e)
	}
	j := f.joins[string(agent)]
	if j == nil {
		if since, ok := f.starts[string(agent)]; ok {
			j = f.join(string(agent), since, false)
		} else {
			j = f.join(string(agent), 0, !f.FromStart)
		}
	}
	e.Agent = j.Agent
	fresh, err := j.Live(e.Seq, event.Renumbered(e.Kind, e.Data))
	if err != nil {
		if f.LogError == nil {
			return err
		}
		if err := f.LogError(j.Agent, err); err != nil {
			return err
		}
		j.Close()
		delete(f.joins, j.Agent)
		return f.emit(e)
	}
	if !fresh {
		return nil
	}
	return f.emit(e)
}

// join starts agent's join: from seq since, or (fromLive) at its first
// live envelope.
func (f *Follower) join(agent string, since uint64, fromLive bool) *eventlog.Join {
	if j := f.joins[agent]; j != nil {
		j.Close()
	}
	delete(f.starts, agent)
	emit := func(env *event.Envelope) error { return f.record(env) }
	var j *eventlog.Join
	if fromLive {
		j = eventlog.NewLiveJoin(agent, f.Log(agent), emit)
	} else {
		j = eventlog.NewJoin(agent, f.Log(agent), since, emit)
	}
	j.Lost, j.Bad = f.Lost, f.Bad
	f.joins[agent] = j
	return j
}

// record hands on an envelope from the log, encoded as the daemon
// encodes the envelopes it publishes.
func (f *Follower) record(env *event.Envelope) error {
	var err error
	if f.buf, err = event.AppendEnvelope(f.buf[:0], env); err != nil {
		return fmt.Errorf("agent %s seq %d: %w", env.AgentID, env.Seq, err)
	}
	f.rec = Envelope{Agent: env.AgentID, Seq: env.Seq, Kind: env.Kind, Turn: env.Turn, Raw: f.buf}
	// Data is where AppendEnvelope put it: after {"kind":K,"turn":N,"data":
	if _, ok := parse(f.buf, &f.rec); !ok {
		f.rec.Data = env.Data
	}
	f.rec.Agent = env.AgentID
	return f.emit(&f.rec)
}

// Close ends the follow and releases the logs.
func (f *Follower) Close() error {
	for _, j := range f.joins {
		j.Close()
	}
	clear(f.joins)
	return f.src.Close()
}

// Encode is env as a follower hands it on: encoded as the daemon encodes
// it. For a source that holds decoded envelopes, and for tests.
func Encode(env *event.Envelope) (*Envelope, error) {
	raw, err := event.AppendEnvelope(nil, env)
	if err != nil {
		return nil, err
	}
	e := &Envelope{}
	agent, ok := parse(raw, e)
	if !ok {
		return nil, fmt.Errorf("agent %q seq %d: not an envelope of an agent", env.AgentID, env.Seq)
	}
	e.Agent = string(agent)
	return e, nil
}
