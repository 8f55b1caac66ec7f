package bus

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kaimon/kaimon/internal/apitype"
	"github.com/kaimon/kaimon/internal/event"
	"github.com/kaimon/kaimon/internal/testutil/pyzmq"
)

func env(agent string, seq uint64, text string) *event.Envelope {
	return &event.Envelope{Kind: event.AssistantText, Turn: 1, AgentID: agent, Seq: seq, TS: time.Now().UTC(),
		Data: json.RawMessage(fmt.Sprintf(`{"delta":true,"content":{"type":"text","text":%q}}`, text))}
}

// newBus binds a bus on a socket in a fresh directory (short enough for the
// 108-byte limit of unix socket paths), closed at the end of the test.
func newBus(t testing.TB, opts Options, extra ...string) (*Bus, string) {
	t.Helper()
	dir, err := os.MkdirTemp("", "kb")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	ep := "ipc://" + filepath.Join(dir, "events.sock")
	opts.Logf = t.Logf
	b, err := Listen(append([]string{ep}, extra...), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b, ep
}

func dial(t testing.TB, ep string, topics ...string) *Subscriber {
	t.Helper()
	s, err := Dial(context.Background(), ep)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	for _, tp := range topics {
		if err := s.Subscribe(tp); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Sync(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	return s
}

func next(t *testing.T, s *Subscriber) (string, event.Envelope) {
	t.Helper()
	m, err := s.Next()
	if err != nil {
		t.Fatal(err)
	}
	var e event.Envelope
	if err := json.Unmarshal(m.Body, &e); err != nil {
		t.Fatalf("body %q: %v", m.Body, err)
	}
	return m.Topic, e
}

// Prefix subscriptions as ZeroMQ defines them: "agent:" takes every agent,
// "agent:<id>" one (and, being a prefix, any id that starts with it).
func TestPrefixFiltering(t *testing.T) {
	b, ep := newBus(t, Options{})
	all := dial(t, ep, "agent:")
	one := dial(t, ep, "agent:a1")
	none := dial(t, ep, "other:")
	b.Publish(env("a1", 1, "x"))
	b.Publish(env("b2", 1, "y"), env("a1", 2, "z"), env("a10", 1, "w")) // a batch: in order
	var got []string
	for range 4 {
		topic, e := next(t, all)
		got = append(got, fmt.Sprintf("%s/%s/%d", topic, e.AgentID, e.Seq))
	}
	if want := []string{"agent:a1/a1/1", "agent:b2/b2/1", "agent:a1/a1/2", "agent:a10/a10/1"}; !slices.Equal(got, want) {
		t.Fatalf("agent: got %v, want %v", got, want)
	}
	got = nil
	for range 3 {
		topic, e := next(t, one)
		got = append(got, fmt.Sprintf("%s/%d", topic, e.Seq))
	}
	if want := []string{"agent:a1/1", "agent:a1/2", "agent:a10/1"}; !slices.Equal(got, want) {
		t.Fatalf("agent:a1 got %v, want %v", got, want)
	}
	// Nothing reached "other:": the sync marker comes with nothing before it.
	if err := none.Sync(10 * time.Second); err != nil || len(none.pending) != 0 {
		t.Fatalf("other: got %d messages (%v)", len(none.pending), err)
	}
	st := b.Stats()
	if st.Subscribers != 3 || st.Published != 4 || st.Dropped != 0 {
		t.Fatalf("stats = %+v", st)
	}
}

// topicHasPrefix is strings.HasPrefix(Topic(id), t) without the topic.
func TestTopicHasPrefix(t *testing.T) {
	for _, id := range []string{"", "a", "a1", "a10", "b2"} {
		for _, p := range []string{"", "a", "agen", "agent", "agent:", "agent:a", "agent:a1", "agent:a10", "agent:b", "agenx", "other:", "agent:a1x"} {
			if got, want := topicHasPrefix(id, p), strings.HasPrefix(Topic(id), p); got != want {
				t.Errorf("topicHasPrefix(%q, %q) = %v, want %v", id, p, got, want)
			}
		}
	}
}

// Subscriptions count, as in ZeroMQ: two subscribes need two cancels.
func TestUnsubscribeCounts(t *testing.T) {
	b, ep := newBus(t, Options{})
	s := dial(t, ep, "agent:", "agent:")
	received := func() int {
		t.Helper()
		b.Publish(env("a", 1, "x"))
		if err := s.Sync(10 * time.Second); err != nil {
			t.Fatal(err)
		}
		n := len(s.pending)
		s.pending = nil
		return n
	}
	if n := received(); n != 1 {
		t.Fatalf("subscribed twice: got %d", n)
	}
	if err := s.Unsubscribe("agent:"); err != nil {
		t.Fatal(err)
	}
	if err := s.Sync(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	if n := received(); n != 1 {
		t.Fatalf("subscribed twice, cancelled once: got %d", n)
	}
	if err := s.Unsubscribe("agent:"); err != nil {
		t.Fatal(err)
	}
	if err := s.Sync(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	if n := received(); n != 0 {
		t.Fatalf("cancelled twice: got %d", n)
	}
}

// A subscriber that never reads costs the others nothing: Publish never
// blocks, the fast subscriber gets every message in order, and the stalled
// one's queue stays within its bounds while its drops are counted.
func TestStalledSubscriberDropsOthersDoNot(t *testing.T) {
	const n, burst = 20000, 100
	b, ep := newBus(t, Options{QueueBytes: 256 << 10})
	stalled := dial(t, ep, "agent:")
	_ = stalled // connected and subscribed, never read
	fast := dial(t, ep, "agent:")
	got := make(chan uint64, burst)
	go func() {
		defer close(got)
		for {
			m, err := fast.Next()
			if err != nil {
				return
			}
			var e event.Envelope
			if json.Unmarshal(m.Body, &e) != nil {
				return
			}
			got <- e.Seq
		}
	}()
	pad := strings.Repeat("p", 200)
	var want uint64 = 1
	for seq := uint64(1); seq <= n; seq++ {
		b.Publish(env("a", seq, pad))
		if seq%burst == 0 {
			// Pace the publisher to the fast reader, so that only the
			// stalled one can fall behind.
			for ; want <= seq; want++ {
				if s, ok := <-got; !ok || s != want {
					t.Fatalf("fast subscriber: got seq %d (open %v), want %d", s, ok, want)
				}
			}
		}
	}
	st := b.Stats()
	if st.Published != n || st.Subscribers != 2 {
		t.Fatalf("stats = %+v", st)
	}
	var sc apitype.SubscriberStats
	for _, c := range st.Connections {
		if c.Sent < n {
			sc = c
		}
	}
	if sc.Dropped == 0 || sc.Dropped != st.Dropped {
		t.Fatalf("stalled subscriber dropped %d, bus dropped %d; want > 0 and equal (%+v)", sc.Dropped, st.Dropped, st)
	}
	if sc.QueuedBytes > 256<<10 {
		t.Fatalf("stalled queue not bounded: %+v", sc)
	}
	t.Logf("stalled subscriber: sent %d, queued %d (%d bytes), dropped %d of %d", sc.Sent, sc.Queued, sc.QueuedBytes, sc.Dropped, n)
}

// The queue drops its oldest entries to stay within its bytes, however
// many entries that is; a ring grown by a burst is let go once emptied.
func TestQueueDropsOldest(t *testing.T) {
	q := newQueue[int](30)
	for i := 1; i <= 5; i++ {
		q.push(i, 10)
	}
	if n, bytes, d := q.stats(); n != 3 || bytes != 30 || d != 2 {
		t.Fatalf("stats = %d %d %d", n, bytes, d)
	}
	if v, _ := q.pop(); v != 3 {
		t.Fatalf("oldest kept = %d, want 3", v)
	}
	q.push(6, 20) // 4 must go to fit 20 bytes
	if n, bytes, d := q.stats(); n != 2 || bytes != 30 || d != 3 {
		t.Fatalf("after a big push: %d %d %d", n, bytes, d)
	}
	q.push(7, 500) // larger than the limit: queued alone
	if v, _ := q.pop(); v != 7 {
		t.Fatalf("got %d, want the oversized 7", v)
	}

	// A burst of many small entries fits in the bytes: none dropped.
	q = newQueue[int](200000 * 8)
	for i := range 200000 {
		q.push(i, 8)
	}
	if n, _, d := q.stats(); n != 200000 || d != 0 {
		t.Fatalf("a burst of 200000 small entries: %d queued, %d dropped", n, d)
	}
	for i := range 200000 {
		if v, ok := q.pop(); !ok || v != i {
			t.Fatalf("pop %d = %d %v", i, v, ok)
		}
	}
	if len(q.buf) > shrinkAbove {
		t.Fatalf("the emptied queue kept a ring of %d", len(q.buf))
	}
	q.push(1, 8)
	if v, ok := q.pop(); !ok || v != 1 {
		t.Fatalf("after the shrink: %d %v", v, ok)
	}
}

// Close delivers what is queued before it hangs up.
func TestCloseDeliversQueued(t *testing.T) {
	b, ep := newBus(t, Options{})
	s := dial(t, ep, "agent:")
	for i := uint64(1); i <= 100; i++ {
		b.Publish(env("a", i, "x"))
	}
	done := make(chan struct{})
	go func() { b.Close(); close(done) }()
	for i := uint64(1); i <= 100; i++ {
		if _, e := next(t, s); e.Seq != i {
			t.Fatalf("got seq %d, want %d", e.Seq, i)
		}
	}
	if _, err := s.Next(); err == nil {
		t.Fatal("Next after Close: want an error")
	}
	<-done
}

// The socket is the owner's alone (0600); a stale file is replaced; a live
// publisher's socket is not stolen; Close removes the file.
func TestSocketFile(t *testing.T) {
	dir, err := os.MkdirTemp("", "kb")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "sock", "events.sock")
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	// A stale socket: bound, then its process is gone (listener closed
	// without unlinking).
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	ln.Close()
	b, err := Listen([]string{"ipc://" + path}, Options{Logf: t.Logf})
	if err != nil {
		t.Fatalf("over a stale socket: %v", err)
	}
	st, err := os.Stat(path)
	if err != nil || st.Mode().Perm() != 0o600 || st.Mode()&os.ModeSocket == 0 {
		t.Fatalf("socket mode = %v, %v", st.Mode(), err)
	}
	if _, err := Listen([]string{"ipc://" + path}, Options{}); err == nil || !strings.Contains(err.Error(), "in use") {
		t.Fatalf("second publisher on a live socket: err = %v", err)
	}
	b.Close()
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("socket left after Close: %v", err)
	}
	if _, err := Listen([]string{"udp://127.0.0.1:1"}, Options{}); err == nil {
		t.Fatal("udp endpoint: want an error")
	}
}

// A subscriber built on libzmq (python3-zmq), knowing nothing of kaimon but
// JSON, reads the bus over ipc and over tcp.
func TestLibzmqSubscriber(t *testing.T) {
	py := pyzmq.Need(t)
	b, ipc := newBus(t, Options{}, "tcp://127.0.0.1:0")
	tcp := b.Endpoints()[1]
	for _, ep := range []string{ipc, tcp} {
		t.Run(strings.SplitN(ep, ":", 2)[0], func(t *testing.T) {
			const n = 50
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, py, pyzmq.Script(), ep, "agent:one", fmt.Sprintf("count=%d", n))
			cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
			cmd.Stderr = os.Stderr
			out, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer cmd.Wait()
			defer syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			waitSubscribed(t, b, "agent:one")
			for i := uint64(1); i <= n; i++ {
				b.Publish(env("two", i, "not for the subscriber"))
				b.Publish(env("one", i, fmt.Sprintf("chunk %d <&>", i)))
			}
			sc := bufio.NewScanner(out)
			sc.Buffer(nil, 1<<20)
			var seqs []uint64
			for sc.Scan() {
				var line struct {
					Ready    bool           `json:"ready"`
					Error    string         `json:"error"`
					Topic    string         `json:"topic"`
					Envelope event.Envelope `json:"envelope"`
				}
				if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
					t.Fatalf("python printed %q: %v", sc.Text(), err)
				}
				if line.Error != "" {
					t.Fatalf("python subscriber: %s", line.Error)
				}
				if line.Ready {
					continue
				}
				e := line.Envelope
				var d event.TextData
				_ = json.Unmarshal(e.Data, &d)
				if line.Topic != "agent:one" || e.AgentID != "one" || e.Kind != event.AssistantText ||
					!d.Delta || d.Content.Text != fmt.Sprintf("chunk %d <&>", e.Seq) {
					t.Fatalf("python got %s", sc.Text())
				}
				seqs = append(seqs, e.Seq)
			}
			if err := cmd.Wait(); err != nil {
				t.Fatalf("python subscriber: %v", err)
			}
			if len(seqs) != n || seqs[0] != 1 || seqs[n-1] != n {
				t.Fatalf("python got seqs %v", seqs)
			}
		})
	}
}

// waitSubscribed waits until some connection of b holds topic.
func waitSubscribed(t *testing.T, b *Bus, topic string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		for _, c := range b.Stats().Connections {
			if slices.Contains(c.Topics, topic) {
				return
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("no subscriber of %q within 30s", topic)
}

// Local subscriptions are in force at once and see only their prefix.
func TestLocal(t *testing.T) {
	l := NewLocal(Options{QueueBytes: 2 * localSize(env("a", 1, "x"))})
	a := l.Subscribe("agent:a")
	all := l.Subscribe("agent:")
	for i := uint64(1); i <= 3; i++ {
		l.Publish(env("a", i, "x"), env("b", i, "y")) // a batch, in order
	}
	ctx := context.Background()
	for _, want := range []uint64{2, 3} { // 1 dropped: queue of 2
		e, err := a.Next(ctx)
		if err != nil || e.AgentID != "a" || e.Seq != want {
			t.Fatalf("a: %+v %v, want seq %d", e, err, want)
		}
	}
	if a.Dropped() != 1 || all.Dropped() != 4 {
		t.Fatalf("dropped a=%d all=%d", a.Dropped(), all.Dropped())
	}
	a.Close()
	l.Publish(env("a", 4, "x"))
	l.Close()
	for _, want := range []string{"b/3", "a/4"} {
		e, err := all.Next(ctx)
		if err != nil || fmt.Sprintf("%s/%d", e.AgentID, e.Seq) != want {
			t.Fatalf("all: %+v %v, want %s", e, err, want)
		}
	}
	if _, err := all.Next(ctx); err != ErrClosed {
		t.Fatalf("after Close: %v", err)
	}
}

// A body over 255 bytes goes in a long frame, which a subscriber reads
// back whole.
func TestLongFrame(t *testing.T) {
	bs, ep := newBus(t, Options{})
	s := dial(t, ep, "agent:")
	data := json.RawMessage(`{"text":"` + strings.Repeat("x", 70000) + `"}`)
	bs.Publish(&event.Envelope{Kind: event.AssistantText, Turn: 1, Data: data, AgentID: "a", Seq: 1, TS: time.Now().UTC()})
	m, err := s.Next()
	if err != nil {
		t.Fatal(err)
	}
	var e event.Envelope
	if err := json.Unmarshal(m.Body, &e); err != nil || e.Seq != 1 || string(e.Data) != string(data) || string(m.Topic) != "agent:a" {
		t.Fatalf("got %.80s (%v)", m.Body, err)
	}
}

// An envelope's message is pooled and reused once every queue it was in
// has written or dropped it (message.release): no subscriber, fast, slow
// or subscribed to one agent, may receive a body that another envelope's
// encoding overwrote, nor an envelope twice or out of order (a message
// reused while still queued goes out as the newer envelope: a seq that
// repeats or goes back). Each body's text names its agent and seq, at a
// length that varies with the seq (over the pooled size too).
func TestPooledMessagesStayIntact(t *testing.T) {
	const n = 6000
	b, ep := newBus(t, Options{QueueBytes: 64 << 10})
	text := func(agent string, seq uint64) string {
		return fmt.Sprintf("%s/%d/", agent, seq) + strings.Repeat("x", int(seq*37%700)+int(seq%97/96)*5000)
	}
	type sub struct {
		s    *Subscriber
		slow bool
		seen map[string]int
		last map[string]uint64
	}
	subs := []*sub{
		{s: dial(t, ep, "agent:")},
		{s: dial(t, ep, "agent:"), slow: true},
		{s: dial(t, ep, "agent:b")},
	}
	errs := make(chan error, len(subs))
	for _, sb := range subs {
		sb.seen, sb.last = map[string]int{}, map[string]uint64{}
		go func() {
			for {
				m, err := sb.s.Next()
				if err != nil {
					errs <- fmt.Errorf("subscriber ended before the end marker: %v", err)
					return
				}
				var e event.Envelope
				if err := json.Unmarshal(m.Body, &e); err != nil {
					errs <- fmt.Errorf("body %.80q: %v", m.Body, err)
					return
				}
				if e.Seq == 0 {
					errs <- nil // the end
					return
				}
				if got, want := event.TextOf(e.Data), text(e.AgentID, e.Seq); got != want || m.Topic != Topic(e.AgentID) {
					errs <- fmt.Errorf("topic %q, agent %s seq %d: text %.40q…, want %.40q…", m.Topic, e.AgentID, e.Seq, got, want)
					return
				}
				if e.Seq <= sb.last[e.AgentID] {
					errs <- fmt.Errorf("agent %s: seq %d after %d", e.AgentID, e.Seq, sb.last[e.AgentID])
					return
				}
				sb.last[e.AgentID] = e.Seq
				sb.seen[e.AgentID]++
				if sb.slow && e.Seq%50 == 0 {
					time.Sleep(2 * time.Millisecond) // falls behind: the bus drops for it
				}
			}
		}()
	}
	for seq := uint64(1); seq <= n; seq += 2 {
		b.Publish(env("a", seq, text("a", seq)), env("b", seq, text("b", seq)), env("a", seq+1, text("a", seq+1)))
		b.Publish(env("b", seq+1, text("b", seq+1)))
		if seq%200 == 1 {
			time.Sleep(time.Millisecond) // let the fast ones keep up
		}
	}
	b.Publish(env("b", 0, "the end")) // the newest: never dropped
	for range subs {
		select {
		case err := <-errs:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("a subscriber did not get to the end")
		}
	}
	if subs[2].seen["a"] != 0 || subs[2].seen["b"] == 0 {
		t.Fatalf("the agent:b subscriber saw %v", subs[2].seen)
	}
	if st := b.Stats(); st.Dropped == 0 {
		t.Fatalf("the slow subscriber was never dropped for (%+v): the test does not exercise drops", st)
	}
	t.Logf("seen: fast %v, slow %v, b only %v; dropped %d", subs[0].seen, subs[1].seen, subs[2].seen, b.Stats().Dropped)
}
