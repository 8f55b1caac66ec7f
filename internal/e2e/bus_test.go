package e2e

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/kaimon/kaimon/internal/apitype"
	"github.com/kaimon/kaimon/internal/bus"
	"github.com/kaimon/kaimon/internal/event"
	"github.com/kaimon/kaimon/internal/testutil/pyzmq"
	"github.com/kaimon/kaimon/internal/verbs"
)

// A subscriber built on libzmq (Debian's python3-zmq), with nothing but a
// JSON parser, reads a real claude turn from the bus: the whole turn, in
// the spec's order, with contiguous seq, and every authoritative envelope
// identical to the log's record.
func TestBusLibzmqSubscriberSeesTurn(t *testing.T) {
	py := pyzmq.Need(t)
	e := newEnv(t)
	id := e.ok("open", e.work, "--allow", "Bash")
	sub := e.start(py, pyzmq.Script(), e.busEndpoint(), "agent:"+id, "kind=result")
	e.waitTopic("agent:"+id, 1)
	if out := e.ok("run", id, "please use a tool"); out != "Tool said: hi. Done." {
		t.Fatalf("run = %q", out)
	}
	if code := sub.wait(); code != 0 {
		t.Fatalf("python subscriber exited %d: %s", code, sub.stderr.String())
	}
	var envs []event.Envelope
	var raws []json.RawMessage
	for _, l := range sub.lines {
		var line struct {
			Ready    bool            `json:"ready"`
			Topic    string          `json:"topic"`
			Envelope json.RawMessage `json:"envelope"`
		}
		mustJSON(t, []byte(l), &line)
		if line.Ready {
			continue
		}
		var env event.Envelope
		mustJSON(t, line.Envelope, &env)
		if line.Topic != "agent:"+id || env.AgentID != id || env.Turn != 1 || env.TS.IsZero() {
			t.Fatalf("python got %s", l)
		}
		envs, raws = append(envs, env), append(raws, line.Envelope)
	}
	if got := shape(t, envs); got != theTurn {
		t.Fatalf("the turn on the bus:\n got %s\nwant %s", got, theTurn)
	}
	// The log holds exactly the authoritative envelopes, the same ones.
	var logged []event.Record
	for _, r := range e.logOf(id) {
		if r.Seq >= envs[0].Seq && r.Seq <= envs[len(envs)-1].Seq {
			logged = append(logged, r)
		}
	}
	k := 0
	for i, env := range envs {
		if !event.Authoritative(env.Kind, env.Data) {
			continue
		}
		if k >= len(logged) || logged[k].Seq != env.Seq || logged[k].Kind != env.Kind {
			t.Fatalf("bus envelope seq %d (%s) is not the log's next record", env.Seq, env.Kind)
		}
		var fromBus, fromLog any
		mustJSON(t, raws[i], &fromBus)
		b, _ := json.Marshal(logged[k].Envelope(id))
		mustJSON(t, b, &fromLog)
		if !reflect.DeepEqual(fromBus, fromLog) {
			t.Fatalf("seq %d differs:\nbus %s\nlog %s", env.Seq, raws[i], b)
		}
		k++
	}
	if k != len(logged) {
		t.Fatalf("the log has %d records in the turn, the bus %d authoritative envelopes", len(logged), k)
	}
	if st := e.busStats(); st.Dropped != 0 || st.Published < uint64(len(envs)) {
		t.Fatalf("bus stats = %+v", st)
	}
}

// Prefix subscriptions through `kaimon tail`: agent: sees both agents,
// agent:<id> only its own; --no-deltas keeps the authoritative ones.
func TestTailPrefixFiltering(t *testing.T) {
	e := newEnv(t)
	a := e.ok("open", e.work)
	b := e.ok("open", e.work)
	all := e.tail("--no-deltas")
	one := e.tail("agent:"+a, "--no-deltas")
	e.waitTopic("agent:", 1)
	e.waitTopic("agent:"+a, 1)
	e.ok("run", a, "say exactly: from a")
	e.ok("run", b, "say exactly: from b")
	e.ok("run", a, "say exactly: a again")
	results := func(agent string, n int) func([]event.Envelope) bool {
		return func(envs []event.Envelope) bool {
			k := 0
			for _, env := range envs {
				if env.AgentID == agent && env.Kind == event.Result {
					k++
				}
			}
			return k >= n
		}
	}
	allEnvs := all.waitEnvelopes("both agents' results", func(envs []event.Envelope) bool {
		return results(a, 2)(envs) && results(b, 1)(envs)
	})
	// Each connection gets its envelopes in publish order: once the
	// second result of a is there, anything of b would be too.
	oneEnvs := one.waitEnvelopes("a's two results", results(a, 2))
	for _, env := range oneEnvs {
		if env.AgentID != a {
			t.Fatalf("agent:%s got an envelope of %s", a, env.AgentID)
		}
	}
	for _, envs := range [][]event.Envelope{allEnvs, oneEnvs} {
		if countDeltas(envs) != 0 {
			t.Fatal("--no-deltas printed a delta")
		}
	}
	if !hasKind(allEnvs, b, event.AssistantText) || !hasKind(allEnvs, a, event.AssistantText) {
		t.Fatal("agent: missed an agent's text")
	}
	// Interrupted, tail ends normally.
	all.signal(syscall.SIGINT)
	one.signal(syscall.SIGINT)
	if c1, c2 := all.wait(), one.wait(); c1 != 0 || c2 != 0 {
		t.Fatalf("tail after SIGINT exited %d, %d; stderr:\n%s\n%s", c1, c2, all.stderr.String(), one.stderr.String())
	}
}

