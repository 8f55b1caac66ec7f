package mcpserver

import (
	"bufio"
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/kaimon/kaimon/internal/apitype"
	"github.com/kaimon/kaimon/internal/event"
	"github.com/kaimon/kaimon/internal/verbs"
)

// Permissions as multi round-trip requests (MRTR, protocol 2026-07-28).
//
// A 2026-07-28 client takes no server-initiated request, so the
// elicitation of elicit.go is not for it. Instead agent_run, when its turn
// meets a permission request of the agent and the call's _meta declares
// elicitation in form mode, returns resultType input_required with the
// same elicitation (askParams) as an input request and a requestState. The
// turn goes on waiting in the daemon. The client's retry (the same tool and
// arguments, with inputResponses and the requestState) answers the request
// and waits on the same turn, which the state names: the turn's text is not
// sent again. The retry ends at the turn's end or at its next permission
// request, which is the next round.
//
// The state is all a retry needs (agent, turn, request, the call's
// deadline), so a retry reaches a `kaimon mcp` started after the round's:
// it is sealed with HMAC-SHA256 under a key kept in the daemon's cache dir
// (Options.StateKey: 0600, made once), so that a restarted `kaimon mcp`
// opens what an earlier one sealed, and consumed once (Options.StateUsed),
// so that a state replayed is refused. The key is a file rather than one
// the daemon hands out: a `kaimon mcp` needs no new route of the daemon,
// and the file's owner is the only principal a stdio server has. A state names the tool and a digest of its
// arguments, and lapses an hour after its request expires.
//
// mcp-go (v1.2.1) renders the round (server.InputRequestBuilder) and
// decodes the answers (mcp.InputResponse.DecodeFor); its bridge for older
// clients (resolveMultiRoundTrip, which would turn an input_required result
// into a server-initiated elicitation and call the handler again) is not
// used: a 2025-11-25 client keeps elicit.go's elicitation, which runs
// beside the turn rather than in the call, and so also reaches tasks.

// inputKeyPrefix begins the inputRequests key of a permission request: the
// request's id follows.
const inputKeyPrefix = "permission-"

// stateGrace is how long after its request's expiry a state is taken (to
// say that the request expired), and how long a state of a request without
// an expiry lives.
const stateGrace = time.Hour

// roundState is what an MRTR round's requestState holds.
type roundState struct {
	V        int    `json:"v"`
	Agent    string `json:"agent"`
	Turn     int    `json:"turn"`
	Request  string `json:"req"`
	Key      string `json:"key"`      // the inputRequests key
	Call     string `json:"call"`     // the tool and a digest of its arguments
	Deadline int64  `json:"deadline"` // the call's timeout, Unix ms
	Expires  int64  `json:"exp"`      // Unix ms
	Nonce    string `json:"nonce"`
}

// rounds is what the orchestrator keeps for MRTR rounds: the sealing key,
// the calls waiting on agents, and what the followed events told of
// pending requests and ended turns.
type rounds struct {
	usedFile string // the file of states used ("": in memory)
	keyErr   error
	key      []byte

	mu      sync.Mutex
	watches map[string]map[*turnWatch]bool // agent → calls waiting on it
	pending map[askKey]event.PermissionData
	ended   map[string]map[int]event.ResultData // agent → turn → its result
	used    map[string]int64                    // without a dir: nonce → expiry
}

func newRounds(keyFile, usedFile string) *rounds {
	rt := &rounds{usedFile: usedFile, watches: map[string]map[*turnWatch]bool{}, pending: map[askKey]event.PermissionData{},
		ended: map[string]map[int]event.ResultData{}, used: map[string]int64{}}
	rt.key, rt.keyErr = loadKey(keyFile)
	return rt
}

