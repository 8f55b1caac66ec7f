package e2e

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kaimon/kaimon/internal/apitype"
	"github.com/kaimon/kaimon/internal/client"
	"github.com/kaimon/kaimon/internal/config"
	"github.com/kaimon/kaimon/internal/event"
	"github.com/kaimon/kaimon/internal/follow"
	"github.com/kaimon/kaimon/internal/verbs"
)

// BenchmarkMRTRRound is what answering a permission request as an MRTR
// round costs (issue 29): the time from the daemon's permission event to
// its decision event (both as the agent's log stamps them), for a request
// of a claude CLI worker (default preset, fake API) answered at once two
// ways, interleaved one of each per op:
//
//	permit: a follower of the daemon's event stream (follow.Remote, in
//	        process) answers it through the control API (agent_permit),
//	        the least any answer elsewhere costs;
//	mrtr:   a raw 2026-07-28 client (rawMCP) of `kaimon mcp` gets agent_run's
//	        input_required and retries at once with accept: kaimon mcp's
//	        following of the stream, the round out over stdio, the retry
//	        in, the state's check and the permit.
//
// Each side has an agent of its own, so that the follower answers only
// its own. Medians are reported (permit-ms, mrtr-ms) and their difference
// (added-ms; the target is ≤ 5 ms).
func BenchmarkMRTRRound(b *testing.B) {
	e := newEnv(b, "KAIMON_PERMISSION_TIMEOUT", "120")
	e.ok("daemon", "start")
	c := startRawMCP(b, e, mrtrCaps)
	c.Discover()
	mine := mrtrOpen(b, c, e.work)
	other := e.ok("open", e.work)
	defer e.ok("close", mine)
	defer e.ok("close", other)
	cl := &client.Client{Paths: config.Paths{SockDir: filepath.Join(e.home, "sock"), CacheDir: filepath.Join(e.home, "cache", "agents")}, NoAutostart: true}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	fw, err := follow.Remote(ctx, cl, "agent:"+other, follow.RemoteOptions{})
	if err != nil {
		b.Fatal(err)
	}
	go func() {
		_ = fw.Run(ctx, func(ev *follow.Envelope) error {
			var p event.PermissionData
			if ev.Kind == event.Permission && json.Unmarshal(ev.Data, &p) == nil && p.Decision == "" {
				_, _ = cl.Permit(ctx, &verbs.PermitArgs{AgentID: other, RequestID: p.RequestID, Decision: apitype.Allow})
			}
			return nil
		})
	}()
	// A command outside the agent's directory asks permission (a
	// harmless one, such as true, is allowed unasked).
	n := 0
	next := func() string {
		n++
		return "run command: touch " + filepath.Join(e.home, "outside-"+strconv.Itoa(n))
	}
	agentOf := []string{other, mine} // each side's agent, as sides orders them
	sides := []benchSide{
		{"permit", func() {
			if _, err := cl.Run(ctx, &verbs.RunArgs{AgentID: other, Text: next()}); err != nil {
				b.Fatal(err)
			}
		}},
		{"mrtr", func() {
			args := map[string]any{"agent_id": mine, "text": next()}
			r := c.Tool("agent_run", args, nil)
			if r.ResultType != "input_required" || len(r.InputRequests) != 1 {
				b.Fatalf("not a round: %+v", r)
			}
			for key := range r.InputRequests {
				if r = c.Answer("agent_run", args, key, mrtrAccept, r.RequestState); r.IsError || r.ResultType == "input_required" {
					b.Fatalf("retry: %+v", r)
				}
			}
		}},
	}
	// The figure is the answer's time in the agent's log, not the call's.
	took := interleave(b, sides, func(k int, _ time.Duration) time.Duration { return lastAnswerTook(b, e, agentOf[k]) })
	pm, mm := ms(median(took["permit"])), ms(median(took["mrtr"]))
	b.ReportMetric(pm, "permit-ms")
	b.ReportMetric(mm, "mrtr-ms")
	b.ReportMetric(mm-pm, "added-ms")
}

// lastAnswerTook is the time from agent id's last permission request to
// its decision, as its log stamps them; the decision must be a user's
// allow.
func lastAnswerTook(b *testing.B, e *kenv, id string) time.Duration {
	raw, err := os.ReadFile(e.paths().Agent(id).Events)
	if err != nil {
		b.Fatal(err)
	}
	asked := map[string]time.Time{}
	var took time.Duration
	found := false
	for _, line := range strings.Split(string(raw), "\n") {
		var r event.Record
		var p event.PermissionData
		if json.Unmarshal([]byte(line), &r) != nil || r.Kind != event.Permission || json.Unmarshal(r.Data, &p) != nil {
			continue
		}
		if p.Decision == "" {
			asked[p.RequestID] = r.TS
			continue
		}
		if p.Decision != apitype.Allow || p.By != event.DecidedByUser {
			b.Fatalf("agent %s's request %s: %+v", id, p.RequestID, p)
		}
		took, found = r.TS.Sub(asked[p.RequestID]), !asked[p.RequestID].IsZero()
	}
	if !found {
		b.Fatalf("agent %s: no answered permission request in its log", id)
	}
	return took
}
