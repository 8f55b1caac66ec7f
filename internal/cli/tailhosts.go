package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
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
// `tail --all-hosts` merges one follower per host (this machine and every
// configured one) into one printer (follow.Merge, which hands it one
// envelope at a time, so that lines are never interleaved); plain output
// stays bytes passed through, with the host's field put in front of each
// envelope's and its agent id qualified, without decoding it
// (follow.Envelope.AppendHosted).

// tailHost is one host of a tail: its name, and how a merged stream marks
// its envelopes.
type tailHost struct {
	name string // fleet.Local or a configured host's name
	// merged says the stream is of many hosts: each envelope says its
	// host; in a stream of one, they are passed on as they are.
	merged bool
	// qual is what qualifies the host's agent ids in a merged stream
	// (NAME/, as fleet.Qualify: none on this machine).
	qual string
}

func newTailHost(name string, merged bool) *tailHost {
	h := &tailHost{name: name, merged: merged}
	if merged {
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
	if h == nil || !h.merged {
		return agent
	}
	return h.name + "/" + agent
}

// write writes e's bytes to p's output with the host's field first and
// the agent id qualified (follow.Envelope.AppendHosted).
func (h *tailHost) write(p *tailPrinter, e *follow.Envelope) error {
	var err error
	if p.line, err = e.AppendHosted(p.line[:0], h.name, h.shown(e.Agent)); err != nil {
		return fmt.Errorf("host %s: %w", h.name, err)
	}
	p.line = append(p.line, '\n')
	_, err = p.out.Write(p.line)
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
	opts := follow.RemoteOptions{Broke: p.retrying(h)}
	var agent *verbs.AgentStatus
	if id := o.agent(); id != "" && (o.Replay || o.UntilResult) {
		if agent, err = o.ask(ctx, cl, id); err != nil {
			return err
		}
		if agent != nil && agent.AgentID != "" {
			id = agent.AgentID // the whole id a unique prefix named
		}
		p.only = id
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
	return h.write(p, e)
}

// How long a merged tail waits for a host it lost: one not reached is
// asked again from 1 s, doubling up to 30 s (each attempt may cost an ssh
// connect timeout), and may start the host's daemon, as the tail's first
// attempt did; this machine's daemon gone away is looked for every second
// (a Ping on a local socket is cheap) and never started: a tail is no
// reason to. Rejoined, each agent seen before resumes where it was, and
// one opened meanwhile from its start (follow.Merge).
var (
	tailUnreachable = follow.Retry{Every: time.Second, Max: 30 * time.Second, Start: true}
	tailLocalGone   = follow.Retry{Every: time.Second}
)

// runTailAll merges this machine and every configured host into one
// stream (follow.Merge). The hosts are reached in parallel; one that
// cannot be reached is reported on stderr and tried again in the
// background, its agents followed from when it answers; the tail ends
// with exit 1 at once only when no host at all answered. A host whose
// stream breaks later is reconnected by follow.Remote and resumed by
// seq: nothing authoritative is lost; so is this machine's daemon once
// it is back, each of its agents resumed from its log where it was. A
// host that refuses the request is reported and the others go on; the
// tail exits 1 once all have ended.
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
	ch := o.Channels[0]
	shown := map[string]*tailHost{}
	hosts := make([]follow.Host, len(names))
	for i, name := range names {
		shown[name] = newTailHost(name, true)
		hosts[i] = follow.Host{Name: name, Unreachable: tailUnreachable,
			Dial: func(ctx context.Context, a follow.Attempt) (*follow.Follower, error) {
				fw, err := dialTail(ctx, f, name, ch, a)
				if err != nil {
					return nil, fleet.Named(name, err)
				}
				return fw, nil
			}}
		if fleet.IsLocal(name) {
			hosts[i].Gone = tailLocalGone
		}
	}
	err = follow.Merge(ctx, hosts, follow.Sink{
		NeedOne: true,
		Emit:    func(host string, e *follow.Envelope) error { return p.emitFrom(shown[host], e) },
		Note:    func(n follow.Note) { p.note(shown[n.Host], n) },
		Lost: func(host, agent string, from, to uint64, n int) {
			p.lost(shown[host], agent, from, to, n)
		},
		Bad: func(host, agent string, b eventlog.Bad) {
			p.flush()
			fmt.Fprintf(p.o.Err, "kaimon: tail: agent %s: event log %v; skipped\n", shown[host].shown(agent), b)
		},
		Idle: p.flush,
	})
	if errors.Is(err, follow.ErrEnded) {
		p.end(nil)
		return errors.New("every host's stream ended (see above)")
	}
	return p.end(err)
}

// dialTail starts the follower of host name for a merged tail: the bus
// on this machine (its daemon started if a allows, else only asked), GET
// /v1/events through ssh elsewhere, resumed where a says.
func dialTail(ctx context.Context, f *fleet.Fleet, name, ch string, a follow.Attempt) (*follow.Follower, error) {
	if !fleet.IsLocal(name) {
		return follow.RemoteDial(func(ctx context.Context) (*client.Client, error) { return f.Client(ctx, name) }, ch)(ctx, a)
	}
	cl, err := f.Client(ctx, name)
	if err != nil {
		return nil, err
	}
	if a.Start {
		_, err = cl.Up(ctx)
	} else {
		_, err = cl.Ping(ctx)
	}
	if err != nil {
		return nil, err
	}
	return follow.Dial(ctx, cl, []string{ch})
}

// note tells on stderr what became of host h's connection.
func (p *tailPrinter) note(h *tailHost, n follow.Note) {
	var msg string
	switch n.Kind {
	case follow.Unreachable:
		msg = fmt.Sprintf("%v; trying again in the background, its agents followed from when it answers", n.Err)
	case follow.Connected:
		switch {
		case n.After == follow.Unreachable:
			msg = fmt.Sprintf("host %s answers: its agents are followed from now", h.name)
		case n.After == follow.Gone && fleet.IsLocal(h.name):
			msg = "this machine's daemon is back: its agents are followed again from where they were"
		case n.After == follow.Gone:
			msg = fmt.Sprintf("host %s is back: its agents are followed again from where they were", h.name)
		}
	case follow.Broke:
		p.retrying(h)(n.Err, n.Attempt)
	case follow.Gone:
		if fleet.IsLocal(h.name) {
			msg = fmt.Sprintf("this machine's daemon went away (%v); its agents are followed again when it is back", n.Err)
		} else {
			msg = fmt.Sprintf("%v; its agents are followed again when it is back", fleet.Named(h.name, n.Err))
		}
	case follow.Ended:
		msg = fmt.Sprintf("the stream ended (%v); the other hosts' go on", fleet.Named(h.name, n.Err))
	case follow.LogError:
		msg = fmt.Sprintf("agent %s: %v; its stream goes on from here", h.shown(n.Agent), n.Err)
	}
	if msg != "" {
		p.flush()
		fmt.Fprintf(p.o.Err, "kaimon: tail: %s\n", msg)
	}
}
