package follow

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/kaimon/kaimon/internal/event"
	"github.com/kaimon/kaimon/internal/eventlog"
)

// A hosted envelope is the envelope with a host field and the agent id
// replaced, whatever the data holds and wherever the fields stand; the
// daemon's shape is spliced, not decoded.
func TestAppendHosted(t *testing.T) {
	check := func(t *testing.T, e *Envelope, host, agent string) {
		t.Helper()
		got, err := e.AppendHosted([]byte("x"), host, agent)
		if err != nil {
			t.Fatal(err)
		}
		if got[0] != 'x' {
			t.Fatalf("%s: dst's bytes not kept", got)
		}
		got = got[1:]
		if !bytes.HasPrefix(got, []byte(`{"host":`)) {
			t.Fatalf("hosted %s: the host's field is not first", got)
		}
		var want, have map[string]any
		if err := json.Unmarshal(e.Raw, &want); err != nil {
			t.Fatal(err)
		}
		want["host"], want["agent_id"] = host, agent
		if err := json.Unmarshal(got, &have); err != nil {
			t.Fatalf("%s: %v", got, err)
		}
		if fmt.Sprint(have) != fmt.Sprint(want) {
			t.Fatalf("hosted %s\nfrom %s", got, e.Raw)
		}
	}
	for _, env := range envelopes("a1") {
		e, err := Encode(env)
		if err != nil {
			t.Fatal(err)
		}
		if e.agentAt == 0 {
			t.Fatalf("the daemon's shape not placed: %s", e.Raw)
		}
		check(t, e, "h1", "h1/a1")
		check(t, e, `we"ird\host`, "we\"ird\\host/a1")
	}
	for _, raw := range []string{
		`{"agent_id":"a1","seq":7,"kind":"assistant_text","turn":2,"data":{"agent_id":"not me"},"ts":"t"}`, // moved
		`{"kind":"status","turn":0,"data":{},"agent_id":"a\u0031","seq":1,"ts":"t"}`,                       // escaped
		`{"kind":"status","turn":0,"data":{},"agent_id":"a1","seq":1,"ts":"t","extra":[1,{"agent_id":2}]}`,
		`{"host":"elsewhere","kind":"status","turn":0,"data":{},"agent_id":"a1","seq":1}`, // a host already: replaced, not doubled
	} {
		var e Envelope
		if _, ok := parse([]byte(raw), &e); !ok {
			t.Fatalf("not parsed: %s", raw)
		}
		check(t, &e, "h1", "h1/a1")
	}
	// What is not JSON is an error, not a line.
	bad := &Envelope{Agent: "a1", Raw: []byte(`{"kind":`)}
	if _, err := bad.AppendHosted(nil, "h1", "h1/a1"); err == nil {
		t.Fatal("a torn envelope hosted without an error")
	}
}

func TestRetryWait(t *testing.T) {
	ms := time.Millisecond
	for _, tc := range []struct {
		r    Retry
		want []time.Duration
	}{
		{Retry{Every: 100 * ms}, []time.Duration{100 * ms, 100 * ms, 100 * ms}},
		{Retry{Every: 100 * ms, Max: 50 * ms}, []time.Duration{100 * ms, 100 * ms}},
		{Retry{Every: 100 * ms, Max: 350 * ms}, []time.Duration{100 * ms, 200 * ms, 350 * ms, 350 * ms}},
		{Retry{Every: time.Second, Max: 30 * time.Second}, []time.Duration{1e9, 2e9, 4e9, 8e9, 16e9, 30e9, 30e9}},
	} {
		for i, w := range tc.want {
			if got := tc.r.Wait(i + 1); got != w {
				t.Errorf("%+v: wait %d = %v, want %v", tc.r, i+1, got, w)
			}
		}
	}
	if !(Retry{}).Never() || (Retry{Every: 1}).Never() {
		t.Error("Never")
	}
}

// chanSource is a live source fed by a test: Next waits for a body, and
// fails with io.EOF once the test closes bodies, as a daemon that went
// away.
type chanSource struct {
	bodies chan []byte
	done   chan struct{}
	once   sync.Once
}

func newChanSource() *chanSource {
	return &chanSource{bodies: make(chan []byte, 64), done: make(chan struct{})}
}

