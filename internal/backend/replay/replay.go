package replay

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/kaimon/kaimon/internal/apitype"
	"github.com/kaimon/kaimon/internal/backend"
	"github.com/kaimon/kaimon/internal/event"
)

// Backend replays a recording as a live agent. Each Send plays the next
// recorded turn, whatever its text (the recorded prompt is not compared:
// a replay answers as it was recorded). Sends during a turn queue, as
// with the other backends.
type Backend struct {
	o     backend.Options
	sink  backend.Sink
	rec   *Recording
	speed float64

	// mu orders everything the backend emits (Send's opening events and
	// the playing turn's) and guards the fields below. Info never takes
	// it: the session calls Info while it publishes.
	mu      sync.Mutex
	turns   backend.Turns
	started bool
	closed  bool
	cancel  context.CancelFunc // stops the turn playing
	wg      sync.WaitGroup

	// sleep waits d unless ctx ends first (false); tests replace it to
	// see the pacing without waiting for it.
	sleep func(ctx context.Context, d time.Duration) bool

	infoMu sync.Mutex
	pos    int // recorded turns taken so far: the next one is Turns[pos]

	closeOnce sync.Once
}

// SessionPrefix starts a replay agent's session id, replay@N: N recorded
// turns are replayed, and a resumed agent goes on with turn N+1.
const SessionPrefix = "replay@"

// New reads the recording o.Model names (relative to o.Cwd), so that a
// missing or damaged one fails agent_open, not the first turn.
func New(o backend.Options, sink backend.Sink) (*Backend, error) {
	if err := o.Check(); err != nil {
		return nil, err
	}
	m, err := ParseModel(o.Model)
	if err != nil {
		return nil, err
	}
	if f := o.Fork; f != nil && !filepath.IsAbs(m.Path) && Resolve(m.Path, f.Cwd) != Resolve(m.Path, o.Cwd) {
		// The model inherited names the recording relative to the
		// forked agent's cwd; the fork's record would keep it so.
		return nil, fmt.Errorf("replay: the recording %s is relative to agent %s's cwd %s, not to the fork's %s: fork with --model replay:<absolute path>",
			m.Path, f.AgentID, f.Cwd, o.Cwd)
	}
	rec, err := Load(Resolve(m.Path, o.Cwd))
	if err != nil {
		return nil, err
	}
	b := &Backend{o: o, sink: sink, rec: rec, speed: m.Speed, sleep: sleep}
	// A resume goes on from the turn its session is at; a fork from the
	// turn the forked agent's is at, each then on its own.
	session, what := o.ResumeSession, "resume"
	if o.Fork != nil {
		session, what = o.Fork.Session, "fork"
	}
	if session != "" {
		n, err := strconv.Atoi(strings.TrimPrefix(session, SessionPrefix))
		if err != nil || !strings.HasPrefix(session, SessionPrefix) || n < 0 || n > len(rec.Turns) {
			return nil, fmt.Errorf("replay: cannot %s session %q with the recording %s (%d turns): want %s<turns replayed>", what, session, rec.Path, len(rec.Turns), SessionPrefix)
		}
		b.pos = n
	}
	return b, nil
}

// Start has nothing to spawn: the recording was read by New.
func (b *Backend) Start(ctx context.Context) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return errors.New("replay: closed before it started")
	}
	b.started = true
	return nil
}

// Send opens turn (or queues it behind the one playing) and plays the
// next recorded turn as it.
func (b *Backend) Send(turn int, text string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case b.closed:
		return errors.New("replay: the agent is closed")
	case !b.started:
		return errors.New("replay: not started")
	}
	evs, active := b.turns.Push(turn, text)
	for _, ev := range evs {
		b.sink.Emit(ev)
	}
	if active {
		b.play(turn)
	}
	return nil
}

// play starts live turn n playing the next recorded turn; mu held.
func (b *Backend) play(n int) {
	b.infoMu.Lock()
	i := b.pos
	if i < len(b.rec.Turns) {
		b.pos++
	}
	b.infoMu.Unlock()
	ctx, cancel := context.WithCancel(context.Background())
	b.cancel = cancel
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		defer cancel()
		b.finish(b.run(ctx, n, i))
	}()
}