// The log/live join: a tail killed mid-turn and resumed with --since
// prints no envelope twice and misses no authoritative one; the resumed
// tail then runs gap-free, and --until-result ends it with 3 when the turn
// is interrupted.
func TestTailResumeSince(t *testing.T) {
	e := newEnv(t)
	id := e.ok("open", e.work)
	t1 := e.tail("agent:"+id, "--from-start")
	t1.waitEnvelopes("the replayed open", func(envs []event.Envelope) bool { return hasKind(envs, id, event.Status) })
	e.waitTopic("agent:"+id, 1)
	e.ok("send", id, "please be slow")
	first := t1.waitEnvelopes("three streamed chunks", func(envs []event.Envelope) bool { return countDeltas(envs) >= 3 })
	t1.signal(syscall.SIGKILL)
	t1.wait()
	first = t1.envelopes() // what it printed before it died
	last := first[len(first)-1].Seq

	t2 := e.tail("agent:"+id, "--since", strconv.FormatUint(last, 10), "--until-result")
	t2.waitEnvelopes("two live chunks", func(envs []event.Envelope) bool { return countDeltas(envs) >= 2 })
	e.ok("interrupt", id)
	if code := t2.wait(); code != 3 || !strings.Contains(t2.stderr.String(), "turn 1 failed: stop reason cancelled") {
		t.Fatalf("resumed tail exited %d (want 3); stderr %s", code, t2.stderr.String())
	}
	second := t2.envelopes()

	seen := map[uint64]bool{}
	all := append(append([]event.Envelope{}, first...), second...)
	for i, env := range all {
		if env.AgentID != id || (i > 0 && env.Seq <= all[i-1].Seq) {
			t.Fatalf("envelope %d: seq %d after %d (agent %s): a duplicate or out of order", i, env.Seq, all[i-1].Seq, env.AgentID)
		}
		seen[env.Seq] = true
	}
	for i := range first {
		if first[i].Seq != uint64(i+1) {
			t.Fatalf("the first tail is not contiguous from 1: %d at %d", first[i].Seq, i)
		}
	}
	live := false
	for i := 1; i < len(second); i++ {
		live = live || !event.Authoritative(second[i-1].Kind, second[i-1].Data)
		if live && second[i].Seq != second[i-1].Seq+1 {
			t.Fatalf("the resumed tail has a gap once live: %d after %d", second[i].Seq, second[i-1].Seq)
		}
	}
	end := second[len(second)-1]
	if end.Kind != event.Result {
		t.Fatalf("the resumed tail ended with %s, want the result", end.Kind)
	}
	for _, r := range e.logOf(id) {
		if r.Seq <= end.Seq && !seen[r.Seq] {
			t.Fatalf("logged seq %d (%s) printed by neither tail", r.Seq, r.Kind)
		}
	}
}

