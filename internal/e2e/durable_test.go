package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kaimon/kaimon/internal/config"
	"github.com/kaimon/kaimon/internal/event"
	"github.com/kaimon/kaimon/internal/eventlog"
	"github.com/kaimon/kaimon/internal/testutil/fakeapi"
	"github.com/kaimon/kaimon/internal/testutil/fakeopenai"
	"github.com/kaimon/kaimon/internal/verbs"
)

// killDaemon SIGKILLs the running daemon and waits until the agents it ran
// are gone too (they are told their daemon died).
func (e *kenv) killDaemon(t *testing.T) {
	t.Helper()
	var ds struct {
		PID int `json:"pid"`
	}
	e.okJSON(&ds, "daemon", "status")
	agents := e.agentPIDs(t)
	if err := syscall.Kill(ds.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the killed daemon's agents to exit", 15*time.Second, func() bool {
		for _, id := range agents {
			if id.Alive() {
				return false
			}
		}
		return syscall.Kill(ds.PID, 0) != nil
	})
}

// requestFor is the last request to the fake API whose user text is text.
func requestFor(t *testing.T, api *fakeapi.Server, text string) fakeapi.Request {
	t.Helper()
	reqs := api.Requests()
	for i := len(reqs) - 1; i >= 0; i-- {
		if reqs[i].LastUserText == text {
			return reqs[i]
		}
	}
	t.Fatalf("the fake API got no request for %q", text)
	return fakeapi.Request{}
}

func hasLine(lines []string, prefix string) bool {
	return slices.ContainsFunc(lines, func(s string) bool { return strings.HasPrefix(s, prefix) })
}

// checkSeq fails unless the agent's log has seq strictly rising: never
// reused, across every daemon that wrote it. (Not by one: the streamed
// deltas between take numbers too, and the log skips them.)
func checkSeq(t *testing.T, path string) []event.Record {
	t.Helper()
	recs, err := eventlog.ReadAll(path, 0)
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i < len(recs); i++ {
		if recs[i].Seq <= recs[i-1].Seq {
			t.Fatalf("log record %d has seq %d after %d: seq must rise (never reused, also across restarts)", i, recs[i].Seq, recs[i-1].Seq)
		}
	}
	return recs
}

