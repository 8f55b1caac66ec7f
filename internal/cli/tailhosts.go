package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/kaimon/kaimon/internal/apitype"
	"github.com/kaimon/kaimon/internal/client"
	"github.com/kaimon/kaimon/internal/eventlog"
	"github.com/kaimon/kaimon/internal/fleet"
	"github.com/kaimon/kaimon/internal/follow"
	"github.com/kaimon/kaimon/internal/verbs"
)

// A tail of another host follows its daemon's GET /v1/events through the
// host's client (ssh), with follow.Remote: the daemon there joins each
// agent's envelopes with its log, and Remote reconnects a broken
// connection and resumes each agent by seq. This machine keeps the bus
// (follow.Dial), which costs no request and no copy through a socket.
//
// `tail --all-hosts` runs one follower per host (this machine and every
// configured one) into one printer, under one lock, so that lines are
// never interleaved; plain output stays bytes passed through, with the
// host's field put in front of each envelope's and its agent id
// qualified, without decoding it.

// tailHost is one host of a tail: its name, and how a merged stream marks
// its envelopes.
type tailHost struct {
	name string // fleet.Local or a configured host's name
	// tag is what a merged stream puts in place of each envelope's
	// opening brace: {"host":"NAME", ; nil in a stream of one host, whose
	// envelopes are passed on as they are.
	tag []byte
	// qual is what qualifies the host's agent ids in a merged stream
	// (NAME/, as fleet.Qualify: none on this machine).
	qual string
}

func newTailHost(name string, merged bool) *tailHost {
	h := &tailHost{name: name}
	if merged {
		b, _ := json.Marshal(name)
		h.tag = append(append([]byte(`{"host":`), b...), ',')
		h.qual = fleet.Qualify(name, "x")
		h.qual = h.qual[:len(h.qual)-1]
	}
	return h
}

// shown is agent as this host's envelopes show it: qualified in a merged
// stream.
func (h *tailHost) shown(agent string) string {
	if h == nil {
		return agent
	}
	return h.qual + agent
}

// pretty is agent as --pretty shows it in a merged stream: with its host
// always, this machine's as local/ID (which routes as any qualified id),
// so that every line says where it comes from.
func (h *tailHost) pretty(agent string) string {
	if h == nil || h.tag == nil {
		return agent
	}
	return h.name + "/" + agent
}

// agentField is where the daemon's encoding (event.AppendEnvelope) puts
// the agent id: after the data, at the end.
var agentField = []byte(`,"agent_id":"`)

// write writes e's bytes to w with the host's field first and the agent
// id qualified. The daemon's shape is edited in place; anything else is
// decoded and encoded again (never the daemon's, but a stream is read as
// JSON, not trusted to a shape).
func (h *tailHost) write(w io.Writer, e *follow.Envelope) error {
	raw := e.Raw
	a := bytes.LastIndex(raw, agentField)
	if len(raw) > 1 && raw[0] == '{' && a > 0 && bytes.HasPrefix(raw[a+len(agentField):], []byte(e.Agent+`"`)) {
		a += len(agentField)
		w.Write(h.tag)
		w.Write(raw[1:a])
		io.WriteString(w, h.qual)
		_, err := w.Write(raw[a:])
		return err
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return fmt.Errorf("host %s: envelope of agent %s seq %d: %w", h.name, e.Agent, e.Seq, err)
	}
	m["host"], _ = json.Marshal(h.name)
	m["agent_id"], _ = json.Marshal(h.shown(e.Agent))
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	_, err = w.Write(b)
	return err
}

