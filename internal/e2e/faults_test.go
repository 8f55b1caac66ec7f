package e2e

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kaimon/kaimon/internal/apitype"
	"github.com/kaimon/kaimon/internal/event"
	"github.com/kaimon/kaimon/internal/verbs"
)

// checkLogWhole fails unless every line of the agent's log is a whole,
// valid record, seq rising, and returns the records.
func checkLogWhole(t *testing.T, path string) []event.Record {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var recs []event.Record
	for i, line := range strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") {
		var r event.Record
		if err := json.Unmarshal([]byte(line), &r); err != nil || r.Kind == "" || r.Seq == 0 {
			t.Fatalf("log line %d is not a whole record (%v): %q", i+1, err, line)
		}
		if len(recs) > 0 && r.Seq <= recs[len(recs)-1].Seq {
			t.Fatalf("log line %d: seq %d after %d", i+1, r.Seq, recs[len(recs)-1].Seq)
		}
		recs = append(recs, r)
	}
	return recs
}

// kindsFrom lists the kinds of recs from index i on.
func kindsFrom(recs []event.Record, i int) string {
	var k []string
	for _, r := range recs[i:] {
		k = append(k, string(r.Kind))
	}
	return strings.Join(k, " ")
}

// TestFaultAgentKilledMidTurn: the agent program SIGKILLed in the middle of
// a turn. The turn fails (run exits 3), the agent is dead and says how, the
// log ends error, result, status dead, and every line of it is whole.
func TestFaultAgentKilledMidTurn(t *testing.T) {
	e := newEnv(t)
	id := e.ok("open", e.work)
	e.ok("run", id, "hello there")
	done := make(chan result, 1)
	go func() { done <- e.kaimon("run", id, "please be slow") }()
	waitFor(t, "the slow turn to reach the model", 30*time.Second, func() bool {
		reqs := e.api.Requests()
		return len(reqs) > 0 && reqs[len(reqs)-1].LastUserText == "please be slow"
	})
	pids := e.agentPIDs(t)
	if len(pids) != 1 {
		t.Fatalf("agent processes %v", pids)
	}
	if err := syscall.Kill(pids[0].PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.code != 3 || !strings.Contains(r.stderr, "claude was killed") {
		t.Fatalf("run during which the agent was killed: %s", r)
	}
	var st verbs.AgentStatus
	e.okJSON(&st, "status", id)
	if st.Status != "dead" || !strings.HasPrefix(st.Reason, "exited: claude was killed") {
		t.Fatalf("status after the kill: %+v", st)
	}
	recs := checkLogWhole(t, st.EventLog)
	// The failed result ends the turn (idle), then the agent is dead.
	if k := kindsFrom(recs, len(recs)-4); k != "error result status status" || !strings.Contains(string(recs[len(recs)-1].Data), `"dead"`) {
		t.Fatalf("the log ends %s", k)
	}
	// Turn 1 is not lost: it still reads.
	var o verbs.OutputResult
	e.okJSON(&o, "output", id, "--turn", "1")
	if !strings.HasPrefix(o.Text, "Hello from fakeapi") || !o.Done {
		t.Fatalf("turn 1 after the kill: %+v", o)
	}
}

// longTool is a Bash command that runs until it is killed, and
// longToolCmdline how its process's /proc cmdline begins. Not sleep:
// claude 2.1.328 refuses to run a sleep of minutes ("Blocked: standalone
// sleep 300"), chained or not.
const (
	longTool        = "tail -f /dev/null"
	longToolCmdline = "tail\x00-f\x00/dev/null"
)

// TestFaultDaemonTermMidTool: SIGTERM to the daemon while an agent's tool
// runs a process of its own (longTool in Bash). The daemon closes the
// agent's whole process group, nothing is left running (the harness checks
// every process of this installation), the turn is logged as cancelled, and
// the next daemon lists the agent dead, "daemon exited".
func TestFaultDaemonTermMidTool(t *testing.T) {
	e := newEnv(t)
	e.ok("daemon", "start")
	var ds struct {
		PID int `json:"pid"`
	}
	e.okJSON(&ds, "daemon", "status")
	id := e.ok("open", e.work, "--allow", "Bash")
	e.dumpOnFail(t, id)
	e.ok("send", id, "run command: "+longTool)
	waitFor(t, "the tool's process to run", 30*time.Second, func() bool {
		for _, pid := range e.processes() {
			if b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline"); strings.HasPrefix(string(b), longToolCmdline) {
				return true
			}
		}
		return false
	})
	if err := syscall.Kill(ds.PID, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the daemon, the agent and its tool to exit", 30*time.Second, func() bool { return len(e.processes()) == 0 })
	var st verbs.AgentStatus
	e.okJSON(&st, "status", id) // the next daemon
	if st.Status != "dead" || st.Reason != "daemon exited" {
		t.Fatalf("after SIGTERM: %+v", st)
	}
	recs := checkLogWhole(t, st.EventLog)
	var res event.ResultData
	for _, r := range recs {
		if r.Kind == event.Result && r.Turn == 1 {
			json.Unmarshal(r.Data, &res)
		}
	}
	if res.StopReason != apitype.StopCancelled {
		t.Fatalf("turn 1 ended %+v, want cancelled; the log ends %s", res, kindsFrom(recs, max(0, len(recs)-4)))
	}
}

// TestFaultAgentKilledMidTool: the claude CLI is SIGKILLed from outside
// (not by kaimon) while its Bash tool runs longTool in a session of its
// own. The tool is re-parented to the daemon (a subreaper), found by its
// tag and stopped with its agent: no process of the agent's tree is left,
// not even a zombie, while the daemon lives on; the agent is dead.
func TestFaultAgentKilledMidTool(t *testing.T) {
	e := newEnv(t)
	e.ok("daemon", "start")
	var ds struct {
		PID int `json:"pid"`
	}
	e.okJSON(&ds, "daemon", "status")
	id := e.ok("open", e.work, "--allow", "Bash")
	e.dumpOnFail(t, id)
	e.ok("send", id, "run command: "+longTool)
	var sleeper int
	waitFor(t, "the tool's process to run", 30*time.Second, func() bool {
		for _, pid := range e.processes() {
			if b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline"); strings.HasPrefix(string(b), longToolCmdline) {
				sleeper = pid
				return true
			}
		}
		return false
	})
	claude := e.claudeProcesses(t)
	for _, pid := range claude {
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "every process but the daemon to exit", 30*time.Second, func() bool {
		left := e.processes()
		return len(left) == 1 && left[0] == ds.PID
	})
	// Not even a zombie: the daemon reaped what it adopted.
	waitFor(t, fmt.Sprintf("the daemon %d to reap the tool's process %d", ds.PID, sleeper), 30*time.Second, func() bool {
		_, err := os.Stat("/proc/" + strconv.Itoa(sleeper))
		return os.IsNotExist(err)
	})
	var st verbs.AgentStatus
	waitFor(t, "the agent to be dead", 30*time.Second, func() bool {
		e.okJSON(&st, "status", id)
		return st.Status == "dead"
	})
}