// loadKey reads the sealing key from path, making it first if there is
// none; without a path, the key is this process's (a state then outlives
// no restart).
func loadKey(path string) ([]byte, error) {
	if path == "" {
		k := make([]byte, 32)
		_, err := rand.Read(k)
		return k, err
	}
	dir := filepath.Dir(path)
	for range 3 {
		if b, err := os.ReadFile(path); err == nil {
			k, err := hex.DecodeString(strings.TrimSpace(string(b)))
			if err != nil || len(k) < 32 {
				return nil, fmt.Errorf("%s is not a key kaimon made: remove it, and `kaimon mcp` makes another (pending MRTR rounds are then refused)", path)
			}
			return k, nil
		} else if !errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, err
		}
		k := make([]byte, 32)
		if _, err := rand.Read(k); err != nil {
			return nil, err
		}
		// Made aside and linked in: two servers starting at once end
		// with the one key, and nobody reads a half-written one.
		tmp, err := os.CreateTemp(dir, filepath.Base(path)+".*")
		if err != nil {
			return nil, err
		}
		_, werr := tmp.WriteString(hex.EncodeToString(k) + "\n")
		if cerr := tmp.Close(); werr == nil {
			werr = cerr
		}
		if werr == nil {
			werr = os.Chmod(tmp.Name(), 0o600)
		}
		if werr == nil {
			werr = os.Link(tmp.Name(), path)
		}
		os.Remove(tmp.Name())
		if werr == nil {
			return k, nil
		}
		if !errors.Is(werr, fs.ErrExist) {
			return nil, werr
		}
	}
	return nil, fmt.Errorf("%s: could not be read or made", path)
}

// envelope keeps what e tells of pending requests and ended turns, and
// hands it to the calls waiting on its agent.
func (rt *rounds) envelope(e Envelope) {
	switch e.Kind {
	case event.Permission, event.Result, event.Status:
	default:
		return
	}
	e.Data = bytes.Clone(e.Data)
	rt.mu.Lock()
	defer rt.mu.Unlock()
	switch e.Kind {
	case event.Permission:
		var p event.PermissionData
		if json.Unmarshal(e.Data, &p) == nil && p.RequestID != "" {
			if k := (askKey{e.Agent, p.RequestID}); p.Decision == "" {
				rt.pending[k] = p
			} else {
				delete(rt.pending, k)
			}
		}
	case event.Status:
		var d event.StatusData
		if json.Unmarshal(e.Data, &d) == nil && d.Status == apitype.Starting {
			// A new agent of the id (reopened after a forget), or the
			// agent restarted: what was kept of it is of turns and
			// requests that are not its.
			rt.forgetLocked(e.Agent)
		}
	case event.Result:
		var r event.ResultData
		if json.Unmarshal(e.Data, &r) == nil {
			m := rt.ended[e.Agent]
			if m == nil {
				m = map[int]event.ResultData{}
				rt.ended[e.Agent] = m
			}
			m[e.Turn] = r
			delete(m, e.Turn-8) // the last few are enough
		}
	}
	for w := range rt.watches[e.Agent] {
		w.put(e)
	}
}

// forget drops what was kept of the agents forgotten: an agent opened
// later with the same id starts its turns at 1 again, and its agent_run
// must not take an ended turn of the one before.
func (rt *rounds) forget(agents ...string) {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	for _, a := range agents {
		rt.forgetLocked(a)
	}
}

func (rt *rounds) forgetLocked(agent string) {
	delete(rt.ended, agent)
	for k := range rt.pending {
		if k.agent == agent {
			delete(rt.pending, k)
		}
	}
}

// turnWatch is a call waiting on an agent: the envelopes of it since the
// watch began.
type turnWatch struct {
	agent string
	mu    sync.Mutex
	q     []Envelope
	ready chan struct{} // has a value while q is not empty
}

func (w *turnWatch) put(e Envelope) {
	w.mu.Lock()
	w.q = append(w.q, e)
	w.mu.Unlock()
	select {
	case w.ready <- struct{}{}:
	default:
	}
}

func (w *turnWatch) take() []Envelope {
	w.mu.Lock()
	defer w.mu.Unlock()
	q := w.q
	w.q = nil
	return q
}

func (rt *rounds) watch(agent string) *turnWatch {
	w := &turnWatch{agent: agent, ready: make(chan struct{}, 1)}
	rt.mu.Lock()
	if rt.watches[agent] == nil {
		rt.watches[agent] = map[*turnWatch]bool{}
	}
	rt.watches[agent][w] = true
	rt.mu.Unlock()
	return w
}

func (rt *rounds) unwatch(w *turnWatch) {
	rt.mu.Lock()
	delete(rt.watches[w.agent], w)
	if len(rt.watches[w.agent]) == 0 {
		delete(rt.watches, w.agent)
	}
	rt.mu.Unlock()
}

// seal is st as a requestState: base64url(JSON).base64url(HMAC-SHA256).
func (rt *rounds) seal(st roundState) (string, error) {
	if rt.keyErr != nil {
		return "", rt.keyErr
	}
	nonce := make([]byte, 16)
	if _, err := rand.Read(nonce); err != nil {
		return "", err
	}
	st.V, st.Nonce = 1, base64.RawURLEncoding.EncodeToString(nonce)
	b, err := json.Marshal(st)
	if err != nil {
		return "", err
	}
	body := base64.RawURLEncoding.EncodeToString(b)
	return body + "." + base64.RawURLEncoding.EncodeToString(rt.mac(body)), nil
}

