package session

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/kaimon/kaimon/internal/apitype"
	"github.com/kaimon/kaimon/internal/event"
	"github.com/kaimon/kaimon/internal/eventlog"
	"github.com/kaimon/kaimon/internal/verbs"
)

// fullDisk is a log file whose disk fills when full is set: a write then
// gets a few bytes out and fails with ENOSPC, as write(2) does.
type fullDisk struct {
	*os.File
	mu   sync.Mutex
	full bool
}

func (f *fullDisk) Write(b []byte) (int, error) {
	f.mu.Lock()
	full := f.full
	f.mu.Unlock()
	if !full {
		return f.File.Write(b)
	}
	n, _ := f.File.Write(b[:min(len(b), 7)])
	return n, syscall.ENOSPC
}

// envRec collects every envelope published.
type envRec struct {
	mu  sync.Mutex
	evs []event.Envelope
}

func (p *envRec) Publish(envs ...*event.Envelope) {
	p.mu.Lock()
	for _, env := range envs {
		p.evs = append(p.evs, *env)
	}
	p.mu.Unlock()
}

func (p *envRec) of(kind event.Kind) []event.Envelope {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []event.Envelope
	for _, e := range p.evs {
		if e.Kind == kind {
			out = append(out, e)
		}
	}
	return out
}

