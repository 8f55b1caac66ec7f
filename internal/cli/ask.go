package cli

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/kaimon/kaimon/internal/apitype"
	"github.com/kaimon/kaimon/internal/event"
	"github.com/kaimon/kaimon/internal/verbs"
)

// asker asks the person at the terminal the permission requests of a
// turn it renders (`kaimon run`, `kaimon chat` with stdin and stdout a
// terminal), one at a time, and answers each with agent_permit: the
// answer is given where the question is read, not in another terminal.
// A request decided meanwhile (by `kaimon permit` elsewhere, the monitor,
// the timeout) is no longer asked. When stdin ends (Ctrl-D), questions
// are told as a run without a terminal tells them: with the command that
// answers them.
//
// The turn's loop drives it: asks brings the follower's permission
// events, lines the person's answer while a question waits, permits
// agent_permit's outcome.
type asker struct {
	ctx   context.Context
	svc   verbs.Service
	id    string // the agent, as the service takes it
	shown string // as the person typed it (HOST/ID)
	ios   *IOStreams
	p     *pretty
	runs  *sync.WaitGroup // the turn's: agent_permit's calls are waited for as agent_run's

	asks    chan *event.PermissionData
	permits chan error

	asking  *event.PermissionData
	askedAt time.Time
	queue   []*event.PermissionData
	off     bool // stdin ended
}

func newAsker(ctx context.Context, svc verbs.Service, id, shown string, ios *IOStreams, p *pretty, runs *sync.WaitGroup) *asker {
	return &asker{ctx: ctx, svc: svc, id: id, shown: shown, ios: ios, p: p, runs: runs,
		asks: make(chan *event.PermissionData, 256), permits: make(chan error, 16)}
}

// take is the follower's: a permission event of the agent, pending or
// decided. It never blocks the follower: a question beyond what the
// channel holds is told as without a terminal.
func (a *asker) take(e *event.Envelope, d *event.PermissionData) {
	if d.Decision != "" {
		a.p.print(e) // its outcome, as a run renders it
	} else {
		a.p.waiting(e) // the spinner: waiting for permission
	}
	select {
	case a.asks <- d:
	default:
		if d.Decision == "" {
			a.p.print(e)
		}
	}
}

// lines is where the answer comes from while a question waits; nil
// (waits forever in a select) otherwise.
func (a *asker) lines() <-chan inputLine {
	if a.asking == nil || a.off {
		return nil
	}
	return a.ios.Lines()
}

// got takes a permission event from asks.
func (a *asker) got(d *event.PermissionData) {
	same := func(q *event.PermissionData) bool { return q.RequestID == d.RequestID }
	asked := a.asking != nil && same(a.asking)
	if d.Decision != "" {
		if asked {
			a.asking = nil // its outcome, rendered, ended the question's line
			a.next()
			return
		}
		a.queue = slices.DeleteFunc(a.queue, same)
		return
	}
	switch {
	case asked, slices.ContainsFunc(a.queue, same):
		// Asked already, or waiting its turn: the stream said it again.
	case a.asking != nil:
		a.queue = append(a.queue, d)
	default:
		a.show(d)
	}
}

// show asks d.
func (a *asker) show(d *event.PermissionData) {
	a.asking = d
	if a.off || !a.ios.inForeground() {
		a.p.say(a.p.pal.permissionLines("? ", a.shown, d))
		a.asking = nil
		a.next()
		return
	}
	a.ios.dropTypedAhead()
	a.p.ask(askLines(a.p.pal, a.shown, d))
	a.askedAt = time.Now()
}

// next asks the first of the queue, if any.
func (a *asker) next() {
	if len(a.queue) > 0 && a.asking == nil {
		d := a.queue[0]
		a.queue = a.queue[1:]
		a.show(d)
	}
}

// askLines is the question: what the agent asks for, and the answers.
func askLines(pal *palette, shown string, d *event.PermissionData) string {
	s := askedLine(pal, "? ", shown, d) + "\n  " + pal.bold.Sprint("allow?") + " [y]es / [n]o"
	if offersAlways(d) {
		s += " / [a]lways"
	}
	if d.ExpiresAt != "" {
		s += pal.faint.Sprintf(" (denied if unanswered by %s)", until(d.ExpiresAt))
	}
	return s + " "
}

// until is an expiry (RFC 3339) as a person reads it: the local time of
// day, or as it came if it is not a time.
func until(expires string) string {
	t, err := time.Parse(time.RFC3339Nano, expires)
	if err != nil {
		return expires
	}
	return t.Local().Format("15:04:05")
}

// offersAlways says whether the request can be allowed for good: the
// agent offers such an option, or offers none of its own (kaimon's
// default options have it).
func offersAlways(d *event.PermissionData) bool {
	return len(d.Options) == 0 || slices.ContainsFunc(d.Options, func(o event.PermissionOption) bool { return o.Kind == "allow_always" })
}

// answer takes a line the person typed; ok false: stdin ended.
func (a *asker) answer(l inputLine, ok bool) {
	if !ok {
		// Ctrl-D: no one answers here any more. The question stays the
		// daemon's until its timeout: say how to answer it.
		a.off = true
		d := a.asking
		a.asking = nil
		a.p.answered()
		a.show(d)
		return
	}
	if l.at.Before(a.askedAt) {
		return // typed before the question: not its answer
	}
	a.p.answered()
	var decision apitype.Decision
	always := false
	switch strings.ToLower(strings.TrimSpace(l.text)) {
	case "y", "yes":
		decision = apitype.Allow
	case "n", "no":
		decision = apitype.Deny
	case "a", "always":
		if offersAlways(a.asking) {
			decision, always = apitype.Allow, true
		}
	}
	if decision == "" {
		choices := "y or n"
		if offersAlways(a.asking) {
			choices = "y, n or a"
		}
		a.p.ask(fmt.Sprintf("  answer %s: ", choices))
		a.askedAt = time.Now()
		return
	}
	req := a.asking.RequestID
	a.asking = nil
	a.runs.Add(1)
	go func() {
		defer a.runs.Done()
		ctx, cancel := context.WithTimeout(a.ctx, 30*time.Second)
		defer cancel()
		_, err := a.svc.Permit(ctx, &verbs.PermitArgs{AgentID: a.id, RequestID: req, Decision: decision, Always: always})
		a.permits <- err
	}()
	a.next()
}

// permitted takes agent_permit's outcome: a failure (the request was
// decided meanwhile, the daemon went away) is said; a success shows as
// the request's outcome on the stream.
func (a *asker) permitted(err error) {
	if err != nil {
		a.p.note(a.ios.ErrOut, "kaimon: permit: "+err.Error())
	}
}
