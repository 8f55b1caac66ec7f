package session

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kaimon/kaimon/internal/apitype"
	"github.com/kaimon/kaimon/internal/backend"
	"github.com/kaimon/kaimon/internal/config"
	"github.com/kaimon/kaimon/internal/event"
	"github.com/kaimon/kaimon/internal/eventlog"
	"github.com/kaimon/kaimon/internal/verbs"
)

// cacheFiles lists the cache dir's files but the daemon's own (pids.json).
func cacheFiles(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	own := config.Paths{CacheDir: dir}.DaemonFiles()
	var out []string
	for _, e := range ents {
		if !slices.Contains(own, filepath.Join(dir, e.Name())) {
			out = append(out, e.Name())
		}
	}
	return out
}

// plantAgentFiles creates a file (or a directory holding one) of every
// kind of agent file of id, as if each of its backends had written its
// own: a claude agent's MCP config, an opencode agent's config home, a
// local agent's conversation.
func plantAgentFiles(t *testing.T, paths config.Paths, id string) {
	t.Helper()
	files := paths.Agent(id)
	for _, k := range config.AgentFileKinds {
		p := files.Path(k)
		if _, err := os.Stat(p); err == nil {
			continue
		}
		if k.Dir {
			if err := os.MkdirAll(filepath.Join(p, "opencode"), 0o700); err != nil {
				t.Fatal(err)
			}
			p = filepath.Join(p, "opencode", "opencode.json")
		}
		if err := os.WriteFile(p, []byte("{}\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// TestForgetRemovesEveryFile: forget leaves only the files it keeps for a
// later read (the logs, config.UntilForgetLogs), and forget --logs leaves
// no file of the agent at all, whichever backend wrote it (opencode's
// config home included); the other agent's files are untouched.
func TestForgetRemovesEveryFile(t *testing.T) {
	r := newRig(t, 0)
	for _, id := range []string{"a", "b", "other"} {
		r.open(t, id)
		r.m.Close(bg, &verbs.CloseArgs{AgentID: id})
		plantAgentFiles(t, r.paths, id)
	}
	of := func(id string) []string {
		var out []string
		for _, name := range cacheFiles(t, r.paths.CacheDir) {
			if got, _, ok := config.AgentFileOf(name); ok && got == id {
				out = append(out, name)
			}
		}
		return out
	}
	if _, err := r.m.Forget(bg, &verbs.ForgetArgs{AgentIDs: []string{"a"}}); err != nil {
		t.Fatal(err)
	}
	var kept []string
	for _, k := range config.AgentFileKinds {
		if !k.Lifetime.RemovedByForget(false) {
			kept = append(kept, "a"+k.Suffix)
		}
	}
	slices.Sort(kept)
	if got := of("a"); !slices.Equal(got, kept) {
		t.Errorf("after forget the cache dir holds %v of a, want %v", got, kept)
	}
	if _, err := r.m.Forget(bg, &verbs.ForgetArgs{AgentIDs: []string{"b"}, Logs: true}); err != nil {
		t.Fatal(err)
	}
	if got := of("b"); len(got) != 0 {
		t.Errorf("after forget --logs the cache dir holds %v of b", got)
	}
	if got := of("other"); len(got) != len(config.AgentFileKinds) {
		t.Errorf("forgetting a and b left %v of other", got)
	}
}

func readRecord(t *testing.T, dir, id string) Record {
	t.Helper()
	b, err := os.ReadFile(config.Paths{CacheDir: dir}.Agent(id).Record)
	if err != nil {
		t.Fatal(err)
	}
	var r Record
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	return r
}

// restart starts a second manager on the rig's paths, as a new daemon
// would after the first one died, and records the options each backend
// it makes is given.
func (r *rig) restart(t *testing.T) (*Manager, *[]backend.Options) {
	t.Helper()
	var made []backend.Options
	m, err := New(r.paths, config.Defaults(), nil, func(o backend.Options, sink backend.Sink) (backend.Backend, error) {
		made = append(made, o)
		return &scripted{sink: sink}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Shutdown)
	return m, &made
}

// The record follows the agent: written at open, at each turn's end with
// the usage (in the background), at close with the reason.
func TestRecordFollowsTheAgent(t *testing.T) {
	r := newRig(t, 0)
	cwd := t.TempDir()
	none := []string{}
	res, err := r.m.Open(bg, &verbs.OpenArgs{Cwd: cwd, ID: "rec", Model: "opus", Permission: "lab",
		AllowedTools: []string{"Bash"}, DisallowedTools: &none, SystemPrompt: "be brief"})
	if err != nil {
		t.Fatal(err)
	}
	rec := readRecord(t, r.paths.CacheDir, res.AgentID)
	if rec.Status != apitype.Idle || rec.Cwd != cwd || rec.Model != "opus" || rec.Permission != "lab" || rec.SystemPrompt != "be brief" ||
		strings.Join(rec.AllowedTools, ",") != "Bash" || rec.DisallowedTools == nil || len(*rec.DisallowedTools) != 0 || rec.SessionID != "sess" {
		t.Fatalf("record after open = %+v", rec)
	}
	r.m.Run(bg, decoded(&verbs.RunArgs{AgentID: "rec", Text: "one"}))
	r.m.Run(bg, decoded(&verbs.RunArgs{AgentID: "rec", Text: "two"}))
	// A turn's end is saved in the background, off agent_run's way.
	r.m.saves.Wait()
	rec = readRecord(t, r.paths.CacheDir, "rec")
	if rec.Turn != 2 || rec.Usage.InputTokens != 200 || rec.Status != apitype.Idle {
		t.Fatalf("record after two turns = %+v", rec)
	}
	r.m.Close(bg, &verbs.CloseArgs{AgentID: "rec"})
	rec = readRecord(t, r.paths.CacheDir, "rec")
	if rec.Status != apitype.Dead || rec.Reason != ReasonClosed {
		t.Fatalf("record after close = %+v", rec)
	}
}

// A daemon that died with an agent mid-turn left a live record and a log
// that ends in the turn. The next daemon lists the agent dead, "daemon
// crashed", and writes the log's missing ending.
func TestCrashedAgentClosedOnLoad(t *testing.T) {
	r := newRig(t, 0)
	id := r.open(t, "crash")
	r.last.hold = true
	if _, err := r.m.Send(bg, &verbs.SendArgs{AgentID: id, Text: "never answered"}); err != nil {
		t.Fatal(err)
	}
	if rec := readRecord(t, r.paths.CacheDir, id); rec.Status == apitype.Dead {
		t.Fatalf("record mid-turn = %+v", rec)
	}
	before, _ := eventlog.ReadAll(r.paths.Agent(id).Events, 0)
	// The streamed delta after the last logged record had a seq of its
	// own, which the log does not keep.
	r.m.agents[id].mu.Lock()
	published := r.m.agents[id].seq
	r.m.agents[id].mu.Unlock()
	if published <= before[len(before)-1].Seq {
		t.Fatalf("published seq %d, logged %d: the test needs an unlogged delta", published, before[len(before)-1].Seq)
	}

	// The first manager is never shut down before the second starts: as
	// after a SIGKILL.
	m2, _ := r.restart(t)
	st, err := m2.Status(bg, &verbs.StatusArgs{AgentID: id})
	if err != nil {
		t.Fatal(err)
	}
	if st.Status != apitype.Dead || st.Reason != ReasonDaemonCrashed || st.Turn != 1 || st.SessionID != "sess" {
		t.Fatalf("status after the crash = %+v", st)
	}
	after, _ := eventlog.ReadAll(st.EventLog, before[len(before)-1].Seq)
	var kinds []string
	for i, rec := range after {
		kinds = append(kinds, string(rec.Kind))
		// Numbered past everything the lost daemon published, deltas
		// included: no seq a subscriber saw is used again.
		if rec.Seq <= published || i > 0 && rec.Seq != after[i-1].Seq+1 {
			t.Errorf("closing record %d has seq %d (the lost daemon published up to %d)", i, rec.Seq, published)
		}
	}
	if strings.Join(kinds, " ") != "error result status" {
		t.Fatalf("closing records = %v", kinds)
	}
	var res event.ResultData
	json.Unmarshal(after[1].Data, &res)
	if after[1].Turn != 1 || !res.StopReason.Failed() || !strings.Contains(res.Error, "kaimon-agentd was lost") {
		t.Errorf("closing result = %+v %s", after[1], after[1].Data)
	}
	if !strings.Contains(string(after[0].Data), "while this agent was working on turn 1") || !strings.Contains(string(after[0].Data), "--resume") || !strings.Contains(string(after[2].Data), `"dead"`) {
		t.Errorf("closing error %s, status %s", after[0].Data, after[2].Data)
	}
	// Written once: a third daemon adds nothing.
	m3, _ := r.restart(t)
	if st, _ := m3.Status(bg, &verbs.StatusArgs{AgentID: id}); st.Reason != ReasonDaemonCrashed {
		t.Errorf("third daemon: %+v", st)
	}
	if again, _ := eventlog.ReadAll(st.EventLog, 0); len(again) != len(before)+3 {
		t.Errorf("log grew again on the third start: %d records, want %d", len(again), len(before)+3)
	}
	// Its output still reads from the log.
	out, err := m3.Output(bg, decoded(&verbs.OutputArgs{AgentID: id}))
	if err != nil || !out.Done || out.Status != apitype.Dead {
		t.Errorf("output after the crash = %+v, %v", out, err)
	}
}

// A clean stop says so, and adds no crash records.
func TestCleanStopRecordsDaemonExited(t *testing.T) {
	r := newRig(t, 0)
	id := r.open(t, "calm")
	r.m.Shutdown()
	m2, _ := r.restart(t)
	st, _ := m2.Status(bg, &verbs.StatusArgs{AgentID: id})
	if st.Status != apitype.Dead || st.Reason != ReasonDaemonExited {
		t.Fatalf("after a clean stop: %+v", st)
	}
	recs, _ := eventlog.ReadAll(st.EventLog, 0)
	for _, rec := range recs {
		if rec.Kind == event.Error {
			t.Errorf("a clean stop logged an error: %s", rec.Data)
		}
	}
}

// Resume takes what the call left out from the record and passes the
// vendor's session to the backend; what it cannot resume is refused with
// nothing changed.
func TestResume(t *testing.T) {
	r := newRig(t, 0)
	cwd := t.TempDir()
	if _, err := r.m.Open(bg, &verbs.OpenArgs{Cwd: cwd, ID: "res", Model: "opus", Permission: "notebook",
		AllowedTools: []string{"mcp__kaimon__agent_list"}, SystemPrompt: "sp"}); err != nil {
		t.Fatal(err)
	}
	r.m.Run(bg, decoded(&verbs.RunArgs{AgentID: "res", Text: "one"}))
	fresh := r.open(t, "fresh")

	m2, made := r.restart(t)
	fail := func(a verbs.OpenArgs, code, want string) {
		t.Helper()
		before := readRecord(t, r.paths.CacheDir, "res")
		_, err := m2.Open(bg, &a)
		var ve *verbs.Error
		if !errors.As(err, &ve) || ve.Code != code || !strings.Contains(ve.Message, want) {
			t.Errorf("open %+v: err = %v, want %s containing %q", a, err, code, want)
		}
		if after := readRecord(t, r.paths.CacheDir, "res"); after.LastActivity != before.LastActivity || after.Status != apitype.Dead {
			t.Errorf("a refused resume changed the record: %+v", after)
		}
	}
	fail(verbs.OpenArgs{ID: "nobody", Resume: true}, verbs.CodeNotFound, `no agent "nobody" to resume`)
	fail(verbs.OpenArgs{ID: "res", Resume: true, Cwd: t.TempDir()}, verbs.CodeBadArgument, "worked in "+cwd)
	fail(verbs.OpenArgs{Resume: true}, verbs.CodeBadArgument, "resume needs the id")

	if _, err := m2.Open(bg, &verbs.OpenArgs{ID: "res", Resume: true, Permission: "lab"}); err != nil {
		t.Fatal(err)
	}
	o := (*made)[len(*made)-1]
	if o.ResumeSession != "sess" || o.Policy == nil || o.Policy.Preset.Name != "lab" || o.Cwd != cwd || o.Model != "opus" || o.Permission != "lab" || o.SystemPrompt != "sp" ||
		strings.Join(o.AllowedTools, ",") != "mcp__kaimon__agent_list" {
		t.Fatalf("resumed with options %+v", o)
	}
	st, _ := m2.Status(bg, &verbs.StatusArgs{AgentID: "res"})
	if st.Status != apitype.Idle || st.Turn != 1 || st.Usage.InputTokens != 100 || st.Reason != "" {
		t.Fatalf("resumed status = %+v", st)
	}
	if s, err := m2.Send(bg, &verbs.SendArgs{AgentID: "res", Text: "two"}); err != nil || s.Turn != 2 {
		t.Fatalf("send after resume = %+v %v", s, err)
	}
	// Live now: resuming it again is refused.
	fail2 := func() {
		_, err := m2.Open(bg, &verbs.OpenArgs{ID: "res", Resume: true})
		var ve *verbs.Error
		if !errors.As(err, &ve) || ve.Code != verbs.CodeWrongState || !strings.Contains(ve.Message, "already open") {
			t.Errorf("resume of a live agent: %v", err)
		}
	}
	fail2()
	// A plain reopen is a fresh conversation: no session passed on.
	if _, err := m2.Open(bg, &verbs.OpenArgs{ID: fresh, Cwd: t.TempDir()}); err != nil {
		t.Fatal(err)
	}
	if o := (*made)[len(*made)-1]; o.ResumeSession != "" || o.Model != verbs.DefaultModel && o.Model != "" {
		t.Errorf("plain reopen got %+v", o)
	}
}

// A reopened agent (plain or resumed, after a crash of its daemon) keeps
// its usage as it keeps its turn count: the figures are the slot's, which
// numbers its turns on.
func TestReopenCarriesUsage(t *testing.T) {
	r := newRig(t, 0)
	cwd := t.TempDir()
	for _, id := range []string{"plain", "resumed"} {
		if _, err := r.m.Open(bg, &verbs.OpenArgs{Cwd: cwd, ID: id}); err != nil {
			t.Fatal(err)
		}
		for _, text := range []string{"one", "two"} {
			if _, err := r.m.Run(bg, decoded(&verbs.RunArgs{AgentID: id, Text: text})); err != nil {
				t.Fatal(err)
			}
		}
	}
	r.m.saves.Wait() // each turn's end is in the record, as the daemon crashes
	m2, _ := r.restart(t)
	for _, a := range []verbs.OpenArgs{{ID: "plain", Cwd: cwd}, {ID: "resumed", Resume: true}} {
		if _, err := m2.Open(bg, &a); err != nil {
			t.Fatal(err)
		}
		st, _ := m2.Status(bg, &verbs.StatusArgs{AgentID: a.ID})
		if st.Turn != 2 || st.Usage.InputTokens != 200 || st.Usage.OutputTokens != 40 {
			t.Errorf("%s reopened: turn %d, usage %d/%d; want turn 2, 200/40", a.ID, st.Turn, st.Usage.InputTokens, st.Usage.OutputTokens)
		}
		if _, err := m2.Run(bg, decoded(&verbs.RunArgs{AgentID: a.ID, Text: "three"})); err != nil {
			t.Fatal(err)
		}
		st, _ = m2.Status(bg, &verbs.StatusArgs{AgentID: a.ID})
		if st.Turn != 3 || st.Usage.InputTokens != 300 || st.Usage.OutputTokens != 60 {
			t.Errorf("%s after a turn more: turn %d, usage %d/%d; want turn 3, 300/60", a.ID, st.Turn, st.Usage.InputTokens, st.Usage.OutputTokens)
		}
	}
}

// A resume whose agent fails to start (the vendor lost the session, say)
// leaves the dead agent as it was, in its slot, with its record, for a
// later try; and a reopened agent's output still reads its earlier turns.
func TestResumeThatFailsChangesNothing(t *testing.T) {
	r := newRig(t, 0)
	id := r.open(t, "x")
	r.m.Run(bg, decoded(&verbs.RunArgs{AgentID: id, Text: "one"}))
	r.m.Close(bg, &verbs.CloseArgs{AgentID: id})
	before := readRecord(t, r.paths.CacheDir, id)

	var startErr error = errors.New("session not found")
	m2, err := New(r.paths, config.Defaults(), nil, func(o backend.Options, sink backend.Sink) (backend.Backend, error) {
		return &scripted{sink: sink, startErr: startErr}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m2.Shutdown)
	old := m2.agents[id]
	_, err = m2.Open(bg, &verbs.OpenArgs{ID: id, Resume: true})
	var ve *verbs.Error
	if !errors.As(err, &ve) || ve.Code != verbs.CodeUnavailable || !strings.Contains(ve.Message, "session not found") {
		t.Fatalf("failed resume: %v", err)
	}
	if m2.agents[id] != old {
		t.Fatal("a failed resume did not give the slot back to the dead agent")
	}
	after := readRecord(t, r.paths.CacheDir, id)
	if after.Status != apitype.Dead || after.Reason != ReasonClosed || after.SessionID != before.SessionID || !after.LastActivity.Equal(before.LastActivity) {
		t.Fatalf("a failed resume changed the record: %+v, was %+v", after, before)
	}
	// The next try works, and the turn before it still reads.
	startErr = nil
	if _, err := m2.Open(bg, &verbs.OpenArgs{ID: id, Resume: true}); err != nil {
		t.Fatal(err)
	}
	out, err := m2.Output(bg, decoded(&verbs.OutputArgs{AgentID: id, Turn: 1}))
	if err != nil || out.Text != "re: one" || !out.Done || out.Status != apitype.Idle {
		t.Fatalf("turn 1 after the resume: %+v %v", out, err)
	}
}

func TestForget(t *testing.T) {
	r := newRig(t, 0)
	for _, id := range []string{"a", "b", "c", "d"} {
		r.open(t, id)
		r.m.Run(bg, decoded(&verbs.RunArgs{AgentID: id, Text: "hi"}))
	}
	live := r.open(t, "live")
	for _, id := range []string{"a", "b", "c", "d"} {
		r.m.Close(bg, &verbs.CloseArgs{AgentID: id})
	}
	ids := func() string {
		l, _ := r.m.List(bg, &verbs.ListArgs{})
		var s []string
		for _, a := range l.Agents {
			s = append(s, a.AgentID)
		}
		sort.Strings(s)
		return strings.Join(s, " ")
	}
	refuse := func(a verbs.ForgetArgs, code, want string) {
		t.Helper()
		_, err := r.m.Forget(bg, &a)
		var ve *verbs.Error
		if !errors.As(err, &ve) || ve.Code != code || !strings.Contains(ve.Message, want) {
			t.Errorf("forget %+v: %v, want %s containing %q", a, err, code, want)
		}
		if got := ids(); got != "a b c d live" {
			t.Errorf("a refused forget changed the list: %s", got)
		}
	}
	refuse(verbs.ForgetArgs{AgentIDs: []string{"a", live}}, verbs.CodeWrongState, "close it first")
	refuse(verbs.ForgetArgs{AgentIDs: []string{"a", "zz"}}, verbs.CodeNotFound, `no agent "zz"`)
	refuse(verbs.ForgetArgs{}, verbs.CodeBadArgument, "name the dead agents")
	refuse(verbs.ForgetArgs{OlderThan: "soon"}, verbs.CodeBadArgument, "not an age")

	// By id: the record goes, the log stays (and still reads).
	res, err := r.m.Forget(bg, &verbs.ForgetArgs{AgentIDs: []string{"a"}})
	if err != nil || strings.Join(res.Forgotten, " ") != "a" || ids() != "b c d live" {
		t.Fatalf("forget a = %+v %v; list %s", res, err, ids())
	}
	if _, err := os.Stat(r.paths.Agent("a").Record); !os.IsNotExist(err) {
		t.Errorf("a's record is still there: %v", err)
	}
	if out, err := r.m.Output(bg, decoded(&verbs.OutputArgs{AgentID: "a"})); err != nil || out.Text != "re: hi" {
		t.Errorf("a's output after forget = %+v %v", out, err)
	}
	// With logs, the log goes too.
	if _, err := r.m.Forget(bg, &verbs.ForgetArgs{AgentIDs: []string{"b"}, Logs: true}); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{r.paths.Agent("b").Record, r.paths.Agent("b").Events} {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("%s survived forget --logs: %v", filepath.Base(p), err)
		}
	}
	// older_than selects by last activity.
	res, _ = r.m.Forget(bg, &verbs.ForgetArgs{OlderThan: "1h"})
	if len(res.Forgotten) != 0 || ids() != "c d live" {
		t.Errorf("older_than 1h forgot %v", res.Forgotten)
	}
	c := r.m.agents["c"]
	c.mu.Lock()
	c.activity = time.Now().Add(-8 * 24 * time.Hour)
	c.mu.Unlock()
	res, _ = r.m.Forget(bg, &verbs.ForgetArgs{OlderThan: "7d"})
	if strings.Join(res.Forgotten, " ") != "c" || ids() != "d live" {
		t.Errorf("older_than 7d forgot %v; list %s", res.Forgotten, ids())
	}
	// all_dead takes the rest of the dead, never the live.
	res, _ = r.m.Forget(bg, &verbs.ForgetArgs{AllDead: true})
	if strings.Join(res.Forgotten, " ") != "d" || ids() != "live" {
		t.Errorf("all_dead forgot %v; list %s", res.Forgotten, ids())
	}
	// A new daemon does not bring forgotten agents back.
	m2, _ := r.restart(t)
	if l, _ := m2.List(bg, &verbs.ListArgs{}); len(l.Agents) != 1 || l.Agents[0].AgentID != live {
		t.Errorf("after restart: %+v", l.Agents)
	}
}

func TestParseAge(t *testing.T) {
	for in, want := range map[string]time.Duration{"7d": 7 * 24 * time.Hour, "1.5d": 36 * time.Hour, "12h": 12 * time.Hour, "90m": 90 * time.Minute} {
		if got, err := ParseAge(in); err != nil || got != want {
			t.Errorf("ParseAge(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "d", "-1d", "7", "soon", "0h"} {
		if _, err := ParseAge(bad); err == nil {
			t.Errorf("ParseAge(%q) accepted", bad)
		}
	}
}

// BenchmarkWriteRecord is the cost of saving an agent's record (temp file,
// fsync, rename, fsync of the dir), paid once per turn (at its result) and
// at status changes, never per event.
func BenchmarkWriteRecord(b *testing.B) {
	dir := b.TempDir()
	none := []string{}
	r := &Record{OpenArgs: verbs.OpenArgs{ID: "bench", Cwd: dir, Model: "sonnet", Permission: "default",
		AllowedTools: []string{"Bash", "Read"}, DisallowedTools: &none},
		SessionID: "3800c11e-6b75-4e64-94a4-d762ff8c8313", CreatedAt: time.Now(), LastActivity: time.Now(), Status: apitype.Idle}
	path := config.Paths{CacheDir: dir}.Agent("bench").Record
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		r.Turn = i
		if err := writeRecord(path, r); err != nil {
			b.Fatal(err)
		}
	}
}

// A record of the format before versions (no version field) loads as it
// did, and the next save writes the version; one of a newer format than
// this daemon knows is not loaded, and an open of its id is refused, so
// that nothing writes over what a newer kaimon kept.
func TestRecordVersion(t *testing.T) {
	dir := t.TempDir()
	paths := config.Paths{CacheDir: dir + "/cache", SockDir: dir + "/sock", ConfigFile: dir + "/c.json", WorktreeDir: dir + "/worktrees"}
	if err := os.MkdirAll(paths.CacheDir, 0o700); err != nil {
		t.Fatal(err)
	}
	old := `{"id":"old","model":"claude","cwd":"/tmp","session_id":"s1","created_at":"2026-01-02T03:04:05Z",` +
		`"last_activity":"2026-01-02T03:04:05Z","turn":3,"usage":{},"status":"dead","reason":"closed"}`
	newer := fmt.Sprintf(`{"version":%d,"id":"newer","model":"claude","cwd":"/tmp","created_at":"2026-01-02T03:04:05Z",`+
		`"last_activity":"2026-01-02T03:04:05Z","turn":1,"usage":{},"status":"dead","what_next_adds":1}`, RecordVersion+1)
	for id, rec := range map[string]string{"old": old, "newer": newer} {
		if err := os.WriteFile(paths.Agent(id).Record, []byte(rec), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	recs, bad := readRecords(paths)
	if len(recs) != 1 || recs[0].ID != "old" || recs[0].Version != 0 || recs[0].SessionID != "s1" || recs[0].Turn != 3 {
		t.Fatalf("records read: %+v", recs)
	}
	if len(bad) != 1 || !strings.Contains(bad[0].Error(), fmt.Sprintf("version %d, newer than this kaimon-agentd reads (%d)", RecordVersion+1, RecordVersion)) {
		t.Fatalf("bad = %v, want the newer record's, saying its version", bad)
	}

	r := &rig{paths: paths}
	m, err := New(paths, config.Defaults(), nil, func(o backend.Options, sink backend.Sink) (backend.Backend, error) {
		return &scripted{sink: sink}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	r.m = m
	t.Cleanup(m.Shutdown)
	st, err := m.Status(bg, &verbs.StatusArgs{AgentID: "old"})
	if err != nil || st.Status != apitype.Dead || st.Turn != 3 || st.SessionID != "s1" {
		t.Fatalf("the old record's agent: %+v %v", st, err)
	}
	var ve *verbs.Error
	if _, err := m.Open(bg, &verbs.OpenArgs{Cwd: t.TempDir(), ID: "newer"}); !errors.As(err, &ve) || ve.Code != verbs.CodeWrongState {
		t.Fatalf("open over the newer record: err = %v, want wrong_state", err)
	}
	if b, _ := os.ReadFile(paths.Agent("newer").Record); string(b) != newer {
		t.Errorf("the newer record changed:\n%s", b)
	}
	// Reopened, the old agent's record is written in this format.
	r.open(t, "old")
	var got Record
	b, _ := os.ReadFile(paths.Agent("old").Record)
	if err := json.Unmarshal(b, &got); err != nil || got.Version != RecordVersion {
		t.Errorf("record after a save: version %d (%v), want %d", got.Version, err, RecordVersion)
	}
}

// resolving is a backend that says, as the claude CLI does, the model it
// was given until a turn has run, then the id that alias resolved to.
type resolving struct {
	*scripted
	given string
	sent  atomic.Bool
}

func (b *resolving) Send(turn int, text string) error {
	b.sent.Store(true)
	return b.scripted.Send(turn, text)
}

func (b *resolving) Info() backend.Info {
	i := b.scripted.Info()
	i.Model = b.given
	if b.sent.Load() && b.given == "sonnet" {
		i.Model = "claude-sonnet-5"
	}
	return i
}

// The model an alias resolved to is what status and list show, and it
// stays through a crash of the daemon and the resume after it, before the
// resumed agent's first turn; the resume still asks for the alias.
func TestResolvedModelSurvivesResume(t *testing.T) {
	dir := t.TempDir()
	paths := config.Paths{CacheDir: dir + "/cache", SockDir: dir + "/sock", ConfigFile: dir + "/c.json", WorktreeDir: dir + "/worktrees"}
	var given []string
	newManager := func() *Manager {
		m, err := New(paths, config.Defaults(), nil, func(o backend.Options, sink backend.Sink) (backend.Backend, error) {
			given = append(given, o.Model)
			return &resolving{scripted: &scripted{sink: sink}, given: o.Model}, nil
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(m.Shutdown)
		return m
	}
	model := func(m *Manager, when string) {
		t.Helper()
		st, err := m.Status(bg, &verbs.StatusArgs{AgentID: "res"})
		if err != nil || st.Model != "claude-sonnet-5" {
			t.Errorf("%s: status model %q (%v), want claude-sonnet-5", when, st.Model, err)
		}
		l, err := m.List(bg, &verbs.ListArgs{})
		if err != nil || len(l.Agents) != 1 || l.Agents[0].Model != "claude-sonnet-5" {
			var models []string
			for _, a := range l.Agents {
				models = append(models, a.Model)
			}
			t.Errorf("%s: list's models %q (%v), want claude-sonnet-5", when, models, err)
		}
	}
	m1 := newManager()
	if _, err := m1.Open(bg, &verbs.OpenArgs{Cwd: t.TempDir(), ID: "res", Model: "sonnet"}); err != nil {
		t.Fatal(err)
	}
	if _, err := m1.Run(bg, decoded(&verbs.RunArgs{AgentID: "res", Text: "one"})); err != nil {
		t.Fatal(err)
	}
	m1.saves.Wait()
	model(m1, "after a turn")
	// m1 is not shut down before m2 starts: as after a SIGKILL.
	m2 := newManager()
	model(m2, "dead after the crash")
	if _, err := m2.Open(bg, &verbs.OpenArgs{ID: "res", Resume: true}); err != nil {
		t.Fatal(err)
	}
	model(m2, "resumed, before a turn")
	if g := given[len(given)-1]; g != "sonnet" {
		t.Errorf("the resume asked the backend for %q, want the alias sonnet", g)
	}
	if rec := readRecord(t, paths.CacheDir, "res"); rec.Model != "sonnet" || rec.ResolvedModel != "claude-sonnet-5" {
		t.Errorf("record after the resume: model %q, resolved %q", rec.Model, rec.ResolvedModel)
	}
}
