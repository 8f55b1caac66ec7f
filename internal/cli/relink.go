package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/kaimon/kaimon/internal/apitype"
	"github.com/kaimon/kaimon/internal/client"
	"github.com/kaimon/kaimon/internal/event"
	"github.com/kaimon/kaimon/internal/fleet"
	"github.com/kaimon/kaimon/internal/verbs"
)

// A run on another host holds one request, agent_run, over ssh. When the
// link breaks under it (the ssh master killed, the link down long enough
// for ssh's keep-alives to give up), the answer is lost but the turn is
// not: the daemon there, and its agent, go on. So the run reaches the host
// again, asks the agent's state, and follows the turn on the agent's events
// from where it was (seq) to its result, answering as agent_run would
// have. A daemon there that did crash is what the host then says: the
// agent dead (daemon crashed), and the run says so as for this machine's.

// relinkTries bounds the tries in a row to reach the host again; the
// pause before each after the first doubles from relinkPause. Each try is
// bounded by relinkWait: ssh gives up on a dead link within its connect
// timeout (8 s), and the remote daemon may have to start.
const (
	relinkTries = 3
	relinkPause = time.Second
	relinkWait  = 10 * time.Second
)

// codeLinkLost is the --json error code of a run whose host's link was lost
// (exit ExitLinkLost).
const codeLinkLost = "link_lost"

// linkLostError ends a run whose host's link broke during the turn and
// could not be made again: the agent there may well be working still, and
// the turn's end is not known here.
type linkLostError struct {
	host, id string // id as shown: HOST/ID
	err      error  // the link's last failure
	// notSent: the host answered, and the agent has no turn with the
	// run's text: the link broke before the turn reached it.
	notSent   bool
	throwaway bool // run -C's agent, which is left open there
}

func (e *linkLostError) Error() string {
	if e.notSent {
		return fmt.Sprintf("the link to host %s broke before the turn reached agent %s (%v): the agent has no such turn, so nothing ran; run it again",
			e.host, e.id, said(e.err))
	}
	s := fmt.Sprintf("the link to host %s was lost during the turn of agent %s and could not be made again in %d tries (%v); "+
		"its daemon and the agent there may be working on: once the host answers, `kaimon status %s` says how the agent is "+
		"and `kaimon output %s` gives the turn's reply", e.host, e.id, relinkTries, said(e.err), e.id, e.id)
	if e.throwaway {
		s += fmt.Sprintf("; run -C's throwaway is left open there: `kaimon close %s`", e.id)
	}
	return s
}

func (e *linkLostError) Unwrap() error { return e.err }

// said is what err says of a link, without naming its host again.
func said(err error) string {
	var le *fleet.LinkError
	if errors.As(err, &le) {
		return le.Said()
	}
	return err.Error()
}

// relinker is what following a turn again needs of the service: a fleet's
// events, by seq.
type relinker interface {
	verbs.Service
	Events(ctx context.Context, id string, since uint64, follow bool) (*client.Watcher, error)
}

// relink follows the run's turn again after the link to its host broke
// (le) while agent_run waited on it, until deadline (the run's --timeout
// from its start): the host reached again (relinkTries in a row at most),
// the agent's state asked, the run's turn found (the follower's, else the
// last in the agent's log with the run's text), and its events followed
// from the last the follower read (rendered when live) to its result. It
// answers as agent_run would have, with the result's envelope for the usage
// line. The follower must not be following meanwhile.
func (f *follower) relink(ctx context.Context, cl verbs.Service, le *fleet.LinkError, deadline time.Time, timeout time.Duration) (*verbs.RunResult, *event.Envelope, error) {
	rs, ok := cl.(relinker)
	if !ok {
		return nil, nil, le
	}
	f.linkHost = le.Host
	f.p.note(f.errw, fmt.Sprintf("kaimon: the link to host %s broke during the turn of agent %s (%s); reconnecting, to follow the turn there", le.Host, f.id, le.Said()))
	f.p.interrupted()
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	var lastErr error = le
	var result *event.Envelope // the turn's, once read: what is left is its text
	select {
	case result = <-f.result: // read before the link broke, with agent_run's answer lost
	default:
	}
	for try := 1; ; try++ {
		if try > relinkTries {
			return nil, nil, &linkLostError{host: le.Host, id: f.id, err: lastErr}
		}
		if try > 1 {
			t := time.NewTimer(relinkPause << (try - 2))
			select {
			case <-ctx.Done():
				t.Stop()
			case <-t.C:
			}
		}
		res, err := f.relinkOnce(ctx, rs, &result)
		switch {
		case err == nil:
			return res, result, nil
		case ctx.Err() != nil && errors.Is(context.Cause(ctx), context.DeadlineExceeded) && f.turn != 0:
			// --timeout: the turn goes on there, as agent_run says.
			return nil, nil, verbs.RunTimedOut(f.id, f.turn, timeout.Seconds(), f.textOf(ctx, rs))
		case ctx.Err() != nil:
			return nil, nil, ctx.Err()
		}
		var ll *fleet.LinkError
		var nf *linkLostError
		switch {
		case errors.As(err, &nf):
			return nil, nil, err
		case errors.As(err, &ll):
			lastErr = ll
		default:
			return nil, nil, err // the host answered, and refused
		}
		if f.progressed {
			try = 1 // the host answered: a new break gets its own tries, after a pause
		}
	}
}

