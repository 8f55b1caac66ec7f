package mcpserver

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/kaimon/kaimon/internal/apitype"
	"github.com/kaimon/kaimon/internal/event"
	"github.com/kaimon/kaimon/internal/server/servertest"
	"github.com/kaimon/kaimon/internal/verbs"
)

// TestStateKeyOnce: the key is made once, 0600, and every server of the
// state dir (one after a restart, two starting at once) has the same.
func TestStateKeyOnce(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	key := filepath.Join(dir, "mcp-state.key")
	keys := make([][]byte, 8)
	var wg sync.WaitGroup
	for i := range keys {
		wg.Add(1)
		go func() {
			defer wg.Done()
			k, err := loadKey(key)
			if err != nil {
				t.Error(err)
			}
			keys[i] = k
		}()
	}
	wg.Wait()
	for _, k := range keys[1:] {
		if string(k) != string(keys[0]) || len(k) != 32 {
			t.Fatalf("keys differ: %x %x", k, keys[0])
		}
	}
	fi, err := os.Stat(key)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v %v", fi, err)
	}
	if left, _ := filepath.Glob(key + ".*"); len(left) != 0 {
		t.Fatalf("temporary files left: %v", left)
	}
	if err := os.WriteFile(key, []byte("junk\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := loadKey(key); err == nil || !strings.Contains(err.Error(), "remove it") {
		t.Fatalf("a damaged key: %v", err)
	}
}

// TestRequestState: a sealed state opens under the same key (a restarted
// server's), for the same call only, until it lapses; altered, or under
// another key, it does not; used, it is refused the second time.
func TestRequestState(t *testing.T) {
	dir := t.TempDir()
	key, used := filepath.Join(dir, "k"), filepath.Join(dir, "u")
	now := time.Now()
	run := verbs.ByName("run")
	call := callDigest(run, &verbs.RunArgs{AgentID: "ab12", Text: "hi", Timeout: 600})
	st := roundState{Agent: "ab12", Turn: 3, Request: "r1", Key: inputKeyPrefix + "r1", Call: call,
		Deadline: now.Add(time.Minute).UnixMilli(), Expires: now.Add(time.Hour).UnixMilli()}
	a := newRounds(key, used)
	s, err := a.seal(st)
	if err != nil {
		t.Fatal(err)
	}
	b := newRounds(key, used) // after a restart
	got, err := b.open(s, call, now)
	if err != nil || got.Agent != "ab12" || got.Turn != 3 || got.Request != "r1" || got.Nonce == "" {
		t.Fatalf("open = %+v, %v", got, err)
	}
	if _, err := b.open(s, callDigest(run, &verbs.RunArgs{AgentID: "ab12", Text: "other", Timeout: 600}), now); err == nil ||
		!strings.Contains(err.Error(), "other arguments") {
		t.Fatalf("another call's state: %v", err)
	}
	if _, err := b.open(s, call, now.Add(2*time.Hour)); err == nil || !strings.Contains(err.Error(), "lapsed") {
		t.Fatalf("a lapsed state: %v", err)
	}
	for i := range len(s) {
		alt := []byte(s)
		alt[i] ^= 1
		if _, err := b.open(string(alt), call, now); err == nil {
			t.Fatalf("state altered at %d opened", i)
		}
	}
	if _, err := newRounds("", "").open(s, call, now); err == nil || !strings.Contains(err.Error(), "fails verification") {
		t.Fatalf("another key's state: %v", err)
	}
	if err := b.consume(got, now); err != nil {
		t.Fatal(err)
	}
	if err := a.consume(got, now); err != errReplayed {
		t.Fatalf("replayed (to the other server): %v", err)
	}
	// Lapsed states are dropped from the record.
	if err := a.consume(roundState{Nonce: "later", Expires: now.Add(3 * time.Hour).UnixMilli()}, now.Add(2*time.Hour)); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(used); strings.Contains(string(b), got.Nonce) || !strings.Contains(string(b), "later") {
		t.Fatalf("used record: %q", b)
	}
	mem := newRounds("", "")
	if err := mem.consume(got, now); err != nil || mem.consume(got, now) != errReplayed {
		t.Fatal("in memory, a state is used once")
	}
	// In memory too, lapsed states are dropped from the record.
	if err := mem.consume(roundState{Nonce: "later", Expires: now.Add(3 * time.Hour).UnixMilli()}, now.Add(2*time.Hour)); err != nil {
		t.Fatal(err)
	}
	if _, kept := mem.used[got.Nonce]; kept || len(mem.used) != 1 {
		t.Fatalf("used in memory: %v", mem.used)
	}
}

