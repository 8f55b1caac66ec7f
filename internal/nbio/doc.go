// Package nbio reads and writes file descriptors that never block (the
// runtime's non-blocking pipes and sockets, inside a poller callback)
// without telling the scheduler that a system call began.
//
// syscall.Read and syscall.Write enter the runtime's syscall state
// (entersyscall), and the first such entry after every P went idle wakes
// the runtime's sysmon thread from its deep sleep and sets it polling
// every 20 µs again. A relay that waits for its agent between reads goes
// idle and wakes up again thousands of times a turn: on this PVM guest,
// where every context switch is dear, sysmon's wakes and sleeps were a
// fifth of the daemon's CPU in a relay profile (docs/perf/history.md, issue 18).
// A call on a non-blocking descriptor returns at once, so there is nothing
// for sysmon to take the P back from: RawSyscall is enough.
//
// Under the race detector they are syscall.Read and syscall.Write, whose
// annotations (the I/O happens-before edge, the buffer written by the
// kernel) the detector needs (nbio_race.go).
package nbio