// TestFaultGarbageFromAgent: an agent program that prints lines that are
// not stream-json (text, a NUL, invalid UTF-8, an array, an unknown type)
// before its answer. Each malformed line is an error event, quoted; the
// turn's answer still arrives whole; every line of the log is a record.
func TestFaultGarbageFromAgent(t *testing.T) {
	e := standin(t, "garbage")
	id := e.ok("open", e.work)
	if out := e.ok("run", id, "hello"); out != "after the garbage" {
		t.Fatalf("run = %q", out)
	}
	var st verbs.AgentStatus
	e.okJSON(&st, "status", id)
	if st.Status != "idle" || st.Usage.OutputTokens != 4 {
		t.Fatalf("status after the garbage: %+v", st)
	}
	var malformed []string
	for _, r := range checkLogWhole(t, st.EventLog) {
		if r.Kind == event.Error {
			var d event.ErrorData
			json.Unmarshal(r.Data, &d)
			malformed = append(malformed, d.Message)
		}
	}
	if len(malformed) != 4 {
		t.Fatalf("error events for the malformed lines: %q", malformed)
	}
	for _, m := range malformed {
		if !strings.HasPrefix(m, "malformed line from claude: ") {
			t.Errorf("error event %q", m)
		}
	}
}

// TestFaultHungAgent: an agent that never ends its turn. run gives up at
// its timeout (exit 4, the agent still working), close stops it, and
// nothing is left running (the harness checks).
func TestFaultHungAgent(t *testing.T) {
	e := standin(t, "mute")
	id := e.ok("open", e.work)
	e.fails(4, "did not end within 1s", "run", id, "hello", "--timeout", "1s")
	var st verbs.AgentStatus
	e.okJSON(&st, "status", id)
	if st.Status != "working" {
		t.Fatalf("after the timeout: %+v", st)
	}
	if got := e.ok("close", id); got != "closed" {
		t.Fatalf("close = %q", got)
	}
	recs := checkLogWhole(t, st.EventLog)
	var res event.ResultData
	json.Unmarshal(recs[len(recs)-3].Data, &res)
	if k := kindsFrom(recs, len(recs)-3); k != "result status status" || res.StopReason != apitype.StopCancelled {
		t.Fatalf("the log ends %s (%s)", k, recs[len(recs)-3].Data)
	}
}