// TestCrashAndResume: SIGKILL the daemon mid-turn, start another. The agent
// is listed dead ("daemon crashed") with its log's ending written, a tail
// waiting on the lost turn ends at once, and the agent resumes with its
// conversation, session, model and numbering; then the same after a clean
// stop. What cannot be resumed is refused with nothing changed.
func TestCrashAndResume(t *testing.T) {
	e := newEnv(t)
	e.ok("daemon", "start")
	id := e.ok("open", e.work, "--permission", "lab", "--allow", "Bash", "--system-prompt", "be brief")
	if out := e.ok("run", id, "hello there"); !strings.HasPrefix(out, "Hello from fakeapi") {
		t.Fatalf("turn 1 = %q", out)
	}
	if got := e.ok("set-model", id, "claude-opus-4-8"); got != "switched" {
		t.Fatalf("set-model = %q", got)
	}
	var before verbs.AgentStatus
	e.okJSON(&before, "status", id)
	if before.SessionID == "" {
		t.Fatalf("no session after a turn: %+v", before)
	}
	// Turn 2 in flight when the daemon dies.
	e.ok("send", id, "please be slow")
	waitFor(t, "turn 2 to reach the model", 30*time.Second, func() bool {
		return slices.ContainsFunc(e.api.Requests(), func(r fakeapi.Request) bool { return r.LastUserText == "please be slow" })
	})
	e.killDaemon(t)

	e.ok("daemon", "start")
	var st verbs.AgentStatus
	st = verbs.AgentStatus{}
	e.okJSON(&st, "status", id)
	if st.Status != "dead" || st.Reason != "daemon crashed" || st.SessionID != before.SessionID ||
		st.Model != "claude-opus-4-8" || st.Turn != 2 || st.Usage.InputTokens == 0 {
		t.Fatalf("after the crash: %+v", st)
	}
	var l verbs.ListResult
	e.okJSON(&l, "list")
	if len(l.Agents) != 1 || l.Agents[0].AgentID != id || l.Agents[0].Reason != "daemon crashed" {
		t.Fatalf("list after the crash: %+v", l.Agents)
	}
	recs := checkSeq(t, st.EventLog)
	var tailKinds []string
	for _, r := range recs[len(recs)-3:] {
		tailKinds = append(tailKinds, string(r.Kind))
	}
	var res event.ResultData
	json.Unmarshal(recs[len(recs)-2].Data, &res)
	if strings.Join(tailKinds, " ") != "error result status" || recs[len(recs)-2].Turn != 2 || !res.StopReason.Failed() {
		t.Fatalf("the log ends %v (result %s)", tailKinds, recs[len(recs)-2].Data)
	}
	// A script waiting on the lost turn is told at once that it failed.
	if r := e.kaimonWithin(15*time.Second, "tail", "agent:"+id, "--from-start", "--turn", "2", "--until-result"); r.code != 3 ||
		!strings.Contains(r.stderr, "kaimon-agentd was lost during the turn") {
		t.Fatalf("tail --until-result on the lost turn: %s", r)
	}

	// Resume after the crash: same session, model and numbering, and the
	// model sees the earlier turns.
	if got := e.ok("open", "--id", id, "--resume"); got != id {
		t.Fatalf("open --resume printed %q", got)
	}
	st = verbs.AgentStatus{}
	e.okJSON(&st, "status", id)
	if st.Status != "idle" || st.SessionID != before.SessionID || st.Model != "claude-opus-4-8" || st.Turn != 2 || st.Cwd != e.work || st.Reason != "" {
		t.Fatalf("resumed: %+v", st)
	}
	if n := e.ok("send", id, "what came before"); n != "3" {
		t.Fatalf("the first turn after resume is %s, want 3", n)
	}
	e.kaimonWithin(2*time.Minute, "tail", "agent:"+id, "--from-start", "--turn", "3", "--until-result")
	req := requestFor(t, e.api, "what came before")
	if req.Model != "claude-opus-4-8" || !hasLine(req.History, "user: hello there") || !hasLine(req.History, "assistant: Hello from fakeapi") {
		t.Fatalf("the resumed turn's request: model %q, conversation %q", req.Model, req.History)
	}
	if !slices.Contains(req.Tools, "Bash") {
		t.Errorf("the resumed agent lost its tools: %v", req.Tools)
	}
	checkSeq(t, st.EventLog)

	// A clean stop, and a resume again.
	e.ok("daemon", "stop")
	st = verbs.AgentStatus{}
	st = verbs.AgentStatus{}
	e.okJSON(&st, "status", id) // autostarts the next daemon
	if st.Status != "dead" || st.Reason != "daemon exited" {
		t.Fatalf("after a clean stop: %+v", st)
	}
	e.ok("open", "--id", id, "--resume", "--json")
	e.ok("run", id, "third time")
	req = requestFor(t, e.api, "third time")
	if !hasLine(req.History, "user: hello there") || !hasLine(req.History, "user: what came before") {
		t.Fatalf("the conversation after a clean stop and resume: %q", req.History)
	}
	st = verbs.AgentStatus{}
	e.okJSON(&st, "status", id)
	if st.SessionID != before.SessionID || st.Turn != 4 {
		t.Fatalf("after the second resume: %+v", st)
	}

	// Refusals, each changing nothing.
	e.fails(1, "already open", "open", "--id", id, "--resume")
	e.fails(1, `no agent "ghost" to resume`, "open", "--id", "ghost", "--resume")
	e.fails(2, "name it with --id", "open", "--resume")
	e.ok("close", id)
	e.fails(1, "worked in "+e.work, "open", "--id", id, "--resume", t.TempDir())
	if err := os.Remove(st.Transcript); err != nil {
		t.Fatal(err)
	}
	e.fails(1, "is gone", "open", "--id", id, "--resume")
	st = verbs.AgentStatus{}
	e.okJSON(&st, "status", id)
	if st.Status != "dead" || st.Reason != "closed" || st.Turn != 4 {
		t.Fatalf("a refused resume changed the agent: %+v", st)
	}
	// Without --resume the slot is reopened with a fresh conversation.
	e.ok("open", "--id", id)
	e.ok("run", id, "fresh start")
	if req := requestFor(t, e.api, "fresh start"); hasLine(req.History, "user: hello there") {
		t.Fatalf("a plain reopen carried the old conversation: %q", req.History)
	}
	st = verbs.AgentStatus{}
	e.okJSON(&st, "status", id)
	if st.SessionID == before.SessionID || st.Turn != 5 {
		t.Fatalf("plain reopen: %+v", st)
	}
	checkSeq(t, st.EventLog)
}

