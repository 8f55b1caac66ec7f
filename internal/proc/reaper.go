package proc

import (
	"fmt"
	"os"
	"os/signal"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// started holds the pids of the children Start started that os/exec has
// not waited for yet: the reaper must leave them to their Wait. Start
// holds the lock from the fork to the registration, and the reaper holds
// it while it looks, so that a child that exits at once is never taken for
// an orphan.
var started = struct {
	sync.Mutex
	pids map[int]struct{}
}{pids: map[int]struct{}{}}

// BecomeSubreaper makes this process a child subreaper
// (PR_SET_CHILD_SUBREAPER): the orphans of its children's descendants (a
// tool left running by an agent that was killed) are re-parented to it
// instead of to init, so that they stay below it, and it reaps them when
// they exit. stop ends the reaping and the subreaper state.
//
// The reaper waits only for zombies that are its children, not started by
// Start, and not in its own process group: on SIGCHLD it scans /proc and
// waits for each such pid alone (waitid P_PID), never wait(-1), which
// would take os/exec's children from their Cmd.Wait. A child that this
// process starts must therefore go through Start, or stay in this
// process's group (os/exec's default).
//
// The state is the process's, and there is one reaper for it however
// many daemons run in the process (tests run two): each call holds it,
// and the last stop ends it, so that one daemon's shutdown does not leave
// another's orphans to init.
func BecomeSubreaper() (stop func(), err error) {
	subreaping.Lock()
	defer subreaping.Unlock()
	if subreaping.holders == 0 {
		if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
			return func() {}, fmt.Errorf("becoming a child subreaper: %w", err)
		}
		subreaping.stop = startReaper()
	}
	subreaping.holders++
	var once sync.Once
	return func() {
		once.Do(func() {
			subreaping.Lock()
			defer subreaping.Unlock()
			if subreaping.holders--; subreaping.holders == 0 {
				subreaping.stop()
				_ = unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0)
			}
		})
	}, nil
}

// subreaping counts the holders of the subreaper state (BecomeSubreaper),
// with what stops its reaper.
var subreaping struct {
	sync.Mutex
	holders int
	stop    func()
}

// startReaper reaps the adopted orphans now and at every SIGCHLD, until
// the function it returns is called (which waits for it to end).
func startReaper() (stop func()) {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGCHLD)
	quit := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		reapOrphans()
		for {
			select {
			case <-sigs:
				reapOrphans()
			case <-quit:
				return
			}
		}
	}()
	return func() {
		signal.Stop(sigs)
		close(quit)
		<-done
	}
}

// reapOrphans waits for every zombie child of this process that is an
// orphan it adopted (see BecomeSubreaper), and reports how many.
func reapOrphans() int {
	self := os.Getpid()
	pgrp := syscall.Getpgrp()
	started.Lock()
	defer started.Unlock()
	n := 0
	for _, e := range procTable() {
		if e.ppid != self || e.state != "Z" || e.pgid == pgrp {
			continue
		}
		if _, ours := started.pids[e.id.PID]; ours {
			continue
		}
		var info unix.Siginfo
		if unix.Waitid(unix.P_PID, e.id.PID, &info, unix.WEXITED|unix.WNOHANG, nil) == nil {
			n++
		}
	}
	return n
}