func (s *chanSource) Next() ([]byte, error) {
	select {
	case b, ok := <-s.bodies:
		if !ok {
			return nil, io.EOF
		}
		return b, nil
	case <-s.done:
		return nil, errors.New("closed")
	}
}

func (s *chanSource) Ready() bool { return len(s.bodies) > 0 }
func (s *chanSource) Close() error {
	s.once.Do(func() { close(s.done) })
	return nil
}

func (s *chanSource) closed() bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}

func (s *chanSource) send(t *testing.T, env *event.Envelope) {
	raw, err := event.AppendEnvelope(nil, env)
	if err != nil {
		t.Fatal(err)
	}
	s.bodies <- raw
}

// recorder is a Sink that keeps what it is handed, and says when it has
// seen what a test waits for.
type recorder struct {
	mu    sync.Mutex
	seqs  map[string][]uint64 // host/agent → seqs
	notes []string
	ch    chan struct{}
}

func newRecorder() *recorder {
	return &recorder{seqs: map[string][]uint64{}, ch: make(chan struct{}, 1000)}
}

func (r *recorder) sink() Sink {
	return Sink{
		Emit: func(host string, e *Envelope) error {
			r.mu.Lock()
			r.seqs[host+"/"+e.Agent] = append(r.seqs[host+"/"+e.Agent], e.Seq)
			r.mu.Unlock()
			r.ch <- struct{}{}
			return nil
		},
		Note: func(n Note) {
			s := fmt.Sprintf("%s %d", n.Host, n.Kind)
			if n.Kind == Connected {
				s += fmt.Sprintf(" after %d", n.After)
			}
			r.mu.Lock()
			r.notes = append(r.notes, s)
			r.mu.Unlock()
			r.ch <- struct{}{}
		},
	}
}

// until waits for cond, checked at each thing the sink is handed.
func (r *recorder) until(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		r.mu.Lock()
		ok := cond()
		r.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-r.ch:
		case <-deadline:
			r.mu.Lock()
			defer r.mu.Unlock()
			t.Fatalf("waiting for %s: seqs %v, notes %q", what, r.seqs, r.notes)
		}
	}
}

func status(agent string, seq uint64) *event.Envelope {
	env := event.New(event.Status, 1, event.StatusData{Status: "working"}).Stamp(agent, seq, ts)
	return &env
}

// A host not reached at first is tried again in the background and
// followed once it answers; the others are followed meanwhile.
func TestMergeRejoinsAnUnreachableHost(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	up, late := newChanSource(), newChanSource()
	var mu sync.Mutex
	attempts := 0
	quick := Retry{Every: time.Millisecond, Max: 4 * time.Millisecond}
	hosts := []Host{
		{Name: "up", Unreachable: quick, Dial: func(context.Context, Attempt) (*Follower, error) { return New(up), nil }},
		{Name: "late", Unreachable: quick, Dial: func(_ context.Context, a Attempt) (*Follower, error) {
			mu.Lock()
			defer mu.Unlock()
			if attempts++; a.N != attempts-1 {
				t.Errorf("attempt %d told N=%d", attempts, a.N)
			}
			if attempts < 3 {
				return nil, errors.New("host late: down")
			}
			return New(late), nil
		}},
	}
	r := newRecorder()
	done := make(chan error, 1)
	go func() { done <- Merge(ctx, hosts, r.sink()) }()
	up.send(t, status("a1", 1))
	r.until(t, "late connected", func() bool { return slices.Contains(r.notes, "late 0 after 1") })
	late.send(t, status("b1", 1))
	up.send(t, status("a1", 2))
	r.until(t, "both hosts' envelopes", func() bool { return len(r.seqs["late/b1"]) == 1 && len(r.seqs["up/a1"]) == 2 })
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Merge ended by its context: %v", err)
	}
	if !up.closed() || !late.closed() {
		t.Fatal("a follower left open")
	}
	// Told once that late is unreachable, not at each attempt.
	if n := len(slices.DeleteFunc(slices.Clone(r.notes), func(s string) bool { return s != "late 1" })); n != 1 {
		t.Fatalf("notes %q: want late unreachable once", r.notes)
	}
}