// --until-result: 0 after a turn that succeeded, 3 after one that failed,
// whether the result is live or replayed from the log. tail starts the
// daemon, and with --wait waits for an agent that is not open yet.
func TestTailUntilResult(t *testing.T) {
	e := newEnv(t)
	// The first command of this installation: tail autostarts the daemon.
	p := e.tail("agent:early", "--from-start", "--until-result", "--no-deltas", "--wait")
	e.waitTopic("agent:early", 1)
	if id := e.ok("open", "--id", "early", e.work); id != "early" {
		t.Fatalf("open printed %q", id)
	}
	e.ok("send", "early", "hello there")
	if code := p.wait(); code != 0 {
		t.Fatalf("live --until-result exited %d: %s", code, p.stderr.String())
	}
	envs := p.envelopes()
	if envs[0].Seq != 1 || envs[len(envs)-1].Kind != event.Result || !strings.Contains(p.stderr.String(), "no agent early yet; waiting for it to be opened") {
		t.Fatalf("live --until-result printed %d envelopes, from seq %d to %s; stderr %q", len(envs), envs[0].Seq, envs[len(envs)-1].Kind, p.stderr.String())
	}

	e.fails(3, "failed", "run", "early", "please fail")
	for _, c := range []struct {
		turn string
		code int
	}{{"1", 0}, {"2", 3}} {
		r := e.kaimon("tail", "agent:early", "--from-start", "--turn", c.turn, "--until-result", "--kinds", "result")
		var env event.Envelope
		if r.code != c.code || json.Unmarshal([]byte(r.stdout), &env) != nil || env.Kind != event.Result || env.Turn != atoi(c.turn) {
			t.Fatalf("replayed --until-result of turn %s: want exit %d and the result alone; got %s", c.turn, c.code, r)
		}
	}
	// --pretty of a replayed turn.
	r := e.kaimon("tail", "agent:early", "--from-start", "--turn", "1", "--until-result", "--pretty")
	for _, want := range []string{"> hello there", "── turn 1 ──", "Hello from fakeapi", "✓ turn 1 end_turn  tokens in 100, out 20"} {
		if r.code != 0 || !strings.Contains(r.stdout, want) {
			t.Fatalf("--pretty: want %q in\n%s", want, r)
		}
	}

	e.fails(2, "exactly one channel agent:ID", "tail", "--since", "3")
	e.fails(2, "exactly one channel agent:ID", "tail", "agent:a", "agent:b", "--from-start")
	e.fails(2, `unknown kind "bogus"`, "tail", "--kinds", "result,bogus")
	e.fails(2, "agent channels are", "tail", "status:")
}

func atoi(s string) int { n, _ := strconv.Atoi(s); return n }

// Many agents at once on one subscriber: every agent's stream is whole,
// in order, and its deltas add up to its text.
func TestBusManyAgents(t *testing.T) {
	const agents, chunks = 4, 300
	e := newEnv(t)
	ids := make([]string, agents)
	var opens sync.WaitGroup
	for i := range ids {
		opens.Add(1)
		go func() {
			defer opens.Done()
			r := e.kaimon("open", e.work)
			if r.code != 0 {
				t.Errorf("open: %s", r)
			}
			ids[i] = strings.TrimSpace(r.stdout)
		}()
	}
	opens.Wait()
	if t.Failed() {
		t.FailNow()
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sub, err := bus.Dial(ctx, e.busEndpoint())
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	if err := sub.Subscribe("agent:"); err != nil {
		t.Fatal(err)
	}
	if err := sub.Sync(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for _, id := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if r := e.kaimon("send", id, fmt.Sprintf("stream %d chunks", chunks)); r.code != 0 {
				t.Errorf("send: %s", r)
			}
		}()
	}
	per := map[string][]event.Envelope{}
	done := 0
	for done < agents {
		m, err := sub.Next()
		if err != nil {
			t.Fatal(err)
		}
		var env event.Envelope
		mustJSON(t, m.Body, &env)
		if m.Topic != "agent:"+env.AgentID {
			t.Fatalf("topic %q for agent %s", m.Topic, env.AgentID)
		}
		if n := len(per[env.AgentID]); n > 0 && per[env.AgentID][n-1].Kind == event.Result {
			continue // this agent's turn is over (status idle follows)
		}
		per[env.AgentID] = append(per[env.AgentID], env)
		if env.Kind == event.Result {
			done++
		}
	}
	wg.Wait()
	var want strings.Builder
	for i := 0; i < chunks; i++ {
		fmt.Fprintf(&want, "tok%d ", i)
	}
	for _, id := range ids {
		envs := per[id]
		got := shape(t, envs) // contiguous, deltas add up
		if got != "status:working user_text turn_started assistant_text(delta)… assistant_text usage result" {
			t.Fatalf("agent %s: %s", id, got)
		}
		if n := countDeltas(envs); n < chunks/2 {
			t.Fatalf("agent %s: %d deltas for %d chunks", id, n, chunks)
		}
		var d event.TextData
		mustJSON(t, envs[len(envs)-3].Data, &d)
		if strings.TrimSpace(d.Content.Text) != strings.TrimSpace(want.String()) {
			t.Fatalf("agent %s text = %.80q…", id, d.Content.Text)
		}
	}
}

