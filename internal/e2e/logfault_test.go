package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/kaimon/kaimon/internal/config"
	"github.com/kaimon/kaimon/internal/event"
)

// smallDisk mounts a tmpfs of size at dir and unmounts it when the test
// ends; it skips the test where mounting is not permitted.
func smallDisk(t *testing.T, dir, size string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size+",mode=0700", "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a small tmpfs to fill (needs root): %v: %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", "-l", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", dir, err, out)
		}
	})
}

// fill writes path until the disk is full.
func fill(t *testing.T, path string) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := bytes.Repeat([]byte("x"), 4096)
	for {
		if _, err := f.Write(buf); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatal(err)
			}
			break
		}
	}
	for { // the last bytes of the last block
		if _, err := f.Write([]byte("x")); err != nil {
			break
		}
	}
}

// TestLogFaultFullDisk: the event logs are on a small disk, which fills.
// A turn then fails (exit 3) rather than succeed unlogged, the agent is
// dead with the log fault as its reason, daemon status counts it; once
// there is room again a new agent works, and every line of every log is a
// whole record.
func TestLogFaultFullDisk(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting a small tmpfs needs root")
	}
	cacheDir, err := os.MkdirTemp("", "kmlog")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(cacheDir) })
	smallDisk(t, cacheDir, "2m")
	e := newEnv(t, "KAIMON_CACHE_DIR", cacheDir)
	id := e.ok("open", e.work)
	e.ok("run", id, "hello there")

	filler := filepath.Join(cacheDir, "filler")
	fill(t, filler)
	// A reply longer than the slack in the log's last page (tmpfs grows
	// a file a page at a time), so that its record cannot be written.
	r := e.fails(3, "", "run", id, "stream 2000 chunks")
	if !strings.Contains(r.stderr, "event log") {
		t.Errorf("the failed run does not name the event log: %s", r)
	}
	var st struct {
		Status string `json:"status"`
		Reason string `json:"reason"`
	}
	waitFor(t, "the agent to be stopped", 30e9, func() bool {
		e.okJSON(&st, "status", id)
		return st.Status == "dead"
	})
	if !strings.HasPrefix(st.Reason, "event log: ") || !strings.Contains(st.Reason, "no space left") {
		t.Errorf("dead agent's reason = %q, want the event log fault", st.Reason)
	}
	var ds struct {
		LogFaults *struct {
			Count     int    `json:"count"`
			LastAgent string `json:"last_agent"`
			LastError string `json:"last_error"`
		} `json:"log_faults"`
	}
	e.okJSON(&ds, "daemon", "status")
	if ds.LogFaults == nil || ds.LogFaults.Count < 1 || ds.LogFaults.LastAgent != id {
		t.Errorf("daemon status log_faults = %+v, want the fault of %s", ds.LogFaults, id)
	}
	if out := e.ok("daemon", "status"); !strings.Contains(out, "event log faults") || !strings.Contains(out, id) {
		t.Errorf("daemon status does not show the fault:\n%s", out)
	}

	// Room again: a new agent works, and the logs are whole records.
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	id2 := e.ok("open", e.work)
	e.ok("run", id2, "hello once more")
	for _, a := range []string{id, id2} {
		checkWhole(t, config.Paths{CacheDir: cacheDir}.Agent(a).Events)
	}
}

// checkWhole fails unless every line of the log at path is a whole record.
func checkWhole(t *testing.T, path string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) > 0 && b[len(b)-1] != '\n' {
		t.Errorf("%s does not end with a newline: a torn last record", path)
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 1<<24)
	for n := 1; sc.Scan(); n++ {
		var r event.Record
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil || r.Seq == 0 || r.Kind == "" {
			t.Errorf("%s line %d is not a whole record (%v): %q", path, n, err, sc.Text())
		}
	}
}

// TestRecordFault: an agent's record cannot be written (a directory is in
// its way, so the rename onto it fails). The agent works on, but its next
// status says the record is behind and why, daemon status counts the
// fault, and doctor FAILs naming the agent; once a save succeeds the
// status is clear and doctor only warns of the fault past.
func TestRecordFault(t *testing.T) {
	e := newEnv(t)
	id := e.ok("open", e.work)
	e.ok("run", id, "hello there")
	record := e.paths().Agent(id).Record
	// The save of the turn's end runs after run returns, and may write
	// the record anew: put the directory in its way once it has.
	waitFor(t, "a directory in the record's way", 30e9, func() bool {
		os.Remove(record)
		return os.Mkdir(record, 0o700) == nil
	})
	if err := os.Mkdir(filepath.Join(record, "in-the-way"), 0o700); err != nil {
		t.Fatal(err)
	}
	e.ok("run", id, "hello again")
	var st struct {
		Status      string `json:"status"`
		RecordError string `json:"record_error"`
	}
	waitFor(t, "the status to say the record is behind", 30e9, func() bool {
		e.okJSON(&st, "status", id)
		return st.RecordError != ""
	})
	if !strings.Contains(st.RecordError, "record could not be written") || !strings.Contains(st.RecordError, record) || st.Status != "idle" {
		t.Errorf("status %s, record_error %q; want idle and the record's write error", st.Status, st.RecordError)
	}
	if out := e.ok("status", id); !strings.Contains(out, "record could not be written") {
		t.Errorf("kaimon status does not say the record is behind:\n%s", out)
	}
	var ds struct {
		RecordFaults *struct {
			Count     int    `json:"count"`
			LastAgent string `json:"last_agent"`
		} `json:"record_faults"`
	}
	e.okJSON(&ds, "daemon", "status")
	if ds.RecordFaults == nil || ds.RecordFaults.Count < 1 || ds.RecordFaults.LastAgent != id {
		t.Errorf("daemon status record_faults = %+v, want the fault of %s", ds.RecordFaults, id)
	}
	if out := e.ok("daemon", "status"); !strings.Contains(out, "record faults") || !strings.Contains(out, id) {
		t.Errorf("daemon status does not show the fault:\n%s", out)
	}
	code, checks := doctorJSON(t, e.env, e.work)
	if c := checks["records"]; code != 1 || c.Status != "FAIL" || !strings.Contains(c.Detail, id) || !strings.Contains(c.Fix, e.paths().CacheDir) {
		t.Errorf("doctor with a record behind: exit %d, records %+v", code, c)
	}

	// Room again: the next save writes the record, and the status is clear.
	if err := os.RemoveAll(record); err != nil {
		t.Fatal(err)
	}
	e.ok("run", id, "third time")
	waitFor(t, "the record to be written", 30e9, func() bool {
		st.RecordError = "" // absent when clear: Unmarshal would keep the old one
		e.okJSON(&st, "status", id)
		return st.RecordError == ""
	})
	if _, err := os.Stat(record); err != nil {
		t.Errorf("the record after the fault: %v", err)
	}
	if _, checks := doctorJSON(t, e.env, e.work); checks["records"].Status != "warn" {
		t.Errorf("doctor with the fault made good: records %+v, want a warning", checks["records"])
	}
}