// NeedOne: no host answering its first attempt ends the merge at once
// with their errors.
func TestMergeNeedOne(t *testing.T) {
	down := func(name string) Host {
		return Host{Name: name, Unreachable: Retry{Every: time.Hour}, Dial: func(context.Context, Attempt) (*Follower, error) {
			return nil, errors.New("host " + name + ": down")
		}}
	}
	r := newRecorder()
	s := r.sink()
	s.NeedOne = true
	err := Merge(t.Context(), []Host{down("h1"), down("h2")}, s)
	if err == nil || err.Error() != "host h1: down\nhost h2: down" {
		t.Fatalf("err = %v", err)
	}
	if len(r.notes) != 0 {
		t.Fatalf("notes %q before giving up", r.notes)
	}
}

// A host whose source went away is rejoined, and each of its agents
// resumed from its log where it was: what the log gained meanwhile comes
// first, each seq once.
func TestMergeResumesAGoneHostFromItsLog(t *testing.T) {
	dir := t.TempDir()
	logOf := func(agent string) string { return filepath.Join(dir, agent+".events.jsonl") }
	w, _, err := eventlog.Open(logOf("a1"))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	appendLog := func(seqs ...uint64) {
		for _, seq := range seqs {
			r := status("a1", seq).Record()
			if err := w.Append(&r); err != nil {
				t.Fatal(err)
			}
		}
	}
	first, second := newChanSource(), newChanSource()
	var since []map[string]uint64
	var mu sync.Mutex
	h := Host{Name: "local", Unreachable: Retry{Every: time.Millisecond}, Gone: Retry{Every: time.Millisecond},
		Dial: func(_ context.Context, a Attempt) (*Follower, error) {
			mu.Lock()
			defer mu.Unlock()
			since = append(since, maps.Clone(a.Since))
			src := first
			if len(since) > 1 {
				src = second
			}
			f := New(src)
			f.Log = logOf
			return f, nil
		}}
	r := newRecorder()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- Merge(ctx, []Host{h}, r.sink()) }()
	appendLog(1, 2)
	first.send(t, status("a1", 1))
	first.send(t, status("a1", 2))
	r.until(t, "seq 2", func() bool { return len(r.seqs["local/a1"]) == 2 })
	appendLog(3, 4) // written while the daemon was away
	close(first.bodies)
	r.until(t, "the host back", func() bool { return slices.Contains(r.notes, fmt.Sprintf("local 0 after %d", Gone)) })
	appendLog(5)
	second.send(t, status("a1", 5))
	r.until(t, "seq 5", func() bool { return len(r.seqs["local/a1"]) >= 5 })
	cancel()
	<-done
	if got := r.seqs["local/a1"]; !slices.Equal(got, []uint64{1, 2, 3, 4, 5}) {
		t.Fatalf("seqs %v, want 1..5 once each", got)
	}
	if len(since) != 2 || since[0] != nil || since[1]["a1"] != 2 {
		t.Fatalf("attempts told since %v, want nil then a1 at 2", since)
	}
	if want := fmt.Sprintf("local %d", Gone); !slices.Contains(r.notes, want) {
		t.Fatalf("notes %q: no %q", r.notes, want)
	}
}

// The consumer's error ends every host's follow and is Merge's; a host
// whose Gone is never ends alone, and all of them ended is ErrEnded.
func TestMergeEnds(t *testing.T) {
	a, b := newChanSource(), newChanSource()
	hosts := []Host{
		{Name: "a", Dial: func(context.Context, Attempt) (*Follower, error) { return New(a), nil }},
		{Name: "b", Dial: func(context.Context, Attempt) (*Follower, error) { return New(b), nil }},
	}
	full := errors.New("disk full")
	s := Sink{Emit: func(host string, e *Envelope) error { return full }}
	done := make(chan error, 1)
	go func() { done <- Merge(t.Context(), hosts, s) }()
	a.send(t, status("a1", 1))
	if err := <-done; !errors.Is(err, full) {
		t.Fatalf("Merge = %v, want the consumer's error", err)
	}
	if !a.closed() || !b.closed() {
		t.Fatal("a follower left open")
	}

	a, b = newChanSource(), newChanSource()
	r := newRecorder()
	go func() { done <- Merge(t.Context(), hosts, r.sink()) }()
	close(a.bodies)
	r.until(t, "a ended", func() bool { return slices.Contains(r.notes, fmt.Sprintf("a %d", Ended)) })
	b.send(t, status("b1", 1))
	r.until(t, "b goes on", func() bool { return len(r.seqs["b/b1"]) == 1 })
	close(b.bodies)
	if err := <-done; !errors.Is(err, ErrEnded) {
		t.Fatalf("Merge = %v, want ErrEnded", err)
	}
}