// runTailRemote follows one channel of another host. A replay (--since,
// --from-start) reads the agent's log there first and ends; the live
// stream then resumes after the last seq replayed, so nothing falls
// between them, and --until-result judges the replay before going live as
// a tail of this machine does.
func runTailRemote(ctx context.Context, o *tailOptions, f *fleet.Fleet) error {
	if len(o.Channels) != 1 {
		return usagef("a tail of another host follows one channel (got %s): agent: is every agent", strings.Join(o.Channels, " "))
	}
	cl, err := f.Client(ctx, o.Host)
	if err != nil {
		return err
	}
	p := newTailPrinter(o)
	p.ctx = ctx
	if p.pretty != nil {
		defer p.pretty.stopSpinner()
	}
	h := newTailHost(o.Host, false)
	opts := follow.RemoteOptions{Retry: p.retrying(h)}
	var agent *verbs.AgentStatus
	if id := o.agent(); id != "" && (o.Replay || o.UntilResult) {
		p.only = id
		if agent, err = o.ask(ctx, cl, id); err != nil {
			return err
		}
		switch {
		case o.Replay && agent != nil:
			last, err := p.replayRemote(ctx, cl, id, o.Since, agent.Status == apitype.Dead)
			if err != nil {
				return p.end(err)
			}
			opts.Since = map[string]uint64{id: last}
		case o.Replay:
			opts.History = true // --wait: the agent's log, once it is opened, from its start
		}
	}
	if agent != nil {
		if err := p.settle(agent); err != nil {
			return p.end(err)
		}
	}
	fw, err := follow.Remote(ctx, cl, o.Channels[0], opts)
	if err != nil {
		return fleet.Cause(err)
	}
	defer fw.Close()
	fw.Only = p.only
	fw.Lost = func(agent string, from, to uint64, n int) { p.lost(h, agent, from, to, n) }
	fw.Idle = p.flush
	p.live = true
	err = fw.Run(ctx, p.emit)
	if ctx.Err() != nil {
		return p.end(nil)
	}
	return p.end(fleet.Cause(err))
}

// replayRemote prints agent id's log after seq since, as its host's daemon
// reads it, and returns the last seq printed (since when none). dead says
// no one writes that log any more.
func (p *tailPrinter) replayRemote(ctx context.Context, cl *client.Client, id string, since uint64, dead bool) (uint64, error) {
	w, err := cl.Events(ctx, id, since, false)
	if err != nil {
		return since, fleet.Cause(err)
	}
	defer w.Close()
	last := since
	for {
		env, err := w.Next()
		if errors.Is(err, io.EOF) {
			return last, nil
		}
		if err != nil {
			return last, fleet.Cause(err)
		}
		if env.Seq == 0 {
			continue // the daemon's note of a bad log line
		}
		e, err := follow.Encode(env)
		if err != nil {
			return last, err
		}
		if err := p.emit(e); err != nil {
			return last, err
		}
		last = env.Seq
	}
}

// lost says on stderr that deltas of agent on host h were lost: on this
// machine the bus dropped them for a slow reader; from another host, its
// daemon did, or the connection broke meanwhile. Either way the
// authoritative events among them were filled in from the agent's log.
func (p *tailPrinter) lost(h *tailHost, agent string, from, to uint64, n int) {
	p.flush()
	why := "the bus dropped them for this slow reader"
	if h != nil && !fleet.IsLocal(h.name) {
		why = fmt.Sprintf("host %s's daemon dropped them for this slow reader, or the connection broke", h.name)
	}
	fmt.Fprintf(p.o.Err, "kaimon: tail: lost %d streamed chunk(s) of agent %s (seq %d-%d): %s; the complete blocks follow\n",
		n, h.shown(agent), from, to, why)
}

// retrying says on stderr that host h's stream broke and is being
// reconnected: at the first attempt, and then every tenth, so that a long
// outage is not silent and not a flood either.
func (p *tailPrinter) retrying(h *tailHost) func(error, int) {
	return func(err error, attempt int) {
		if attempt != 1 && attempt%10 != 0 {
			return
		}
		p.flush()
		fmt.Fprintf(p.o.Err, "kaimon: tail: host %s: the stream broke (%v); reconnecting (attempt %d), resuming each agent where it was\n",
			h.name, fleet.Cause(err), attempt)
	}
}

// emitFrom prints e, an envelope of host h: with its host in a merged
// stream.
func (p *tailPrinter) emitFrom(h *tailHost, e *follow.Envelope) error {
	if p.ctx != nil && p.ctx.Err() != nil {
		return p.ctx.Err()
	}
	if !p.match(e) {
		return nil
	}
	if p.pretty != nil {
		env, err := e.Decode()
		if err != nil {
			return err
		}
		env.AgentID = h.pretty(env.AgentID)
		p.pretty.print(env)
		return nil
	}
	if err := h.write(p.out, e); err != nil {
		return err
	}
	return p.out.WriteByte('\n')
}

// rejoinMax bounds the wait between attempts to reach a host that could
// not be reached when the tail started.
const rejoinMax = 30 * time.Second