// GET /v1/agents/{id}/events: without follow the log, then the end; with
// follow the log and then live envelopes, deltas included, with no gap.
func TestEventsEndpoint(t *testing.T) {
	e := newEnv(t)
	id := e.ok("open", e.work, "--allow", "Bash")
	cl := e.client()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	w, err := cl.Events(ctx, id, 0, true)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	e.ok("send", id, "please use a tool")
	var envs []event.Envelope
	for {
		env, err := w.Next()
		if err != nil {
			t.Fatal(err)
		}
		envs = append(envs, *env)
		if env.Kind == event.Result {
			break
		}
	}
	for i, env := range envs {
		if env.Seq != uint64(i+1) || env.AgentID != id {
			t.Fatalf("followed stream: envelope %d has seq %d, agent %s", i, env.Seq, env.AgentID)
		}
	}
	var turn []event.Envelope
	for _, env := range envs {
		if env.Turn == 1 {
			turn = append(turn, env)
		}
	}
	if got := shape(t, turn); got != theTurn {
		t.Fatalf("followed turn:\n got %s\nwant %s", got, theTurn)
	}

	// Without follow: the log after since, and the end.
	w2, err := cl.Events(ctx, id, 3, false)
	if err != nil {
		t.Fatal(err)
	}
	defer w2.Close()
	var fromLog []event.Envelope
	for {
		env, err := w2.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		fromLog = append(fromLog, *env)
	}
	var logged []uint64
	for _, r := range e.logOf(id) {
		if r.Seq > 3 {
			logged = append(logged, r.Seq)
		}
	}
	if len(fromLog) != len(logged) || len(logged) == 0 || countDeltas(fromLog) != 0 || fromLog[0].Seq != logged[0] {
		t.Fatalf("log stream: %d envelopes; the log has %d after seq 3", len(fromLog), len(logged))
	}

	var ve *verbs.Error
	if _, err := cl.Events(ctx, "ghost", 0, false); !errors.As(err, &ve) || ve.Code != verbs.CodeNotFound {
		t.Fatalf("unknown agent: %v", err)
	}
	var st map[string]any
	err = cl.Do(ctx, "GET", "/v1/agents/"+id+"/events?since=x", nil, &st)
	if !errors.As(err, &ve) || ve.Code != verbs.CodeBadArgument {
		t.Fatalf("bad since: %v", err)
	}
}

// A stalled subscriber (connected, subscribed, never reading) while an
// agent streams thousands of deltas: a fast subscriber still sees every
// envelope, the stalled one's queue stays within its bound, and its drops
// are counted in daemon status. (How long the turn takes, with and without
// it, is BenchmarkBusStalledSubscriber's business, not a test's.) The
// queues are bounded at 1 MiB here (bus_queue_bytes): the default 32 MiB
// absorbs these turns whole.
func TestBusStalledSubscriber(t *testing.T) {
	const turns, chunks = 2, 5000
	e := newEnv(t)
	if err := os.WriteFile(filepath.Join(e.home, "config.json"), []byte(`{"bus_queue_bytes": 1048576}`), 0o600); err != nil {
		t.Fatal(err)
	}
	id := e.ok("open", e.work)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stalled, err := bus.Dial(ctx, e.busEndpoint())
	if err != nil {
		t.Fatal(err)
	}
	defer stalled.Close()
	if err := stalled.Subscribe("agent:"); err != nil {
		t.Fatal(err)
	}
	if err := stalled.Sync(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	fast := startFastSub(t, ctx, e)
	for i := 0; i < turns; i++ {
		e.ok("run", id, fmt.Sprintf("stream %d chunks", chunks))
	}
	envs := fast.until(t, func(envs []event.Envelope) bool {
		n := 0
		for _, env := range envs {
			if env.Kind == event.Result {
				n++
			}
		}
		return n == turns
	})
	for i := 1; i < len(envs); i++ {
		if envs[i].Seq != envs[i-1].Seq+1 {
			t.Fatalf("the fast subscriber missed seq %d..%d", envs[i-1].Seq+1, envs[i].Seq-1)
		}
	}
	if n := countDeltas(envs); n < turns*chunks/2 {
		t.Fatalf("the fast subscriber saw %d deltas", n)
	}
	st := e.busStats()
	var worst apitype.SubscriberStats
	for _, c := range st.Connections {
		if c.Dropped > worst.Dropped {
			worst = c
		}
	}
	if worst.Dropped == 0 || st.Dropped < worst.Dropped {
		t.Fatalf("no drops counted for the stalled subscriber: %+v", st)
	}
	if st.QueueBytes != 1<<20 || worst.QueuedBytes > st.QueueBytes {
		t.Fatalf("the stalled queue outgrew its bound: %+v (limit %d bytes)", worst, st.QueueBytes)
	}
	t.Logf("published %d; stalled subscriber: sent %d, queued %d (%d bytes), dropped %d; fast subscriber: %d envelopes, none lost",
		st.Published, worst.Sent, worst.Queued, worst.QueuedBytes, worst.Dropped, len(envs))
}

// fastSub reads the bus as fast as it can, in a goroutine.
type fastSub struct {
	mu      sync.Mutex
	envs    []event.Envelope
	lat     []time.Duration // receive time minus the envelope's ts
	changed chan struct{}
	err     error
}

func startFastSub(t testing.TB, ctx context.Context, e *kenv) *fastSub {
	sub, err := bus.Dial(ctx, e.busEndpoint())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sub.Close() })
	if err := sub.Subscribe("agent:"); err != nil {
		t.Fatal(err)
	}
	if err := sub.Sync(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	f := &fastSub{changed: make(chan struct{})}
	go func() {
		for {
			m, err := sub.Next()
			now := time.Now()
			f.mu.Lock()
			if err != nil {
				f.err = err
				close(f.changed)
				f.mu.Unlock()
				return
			}
			var env event.Envelope
			if json.Unmarshal(m.Body, &env) == nil {
				f.envs = append(f.envs, env)
				f.lat = append(f.lat, now.Sub(env.TS))
			}
			close(f.changed)
			f.changed = make(chan struct{})
			f.mu.Unlock()
		}
	}()
	return f
}