func (rt *rounds) mac(body string) []byte {
	m := hmac.New(sha256.New, rt.key)
	m.Write([]byte(body))
	return m.Sum(nil)
}

// errNotOurs begins the error of a requestState that is not one this
// server gave for the call.
const errNotOurs = "requestState is not one kaimon gave for this call"

// errUnverified is the error of a requestState that fails verification.
var errUnverified = errors.New(errNotOurs + ": it fails verification (altered, or sealed under another key); it grants nothing")

// permitHint says what a client whose retry of agent_run is refused does
// instead: answer the request the round asked with agent_permit, and read
// the turn. Calling agent_run again without the round's state would send
// its text as a new turn. request is "" when it is not known.
func permitHint(agent, request string) string {
	which := "agent " + agent + "'s pending permission request"
	if request != "" {
		which += " " + request
	} else {
		which += " (agent_status lists its request_id)"
	}
	return "answer " + which + " with agent_permit, and read the turn with agent_output or agent_status " +
		"(calling agent_run again would send its text as a new turn)"
}

// open verifies s, a requestState of call, and reads it.
func (rt *rounds) open(s, call string, now time.Time) (roundState, error) {
	var st roundState
	if rt.keyErr != nil {
		return st, rt.keyErr
	}
	body, sig, ok := strings.Cut(s, ".")
	got, err := b64.DecodeString(sig)
	if !ok || err != nil || !hmac.Equal(got, rt.mac(body)) {
		return st, errUnverified
	}
	b, err := b64.DecodeString(body)
	if err != nil || json.Unmarshal(b, &st) != nil || st.V != 1 {
		return st, errors.New(errNotOurs + ": its content cannot be read")
	}
	if st.Call != call {
		return st, errors.New(errNotOurs + ": it was given for another tool or other arguments; retry with the tool and arguments of the call that returned it")
	}
	if now.UnixMilli() > st.Expires {
		return st, fmt.Errorf("requestState for agent %s's permission request %s lapsed at %s: the request was denied at its expiry, and turn %d went on without it; read the turn with agent_output",
			st.Agent, st.Request, time.UnixMilli(st.Expires).UTC().Format(time.RFC3339), st.Turn)
	}
	return st, nil
}

// errReplayed is the error of a requestState used before.
var errReplayed = errors.New("requestState was used before (a replay): it grants nothing; a retry carries the requestState of the round it answers")

// consume records that st is used, or says it was: a state answers once,
// also across restarts of `kaimon mcp` (the record is a file, under an
// flock, pruned of lapsed states as it is rewritten).
func (rt *rounds) consume(st roundState, now time.Time) error {
	if rt.usedFile == "" {
		rt.mu.Lock()
		defer rt.mu.Unlock()
		// Lapsed states are dropped, as from the file: open refuses them
		// before they are looked up here.
		for nonce, exp := range rt.used {
			if exp < now.UnixMilli() {
				delete(rt.used, nonce)
			}
		}
		if _, ok := rt.used[st.Nonce]; ok {
			return errReplayed
		}
		rt.used[st.Nonce] = st.Expires
		return nil
	}
	f, err := os.OpenFile(rt.usedFile, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		return err
	}
	var keep []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		nonce, exp, _ := strings.Cut(sc.Text(), " ")
		ms, err := strconv.ParseInt(exp, 10, 64)
		if err != nil || ms < now.UnixMilli() {
			continue
		}
		if nonce == st.Nonce {
			return errReplayed
		}
		keep = append(keep, sc.Text())
	}
	keep = append(keep, st.Nonce+" "+strconv.FormatInt(st.Expires, 10))
	if err := f.Truncate(0); err != nil {
		return err
	}
	// Not synced: a record lost with the machine lets a used state be
	// presented again, and open and consume take it. Its answer then
	// decides nothing if the request was decided, as the daemon takes
	// one decision a request (Permit is wrong_state, and the retry waits
	// on the turn as after an answer given elsewhere), or expired (the
	// retry is told so). Only a request whose answer was lost with the
	// machine before it reached the daemon still waits, and the replay
	// gives it its first decision.
	_, err = f.WriteAt([]byte(strings.Join(keep, "\n")+"\n"), 0)
	return err
}