// run replays recorded turn i as live turn n and returns its result: the
// recorded one, or cancelled when interrupted or closed.
func (b *Backend) run(ctx context.Context, n, i int) event.Event {
	if i >= len(b.rec.Turns) {
		msg := fmt.Sprintf("the recording has no turn %d: its %d turn(s) have all been replayed (%s); open the agent again, without --resume, to replay it from the start",
			i+1, len(b.rec.Turns), b.rec.Path)
		return event.New(event.Result, n, event.ResultData{StopReason: apitype.StopError, Error: msg})
	}
	cancelled := event.New(event.Result, n, event.ResultData{StopReason: apitype.StopCancelled})
	t := &b.rec.Turns[i]
	prev := t.Start
	announced := map[string]bool{}
	for _, r := range t.Events {
		wait := gap(prev, r.TS, b.speed)
		prev = r.TS
		ev := event.Event{Kind: r.Kind, Turn: n, Data: r.Data}
		if ev.Kind == event.Result {
			if !b.sleep(ctx, wait) {
				return cancelled
			}
			return ev
		}
		// The recorded gap is spread over the synthesized chunks, and the
		// block itself comes right after its last chunk, as it does live.
		lead := synthesize(ev, announced)
		if len(lead) == 0 {
			if !b.sleep(ctx, wait) {
				return cancelled
			}
		}
		for _, s := range lead {
			if !b.sleep(ctx, wait/time.Duration(len(lead))) || !b.emit(ctx, s) {
				return cancelled
			}
		}
		if !b.emit(ctx, ev) {
			return cancelled
		}
	}
	msg := fmt.Sprintf("the recording's turn %d ends without a result (the recorded agent stopped mid-turn)", t.Number)
	return event.New(event.Result, n, event.ResultData{StopReason: apitype.StopError, Error: msg})
}

// synthesize is what a live agent streams before authoritative event ev:
// text deltas before an assistant_text or thought block, input fragments
// before the authoritative copy of an announced tool call.
func synthesize(ev event.Event, announced map[string]bool) []event.Event {
	var out []event.Event
	switch ev.Kind {
	case event.AssistantText, event.Thought:
		var d event.TextData
		if json.Unmarshal(ev.Data, &d) != nil || d.Delta {
			return nil
		}
		for _, c := range Chunks(d.Content.Text) {
			out = append(out, event.NewText(ev.Kind, ev.Turn, true, c))
		}
	case event.ToolUse:
		var d event.ToolUseData
		if json.Unmarshal(ev.Data, &d) != nil {
			return nil
		}
		id := d.Call.ToolCallID
		if len(d.Call.RawInput) == 0 {
			announced[id] = true
			return nil
		}
		if !announced[id] {
			return nil
		}
		delete(announced, id)
		for _, c := range JSONChunks(d.Call.RawInput) {
			out = append(out, event.New(event.ToolInputDelta, ev.Turn, event.ToolInputDeltaData{ToolCallID: id, PartialJSON: c}))
		}
	}
	return out
}

// emit hands ev on unless the turn was stopped.
func (b *Backend) emit(ctx context.Context, ev event.Event) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if ctx.Err() != nil {
		return false
	}
	b.sink.Emit(ev)
	return true
}

// finish ends the playing turn with result res and opens the next queued
// one; after Close, the queued ones end cancelled instead.
func (b *Backend) finish(res event.Event) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.sink.Emit(res)
	b.cancel = nil
	if b.closed {
		b.turns.Pop()
		for _, ev := range b.turns.Abort(apitype.StopCancelled, "the agent was closed") {
			b.sink.Emit(ev)
		}
		return
	}
	_, evs, next := b.turns.Pop()
	for _, ev := range evs {
		b.sink.Emit(ev)
	}
	if next != nil {
		b.play(next.Number)
	}
}

func sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// Interrupt stops the turn playing; it ends with stopReason cancelled, and
// the next queued turn, if any, opens.
func (b *Backend) Interrupt(ctx context.Context) (bool, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.turns.Active(); !ok || b.closed || b.cancel == nil {
		return false, nil
	}
	b.cancel()
	return true, nil
}

// SetModel refuses: a recording has no other model to switch to.
func (b *Backend) SetModel(ctx context.Context, model string) (bool, error) { return false, nil }

// Close stops the turn playing (it and the queued ones end cancelled) and
// reports the agent gone. It may be called more than once.
func (b *Backend) Close() error {
	b.closeOnce.Do(func() {
		b.mu.Lock()
		b.closed = true
		if b.cancel != nil {
			b.cancel()
		}
		started := b.started
		b.mu.Unlock()
		b.wg.Wait()
		b.mu.Lock()
		for _, ev := range b.turns.Abort(apitype.StopCancelled, "the agent was closed") {
			b.sink.Emit(ev)
		}
		b.mu.Unlock()
		if started {
			b.sink.Exited(nil)
		}
	})
	return nil
}

// Info reports the replay position as the session id (see SessionPrefix)
// and the recording as the transcript.
func (b *Backend) Info() backend.Info {
	b.infoMu.Lock()
	defer b.infoMu.Unlock()
	return backend.Info{SessionID: SessionPrefix + strconv.Itoa(b.pos), Transcript: b.rec.Path, Model: b.o.Model, QueuesPrompts: true}
}
