//go:build !race

// The plain build: RawSyscall, no entersyscall (see the package doc).

package nbio

import (
	"syscall"
	"unsafe"
)

// Read is read(2) on fd, which must be non-blocking, retried on EINTR.
func Read(fd uintptr, p []byte) (int, error) { return raw(syscall.SYS_READ, fd, p) }

// Write is write(2) on fd, which must be non-blocking, retried on EINTR.
func Write(fd uintptr, p []byte) (int, error) { return raw(syscall.SYS_WRITE, fd, p) }

// raw is read(2) or write(2) (trap) of p on fd by RawSyscall.
func raw(trap, fd uintptr, p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	for {
		n, _, e := syscall.RawSyscall(trap, fd, uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)))
		switch e {
		case 0:
			return int(n), nil
		case syscall.EINTR:
			continue
		}
		return -1, e
	}
}