// callDigest names a call in its state: the tool, and a digest of its
// arguments as decoded (so that the order of their keys does not matter).
func callDigest(v *verbs.Verb, args any) string {
	b, _ := json.Marshal(args)
	sum := sha256.Sum256(b)
	return v.Name + ":" + base64.RawURLEncoding.EncodeToString(sum[:16])
}

// rounds runs a call of a 2026-07-28 client as MRTR rounds, if it is one:
// agent_run, with elicitation in form mode in its _meta, of an agent whose
// requests --elicit has asked about (elicits). It returns nil
// for any other call, which runs as it always has; a call of another
// kind that carries a requestState or inputResponses is refused, as they
// are not ours.
func (or *orchestrator) rounds(ctx context.Context, v *verbs.Verb, args any, req mcp.CallToolRequest) *mcp.CallToolResult {
	retry := req.Params.RequestState != "" || len(req.Params.InputResponses) > 0
	info := server.RequestProtocolInfoFromContext(ctx)
	modern := info != nil && info.Modern
	ra, isRun := args.(*verbs.RunArgs)
	if !modern || !isRun || !formElicits(info.ClientCapabilities) {
		if retry {
			why := "asks for no input"
			if modern && isRun {
				why = "asks for input only of a client that declares elicitation (form) in its clientCapabilities"
			}
			if !isRun {
				return mcp.NewToolResultError(fmt.Sprintf("%s: %s: this call %s; call it without inputResponses and requestState", v.Name, errNotOurs, why))
			}
			// The state, if it is ours, names the request.
			st, err := or.rt.open(req.Params.RequestState, callDigest(v, ra), time.Now())
			if err != nil {
				st = roundState{Agent: ra.AgentID}
			}
			return mcp.NewToolResultError(fmt.Sprintf("%s: %s: this call %s; %s", v.Name, errNotOurs, why, permitHint(st.Agent, st.Request)))
		}
		return nil
	}
	or.starting(ra)
	call := callDigest(v, ra)
	if !or.elicits(ra.AgentID) {
		// --elicit says not to ask about this agent's requests (never,
		// or own for an agent not this session's), as elicit.go does not
		// for a 2025-11-25 client: the call runs as it always has,
		// waiting on the turn, and its requests wait for agent_permit or
		// their expiry.
		if retry {
			st, err := or.rt.open(req.Params.RequestState, call, time.Now())
			if err != nil {
				st = roundState{Agent: ra.AgentID}
			}
			mode := cmp(or.o.Elicit, verbs.ElicitOwn)
			return mcp.NewToolResultError(fmt.Sprintf("%s: %s: this server asks about no permission request of agent %s (--elicit %s); %s",
				v.Name, errNotOurs, ra.AgentID, mode, permitHint(st.Agent, st.Request)))
		}
		return nil
	}
	w := or.rt.watch(ra.AgentID)
	defer or.rt.unwatch(w)
	now := time.Now()
	if req.Params.RequestState == "" {
		if retry {
			return mcp.NewToolResultError(v.Name + ": inputResponses without the requestState of the round they answer: retry with both, as the input_required result gave them")
		}
		// The turn is sent, not run: its permission requests end the
		// call, and the turn goes on in the daemon.
		sr, err := or.svc.Send(ctx, &verbs.SendArgs{AgentID: ra.AgentID, Text: ra.Text})
		if err != nil {
			return toolError(err)
		}
		deadline := now.Add(time.Duration(ra.Timeout * float64(time.Second)))
		return or.waitTurn(ctx, w, call, ra, sr.Turn, deadline, "", true)
	}
	st, err := or.rt.open(req.Params.RequestState, call, now)
	if err == errUnverified {
		return mcp.NewToolResultError(v.Name + ": " + err.Error() + "; " + permitHint(ra.AgentID, ""))
	} else if err != nil {
		return mcp.NewToolResultError(v.Name + ": " + err.Error())
	}
	k := askKey{st.Agent, st.Request}
	resp, ok := req.Params.InputResponses[st.Key]
	if !ok && len(req.Params.InputResponses) > 0 {
		keys := make([]string, 0, len(req.Params.InputResponses))
		for key := range req.Params.InputResponses {
			keys = append(keys, strconv.Quote(key))
		}
		sort.Strings(keys)
		return mcp.NewToolResultError(fmt.Sprintf("%s: inputResponses has %s, which this round did not ask: it asked %q (agent %s's permission request %s); answer under that key",
			v.Name, strings.Join(keys, ", "), st.Key, st.Agent, st.Request))
	}
	if err := or.rt.consume(st, now); err != nil {
		return mcp.NewToolResultError(v.Name + ": " + err.Error())
	}
	deadline := time.UnixMilli(st.Deadline)
	if !ok {
		// No answer: the request is asked again if it still waits
		// (the spec's way for missing input), else the call goes on.
		return or.waitTurn(ctx, w, call, ra, st.Turn, deadline, "", false)
	}
	var answer verbs.PermitArgs
	if err := resp.DecodeFor(mcp.MethodElicitationCreate); err != nil || resp.Elicitation == nil {
		answer = verbs.PermitArgs{AgentID: k.agent, RequestID: k.request, Decision: apitype.Deny,
			Error: fmt.Sprintf("the MCP client's answer to the elicitation is not an elicitation result: %v", err)}
	} else {
		answer = permitAnswer(k, resp.Elicitation.ElicitationResponse)
	}
	if _, err := or.svc.Permit(context.WithoutCancel(ctx), &answer); err != nil {
		e := verbs.AsError(err)
		switch {
		case e.Code == verbs.CodeWrongState && strings.Contains(e.Message, "("+event.DecidedByTimeout+")"):
			return mcp.NewToolResultError(fmt.Sprintf("%s: agent %s's permission request %s expired before this answer came: it was denied, and turn %d went on without it; read the turn with agent_output",
				v.Name, st.Agent, st.Request, st.Turn))
		case e.Code == verbs.CodeWrongState || e.Code == verbs.CodeNotFound:
			// Answered elsewhere first (agent_permit, the monitor), or
			// no longer pending (the agent restarted): the call goes on
			// without this answer.
		default:
			// The answer did not reach the daemon, and the state is
			// spent (consume): a fresh round asks again, so that the
			// client's way on is not to call agent_run anew, which
			// would send the turn's text again.
			or.errLog.Printf("answering agent %s's permission request %s from an MRTR round: %v; it is asked again", k.agent, k.request, err)
			return or.askRound(call, st.Agent, st.Turn, or.requestOf(ctx, k), deadline,
				fmt.Sprintf("The answer given before could not be passed on (%s); answer again.", e.Message))
		}
	}
	return or.waitTurn(ctx, w, call, ra, st.Turn, deadline, st.Request, false)
}

