// Package proc runs agent children each in a process group of its own,
// stops them gently and then hard as a group together with whatever they
// left behind (tagged.go), waits for every child's exit in one waiter
// (exit.go), reaps the orphans a subreaper daemon inherits (reaper.go),
// and identifies a process by pid plus start time so that reaping never
// hits a stranger with a reused pid.
package proc

import (
	"errors"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/kaimon/kaimon/internal/procstat"
)

// Identity names one process instance: its pid and the start time the kernel
// recorded for it (clock ticks since boot, /proc/<pid>/stat field 22).
type Identity struct {
	PID       int    `json:"pid"`
	StartTime uint64 `json:"start_time"`
}

// groupLive says whether a process of group pgid still runs. Zombies do
// not count: an orphan of the group waits to be reaped by init, which
// here may never come.
func groupLive(pgid int) bool {
	if syscall.Kill(-pgid, 0) != nil {
		return false
	}
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return true
	}
	want := strconv.Itoa(pgid)
	for _, e := range ents {
		if e.Name()[0] < '0' || e.Name()[0] > '9' {
			continue
		}
		if f, err := procstat.Fields(e.Name()); err == nil && f[2] == want && !procstat.Gone(f[0]) {
			return true
		}
	}
	return false
}

// Alive reports whether id still names the same running process.
func (id Identity) Alive() bool {
	st, err := procstat.StartTime(id.PID)
	return err == nil && st == id.StartTime
}

// Setpgid makes cmd start in a new process group of its own.
func Setpgid(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
}

// Child is a started process, leader of its own group, whose exit the
// shared waiter (exit.go) watches for.
type Child struct {
	Cmd  *exec.Cmd
	ID   Identity
	done chan struct{}
	err  error
	once sync.Once

	exitMu sync.Mutex
	exited bool
	onExit []func()

	// tag is the value of procstat.TagEnv in the child's environment, which every
	// descendant inherits: it finds them once they are re-parented.
	tag string
	// stopping is set when Stop begins: the exit is then kaimon's doing,
	// and Stop sweeps what is left in its own time.
	stopping atomic.Bool
}

// Start starts cmd in its own process group and begins waiting on it. The
// child gets SIGTERM if kaimon dies (PR_SET_PDEATHSIG), so that an agent
// does not work on unsupervised after its daemon crashed; what it leaves
// in its group is reaped by the next daemon (pids.json). The signal is
// tied to the OS thread that forks, which the Go runtime keeps alive
// unless a goroutine locked to it exits; kaimon locks none.
//
// The child's environment gets procstat.TagEnv, unique to it, so that its
// descendants are found after it died and they were re-parented (to this
// process when it is a subreaper, to init otherwise): when the child
// exits without Stop (killed from outside, crashed), what it left is
// stopped too, gently then hard, in the goroutine that reaps it.
// Start registers the child with the orphan reaper (BecomeSubreaper)
// before the reaper may look at it, so that the reaper never waits for a
// child that os/exec waits for.
func Start(cmd *exec.Cmd) (*Child, error) {
	Setpgid(cmd)
	cmd.SysProcAttr.Pdeathsig = syscall.SIGTERM
	tag := newTag()
	env := cmd.Env
	if env == nil {
		env = os.Environ()
	}
	cmd.Env = withTag(env, tag)
	started.Lock()
	if err := cmd.Start(); err != nil {
		started.Unlock()
		return nil, err
	}
	c := &Child{Cmd: cmd, done: make(chan struct{}), tag: tag}
	c.ID.PID = cmd.Process.Pid
	started.pids[c.ID.PID] = struct{}{}
	started.Unlock()
	// The child has its environment, arguments and attributes; the Cmd
	// is kept for its exit state for the child's life, and copies of
	// them (a kilobyte of headers each, for a claude agent) need not be.
	cmd.Env, cmd.Args, cmd.SysProcAttr = nil, nil, nil
	c.ID.StartTime, _ = procstat.StartTime(c.ID.PID)
	if !exits.watch(c.ID.PID, c.reap) {
		go c.reap() // no pidfds: Wait blocks in waitid, as before
	}
	return c, nil
}

// AfterExit calls f once the process has exited and been reaped (Done is
// closed), in the goroutine that reaps it, or at once when it has
// already. f must not block: it is for arming a timer, where a goroutine
// of its own waiting on Done would cost a stack for the child's life.
func (c *Child) AfterExit(f func()) {
	c.exitMu.Lock()
	if !c.exited {
		c.onExit = append(c.onExit, f)
		c.exitMu.Unlock()
		return
	}
	c.exitMu.Unlock()
	f()
}

// reap collects the child once it has exited (or, without a pidfd,
// waits for it to): cmd.Wait returns its status and waits for os/exec's
// stdio copies, then Done is closed and the AfterExit functions run. It
// runs in a goroutine of its own, started at the exit by the shared
// waiter (exit.go): a copy still draining must not hold up the others'.
func (c *Child) reap() {
	c.err = c.Cmd.Wait()
	started.Lock()
	delete(started.pids, c.ID.PID)
	started.Unlock()
	close(c.done)
	c.exitMu.Lock()
	c.exited = true
	fs := c.onExit
	c.onExit = nil
	c.exitMu.Unlock()
	for _, f := range fs {
		f()
	}
	if !c.stopping.Load() {
		// Nobody stopped it: it died on its own, and what it
		// started (a tool in a session of its own) would run on.
		stopTagged(c.tag, LeftoverGrace)
	}
}

// reaped says whether Done is closed.
func (c *Child) reaped() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// Done is closed when the process has exited and been reaped.
func (c *Child) Done() <-chan struct{} { return c.done }