// TestFaultAPIBreaksMidStream: the model API drops the connection halfway
// through a reply. The claude CLI asks again without streaming and the turn
// ends whole. When that fails too, the turn fails (run exits 3), the agent
// lives on, its next turn works, and the log is whole.
func TestFaultAPIBreaksMidStream(t *testing.T) {
	e := newEnv(t)
	id := e.ok("open", e.work)
	if out := e.ok("run", id, "please break off"); out != "part0 part1 part2 part3 part4 part5 part6 part7 part8 part9 " {
		t.Fatalf("the turn whose stream broke = %q", out)
	}
	var streamed, whole int
	for _, r := range e.api.Requests() {
		if r.LastUserText == "please break off" {
			if r.Stream {
				streamed++
			} else {
				whole++
			}
		}
	}
	if streamed == 0 || whole == 0 {
		t.Errorf("requests for the broken turn: %d streamed, %d whole; want the CLI's fallback", streamed, whole)
	}
	e.fails(3, "failed", "run", id, "please break off every time")
	if out := e.ok("run", id, "hello there"); !strings.HasPrefix(out, "Hello from fakeapi") {
		t.Fatalf("the turn after = %q", out)
	}
	var st verbs.AgentStatus
	e.okJSON(&st, "status", id)
	if st.Status != "idle" || st.Turn != 3 {
		t.Fatalf("status: %+v", st)
	}
	var res event.ResultData
	for _, r := range checkLogWhole(t, st.EventLog) {
		if r.Kind == event.Result && r.Turn == 2 {
			json.Unmarshal(r.Data, &res)
		}
	}
	if !res.StopReason.Failed() {
		t.Fatalf("turn 2 ended %+v", res)
	}
}

// TestFaultClientGoesAway: clients killed mid-run, mid-tail and mid-event
// stream leave nothing in the daemon: its goroutine count comes back to
// where it was, the agent finishes its turn, and the log is whole.
func TestFaultClientGoesAway(t *testing.T) {
	e := newEnv(t)
	id := e.ok("open", e.work)
	e.ok("run", id, "hello there")
	goroutines := func() int {
		var ds struct {
			Goroutines int `json:"goroutines"`
		}
		e.okJSON(&ds, "daemon", "status")
		return ds.Goroutines
	}
	before := goroutines()

	start := func(args ...string) *exec.Cmd {
		cmd := exec.Command(filepath.Join(binDir, "kaimon"), args...)
		cmd.Dir, cmd.Env = e.work, e.env
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		return cmd
	}
	tail := start("tail", "agent:"+id)
	run := start("run", id, "please be slow")
	// The HTTP event stream, read a little and then hung up on.
	conn, err := net.Dial("unix", filepath.Join(e.home, "sock", "agentd.sock"))
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(conn, "GET /v1/agents/%s/events?since=0&follow=1 HTTP/1.1\r\nHost: k\r\n\r\n", id)
	if n, err := conn.Read(make([]byte, 512)); n == 0 || err != nil {
		t.Fatalf("the event stream answered nothing: %v", err)
	}
	waitFor(t, "the slow turn to stream", 30*time.Second, func() bool {
		reqs := e.api.Requests()
		return len(reqs) > 0 && reqs[len(reqs)-1].LastUserText == "please be slow"
	})
	time.Sleep(500 * time.Millisecond) // a few chunks go out to the tails
	conn.Close()
	for _, c := range []*exec.Cmd{run, tail} {
		c.Process.Kill()
		c.Wait()
	}
	// The agent goes on without its caller; the turn ends by itself.
	e.kaimonWithin(2*time.Minute, "tail", "agent:"+id, "--from-start", "--turn", "2", "--until-result")
	waitFor(t, fmt.Sprintf("the daemon's goroutines to come back to %d", before), 15*time.Second, func() bool { return goroutines() <= before })
	var st verbs.AgentStatus
	e.okJSON(&st, "status", id)
	if st.Status != "idle" || st.Turn != 2 {
		t.Fatalf("status: %+v", st)
	}
	checkLogWhole(t, st.EventLog)
}

// TestFaultOverlongLine: an agent program that prints a 65 MiB line, over
// kaimon's 64 MiB bound. The line is skipped, not buffered, with an error
// event giving its size; the turn's answer after it arrives; the daemon
// lives on; the log is whole.
func TestFaultOverlongLine(t *testing.T) {
	e := standin(t, "longline")
	id := e.ok("open", e.work)
	if out := e.ok("run", id, "hello"); out != "after the long line" {
		t.Fatalf("run = %q", out)
	}
	var st verbs.AgentStatus
	e.okJSON(&st, "status", id)
	var skipped []string
	for _, r := range checkLogWhole(t, st.EventLog) {
		if r.Kind == event.Error {
			skipped = append(skipped, string(r.Data))
		}
	}
	if len(skipped) != 1 || !strings.Contains(skipped[0], "68157441") {
		t.Fatalf("error events: %q", skipped)
	}
	if st.Status != "idle" {
		t.Fatalf("status: %+v", st)
	}
}

// A kaimon run by an agent's tool carries that agent's KAIMON_PROC_TAG;
// the daemon it autostarts must not, or it would be taken for the
// agent's leftover and killed when the agent ends.
func TestAutostartedDaemonCarriesNoTag(t *testing.T) {
	e := newEnv(t, "KAIMON_PROC_TAG", "an-agents-tag")
	e.ok("list") // autostarts the daemon
	env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", e.daemonPID()))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(env), "KAIMON_PROC_TAG=") {
		t.Fatalf("the autostarted daemon carries the tag of the agent whose tool started it")
	}
}