// relinkOnce is one try of relink: it returns agent_run's answer, or the
// error that ended the try (a LinkError to try again after). result keeps
// the turn's result across tries.
func (f *follower) relinkOnce(ctx context.Context, rs relinker, result **event.Envelope) (*verbs.RunResult, error) {
	f.progressed = false
	tctx, cancel := context.WithTimeout(ctx, relinkWait)
	st, err := rs.Status(tctx, &verbs.StatusArgs{AgentID: f.id})
	timedOut := tctx.Err() != nil && ctx.Err() == nil
	cancel()
	switch {
	case err != nil && timedOut:
		return nil, &fleet.LinkError{Host: f.linkHost, Err: fmt.Errorf("no answer within %s", relinkWait)}
	case err != nil:
		return nil, err
	}
	f.progressed = true
	if f.turn == 0 {
		if err := f.findTurn(ctx, rs); err != nil {
			return nil, err
		}
		if f.turn == 0 {
			return nil, &linkLostError{host: f.linkHost, id: f.id, err: fmt.Errorf("agent %s is %s at turn %d", f.id, st.Status, st.Turn), notSent: true}
		}
	}
	if *result == nil {
		w, err := rs.Events(ctx, f.id, f.seq, true)
		if err != nil {
			return nil, err
		}
		stop := context.AfterFunc(ctx, func() { w.Close() })
		e, died, err := f.read(w)
		stop()
		w.Close()
		switch {
		case died:
			return nil, verbs.RunDied(f.id, f.turn, f.textOf(ctx, rs))
		case e == nil && ctx.Err() != nil:
			return nil, ctx.Err()
		case e == nil && err == nil:
			err = errors.New("the event stream ended")
		}
		if e == nil {
			return nil, &fleet.LinkError{Host: f.linkHost, Err: err}
		}
		*result = e
	}
	var d event.ResultData
	_ = json.Unmarshal((*result).Data, &d)
	o, err := rs.Output(ctx, f.outputArgs())
	if err != nil {
		return nil, err
	}
	res, err := verbs.RunEnded(f.id, f.turn, d.StopReason, d.Error, o.Text)
	var ve *verbs.Error
	if st.Status == apitype.Dead && errors.As(err, &ve) {
		// The daemon there did go (crashed: the next one ended the
		// turn so), or the agent did: what this machine's run says.
		e := *ve
		e.Message += fmt.Sprintf("; agent %s is dead (%s): `kaimon open --id %s --resume` continues its conversation", f.id, st.Reason, f.id)
		return nil, &e
	}
	return res, err
}

// findTurn sets the follower's turn to the last in the agent's log whose
// user_text is the run's, and its seq to where that turn's events begin;
// it leaves the turn 0 when there is none. A live run's stream was open
// before the turn was sent: the turn is after what it read.
func (f *follower) findTurn(ctx context.Context, rs relinker) error {
	from := uint64(0)
	if f.live {
		from = f.seq
	}
	w, err := rs.Events(ctx, f.id, from, false)
	if err != nil {
		return err
	}
	defer w.Close()
	for {
		e, err := w.Next()
		if err != nil {
			if ctx.Err() == nil && !errors.Is(err, io.EOF) {
				return &fleet.LinkError{Host: f.linkHost, Err: err}
			}
			return ctx.Err()
		}
		if e.Kind != event.UserText {
			continue
		}
		var d event.TextData
		if json.Unmarshal(e.Data, &d) == nil && d.Content.Text == f.text {
			f.turn = e.Turn
			f.seq = e.Seq - 1 // the live view renders the turn from its start
		}
	}
}

// textOf is the run's turn's reply so far, "" when it cannot be read.
func (f *follower) textOf(ctx context.Context, rs relinker) string {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), relinkWait)
	defer cancel()
	o, err := rs.Output(ctx, f.outputArgs())
	if err != nil {
		return ""
	}
	return o.Text
}

// outputArgs ask for the run's turn's reply, whole, as agent_run gives it.
func (f *follower) outputArgs() *verbs.OutputArgs {
	return &verbs.OutputArgs{AgentID: f.id, Turn: f.turn, Which: verbs.WhichLastMessage, MaxChars: int(verbs.MaxCharsRange.Max)}
}

// isDead says whether e is a status event saying the agent is dead.
func isDead(e *event.Envelope) bool {
	if e.Kind != event.Status {
		return false
	}
	var d event.StatusData
	return json.Unmarshal(e.Data, &d) == nil && d.Status == apitype.Dead
}