// runTailAll merges this machine and every configured host into one
// stream. The hosts are reached in parallel; one that cannot be reached
// is reported on stderr and tried again in the background (from 1 s,
// doubling, up to rejoinMax), its agents followed from when it answers;
// the tail ends with exit 1 at once only when no host at all answered.
// A host whose stream breaks later is reconnected by follow.Remote and
// resumed by seq: nothing authoritative is lost; so is this machine's
// daemon once it is back (run). A follower that ends (a host that
// refuses the request) is reported, the others go on; the tail exits 1
// once all have ended.
func runTailAll(ctx context.Context, o *tailOptions, f *fleet.Fleet) error {
	names, err := f.All()
	if err != nil {
		return err
	}
	p := newTailPrinter(o)
	p.ctx = ctx
	if p.pretty != nil {
		p.pretty.multi = true
		defer p.pretty.stopSpinner()
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	m := &tailMerge{p: p, cancel: cancel}
	type started struct {
		h   *tailHost
		fw  *follow.Follower
		err error
	}
	first := make([]started, len(names))
	var wg sync.WaitGroup
	for i, name := range names {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := started{h: newTailHost(name, true)}
			cl, err := f.Client(ctx, name)
			if err == nil {
				s.fw, err = m.start(ctx, s.h, cl)
			}
			s.err = err
			first[i] = s
		}()
	}
	wg.Wait()
	var failed []error
	for _, s := range first {
		if s.err != nil {
			failed = append(failed, fleet.Named(s.h.name, s.err))
		}
	}
	if len(failed) == len(names) {
		return errors.Join(failed...)
	}
	var run sync.WaitGroup
	for _, s := range first {
		run.Add(1)
		go func() {
			defer run.Done()
			if s.err != nil {
				m.note("kaimon: tail: %v; trying again in the background, its agents followed from when it answers\n", fleet.Named(s.h.name, s.err))
				s.fw = m.rejoin(ctx, f, s.h)
				if s.fw == nil {
					return
				}
			}
			m.run(ctx, f, s.h, s.fw)
		}()
	}
	run.Wait()
	if ctx.Err() != nil && m.err == nil {
		return p.end(nil) // interrupted: a normal end
	}
	if m.err != nil {
		return p.end(m.err)
	}
	p.end(nil)
	return errors.New("every host's stream ended (see above)")
}

// tailMerge is the printer shared by the followers of a merged tail.
type tailMerge struct {
	mu     sync.Mutex
	p      *tailPrinter
	cancel context.CancelFunc
	err    error // the first error of output, which ends every follower
}

// start starts host h's follower: the bus on this machine, GET
// /v1/events through cl elsewhere. Either is in force when it returns.
func (m *tailMerge) start(ctx context.Context, h *tailHost, cl *client.Client) (*follow.Follower, error) {
	ch := m.p.o.Channels[0]
	if fleet.IsLocal(h.name) {
		if _, err := cl.Up(ctx); err != nil {
			return nil, err
		}
		return follow.Dial(ctx, cl, []string{ch})
	}
	return follow.Remote(ctx, cl, ch, follow.RemoteOptions{Retry: func(err error, attempt int) {
		m.mu.Lock()
		defer m.mu.Unlock()
		m.p.retrying(h)(err, attempt)
	}})
}

// rejoin tries to reach host h until it answers (its follower) or ctx
// ends (nil).
func (m *tailMerge) rejoin(ctx context.Context, f *fleet.Fleet, h *tailHost) *follow.Follower {
	wait := time.Second
	for {
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
		wait = min(2*wait, rejoinMax)
		cl, err := f.Client(ctx, h.name) // a failure is not kept: this tries again
		if err != nil {
			continue
		}
		if fw, err := m.start(ctx, h, cl); err == nil {
			m.note("kaimon: tail: host %s answers: its agents are followed from now\n", h.name)
			return fw
		}
	}
}