// TestRoundsRefuse: what is not an MRTR round of ours is said to be so,
// and nothing is sent or answered for it; a call of a legacy client, or of
// a client without form elicitation, is no round.
func TestRoundsRefuse(t *testing.T) {
	fake := &servertest.Fake{}
	or := newOrchestrator(context.Background(), fake, Options{}, io.Discard)
	modern := func(caps mcp.ClientCapabilities) context.Context {
		return server.WithRequestProtocolInfo(context.Background(), &server.RequestProtocolInfo{Modern: true, ProtocolVersion: "2026-07-28", ClientCapabilities: &caps})
	}
	form := modern(mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapability{Form: &struct{}{}}})
	run, list := verbs.ByName("run"), verbs.ByName("list")
	ra := &verbs.RunArgs{AgentID: "ab12", Text: "hi", Timeout: 600}
	retry := func(state string, responses mcp.InputResponses) mcp.CallToolRequest {
		var req mcp.CallToolRequest
		req.Params.RequestState, req.Params.InputResponses = state, responses
		return req
	}
	answer := mcp.InputResponses{"x": mcp.NewElicitationInputResponse(mcp.ElicitationResult{})}
	// A state of ours, for a client that no longer declares form
	// elicitation: the refusal names its request.
	sealed, err := or.rt.seal(roundState{Agent: "ab12", Turn: 1, Request: "r7", Key: inputKeyPrefix + "r7", Call: callDigest(run, ra),
		Deadline: time.Now().Add(time.Minute).UnixMilli(), Expires: time.Now().Add(time.Hour).UnixMilli()})
	if err != nil {
		t.Fatal(err)
	}
	text := func(t *testing.T, r *mcp.CallToolResult) string {
		t.Helper()
		if r == nil || !r.IsError || len(r.Content) != 1 {
			t.Fatalf("not a tool error: %+v", r)
		}
		return r.Content[0].(mcp.TextContent).Text
	}
	for _, tc := range []struct {
		name string
		ctx  context.Context
		v    *verbs.Verb
		args any
		req  mcp.CallToolRequest
		want string // "" for no round (nil)
	}{
		{"legacy", context.Background(), run, ra, mcp.CallToolRequest{}, ""},
		{"no form", modern(mcp.ClientCapabilities{}), run, ra, mcp.CallToolRequest{}, ""},
		{"other tool", form, list, &verbs.ListArgs{}, mcp.CallToolRequest{}, ""},
		{"other tool's state", form, list, &verbs.ListArgs{}, retry("s", nil), "asks for no input"},
		{"state without form", modern(mcp.ClientCapabilities{}), run, ra, retry("s", nil), "declares elicitation (form)"},
		// A refused retry of agent_run says to answer the request with
		// agent_permit: calling agent_run again would send a new turn.
		{"state without form: what to do", modern(mcp.ClientCapabilities{}), run, ra, retry("s", nil),
			"answer agent ab12's pending permission request (agent_status lists its request_id) with agent_permit, and read the turn with agent_output"},
		{"our state without form", modern(mcp.ClientCapabilities{}), run, ra, retry(sealed, answer),
			"answer agent ab12's pending permission request r7 with agent_permit"},
		{"legacy state", context.Background(), run, ra, retry("s", nil), "asks for no input"},
		{"legacy state: what to do", context.Background(), run, ra, retry("s", nil), "with agent_permit, and read the turn"},
		{"answers without state", form, run, ra, retry("", answer), "without the requestState"},
		{"forged state", form, run, ra, retry("e30.AAAA", answer), "fails verification"},
		{"forged state: what to do", form, run, ra, retry("e30.AAAA", answer), "answer agent ab12's pending permission request (agent_status"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := or.rounds(tc.ctx, tc.v, tc.args, tc.req)
			if tc.want == "" {
				if r != nil {
					t.Fatalf("a round: %+v", r)
				}
				return
			}
			got := text(t, r)
			if !strings.Contains(got, tc.want) {
				t.Fatalf("error %q, want %q in it", got, tc.want)
			}
			if tc.v == run && strings.Contains(got, "without inputResponses and requestState") {
				t.Fatalf("error %q tells to call agent_run again, which sends a new turn", got)
			}
		})
	}
	if calls := fake.Calls(); len(calls) != 0 {
		t.Fatalf("refused calls reached the daemon: %+v", calls)
	}
}

