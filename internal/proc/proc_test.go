package proc

import (
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kaimon/kaimon/internal/procstat"
)

// startPrinting starts sh -c script, which prints a pid first, and returns
// the child and that pid.
func startPrinting(t *testing.T, script string) (*Child, int) {
	t.Helper()
	cmd := exec.Command("sh", "-c", script)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	c, err := Start(cmd)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 32)
	n, _ := out.Read(buf)
	pid := 0
	for _, b := range buf[:n] {
		if b >= '0' && b <= '9' {
			pid = pid*10 + int(b-'0')
		}
	}
	return c, pid
}

func TestStopKillsTheWholeGroup(t *testing.T) {
	// The leader ignores SIGTERM and has a grandchild: Stop must still end
	// both, within the grace period plus the hard kill.
	c, grandchild := startPrinting(t, `trap "" TERM; sleep 300 & echo $!; wait`)
	if grandchild == 0 {
		t.Fatal("no grandchild pid")
	}
	if pgid, _ := syscall.Getpgid(c.ID.PID); pgid != c.ID.PID {
		t.Fatalf("child pgid %d, want its own group %d", pgid, c.ID.PID)
	}
	c.Stop(200 * time.Millisecond)
	if c.ID.Alive() {
		t.Error("leader still alive after Stop")
	}
	deadline := time.Now().Add(2 * time.Second)
	for syscall.Kill(grandchild, 0) == nil && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if syscall.Kill(grandchild, 0) == nil {
		t.Errorf("grandchild %d leaked", grandchild)
	}
}

func TestIdentityRefusesAReusedPid(t *testing.T) {
	self := Identity{PID: os.Getpid()}
	st, err := procstat.StartTime(self.PID)
	if err != nil {
		t.Fatal(err)
	}
	self.StartTime = st
	if !self.Alive() {
		t.Fatal("own identity not alive")
	}
	stranger := Identity{PID: os.Getpid(), StartTime: st + 1}
	if stranger.Alive() {
		t.Error("a different start time must not match")
	}
	if KillGroup(stranger, time.Millisecond) {
		t.Error("KillGroup signalled a process whose start time differs")
	}
}

// StopLeaderFirst signals the leader alone, so that a child of its group
// can finish what it writes once the leader is gone (claude-agent-acp's
// claude CLI and its transcript); Stop signals the whole group at once.
func TestStopLeaderFirstLetsTheGroupFinish(t *testing.T) {
	run := func(stop func(*Child)) bool {
		done := t.TempDir() + "/done"
		// The child waits out the leader, then writes; the leader waits
		// forever.
		c, err := Start(exec.Command("sh", "-c", `(trap "" TERM; sleep 0.3; touch `+done+`) & exec sleep 300`))
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond) // the child is in place
		stop(c)
		// A SIGKILLed member may take a moment to be gone.
		deadline := time.Now().Add(2 * time.Second)
		for groupLive(c.ID.PID) && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		if groupLive(c.ID.PID) {
			t.Errorf("the group of %d outlived the stop", c.ID.PID)
			syscall.Kill(-c.ID.PID, syscall.SIGKILL)
		}
		_, err = os.Stat(done)
		return err == nil
	}
	if !run(func(c *Child) { c.StopLeaderFirst(5 * time.Second) }) {
		t.Error("StopLeaderFirst: the group's child did not get to finish")
	}
	if run(func(c *Child) { c.Stop(5 * time.Second) }) {
		t.Error("Stop: the group's child finished; it should have been stopped with its leader")
	}
	// A child that does not finish is killed after the grace.
	c, err := Start(exec.Command("sh", "-c", `(trap "" TERM; sleep 300) & exec sleep 300`))
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond)
	c.StopLeaderFirst(200 * time.Millisecond)
	deadline := time.Now().Add(2 * time.Second)
	for groupLive(c.ID.PID) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if groupLive(c.ID.PID) {
		t.Error("StopLeaderFirst left a child that ignores SIGTERM running past the grace")
	}
}