// run hands host h's envelopes to the printer until ctx ends, output
// fails (which ends every host's) or h's stream ends (said on stderr).
// This machine's daemon going away is not an end: it is followed again
// once it is back (rejoinLocal).
func (m *tailMerge) run(ctx context.Context, f *fleet.Fleet, h *tailHost, fw *follow.Follower) {
	for fw != nil {
		m.hook(h, fw)
		err := fw.Run(ctx, m.emitter(h))
		lasts := fw.Lasts() // before Close, which lets the joins go
		fw.Close()
		var se *follow.SourceError
		switch {
		case ctx.Err() != nil:
			return
		case errors.As(err, &se) && fleet.IsLocal(h.name):
			m.note("kaimon: tail: this machine's daemon went away (%v); its agents are followed again when it is back\n", se.Err)
			fw = m.rejoinLocal(ctx, f, h, lasts)
		case errors.As(err, &se):
			m.note("kaimon: tail: the stream ended (%v); the other hosts' go on\n", fleet.Named(h.name, se.Err))
			return
		case err != nil:
			m.failed(err)
			return
		}
	}
}

// emitter is what hands host h's envelopes to the shared printer; its
// errors are outputErrors.
func (m *tailMerge) emitter(h *tailHost) follow.Emit {
	return func(e *follow.Envelope) error {
		m.mu.Lock()
		defer m.mu.Unlock()
		if err := m.p.emitFrom(h, e); err != nil {
			return &outputError{err}
		}
		return nil
	}
}

// outputError is an error of the merged tail's output, which ends every
// host's follow; it reads as the error it wraps.
type outputError struct{ err error }

func (e *outputError) Error() string { return e.err.Error() }
func (e *outputError) Unwrap() error { return e.err }

// hook sets what fw tells the printer besides envelopes: before any
// Replay or Run, as each agent's join takes them when it starts.
func (m *tailMerge) hook(h *tailHost, fw *follow.Follower) {
	fw.Lost = func(agent string, from, to uint64, n int) {
		m.mu.Lock()
		defer m.mu.Unlock()
		m.p.lost(h, agent, from, to, n)
	}
	fw.Idle = func() error {
		m.mu.Lock()
		defer m.mu.Unlock()
		return m.p.flush()
	}
	fw.Bad = func(agent string, b eventlog.Bad) {
		m.note("kaimon: tail: agent %s: event log %v; skipped\n", h.shown(agent), b)
	}
	// A log of this machine that cannot be read to fill a gap: say so and
	// go on, as one host's fault must not end the others' stream.
	fw.LogError = func(agent string, err error) error {
		m.note("kaimon: tail: agent %s: %v; its stream goes on from here\n", h.shown(agent), err)
		return nil
	}
}

// failed ends every host's follow with err, the first error of output.
func (m *tailMerge) failed(err error) {
	m.mu.Lock()
	if m.err == nil {
		m.err = err
	}
	m.mu.Unlock()
	m.cancel()
}

// rejoinLocal waits for this machine's daemon to be back (it never starts
// one: a tail is no reason to) and follows it again, each agent seen
// before resumed after the seq it was at (lasts): what its log gained
// meanwhile (a lost daemon's ending, which the next one writes) is
// printed first, so nothing authoritative falls in the break. It asks
// every rejoinLocalEvery, a Ping on a local socket being cheap, so that
// the agents a new daemon opens are joined from their start. Nil when
// ctx ends first, or output failed.
func (m *tailMerge) rejoinLocal(ctx context.Context, f *fleet.Fleet, h *tailHost, lasts map[string]uint64) *follow.Follower {
	tick := time.NewTicker(rejoinLocalEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		cl, err := f.Client(ctx, h.name)
		if err != nil {
			continue
		}
		if _, err := cl.Ping(ctx); err != nil {
			continue
		}
		fw, err := follow.Dial(ctx, cl, []string{m.p.o.Channels[0]})
		if err != nil {
			continue
		}
		m.hook(h, fw)
		emit := m.emitter(h)
		for agent, seq := range lasts {
			err := fw.Replay(agent, seq, emit)
			switch {
			case ctx.Err() != nil:
				fw.Close()
				return nil
			case errors.As(err, new(*outputError)):
				fw.Close()
				m.failed(err)
				return nil
			case err != nil:
				m.note("kaimon: tail: agent %s: %v; its stream goes on from here\n", h.shown(agent), err)
			}
		}
		m.note("kaimon: tail: this machine's daemon is back: its agents are followed again from where they were\n")
		return fw
	}
}

// rejoinLocalEvery is how often a merged tail asks whether this machine's
// daemon is back.
const rejoinLocalEvery = time.Second

// note writes a line on stderr, after what output holds.
func (m *tailMerge) note(format string, a ...any) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.p.flush()
	fmt.Fprintf(m.p.o.Err, format, a...)
}