func (f *fastSub) until(t testing.TB, cond func([]event.Envelope) bool) []event.Envelope {
	t.Helper()
	timeout := time.After(2 * time.Minute)
	for {
		f.mu.Lock()
		envs, ch, err := f.envs, f.changed, f.err
		f.mu.Unlock()
		if cond(envs) {
			return envs
		}
		if err != nil {
			t.Fatalf("fast subscriber: %v", err)
		}
		select {
		case <-ch:
		case <-timeout:
			t.Fatal("fast subscriber: timed out")
		}
	}
}

// reset forgets what was read so far.
func (f *fastSub) reset() {
	f.mu.Lock()
	f.envs, f.lat = nil, nil
	f.mu.Unlock()
}

// Tool-result PNGs larger than agent_image_max_long_edge are
// box-downsampled before the log and the bus see them: the real claude
// CLI reads a PNG with its Read tool and the image arrives shrunk.
func TestImagesShrunk(t *testing.T) {
	e := newEnv(t)
	if err := os.WriteFile(filepath.Join(e.home, "config.json"), []byte(`{"agent_image_max_long_edge": 200}`), 0o600); err != nil {
		t.Fatal(err)
	}
	img := image.NewNRGBA(image.Rect(0, 0, 1000, 400))
	for y := 0; y < 400; y++ {
		for x := 0; x < 1000; x++ {
			img.SetNRGBA(x, y, color.NRGBA{uint8(x / 4), uint8(y / 2), 90, 255})
		}
	}
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(e.work, "big.png")
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	id := e.ok("open", e.work)
	live := e.tail("agent:"+id, "--kinds", "tool_result", "--until-result")
	e.waitTopic("agent:"+id, 1)
	e.ok("run", id, "please read "+path)
	if code := live.wait(); code != 0 {
		t.Fatalf("tail exited %d: %s", code, live.stderr.String())
	}
	check := func(where string, data []byte) {
		t.Helper()
		var found bool
		gjson.GetBytes(data, "update.content").ForEach(func(_, c gjson.Result) bool {
			if c.Get("content.type").String() != "image" {
				return true
			}
			found = true
			raw, err := base64.StdEncoding.DecodeString(c.Get("content.data").String())
			if err != nil {
				t.Fatalf("%s: %v", where, err)
			}
			cfg, err := png.DecodeConfig(bytes.NewReader(raw))
			if err != nil || cfg.Width != 200 || cfg.Height != 80 {
				t.Fatalf("%s: image %dx%d (%v), want 200x80", where, cfg.Width, cfg.Height, err)
			}
			return true
		})
		if !found {
			t.Fatalf("%s: no image in the tool result %.300s", where, data)
		}
	}
	envs := live.envelopes()
	if len(envs) != 1 {
		t.Fatalf("tail printed %d tool results", len(envs))
	}
	check("bus", envs[0].Data)
	for _, r := range e.logOf(id) {
		if r.Kind == event.ToolResult {
			check("log", r.Data)
			if !bytes.Equal(r.Data, envs[0].Data) {
				t.Fatal("the log and the bus carry different tool results")
			}
		}
	}
}