// TestRunDaemonLost: the daemon SIGKILLed during a `kaimon run` is said as
// what it is, a turn lost with its daemon (exit 3, not 1 for "not
// running"), with the command that resumes the agent, as its log says;
// `kaimon run` on the dead agent then names that command first too.
func TestRunDaemonLost(t *testing.T) {
	e := newEnv(t)
	id := e.ok("open", e.work)

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(binDir, "kaimon"), "run", id, "please hold")
	cmd.Dir, cmd.Env = e.work, e.env
	var so, se bytes.Buffer
	cmd.Stdout, cmd.Stderr = &so, &se
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the held half to stream", 60*time.Second, func() bool {
		var o verbs.OutputResult
		e.okJSON(&o, "output", id)
		return o.Turn == 1 && o.Text == fakeapi.HoldFirst
	})
	e.killDaemon(t)
	err := cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 3 {
		t.Fatalf("run whose daemon was killed: %v (want exit 3)\nstdout: %s\nstderr: %s", err, so.String(), se.String())
	}
	msg := se.String()
	if !strings.Contains(msg, "kaimon-agentd was lost during the turn of agent "+id) ||
		!strings.Contains(msg, "`kaimon open --id "+id+" --resume`") || strings.Contains(msg, "is kaimon-agentd running") {
		t.Fatalf("run whose daemon was killed says:\n%s", msg)
	}

	// The next daemon (autostarted) has the agent dead: run says how to
	// get it back with its conversation.
	r := e.fails(1, "is dead; reopen it with its conversation: `kaimon open --id "+id+" --resume`", "run", id, "anyone there?")
	t.Logf("run whose daemon was killed: %s\nrun on the dead agent: %s", msg, r.stderr)
}

// TestForgetCLI: forget by id, --older-than, --all-dead and --logs, and
// refusals that forget nothing.
func TestForgetCLI(t *testing.T) {
	e := newEnv(t)
	var ids []string
	for i := 0; i < 3; i++ {
		id := e.ok("open", e.work)
		e.ok("close", id)
		ids = append(ids, id)
	}
	live := e.ok("open", e.work)
	listed := func() []string {
		var l verbs.ListResult
		e.okJSON(&l, "list")
		var out []string
		for _, a := range l.Agents {
			out = append(out, a.AgentID)
		}
		slices.Sort(out)
		return out
	}
	all := append(append([]string{}, ids...), live)
	slices.Sort(all)
	e.fails(1, "close it first", "forget", ids[0], live)
	e.fails(1, `no agent "ghost"`, "forget", ids[0], "ghost")
	e.fails(2, "forget takes", "forget")
	e.fails(1, "not an age", "forget", "--older-than", "soon")
	if got := listed(); !slices.Equal(got, all) {
		t.Fatalf("refused forgets changed the list: %v", got)
	}
	paths := e.paths()
	if got := e.ok("forget", ids[0]); got != ids[0] {
		t.Fatalf("forget printed %q", got)
	}
	if _, err := os.Stat(paths.Agent(ids[0]).Events); err != nil {
		t.Errorf("forget without --logs removed the log: %v", err)
	}
	if got := e.ok("forget", "--older-than", "1h"); got != "" {
		t.Errorf("--older-than 1h forgot %q", got)
	}
	if got := e.ok("forget", ids[1], "--logs"); got != ids[1] {
		t.Fatalf("forget --logs printed %q", got)
	}
	// No file of the agent is left, of any kind.
	ents, _ := os.ReadDir(paths.CacheDir)
	for _, ent := range ents {
		if id, _, ok := config.AgentFileOf(ent.Name()); ok && id == ids[1] {
			t.Errorf("%s survived forget --logs", ent.Name())
		}
	}
	var fr verbs.ForgetResult
	e.okJSON(&fr, "forget", "--all-dead")
	if len(fr.Forgotten) != 1 || fr.Forgotten[0] != ids[2] {
		t.Fatalf("--all-dead forgot %v", fr.Forgotten)
	}
	if got := listed(); !slices.Equal(got, []string{live}) {
		t.Fatalf("after forgetting the dead: %v", got)
	}
	// A forgotten agent does not come back with the next daemon.
	e.ok("daemon", "stop")
	e.ok("forget", live)
	if got := listed(); len(got) != 0 {
		t.Fatalf("after a restart and forgetting the last: %v", got)
	}
}