// BenchmarkAppendHosted: a merged stream's line spliced from the daemon's
// bytes, beside decoding and encoding it again (what another shape costs).
func BenchmarkAppendHosted(b *testing.B) {
	env := event.NewText(event.AssistantText, 2, true, "a chunk of streamed text, as long as a model's usually are").Stamp("a1b2c3d4", 42, ts)
	e, err := Encode(&env)
	if err != nil {
		b.Fatal(err)
	}
	decoded := *e
	decoded.agentAt, decoded.agentEnd = 0, 0 // as if the parser had not placed it
	for _, bc := range []struct {
		name string
		e    *Envelope
	}{{"spliced", e}, {"decoded", &decoded}} {
		b.Run(bc.name, func(b *testing.B) {
			var line []byte
			b.SetBytes(int64(len(e.Raw)))
			for b.Loop() {
				if line, err = bc.e.AppendHosted(line[:0], "h1", "h1/a1b2c3d4"); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// A host is followed as soon as it answers: one whose first attempt hangs
// (an ssh connect to a link that is down) holds back no other.
func TestMergeDoesNotWaitForTheSlowest(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	up := newChanSource()
	hosts := []Host{
		{Name: "up", Unreachable: Retry{Every: time.Hour}, Dial: func(context.Context, Attempt) (*Follower, error) { return New(up), nil }},
		{Name: "slow", Unreachable: Retry{Every: time.Hour}, Dial: func(ctx context.Context, _ Attempt) (*Follower, error) {
			<-ctx.Done()
			return nil, ctx.Err()
		}},
	}
	for _, needOne := range []bool{false, true} {
		up = newChanSource()
		r := newRecorder()
		s := r.sink()
		s.NeedOne = needOne
		ctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- Merge(ctx, hosts, s) }()
		up.send(t, status("a1", 1))
		r.until(t, fmt.Sprintf("up's envelope while slow dials (NeedOne %v)", needOne), func() bool { return len(r.seqs["up/a1"]) == 1 })
		cancel()
		if err := <-done; err != nil {
			t.Fatalf("NeedOne %v: %v", needOne, err)
		}
	}
}

// The consumer failing while a log fills a gap of the live stream ends
// the merge with its error: it is no fault of the host's log to tell and
// go on from.
func TestMergeSinkErrorDuringGapFill(t *testing.T) {
	dir := t.TempDir()
	logOf := func(agent string) string { return filepath.Join(dir, agent+".events.jsonl") }
	w, _, err := eventlog.Open(logOf("a1"))
	if err != nil {
		t.Fatal(err)
	}
	for seq := uint64(1); seq <= 3; seq++ {
		r := status("a1", seq).Record()
		w.Append(&r)
	}
	w.Close()
	src := newChanSource()
	h := Host{Name: "local", Dial: func(context.Context, Attempt) (*Follower, error) {
		f := New(src)
		f.Log, f.FromStart = logOf, true
		return f, nil
	}}
	full := errors.New("broken pipe")
	var notes []Note
	s := Sink{Emit: func(string, *Envelope) error { return full }, Note: func(n Note) { notes = append(notes, n) }}
	done := make(chan error, 1)
	go func() { done <- Merge(t.Context(), []Host{h}, s) }()
	src.send(t, status("a1", 3)) // 1 and 2 come from the log first: the emit of 1 fails
	if err := <-done; !errors.Is(err, full) {
		t.Fatalf("Merge = %v, want the consumer's error", err)
	}
	for _, n := range notes {
		if n.Kind == LogError {
			t.Fatalf("the consumer's error told as the log's: %+v", n)
		}
	}
}

// A follower without a log (a remote stream) knows where each agent it
// handed on is, Lost hook or not: what a rejoin resumes from.
func TestLastsWithoutALog(t *testing.T) {
	src := &fakeSource{batch: 1}
	for _, seq := range []uint64{4, 5} {
		raw, _ := event.AppendEnvelope(nil, status("a1", seq))
		src.bodies = append(src.bodies, raw)
	}
	f := New(src)
	f.Run(t.Context(), func(*Envelope) error { return nil })
	if got := f.Lasts(); got["a1"] != 5 {
		t.Fatalf("Lasts = %v, want a1 at 5", got)
	}
}