// waitTurn waits on turn n of ra's agent until it ends (its result is the
// call's), or until it meets a permission request other than answered
// (which is the next round), or until deadline. fresh is for a turn sent
// after w began, which w has seen all of.
func (or *orchestrator) waitTurn(ctx context.Context, w *turnWatch, call string, ra *verbs.RunArgs, n int, deadline time.Time, answered string, fresh bool) *mcp.CallToolResult {
	agent := ra.AgentID
	// What came before the watch began: the turn ended, or a request of
	// it waits (a retry after an answer given elsewhere, or after a
	// restart, which has seen none of it).
	or.rt.mu.Lock()
	r, ended := or.rt.ended[agent][n]
	if fresh {
		// Sent after w began, the turn's end comes to w: a turn n that
		// ended before is another agent's of the id (forgotten and
		// reopened, the forget not yet seen).
		ended = false
	}
	var ask *event.PermissionData
	for k, p := range or.rt.pending {
		if k.agent == agent && k.request != answered {
			ask = &p
			break
		}
	}
	or.rt.mu.Unlock()
	if ended {
		return or.turnEnded(ctx, agent, n, r)
	}
	if ask == nil && !fresh {
		out, err := or.svc.Output(ctx, &verbs.OutputArgs{AgentID: agent, Turn: n, Which: verbs.WhichLastMessage})
		if err != nil {
			return toolError(err)
		}
		switch {
		case out.Done:
			// Ended before this server followed it (it was restarted):
			// its stop reason is in the log, not here.
			return or.turnEnded(ctx, agent, n, event.ResultData{})
		case out.Status == apitype.Dead:
			return toolError(verbs.RunDied(agent, n, out.Text))
		}
		st, err := or.svc.Status(ctx, &verbs.StatusArgs{AgentID: agent})
		if err != nil {
			return toolError(err)
		}
		for _, p := range st.PendingPermissions {
			if p.RequestID != answered {
				ask = &event.PermissionData{RequestID: p.RequestID, ExpiresAt: p.ExpiresAt,
					ToolCall: event.ToolCall{Title: cmp(p.Title, p.Tool)}}
				break
			}
		}
	}
	if ask != nil {
		return or.askRound(call, agent, n, *ask, deadline, "")
	}
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	for {
		select {
		case <-w.ready:
		case <-timer.C:
			return toolError(verbs.RunTimedOut(agent, n, ra.Timeout, or.textOf(ctx, agent, n)))
		case <-ctx.Done():
			return toolError(&verbs.Error{Code: verbs.CodeTimeout, Text: or.textOf(context.WithoutCancel(ctx), agent, n),
				Message: fmt.Sprintf("%s: the caller went away: %v; the turn goes on", runVerb, ctx.Err())})
		}
		for _, e := range w.take() {
			switch e.Kind {
			case event.Permission:
				// Of this turn, or of one before it that it waits
				// behind (queued): either is in the call's way.
				var p event.PermissionData
				if json.Unmarshal(e.Data, &p) == nil && p.Decision == "" && p.RequestID != answered && e.Turn <= n {
					return or.askRound(call, agent, n, p, deadline, "")
				}
			case event.Result:
				if e.Turn == n {
					var r event.ResultData
					_ = json.Unmarshal(e.Data, &r)
					return or.turnEnded(ctx, agent, n, r)
				}
			case event.Status:
				var d event.StatusData
				if json.Unmarshal(e.Data, &d) == nil && d.Status == apitype.Dead {
					return toolError(verbs.RunDied(agent, n, or.textOf(ctx, agent, n)))
				}
			}
		}
	}
}