// TestLogFaultStopsAgent: when the log cannot take an event, the agent
// does not go on unlogged: the turn fails (agent_run's turn_failed), an
// error on the bus says the log failed, the agent is dead with the reason,
// daemon status counts the fault, and the log holds whole records only.
func TestLogFaultStopsAgent(t *testing.T) {
	r := newRig(t, 10)
	pub := &envRec{}
	r.m.AddPublisher(pub)
	id := r.open(t, "a1")
	if _, err := r.m.Run(bg, decoded(&verbs.RunArgs{AgentID: id, Text: "one"})); err != nil {
		t.Fatal(err)
	}
	ag, _ := r.m.get(id)
	path := r.paths.Agent(id).Events
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	st, _ := f.Stat()
	disk := &fullDisk{File: f}
	ag.pubMu.Lock()
	ag.log.Close()
	ag.log = eventlog.NewWriter(disk, path, st.Size())
	ag.pubMu.Unlock()
	disk.mu.Lock()
	disk.full = true
	disk.mu.Unlock()

	_, err = r.m.Run(bg, decoded(&verbs.RunArgs{AgentID: id, Text: "two"}))
	var ve *verbs.Error
	if !errors.As(err, &ve) || ve.Code != verbs.CodeTurnFailed {
		t.Fatalf("run on a full disk: err = %v, want turn_failed", err)
	}
	deadline := time.Now().Add(5 * time.Second)
	var s *verbs.AgentStatus
	for {
		s, _ = r.m.Status(bg, &verbs.StatusArgs{AgentID: id})
		if s.Status == apitype.Dead || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if s.Status != apitype.Dead || !strings.HasPrefix(s.Reason, "event log: ") || !strings.Contains(s.Reason, "no space left") {
		t.Fatalf("status %s, reason %q; want dead, event log: ... no space left", s.Status, s.Reason)
	}
	errs := pub.of(event.Error)
	if len(errs) != 1 || !strings.Contains(string(errs[0].Data), "cannot be written") {
		t.Fatalf("error events on the bus: %v", errs)
	}
	var failed bool
	for _, e := range pub.of(event.Result) {
		if e.Turn == 2 && strings.Contains(string(e.Data), `"stopReason":"error"`) && strings.Contains(string(e.Data), "event log") {
			failed = true
		}
		if e.Turn == 2 && strings.Contains(string(e.Data), `"end_turn"`) {
			t.Errorf("turn 2 succeeded on the bus: %s", e.Data)
		}
	}
	if !failed {
		t.Errorf("no failed result of turn 2 on the bus: %v", pub.of(event.Result))
	}
	if n, agent, last, _ := r.m.LogFaults(); n != 1 || agent != id || !strings.Contains(last, "no space left") {
		t.Errorf("LogFaults = %d %s %q", n, agent, last)
	}
	// The log is turn 1, whole, and nothing torn.
	var bad []eventlog.Bad
	var last event.Record
	eventlog.ScanBad(path, 0, func(rec *event.Record) bool { last = *rec; return true }, func(b eventlog.Bad) { bad = append(bad, b) })
	if len(bad) != 0 || last.Turn != 1 || last.Kind != event.Status {
		t.Fatalf("log ends with %+v, bad lines %v", last, bad)
	}
	// Reopened with room on the disk, the slot logs again, numbering on.
	r.open(t, id)
	if _, err := r.m.Run(bg, decoded(&verbs.RunArgs{AgentID: id, Text: "three"})); err != nil {
		t.Fatal(err)
	}
	recs, _ := eventlog.ReadAll(path, last.Seq)
	if len(recs) == 0 || recs[0].Seq <= last.Seq {
		t.Fatalf("after reopen: %+v", recs)
	}
}

// TestOutputNamesBadLines: agent_output read from a log with a damaged
// line says so (log_errors), whether the log is read by the book of a
// reopened slot or by the fallback for an agent the daemon does not hold.
func TestOutputNamesBadLines(t *testing.T) {
	r := newRig(t, 10)
	id := r.open(t, "a1")
	if _, err := r.m.Run(bg, decoded(&verbs.RunArgs{AgentID: id, Text: "one"})); err != nil {
		t.Fatal(err)
	}
	r.m.Close(bg, &verbs.CloseArgs{AgentID: id})
	path := r.paths.Agent(id).Events
	f, _ := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString(`{"seq":99,"ki`)
	f.Close()

	// Forgotten with its log kept: the fallback reads the log.
	if _, err := r.m.Forget(bg, &verbs.ForgetArgs{AgentIDs: []string{id}}); err != nil {
		t.Fatal(err)
	}
	res, err := r.m.Output(bg, decoded(&verbs.OutputArgs{AgentID: id}))
	if err != nil || res.Text != "re: one" || len(res.LogErrors) != 1 || !strings.Contains(res.LogErrors[0], "torn last record") {
		t.Fatalf("output from the log = %+v, %v", res, err)
	}
	// Reopened: the book is filled from the log, and keeps the note.
	r.open(t, id)
	res, err = r.m.Output(bg, decoded(&verbs.OutputArgs{AgentID: id, Turn: 1}))
	if err != nil || res.Text != "re: one" || len(res.LogErrors) != 1 || !strings.Contains(res.LogErrors[0], "torn last record") {
		t.Fatalf("output from the book = %+v, %v", res, err)
	}
}

// TestRecordFaultShows: when the agent's record cannot be written (here a
// directory is in its way, so the rename onto it fails), the agent runs on
// (its log is fine), but its status says the record is behind and why, and
// daemon status counts the fault; once a save succeeds the status is clear
// and the record current.
func TestRecordFaultShows(t *testing.T) {
	r := newRig(t, 10)
	id := r.open(t, "a1")
	if _, err := r.m.Run(bg, decoded(&verbs.RunArgs{AgentID: id, Text: "one"})); err != nil {
		t.Fatal(err)
	}
	ag, _ := r.m.get(id)
	ag.bgSaves.Wait() // turn one's save, which would write the record anew
	record := r.paths.Agent(id).Record
	if err := os.Remove(record); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(record, "in-the-way"), 0o700); err != nil {
		t.Fatal(err)
	}
	status := func(want func(*verbs.AgentStatus) bool) *verbs.AgentStatus {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for {
			s, err := r.m.Status(bg, &verbs.StatusArgs{AgentID: id})
			if err != nil {
				t.Fatal(err)
			}
			if want(s) || time.Now().After(deadline) {
				return s
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	if _, err := r.m.Run(bg, decoded(&verbs.RunArgs{AgentID: id, Text: "two"})); err != nil {
		t.Fatalf("run with the record in the way: %v", err)
	}
	s := status(func(s *verbs.AgentStatus) bool { return s.RecordError != "" })
	if !strings.Contains(s.RecordError, "record could not be written") || !strings.Contains(s.RecordError, record) || s.Status != apitype.Idle {
		t.Fatalf("status %s, record_error %q; want idle, the record's write error", s.Status, s.RecordError)
	}
	if n, agent, last, at := r.m.RecordFaults(); n < 1 || agent != id || !strings.Contains(last, record) || at == "" {
		t.Errorf("RecordFaults = %d %s %q %s", n, agent, last, at)
	}
	if n, _, _, _ := r.m.LogFaults(); n != 0 {
		t.Errorf("LogFaults = %d: the event log was fine", n)
	}

	if err := os.RemoveAll(record); err != nil {
		t.Fatal(err)
	}
	if _, err := r.m.Run(bg, decoded(&verbs.RunArgs{AgentID: id, Text: "three"})); err != nil {
		t.Fatal(err)
	}
	if s := status(func(s *verbs.AgentStatus) bool { return s.RecordError == "" }); s.RecordError != "" {
		t.Fatalf("after a save with room: record_error %q", s.RecordError)
	}
	if rec := readRecord(t, r.paths.CacheDir, id); rec.Turn != 3 {
		t.Errorf("record after the fault: turn %d, want 3", rec.Turn)
	}
}

// slowDisk is a log file whose Sync, once armed, blocks until released:
// a disk slow to flush.
type slowDisk struct {
	*os.File
	mu      sync.Mutex
	armed   bool
	syncing chan struct{} // closed when a Sync begins blocking
	release chan struct{}
}

func (f *slowDisk) Sync() error {
	f.mu.Lock()
	armed := f.armed
	f.armed = false
	f.mu.Unlock()
	if armed {
		close(f.syncing)
		<-f.release
	}
	return f.File.Sync()
}

// TestStatusAnswersDuringResultSync: the fsync after a turn's result does
// not hold the agent's lock, so agent_status answers while the disk is
// slow (the turn still working, its result not yet published); agent_run
// still returns only once the result is on disk.
func TestStatusAnswersDuringResultSync(t *testing.T) {
	r := newRig(t, 10)
	id := r.open(t, "a1")
	if _, err := r.m.Run(bg, decoded(&verbs.RunArgs{AgentID: id, Text: "one"})); err != nil {
		t.Fatal(err)
	}
	ag, _ := r.m.get(id)
	path := r.paths.Agent(id).Events
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	st, _ := f.Stat()
	disk := &slowDisk{File: f, armed: true, syncing: make(chan struct{}), release: make(chan struct{})}
	ag.pubMu.Lock()
	ag.log.Close()
	ag.log = eventlog.NewWriter(disk, path, st.Size())
	ag.pubMu.Unlock()

	ran := make(chan error, 1)
	go func() {
		_, err := r.m.Run(bg, decoded(&verbs.RunArgs{AgentID: id, Text: "two"}))
		ran <- err
	}()
	<-disk.syncing
	status := make(chan *verbs.AgentStatus, 1)
	go func() {
		s, _ := r.m.Status(bg, &verbs.StatusArgs{AgentID: id})
		status <- s
	}()
	select {
	case s := <-status:
		if s.Status != apitype.Working || s.Turn != 2 {
			t.Errorf("status during the sync: %s turn %d, want working turn 2", s.Status, s.Turn)
		}
	case <-time.After(30 * time.Second): // a hang, not a measure
		close(disk.release)
		t.Fatal("agent_status did not answer while the result's fsync was blocked")
	}
	select {
	case err := <-ran:
		t.Fatalf("agent_run returned before the result's fsync (err %v)", err)
	default:
	}
	close(disk.release)
	if err := <-ran; err != nil {
		t.Fatal(err)
	}
	if s, _ := r.m.Status(bg, &verbs.StatusArgs{AgentID: id}); s.Status != apitype.Idle || s.Turn != 2 {
		t.Fatalf("status after the sync: %s turn %d, want idle turn 2", s.Status, s.Turn)
	}
}
