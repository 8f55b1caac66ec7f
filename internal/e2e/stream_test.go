package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/kaimon/kaimon/internal/client"
	"github.com/kaimon/kaimon/internal/event"
	"github.com/kaimon/kaimon/internal/follow"
)

// cuttable dials the daemon's socket and can cut every connection it made,
// as a killed ssh master cuts the channel to a remote daemon.
type cuttable struct {
	sock  string
	mu    sync.Mutex
	conns []net.Conn
	dials int
	down  bool // the link is down: dials fail
}

func (c *cuttable) dial(ctx context.Context) (net.Conn, error) {
	c.mu.Lock()
	down := c.down
	c.mu.Unlock()
	if down {
		return nil, errors.New("cuttable: the link is down")
	}
	conn, err := (&net.Dialer{}).DialContext(ctx, "unix", c.sock)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.conns = append(c.conns, conn)
	c.dials++
	c.mu.Unlock()
	return conn, nil
}

func (c *cuttable) setDown(down bool) {
	c.mu.Lock()
	c.down = down
	c.mu.Unlock()
}

func (c *cuttable) cut() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, conn := range c.conns {
		conn.Close()
	}
	c.conns = nil
}

// Agents run turns while follow.Remote follows every agent through GET
// /v1/events, and its connection is cut mid-turn, again and again, then
// held down while an idle agent runs a turn and a new one is opened and
// runs one: every authoritative event after where each agent started (its
// log) arrives once, in seq order per agent, and the cuts were reconnected
// and resumed. Agents a and b start where the consumer says (Since), d
// where the daemon says it started it (its end at the request), c, which
// appeared during the outage, at its start.
func TestStreamResumesAcrossCuts(t *testing.T) {
	e := newEnv(t)
	d := e.ok("open", e.work)
	a := e.ok("open", e.work)
	b := e.ok("open", e.work)
	start := map[string]uint64{}
	for _, id := range []string{a, b, d} {
		logged := e.logOf(id)
		start[id] = logged[len(logged)-1].Seq
	}
	dialer := &cuttable{sock: e.paths().Socket()}
	cl := &client.Client{Paths: e.paths(), NoAutostart: true, Dial: dialer.dial, Addr: "a cuttable connection"}
	t.Cleanup(cl.CloseIdleConnections)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	var (
		mu      sync.Mutex
		got     = map[string][]event.Envelope{}
		deltas  = map[string]int{} // per agent and turn: "ID/TURN"
		retries int
		lost    int
	)
	f, err := follow.Remote(ctx, cl, "agent:", follow.RemoteOptions{Since: map[string]uint64{a: start[a], b: start[b]}, Backoff: follow.Retry{Every: 50 * time.Millisecond, Max: 200 * time.Millisecond},
		Broke: func(err error, attempt int) {
			mu.Lock()
			retries++
			mu.Unlock()
		}})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	f.Lost = func(agent string, from, to uint64, n int) {
		mu.Lock()
		lost += n
		mu.Unlock()
	}
	done := make(chan error, 1)
	go func() {
		done <- f.Run(ctx, func(fe *follow.Envelope) error {
			env, err := fe.Decode()
			if err != nil {
				return err
			}
			mu.Lock()
			defer mu.Unlock()
			got[env.AgentID] = append(got[env.AgentID], *env)
			if !event.Authoritative(env.Kind, env.Data) {
				deltas[fmt.Sprintf("%s/%d", env.AgentID, env.Turn)]++
			}
			return nil
		})
	}()
	counted := func(f func() bool) func() bool {
		return func() bool { mu.Lock(); defer mu.Unlock(); return f() }
	}
	resulted := func(turn int) bool {
		for _, id := range []string{a, b} {
			ok := false
			for _, env := range got[id] {
				ok = ok || (env.Kind == event.Result && env.Turn == turn)
			}
			if !ok {
				return false
			}
		}
		return true
	}
	cuts := 0
	for turn := 1; turn <= 2; turn++ {
		e.ok("send", a, "please be slow")
		e.ok("send", b, "please be slow")
		for _, n := range []int{4, 12} {
			waitFor(t, fmt.Sprintf("%d chunks of turn %d of each agent", n, turn), 2*time.Minute, counted(func() bool {
				return deltas[fmt.Sprintf("%s/%d", a, turn)] >= n && deltas[fmt.Sprintf("%s/%d", b, turn)] >= n
			}))
			dialer.cut()
			cuts++
		}
		waitFor(t, fmt.Sprintf("the results of turn %d", turn), 2*time.Minute, counted(func() bool { return resulted(turn) }))
	}
	// The link goes down; meanwhile d, idle so far, runs a turn, and c is
	// opened and runs one: nothing of either has reached the consumer.
	dialer.setDown(true)
	dialer.cut()
	cuts++
	c := e.ok("open", e.work)
	e.ok("send", d, "say exactly: while you were away")
	e.ok("send", c, "say exactly: while you were away")
	for _, id := range []string{c, d} {
		waitFor(t, "the result of "+id+" in its log", 2*time.Minute, func() bool {
			b, _ := os.ReadFile(e.paths().Agent(id).Events)
			return bytes.Contains(b, []byte(`"kind":"result"`))
		})
	}
	mu.Lock()
	if len(got[c]) > 0 {
		t.Errorf("agent %s reached the consumer while the link was down", c)
	}
	mu.Unlock()
	dialer.setDown(false)
	// The log is written before the envelope is published: once the
	// results are in the logs, every record before them is too.
	for _, id := range []string{a, b, c, d} {
		logged := e.logOf(id)
		waitFor(t, "every logged record of "+id, 2*time.Minute, counted(func() bool {
			envs := got[id]
			return len(envs) > 0 && envs[len(envs)-1].Seq >= logged[len(logged)-1].Seq
		}))
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("follow ended with %v, want the context's end", err)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, id := range []string{a, b, c, d} {
		var authoritative []uint64
		for i, env := range got[id] {
			if i > 0 && env.Seq <= got[id][i-1].Seq {
				t.Fatalf("agent %s: seq %d after %d: a duplicate or out of order", id, env.Seq, got[id][i-1].Seq)
			}
			if event.Authoritative(env.Kind, env.Data) {
				authoritative = append(authoritative, env.Seq)
			}
		}
		var logged []uint64
		for _, r := range e.logOf(id) {
			if r.Seq > start[id] && r.Seq <= got[id][len(got[id])-1].Seq {
				logged = append(logged, r.Seq)
			}
		}
		if fmt.Sprint(authoritative) != fmt.Sprint(logged) {
			t.Fatalf("agent %s: authoritative seqs followed\n%v\nwant the log's\n%v", id, authoritative, logged)
		}
	}
	dialer.mu.Lock()
	dials := dialer.dials
	dialer.mu.Unlock()
	if retries <= cuts || dials <= cuts {
		t.Fatalf("%d cuts, %d reconnection attempts, %d dials: the cuts were not all reconnected, or none failed while the link was down", cuts, retries, dials)
	}
	t.Logf("%d cuts, %d reconnection attempts, %d dials, %d deltas lost", cuts, retries, dials, lost)
}