// TestAskParams: the question says what the request is and when it is
// denied if nobody answers, as agent_status says it.
func TestAskParams(t *testing.T) {
	p := event.PermissionData{RequestID: "r1", ExpiresAt: "2026-12-03T14:00:00Z", ToolCall: event.ToolCall{Title: "Bash"}}
	msg := askParams(askKey{"ab12", "r1"}, p, "").Message
	if !strings.Contains(msg, "Agent ab12 asks to run Bash") || !strings.HasSuffix(msg, " Denied if unanswered by 2026-12-03T14:00:00Z.") {
		t.Fatalf("message %q", msg)
	}
	p.ExpiresAt = ""
	if msg := askParams(askKey{"ab12", "r1"}, p, "").Message; strings.Contains(msg, "unanswered") {
		t.Fatalf("no expiry, yet the message says one: %q", msg)
	}
}

// formCtx is the context of a 2026-07-28 call whose client declares form
// elicitation.
func formCtx() context.Context {
	caps := mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapability{Form: &struct{}{}}}
	return server.WithRequestProtocolInfo(context.Background(), &server.RequestProtocolInfo{Modern: true, ProtocolVersion: "2026-07-28", ClientCapabilities: &caps})
}

// pendingEnvelope is the permission event of agent's request id, not
// decided.
func pendingEnvelope(agent, id string, turn int) Envelope {
	b, _ := json.Marshal(event.PermissionData{RequestID: id, ToolCall: event.ToolCall{Title: "Bash"}})
	return Envelope{Agent: agent, Kind: event.Permission, Turn: turn, Data: b}
}

// TestRoundsElicitPolicy: --elicit holds for a 2026-07-28 client as for a
// 2025-11-25 one. never: agent_run asks in no round (it runs as it always
// has, its requests left to agent_permit or their expiry), and a retry is
// refused, saying what to do; own and all: agent_run's agent is the
// session's, and its request is asked as a round.
func TestRoundsElicitPolicy(t *testing.T) {
	run := verbs.ByName("run")
	// A short timeout: a call that wrongly waits on the turn ends.
	ra := &verbs.RunArgs{AgentID: "ab12", Text: "hi", Timeout: 0.2}
	for _, mode := range []string{verbs.ElicitNever, verbs.ElicitOwn, verbs.ElicitAll} {
		t.Run(mode, func(t *testing.T) {
			fake := (&servertest.Fake{}).Returns("send", &verbs.SendResult{Turn: 2}, nil)
			or := newOrchestrator(context.Background(), fake, Options{Elicit: mode}, io.Discard)
			or.envelope(pendingEnvelope("ab12", "r1", 2))
			r := or.rounds(formCtx(), run, ra, mcp.CallToolRequest{})
			if mode == verbs.ElicitNever {
				if r != nil {
					t.Fatalf("--elicit never, and agent_run asked in a round (or waited in one): %+v", r)
				}
				if calls := fake.Calls(); len(calls) != 0 {
					t.Fatalf("no round, yet the call reached the daemon: %+v", calls)
				}
				var req mcp.CallToolRequest
				req.Params.RequestState = "e30.AAAA"
				r = or.rounds(formCtx(), run, ra, req)
				if r == nil || !r.IsError || !strings.Contains(r.Content[0].(mcp.TextContent).Text, "--elicit never") ||
					!strings.Contains(r.Content[0].(mcp.TextContent).Text, "with agent_permit") {
					t.Fatalf("a retry under --elicit never: %+v", r)
				}
				return
			}
			if r == nil || r.ResultType != mcp.ResultTypeInputRequired || len(r.InputRequests) != 1 || r.RequestState == "" {
				t.Fatalf("--elicit %s: no round for the agent's request: %+v", mode, r)
			}
			if _, ok := r.InputRequests[inputKeyPrefix+"r1"]; !ok {
				t.Fatalf("--elicit %s: the round asks %v, not request r1", mode, r.InputRequests)
			}
		})
	}
}

// resultEnvelope is the end of agent's turn n, with stop and why.
func resultEnvelope(agent string, n int, stop apitype.StopReason, why string) Envelope {
	b, _ := json.Marshal(event.ResultData{StopReason: stop, Error: why})
	return Envelope{Agent: agent, Kind: event.Result, Turn: n, Data: b}
}