// Err is the process's exit error; valid after Done.
func (c *Child) Err() error { <-c.done; return c.err }

// ExitCode is the exit code, or -1 when killed by a signal; valid after Done.
func (c *Child) ExitCode() int {
	<-c.done
	if c.Cmd.ProcessState == nil {
		return -1
	}
	return c.Cmd.ProcessState.ExitCode()
}

// Stop signals the whole group with SIGTERM, waits up to grace for the
// leader to exit, then SIGKILLs the group. Other members of the group that
// outlive the leader are killed too: a tool the agent spawned must not be
// leaked. So are the leader's descendants in groups of their own (the
// claude CLI runs each Bash tool in a new process group), found before the
// first signal while the leader still holds them.
//
// What carries the child's tag outside the group and the leader's tree
// (re-parented before the stop, or by it) gets the same SIGTERM with the
// group, and what is left of it at the end the rest of grace to exit
// before SIGKILL (stopTagged): a tool that traps SIGTERM to clean up may.
// A leader already gone when Stop begins (a backend's finish, after the
// exit) has no exit to wait for: what it left in its group is given the
// grace instead, as what it left outside is.
func (c *Child) Stop(grace time.Duration) {
	c.once.Do(func() {
		c.stopping.Store(true)
		deadline := time.Now().Add(grace)
		pgid := c.ID.PID
		gone := c.reaped()
		table := procTable() // one read of /proc for both
		below := below(table, pgid)
		_ = syscall.Kill(-pgid, syscall.SIGTERM)
		signalAll(below, syscall.SIGTERM)
		signalAll(reparented(table, c.tag, pgid, below), syscall.SIGTERM)
		if gone {
			for time.Now().Before(deadline) && groupLive(pgid) {
				time.Sleep(20 * time.Millisecond)
			}
		} else {
			t := time.NewTimer(grace)
			select {
			case <-c.done:
			case <-t.C:
			}
			t.Stop()
		}
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		signalAll(below, syscall.SIGKILL)
		<-c.done
		stopTagged(c.tag, time.Until(deadline))
	})
}

// StopLeaderFirst is Stop for a leader that runs its own children through
// pipes (claude-agent-acp runs the claude CLI): SIGTERM goes to the leader
// alone, so that its children see their input end and exit in their own
// time, writing what they keep (the claude CLI's transcript); after grace,
// or once the whole group is gone, what is left is killed, descendants in
// groups of their own included. What carries the child's tag outside its
// tree is stopped as by Stop.
func (c *Child) StopLeaderFirst(grace time.Duration) {
	c.once.Do(func() {
		c.stopping.Store(true)
		pgid := c.ID.PID
		table := procTable()
		below := below(table, pgid)
		deadline := time.Now().Add(grace)
		_ = syscall.Kill(pgid, syscall.SIGTERM)
		// Not the leader's own children: they exit in their own time.
		signalAll(reparented(table, c.tag, pgid, below), syscall.SIGTERM)
	wait:
		for time.Now().Before(deadline) {
			select {
			case <-c.done:
				// The leader is reaped; is anyone left in its group?
				if !groupLive(pgid) {
					break wait
				}
			default:
			}
			time.Sleep(20 * time.Millisecond)
		}
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		signalAll(below, syscall.SIGKILL)
		<-c.done
		stopTagged(c.tag, time.Until(deadline)) // as in Stop
	})
}

// descendants lists the processes below pid (its children, theirs, …),
// from /proc, each with its identity so that a later signal never reaches
// a stranger that reused a pid.
func descendants(pid int) []Identity { return below(procTable(), pid) }

// signalAll sends sig to each process of ids that is still the same
// process, and to its group when it leads one.
func signalAll(ids []Identity, sig syscall.Signal) {
	for _, id := range ids {
		if !id.Alive() {
			continue
		}
		if pgid, err := syscall.Getpgid(id.PID); err == nil && pgid == id.PID {
			_ = syscall.Kill(-id.PID, sig)
		} else {
			_ = syscall.Kill(id.PID, sig)
		}
	}
}

// KillGroup stops a leftover process group whose leader is id, only if id
// still names the same process instance. It reports whether it signalled.
func KillGroup(id Identity, grace time.Duration) bool {
	if id.PID <= 1 || !id.Alive() {
		return false
	}
	_ = syscall.Kill(-id.PID, syscall.SIGTERM)
	deadline := time.Now().Add(grace)
	for time.Now().Before(deadline) && id.Alive() {
		time.Sleep(20 * time.Millisecond)
	}
	if id.Alive() {
		_ = syscall.Kill(-id.PID, syscall.SIGKILL)
	}
	return true
}

// ErrExited is returned for operations on a process that has exited.
var ErrExited = errors.New("process has exited")

// ExitDescription says how the process ended, for error messages
// (procstat.ExitDescription). Valid after Done.
func (c *Child) ExitDescription() string {
	<-c.done
	return procstat.ExitDescription(c.Cmd.ProcessState)
}

// LogTail returns the end of what was appended to the log at path since
// offset from, at most max bytes, trimmed and made valid UTF-8: the stderr
// a child wrote into its agent's log, quoted when it dies.
func LogTail(path string, from int64, max int64) string {
	if path == "" {
		return ""
	}
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return ""
	}
	start := from
	if s := st.Size() - max; s > start {
		start = s
	}
	if start >= st.Size() {
		return ""
	}
	buf := make([]byte, st.Size()-start)
	n, _ := f.ReadAt(buf, start)
	return strings.TrimSpace(strings.ToValidUTF8(string(buf[:n]), "?"))
}