// TestACPOpencodeResume: an opencode agent lost with its daemon resumes
// through session/load: the same session, the model it was switched to, and
// the conversation the model sees; the history opencode replays while
// loading is not taken for new events.
func TestACPOpencodeResume(t *testing.T) {
	e := newACPEnv(t, "opencode")
	id := e.ok("open", "--model", "acp:opencode:fake/fake-model", e.work)
	if out := e.ok("run", id, "hello there"); !strings.HasPrefix(out, "Hello from fakeopenai") {
		t.Fatalf("turn 1 = %q", out)
	}
	if got := e.ok("set-model", id, "fake/fake-model-2"); got != "switched" {
		t.Fatalf("set-model = %q", got)
	}
	var before verbs.AgentStatus
	e.okJSON(&before, "status", id)
	e.ok("send", id, "please be slow")
	waitFor(t, "turn 2 to reach the model", 30*time.Second, func() bool {
		return slices.ContainsFunc(e.openai.Requests(), func(r fakeopenai.Request) bool { return r.LastUserText == "please be slow" })
	})
	e.killDaemon(t)

	e.ok("daemon", "start")
	var st verbs.AgentStatus
	e.okJSON(&st, "status", id)
	if st.Status != "dead" || st.Reason != "daemon crashed" || st.Model != "acp:opencode:fake/fake-model-2" || st.SessionID != before.SessionID {
		t.Fatalf("after the crash: %+v", st)
	}
	logged := len(checkSeq(t, st.EventLog))
	e.ok("open", "--id", id, "--resume")
	st = verbs.AgentStatus{}
	e.okJSON(&st, "status", id)
	if st.Status != "idle" || st.SessionID != before.SessionID || st.Model != "acp:opencode:fake/fake-model-2" || st.Turn != 2 {
		t.Fatalf("resumed: %+v", st)
	}
	if out := e.ok("run", id, "what came before"); !strings.HasPrefix(out, "Hello from fakeopenai") {
		t.Fatalf("turn 3 = %q", out)
	}
	var req fakeopenai.Request
	for _, r := range e.openai.Requests() {
		if r.LastUserText == "what came before" {
			req = r
		}
	}
	if req.Model != "fake-model-2" || !hasLine(req.History, "user: hello there") || !hasLine(req.History, "assistant: Hello from fakeopenai") {
		t.Fatalf("the resumed turn's request: model %q, conversation %q", req.Model, req.History)
	}
	// Since the resume, the log holds the reopening and turn 3, nothing of
	// the replayed history.
	recs := checkSeq(t, st.EventLog)
	for _, r := range recs[logged:] {
		if r.Kind != event.Status && r.Turn != 3 {
			t.Errorf("after the resume the log has %s of turn %d: %s", r.Kind, r.Turn, r.Data)
		}
	}
	if k := kinds(recs, 3); k != "user_text turn_started assistant_text usage result" {
		t.Errorf("turn 3 kinds: %s", k)
	}
}

// TestACPResumeClaudeAndGemini: claude-agent-acp and gemini-cli declare
// loadSession too. claude-agent-acp, closed and resumed, carries its
// conversation on. gemini-cli 0.61 does too, or refuses to load the
// session ("No previous sessions found for this project"): then kaimon
// says so, and the agent stays as it was, dead, with its session, for a
// later try.
func TestACPResumeClaudeAndGemini(t *testing.T) {
	e := newACPEnv(t, "claude", "gemini")
	open := func(agent string) (string, verbs.AgentStatus) {
		id := e.ok("open", "--model", "acp:"+agent, e.work)
		e.ok("run", id, "hello from "+agent)
		var st verbs.AgentStatus
		e.okJSON(&st, "status", id)
		e.ok("close", id)
		return id, st
	}

	id, before := open("claude")
	e.ok("open", "--id", id, "--resume")
	var st verbs.AgentStatus
	e.okJSON(&st, "status", id)
	if st.SessionID != before.SessionID || st.Turn != 1 || st.Status != "idle" || st.Model != before.Model {
		t.Fatalf("acp:claude resumed: %+v (before %+v)", st, before)
	}
	e.ok("run", id, "what came before")
	if h := requestFor(t, e.api, "what came before").History; !hasLine(h, "user: hello from claude") {
		t.Errorf("acp:claude after resume sent the conversation %q", h)
	}
	e.ok("close", id)

	// gemini-cli 0.61 loads the session, or refuses it ("No previous
	// sessions found for this project") when its chat file is not yet
	// what it wants: seen both ways here, depending on timing. Either way
	// kaimon must tell the truth.
	id, before = open("gemini")
	r := e.kaimon("open", "--id", id, "--resume")
	st = verbs.AgentStatus{}
	e.okJSON(&st, "status", id)
	if r.code == 0 {
		if st.Status != "idle" || st.SessionID != before.SessionID || st.Turn != 1 {
			t.Fatalf("acp:gemini resumed: %+v", st)
		}
		e.ok("run", id, "what came before gemini")
		reqs := e.gemini.Requests()
		var h []string
		for _, q := range reqs {
			if q.LastUserText == "what came before gemini" && !q.JSONMode {
				h = q.History
			}
		}
		if !hasLine(h, "user: hello from gemini") {
			t.Errorf("acp:gemini after resume sent the conversation %q", h)
		}
		return
	}
	if r.code != 1 || !strings.Contains(r.stderr, "acp:gemini refused session/load of session "+before.SessionID) {
		t.Fatalf("a refused gemini resume: %s", r)
	}
	if st.Status != "dead" || st.Reason != "closed" || st.SessionID != before.SessionID || st.Turn != 1 {
		t.Fatalf("a failed resume changed the agent: %+v", st)
	}
}
