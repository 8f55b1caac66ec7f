package proc

import (
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/kaimon/kaimon/internal/procstat"
)

// subreaper makes the test process a subreaper, as kaimon-agentd is, for
// the test's life.
func subreaper(t *testing.T) {
	t.Helper()
	stop, err := BecomeSubreaper()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
}

// gone waits until process pid no longer exists at all: not running and
// not a zombie either (reaped).
func gone(pid int) bool {
	deadline := time.Now().Add(LeftoverGrace + 5*time.Second)
	for time.Now().Before(deadline) {
		if _, err := os.Stat("/proc/" + strconv.Itoa(pid)); os.IsNotExist(err) {
			return true
		}
		time.Sleep(10 * time.Millisecond)
	}
	return false
}

// A leader killed from outside (not by Stop) leaves a descendant in a
// session of its own, as the claude CLI leaves a Bash tool: the descendant
// is re-parented to the subreaper, stopped (also when it ignores SIGTERM),
// and reaped.
func TestLeftoversOfALeaderKilledFromOutside(t *testing.T) {
	subreaper(t)
	for name, leftover := range map[string]string{
		"plain":          `setsid sleep 300 & echo $!; exec sleep 300`,
		"ignoring TERM":  `setsid sh -c 'trap "" TERM; while :; do sleep 1; done' & echo $!; exec sleep 300`,
		"a grandchild's": `setsid sh -c 'sleep 300 & wait' & echo $!; exec sleep 300`,
	} {
		c, pid := startPrinting(t, leftover)
		if pid == 0 {
			t.Fatalf("%s: no pid", name)
		}
		var kids []Identity
		for i := 0; i < 200 && len(kids) == 0; i++ { // until the descendants are in place
			kids = descendants(c.ID.PID)
			if len(kids) < 2 && name == "a grandchild's" {
				kids = nil
			}
			time.Sleep(10 * time.Millisecond)
		}
		if err := syscall.Kill(c.ID.PID, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		<-c.Done()
		for _, k := range kids {
			// One that ignores SIGTERM is killed when its grace ends.
			for end := time.Now().Add(LeftoverGrace + 5*time.Second); !gone(k.PID) && time.Now().Before(end); {
				time.Sleep(20 * time.Millisecond)
			}
			if !gone(k.PID) {
				t.Errorf("%s: the leader's descendant %d is left (running: %v)", name, k.PID, procstat.Running(k.PID))
				syscall.Kill(k.PID, syscall.SIGKILL)
			}
		}
	}
}

// The reaper takes only adopted orphans: os/exec's own children, started
// by Start or plainly, are still waited for by their Cmd, with their exit
// codes, while orphans come and go.
func TestReaperLeavesOsExecItsChildren(t *testing.T) {
	subreaper(t)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // a stream of orphans, each exiting on its own
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			c, err := Start(exec.Command("sh", "-c", `setsid sh -c 'sleep 0.01' & exit 0`))
			if err != nil {
				t.Error(err)
				return
			}
			<-c.Done()
		}
	}()
	for i := 0; i < 30; i++ {
		if err := exec.Command("sh", "-c", "exit 0").Run(); err != nil {
			t.Fatalf("plain os/exec child %d: %v", i, err)
		}
		cmd := exec.Command("sh", "-c", "exit 3")
		c, err := Start(cmd)
		if err != nil {
			t.Fatal(err)
		}
		if code := c.ExitCode(); code != 3 {
			t.Fatalf("Start's child %d: exit code %d (%v), want 3", i, code, c.Err())
		}
	}
	close(stop)
	wg.Wait()
	// Every orphan is reaped: no zombie child of this process is left.
	deadline := time.Now().Add(5 * time.Second)
	for {
		var zombies []int
		for _, e := range procTable() {
			if e.ppid == os.Getpid() && e.state == "Z" {
				zombies = append(zombies, e.id.PID)
			}
		}
		if len(zombies) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("zombie children left unreaped: %v", zombies)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// The subreaper state is the process's: two holders (two daemons in one
// test process) share it, and only the last one's stop ends it.
func TestSubreaperHeldByEach(t *testing.T) {
	is := func() bool {
		t.Helper()
		var v int32
		if err := unix.Prctl(unix.PR_GET_CHILD_SUBREAPER, uintptr(unsafe.Pointer(&v)), 0, 0, 0); err != nil {
			t.Fatal(err)
		}
		return v != 0
	}
	if is() {
		t.Fatal("a subreaper before the test")
	}
	stop1, err := BecomeSubreaper()
	if err != nil {
		t.Fatal(err)
	}
	stop2, err := BecomeSubreaper()
	if err != nil {
		t.Fatal(err)
	}
	stop1()
	stop1() // a second stop of the same holder changes nothing
	if !is() {
		t.Fatal("one holder's stop ended the subreaper state the other holds")
	}
	stop2()
	if is() {
		t.Fatal("still a subreaper after every holder stopped")
	}
}