// TestRoundsForgotten: what is kept of an agent's turns and requests goes
// with it. Forgotten (agent_forget through this server) or started anew
// (status starting), the agent's ended turns and pending requests are
// dropped, and another agent's kept; and agent_run of a turn it sends
// never takes the end of a turn of that number that ended before, which
// is an earlier agent's of the id whose forget the server has not seen.
func TestRoundsForgotten(t *testing.T) {
	run := verbs.ByName("run")
	fake := &servertest.Fake{}
	or := newOrchestrator(context.Background(), fake, Options{}, io.Discard)
	or.srv = server.NewMCPServer("test", "0")
	fill := func() {
		for _, a := range []string{"ab12", "cd34"} {
			or.rt.envelope(resultEnvelope(a, 1, apitype.StopError, "the old agent's failure"))
			or.rt.envelope(pendingEnvelope(a, "r1", 2))
		}
	}
	kept := func(t *testing.T, agent string) (ended, pending bool) {
		t.Helper()
		or.rt.mu.Lock()
		defer or.rt.mu.Unlock()
		_, pending = or.rt.pending[askKey{agent, "r1"}]
		return len(or.rt.ended[agent]) > 0, pending
	}
	starting, _ := json.Marshal(event.StatusData{Status: apitype.Starting})
	for _, tc := range []struct {
		name string
		drop func()
	}{
		{"forgotten", func() { or.called(&verbs.ForgetResult{Forgotten: []string{"ab12"}}) }},
		{"starting", func() { or.rt.envelope(Envelope{Agent: "ab12", Kind: event.Status, Data: starting}) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fill()
			tc.drop()
			if ended, pending := kept(t, "ab12"); ended || pending {
				t.Fatalf("kept of the agent dropped: ended turns %v, pending requests %v", ended, pending)
			}
			if ended, pending := kept(t, "cd34"); !ended || !pending {
				t.Fatalf("kept of another agent dropped: ended turns %v, pending requests %v", ended, pending)
			}
		})
	}
	t.Run("sent after an old turn of the number ended", func(t *testing.T) {
		or.rt.forget("ab12", "cd34")
		or.rt.envelope(resultEnvelope("ab12", 1, apitype.StopError, "the old agent's failure"))
		fake.Returns("send", &verbs.SendResult{Turn: 1}, nil)
		// The new agent's turn 1 does not end here: the call waits on it
		// until its (short) timeout, rather than answer with the old end.
		r := or.rounds(formCtx(), run, &verbs.RunArgs{AgentID: "ab12", Text: "hi", Timeout: 0.1}, mcp.CallToolRequest{})
		if r == nil || !r.IsError || len(r.Content) != 1 {
			t.Fatalf("agent_run of the new agent's turn 1: %+v", r)
		}
		if got := r.Content[0].(mcp.TextContent).Text; strings.Contains(got, "old agent's failure") || !strings.Contains(got, "still running") {
			t.Fatalf("agent_run of the new agent's turn 1 took the old agent's turn 1: %s", got)
		}
	})
}

// TestRoundsPermitFails: an answer that does not reach the daemon (its
// Permit fails, not for a request decided or expired) is asked again in a
// fresh round, with a new state, saying why: the state answered is spent,
// and calling agent_run anew would send the turn again.
func TestRoundsPermitFails(t *testing.T) {
	run := verbs.ByName("run")
	ra := &verbs.RunArgs{AgentID: "ab12", Text: "hi", Timeout: 600}
	fake := (&servertest.Fake{}).Returns("permit", nil, &verbs.Error{Code: verbs.CodeUnavailable, Message: "the daemon is restarting"})
	or := newOrchestrator(context.Background(), fake, Options{}, io.Discard)
	or.rt.envelope(pendingEnvelope("ab12", "r1", 2))
	now := time.Now()
	state, err := or.rt.seal(roundState{Agent: "ab12", Turn: 2, Request: "r1", Key: inputKeyPrefix + "r1", Call: callDigest(run, ra),
		Deadline: now.Add(time.Minute).UnixMilli(), Expires: now.Add(time.Hour).UnixMilli()})
	if err != nil {
		t.Fatal(err)
	}
	var req mcp.CallToolRequest
	req.Params.RequestState = state
	req.Params.InputResponses = mcp.InputResponses{inputKeyPrefix + "r1": mcp.NewElicitationInputResponse(mcp.ElicitationResult{
		ElicitationResponse: mcp.ElicitationResponse{Action: mcp.ElicitationResponseActionAccept}})}
	r := or.rounds(formCtx(), run, ra, req)
	if r == nil || r.ResultType != mcp.ResultTypeInputRequired || r.RequestState == "" || r.RequestState == state {
		t.Fatalf("an answer that did not reach the daemon: %+v", r)
	}
	in, ok := r.InputRequests[inputKeyPrefix+"r1"]
	if !ok || in.Elicitation == nil || !strings.Contains(in.Elicitation.Message, "could not be passed on (the daemon is restarting)") {
		t.Fatalf("the fresh round does not ask request r1 again saying why: %+v", r.InputRequests)
	}
	st, err := or.rt.open(r.RequestState, callDigest(run, ra), now)
	if err != nil || st.Request != "r1" || st.Turn != 2 || st.Deadline != now.Add(time.Minute).UnixMilli() {
		t.Fatalf("the fresh round's state: %+v, %v", st, err)
	}
	if err := or.rt.consume(st, now); err != nil {
		t.Fatalf("the fresh round's state is spent already: %v", err)
	}
}

