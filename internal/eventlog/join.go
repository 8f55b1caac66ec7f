package eventlog

import "github.com/kaimon/kaimon/internal/event"

// Join puts one agent's envelopes in seq order, with no gap and no
// duplicate, from two sources: its log (authoritative events only, written
// before they are published) and the live stream (everything, deltas
// included, but only from the moment of subscribing, and minus what a full
// queue dropped).
//
// The caller subscribes to the live stream first and holds what arrives,
// then calls Replay, which emits the log after the start seq, then hands
// the seq of every live envelope to Live. Live skips what was already
// emitted (seq at or below the last one) and fills a jump in seq from the
// log; since the log is written before publishing, every authoritative
// event below a live seq is in it by then. What the log cannot fill were
// deltas: after the first live envelope that is a loss (reported to Lost);
// before it, it is only what streamed before the subscription began.
//
// The join sees only the live envelope's seq, and the caller emits the
// envelope itself when Live says so: a caller that holds the bytes the
// bus sent passes them on as they came, one that holds a decoded
// envelope passes that. It lives here, beside the log it reads, so that
// both the daemon's events route and the CLI's follower use it.
type Join struct {
	Agent string
	// Emit receives the log's envelopes (Replay, and what fills a gap);
	// an error stops the join.
	Emit func(*event.Envelope) error
	// Lost, if set, hears of deltas lost in a gap: n envelopes of seq
	// from..to that the log does not hold.
	Lost func(agent string, from, to uint64, n int)
	// Bad, if set, hears of each line of the log that is not a record
	// (torn or damaged), which the join skips.
	Bad func(agent string, b Bad)

	cur  *Cursor
	last uint64
	live bool
	// fromLive starts the stream at the first live envelope.
	fromLive bool
}

// NewJoin joins agent's log at logPath (from seq since+1) with live
// envelopes.
func NewJoin(agent, logPath string, since uint64, emit func(*event.Envelope) error) *Join {
	j := &Join{Agent: agent, Emit: emit, cur: NewCursor(logPath), last: since}
	j.cur.Bad = func(b Bad) {
		if j.Bad != nil {
			j.Bad(j.Agent, b)
		}
	}
	return j
}

// NewLiveJoin is a join that starts at the first live envelope, for a
// consumer that wants no history: the log only fills later gaps.
func NewLiveJoin(agent, logPath string, emit func(*event.Envelope) error) *Join {
	j := NewJoin(agent, logPath, 0, emit)
	j.fromLive = true
	return j
}

// Last is the seq of the last envelope emitted (the start seq before any).
func (j *Join) Last() uint64 { return j.last }

// Replay emits the log's records after the last seq emitted.
func (j *Join) Replay() error {
	return j.cur.Read(j.last, 0, j.emitRecord)
}

// Skip moves past the log's records without emitting them: the join then
// starts at the agent's end as the log has it now (what is live from here
// on is emitted, and gaps are filled from the log as ever). Bad does not
// hear of the lines skipped. It reads the log from its end, not through.
func (j *Join) Skip() error {
	last, ok, err := j.cur.SkipToEnd()
	if ok && last > j.last {
		j.last = last
	}
	return err
}

func (j *Join) emitRecord(r *event.Record) error {
	e := r.Envelope(j.Agent)
	j.last = r.Seq
	return j.Emit(&e)
}

// Torn reports a last line of the log without its newline to Bad: for a
// reader who is done with a log no one writes any more (a dead agent's),
// where it can only be torn.
func (j *Join) Torn() {
	if b, ok := j.cur.Trailing(); ok && j.Bad != nil {
		j.Bad(j.Agent, b)
	}
}

// Live takes the seq of one live envelope of this agent (and whether a
// jump in seq up to it is a renumbering, event.Renumbered): it emits what
// the log holds before it that was not emitted yet, and reports whether
// the live envelope is new, which the caller then emits (after the log's,
// so in order); false is a duplicate, to drop. A jump up to a renumbered
// envelope (live, or filled from the log) is not counted as lost (see
// event.Renumbered); Lost hears of the other gaps the log cannot fill, as
// one report: their count, from the first seq missing to the last.
func (j *Join) Live(seq uint64, renumbered bool) (fresh bool, err error) {
	if j.fromLive && !j.live {
		j.last = seq - 1
	}
	if seq <= j.last {
		return false, nil
	}
	if seq > j.last+1 {
		var g gaps
		prev := j.last
		err := j.cur.Read(j.last, seq, func(r *event.Record) error {
			if r.Seq <= prev {
				return nil // a damaged log's repeat: emitted already
			}
			g.add(prev, r.Seq, event.Renumbered(r.Kind, r.Data))
			prev = r.Seq
			return j.emitRecord(r)
		})
		if err != nil {
			return false, err
		}
		g.add(prev, seq, renumbered)
		if g.n > 0 && j.live && j.Lost != nil {
			j.Lost(j.Agent, g.from, g.to, int(g.n))
		}
	}
	j.live = true
	j.last = seq
	return true, nil
}

// gaps sums the seqs missing between envelopes: n of them, from the first
// to the last.
type gaps struct{ n, from, to uint64 }

// add takes the seqs missing between prev and next (next > prev), unless
// next is renumbered (event.Renumbered).
func (g *gaps) add(prev, next uint64, renumbered bool) {
	if renumbered || next <= prev+1 {
		return
	}
	if g.n == 0 {
		g.from = prev + 1
	}
	g.n += next - prev - 1
	g.to = next - 1
}

// Close releases the log file.
func (j *Join) Close() error { return j.cur.Close() }
