package proc

import (
	"sync"

	"golang.org/x/sys/unix"
)

// exits is the one waiter for every child's exit. A goroutine per child,
// parked on the child's pidfd, cost a stack for each child's whole life
// (a thousand idle agents, a thousand stacks); here one goroutine waits in
// epoll_wait(2) on every child's pidfd, which becomes readable when its
// process exits, and only then starts a goroutine that reaps that child
// (Child.reap: cmd.Wait, which returns at once for a process that has
// exited, and still waits for os/exec's stdio copies). It costs one OS
// thread, blocked in epoll_wait, for the daemon.
var exits exitWaiter

type exitWaiter struct {
	once sync.Once
	epfd int // -1 when there is no epoll: watch refuses, callers wait alone

	mu sync.Mutex
	// byFd is what to run when the pidfd fd is readable. A pidfd is
	// added here before it is added to the epoll set and closed only by
	// run, after it was removed from both, so that a reused fd number
	// never gets an earlier child's exit.
	byFd   map[int32]func()
	broken bool // run has stopped: watch refuses
}

// watch arranges for reap to run, in a goroutine of its own, once process
// pid (a child not yet waited for) has exited. It reports false when it
// cannot (no pidfds before Linux 5.3): the caller waits for the child
// itself.
func (w *exitWaiter) watch(pid int, reap func()) bool {
	w.once.Do(w.init)
	if w.epfd < 0 {
		return false
	}
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return false
	}
	// Held across the add, so that run, when it gives up, sees every
	// pidfd either in both byFd and the epoll set or in neither.
	w.mu.Lock()
	defer w.mu.Unlock()
	ev := unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(fd)}
	if w.broken {
		unix.Close(fd)
		return false
	}
	w.byFd[int32(fd)] = reap
	if err := unix.EpollCtl(w.epfd, unix.EPOLL_CTL_ADD, fd, &ev); err != nil {
		delete(w.byFd, int32(fd))
		unix.Close(fd)
		return false
	}
	return true
}

func (w *exitWaiter) init() {
	w.byFd = map[int32]func(){}
	fd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		w.epfd = -1
		return
	}
	w.epfd = fd
	go w.run()
}

// run waits for exits and hands each to its reaper. Should epoll_wait
// fail for good (it should not: the epoll fd is never closed), every
// child still watched is handed to its reaper at once, whose cmd.Wait then
// blocks in waitid as it did before pidfds: exits are late, never lost.
func (w *exitWaiter) run() {
	evs := make([]unix.EpollEvent, 64)
	for {
		n, err := unix.EpollWait(w.epfd, evs, -1)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			w.mu.Lock()
			w.broken = true
			rest := w.byFd
			w.byFd = map[int32]func(){}
			w.mu.Unlock()
			for fd, reap := range rest {
				go reap()
				_ = unix.EpollCtl(w.epfd, unix.EPOLL_CTL_DEL, int(fd), nil)
				unix.Close(int(fd))
			}
			return
		}
		for _, ev := range evs[:n] {
			fd := ev.Fd
			_ = unix.EpollCtl(w.epfd, unix.EPOLL_CTL_DEL, int(fd), nil)
			w.mu.Lock()
			reap := w.byFd[fd]
			delete(w.byFd, fd)
			w.mu.Unlock()
			unix.Close(int(fd))
			if reap != nil {
				go reap()
			}
		}
	}
}