// A descendant in a process group of its own (the claude CLI runs each
// Bash tool so) is stopped with its leader, by Stop and StopLeaderFirst.
func TestStopReachesDescendantsInTheirOwnGroup(t *testing.T) {
	for name, stop := range map[string]func(*Child){
		"Stop":            func(c *Child) { c.Stop(200 * time.Millisecond) },
		"StopLeaderFirst": func(c *Child) { c.StopLeaderFirst(200 * time.Millisecond) },
	} {
		c, pid := startPrinting(t, `setsid sleep 300 & echo $!; wait`)
		for i := 0; i < 100; i++ { // until setsid has run
			if pgid, _ := syscall.Getpgid(pid); pgid == pid {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		if pgid, _ := syscall.Getpgid(pid); pid == 0 || pgid == c.ID.PID {
			t.Fatalf("%s: the descendant %d is not in a group of its own (%d)", name, pid, pgid)
		}
		stop(c)
		deadline := time.Now().Add(2 * time.Second)
		for procstat.Running(pid) && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		if procstat.Running(pid) {
			t.Errorf("%s left the descendant %d running", name, pid)
			syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// Waiting for children holds neither an OS thread nor a goroutine each
// (one waiter epolls every child's pidfd), and each exit is still seen,
// with its code.
func TestWaitHoldsNoThreadNorGoroutine(t *testing.T) {
	threads := func() int {
		raw, err := os.ReadFile("/proc/self/status")
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range strings.Split(string(raw), "\n") {
			if v, ok := strings.CutPrefix(l, "Threads:"); ok {
				n, _ := strconv.Atoi(strings.TrimSpace(v))
				return n
			}
		}
		t.Fatal("no Threads in /proc/self/status")
		return 0
	}
	// The shared waiter's own goroutine and thread are not the
	// children's: start it first.
	warm := exec.Command("/bin/true")
	c0, err := Start(warm)
	if err != nil {
		t.Fatal(err)
	}
	<-c0.Done()
	const n = 40
	beforeT, beforeG := threads(), runtime.NumGoroutine()
	var kids []*Child
	var stdins []*os.File
	defer func() {
		for _, f := range stdins {
			f.Close()
		}
		for _, c := range kids {
			c.Stop(time.Second)
		}
	}()
	for i := 0; i < n; i++ {
		cmd := exec.Command("/bin/sh", "-c", "read x; exit 7")
		w, err := cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		c, err := Start(cmd)
		if err != nil {
			t.Fatal(err)
		}
		kids = append(kids, c)
		stdins = append(stdins, w.(*os.File))
	}
	// Each child is running (it waits on its stdin) and watched (Start
	// returned): count.
	if got := threads() - beforeT; got >= n/2 {
		t.Errorf("%d threads more for %d children waited for", got, n)
	}
	if got := runtime.NumGoroutine() - beforeG; got >= n/2 {
		t.Errorf("%d goroutines more for %d children waited for", got, n)
	}
	for i, f := range stdins {
		f.Close()
		<-kids[i].Done()
		if code := kids[i].ExitCode(); code != 7 {
			t.Errorf("child %d: exit code %d, want 7", i, code)
		}
	}
}

// AfterExit's functions run once the child is reaped, whether they were
// given before its exit or after.
func TestAfterExit(t *testing.T) {
	cmd := exec.Command("/bin/sh", "-c", "read x")
	w, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	c, err := Start(cmd)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Stop(0)
	before := make(chan bool, 1)
	c.AfterExit(func() {
		select {
		case <-c.Done():
			before <- true
		default:
			before <- false
		}
	})
	w.Close()
	if !<-before {
		t.Error("AfterExit ran before Done")
	}
	ran := false
	c.AfterExit(func() { ran = true })
	if !ran {
		t.Error("AfterExit after the exit did not run at once")
	}
}

// A process that carries the child's tag but left its tree before the
// stop (re-parented, in a session of its own: a Bash tool of the claude
// CLI that outlived its shell) gets SIGTERM with the group and the grace
// to exit, before any SIGKILL: it was killed outright, found only by the
// final sweep. It traps SIGTERM, writes a marker and exits.
func TestStopGivesReparentedLeftoversTheGrace(t *testing.T) {
	subreaper(t)
	marker := t.TempDir() + "/term"
	// The middle shell starts the trapper in a session of its own and
	// exits: the trapper is re-parented, away from the leader's tree.
	c, pid := startPrinting(t, `sh -c 'setsid sh -c "trap \"echo term > `+marker+`; exit 0\" TERM; echo \$\$; while :; do sleep 0.05; done" &'; exec sleep 300`)
	if pid == 0 {
		c.Stop(0)
		t.Fatal("no pid")
	}
	defer func() {
		if t.Failed() {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	}()
	// Until the middle shell is gone.
	for i := 0; i < 200; i++ {
		if !slices.ContainsFunc(descendants(c.ID.PID), func(id Identity) bool { return id.PID == pid }) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if pgid, _ := syscall.Getpgid(pid); pgid == c.ID.PID || slices.ContainsFunc(descendants(c.ID.PID), func(id Identity) bool { return id.PID == pid }) {
		t.Fatalf("the trapper %d is in the leader's group or tree", pid)
	}
	c.Stop(5 * time.Second)
	if !gone(pid) {
		t.Errorf("Stop left the re-parented trapper %d running", pid)
	}
	if b, err := os.ReadFile(marker); err != nil || strings.TrimSpace(string(b)) != "term" {
		t.Errorf("the re-parented trapper got no SIGTERM before SIGKILL (marker: %q, %v)", b, err)
	}
}