func cmp(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// requestOf is what is known of k, a request asked before: as the
// followed events told it, else as agent_status tells it, else its id.
func (or *orchestrator) requestOf(ctx context.Context, k askKey) event.PermissionData {
	or.rt.mu.Lock()
	p, ok := or.rt.pending[k]
	or.rt.mu.Unlock()
	if ok {
		return p
	}
	if st, err := or.svc.Status(ctx, &verbs.StatusArgs{AgentID: k.agent}); err == nil {
		for _, q := range st.PendingPermissions {
			if q.RequestID == k.request {
				return event.PermissionData{RequestID: q.RequestID, ExpiresAt: q.ExpiresAt, ToolCall: event.ToolCall{Title: cmp(q.Title, q.Tool)}}
			}
		}
	}
	return event.PermissionData{RequestID: k.request}
}

// askRound is the input_required result asking about request p of turn n;
// note, if any, ends the question's message.
func (or *orchestrator) askRound(call, agent string, n int, p event.PermissionData, deadline time.Time, note string) *mcp.CallToolResult {
	k := askKey{agent, p.RequestID}
	exp := time.Now().Add(stateGrace)
	if t, err := time.Parse(time.RFC3339Nano, p.ExpiresAt); err == nil {
		exp = t.Add(stateGrace)
	}
	key := inputKeyPrefix + p.RequestID
	state, err := or.rt.seal(roundState{Agent: agent, Turn: n, Request: p.RequestID, Key: key, Call: call,
		Deadline: deadline.UnixMilli(), Expires: exp.UnixMilli()})
	if err != nil {
		return mcp.NewToolResultError(fmt.Sprintf("%s: agent %s waits for permission request %s, and it cannot be asked as a round: %v; answer it with agent_permit",
			runVerb, agent, p.RequestID, err))
	}
	params := askParams(k, p, "")
	params.Mode = mcp.ElicitationModeForm
	if note != "" {
		params.Message += "\n" + note
	}
	return server.NewInputRequestBuilder(state).Elicit(key, params).ToolResult()
}

// turnEnded is agent_run's result for turn n, ended with r.
func (or *orchestrator) turnEnded(ctx context.Context, agent string, n int, r event.ResultData) *mcp.CallToolResult {
	res, err := verbs.RunEnded(agent, n, r.StopReason, r.Error, or.textOf(ctx, agent, n))
	if err != nil {
		return toolError(err)
	}
	out, err := okResult(res)
	if err != nil {
		return mcp.NewToolResultError(err.Error())
	}
	return out
}

// textOf is turn n's reply (as agent_run gives it), "" if it cannot be
// read.
func (or *orchestrator) textOf(ctx context.Context, agent string, n int) string {
	out, err := or.svc.Output(ctx, &verbs.OutputArgs{AgentID: agent, Turn: n, Which: verbs.WhichLastMessage})
	if err != nil {
		return ""
	}
	return out.Text
}

// b64 decodes a state strictly: one text for one value, so that no
// altered character opens.
var b64 = base64.RawURLEncoding.Strict()