// elicitSession is a client session of a 2025-11-25 client that declares
// form elicitation: the elicitations sent to it come out of asked, and
// wait for their context's end.
type elicitSession struct{ asked chan mcp.ElicitationRequest }

func (s *elicitSession) Initialize()       {}
func (s *elicitSession) Initialized() bool { return true }
func (s *elicitSession) NotificationChannel() chan<- mcp.JSONRPCNotification {
	return make(chan mcp.JSONRPCNotification, 8)
}
func (s *elicitSession) SessionID() string                            { return "s1" }
func (s *elicitSession) GetClientInfo() mcp.Implementation            { return mcp.Implementation{Name: "test"} }
func (s *elicitSession) SetClientInfo(mcp.Implementation)             {}
func (s *elicitSession) SetClientCapabilities(mcp.ClientCapabilities) {}
func (s *elicitSession) GetClientCapabilities() mcp.ClientCapabilities {
	return mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapability{}}
}
func (s *elicitSession) RequestElicitation(ctx context.Context, r mcp.ElicitationRequest) (*mcp.ElicitationResult, error) {
	s.asked <- r
	<-ctx.Done()
	return nil, ctx.Err()
}

// TestModernFlag: whether the client is a 2026-07-28 one is one flag, set
// by a request of a version mcp-go serves and reset by initialize. A
// client that probes server/discover and falls back to initialize (as the
// claude CLI does when discover goes unanswered) is asked about its
// agents' permission requests by elicitation, as any 2025-11-25 client.
func TestModernFlag(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	or := newOrchestrator(ctx, &servertest.Fake{}, Options{Elicit: verbs.ElicitAll}, io.Discard)
	defer or.wait()
	defer cancel()
	or.srv = server.NewMCPServer("test", "0", server.WithElicitation())
	sess := &elicitSession{asked: make(chan mcp.ElicitationRequest, 1)}
	or.session = sess
	request := func(method, version string) {
		t.Helper()
		m := map[string]any{"jsonrpc": "2.0", "id": 1, "method": method, "params": map[string]any{}}
		if version != "" {
			m["params"] = map[string]any{"_meta": map[string]any{"io.modelcontextprotocol/protocolVersion": version}}
		}
		b, _ := json.Marshal(m)
		if err := or.checkRequest(ctx, 1, json.RawMessage(b)); err != nil {
			t.Fatalf("%s: %v", method, err)
		}
	}
	asking := func(id string) bool {
		or.permission(pendingEnvelope("ab12", id, 1))
		or.mu.Lock()
		defer or.mu.Unlock()
		return or.asks[askKey{"ab12", id}] != nil
	}
	request(string(mcp.MethodServerDiscover), "2099-01-01") // not a version mcp-go serves
	if or.isModern() {
		t.Fatal("a request of protocol 2099-01-01, which mcp-go refuses, made the client a 2026-07-28 one")
	}
	request(string(mcp.MethodServerDiscover), mcp.ProtocolVersion20260728)
	if !or.isModern() || asking("r1") {
		t.Fatalf("after server/discover: modern %v; and a permission request went out as an elicitation to a 2026-07-28 client", or.isModern())
	}
	request(string(mcp.MethodInitialize), "")
	if or.isModern() {
		t.Fatal("initialize after server/discover left the client a 2026-07-28 one")
	}
	if !asking("r2") {
		t.Fatal("a client that initialized after server/discover is not asked by elicitation")
	}
	if got := <-sess.asked; !strings.Contains(got.Params.Message, "Agent ab12 asks") {
		t.Fatalf("elicitation: %+v", got)
	}
}
