//go:build race

package nbio

import "syscall"

// Read is read(2) on fd, retried on EINTR; under the race detector, the
// syscall package's, for its annotations.
func Read(fd uintptr, p []byte) (int, error) {
	for {
		n, err := syscall.Read(int(fd), p)
		if err != syscall.EINTR {
			return n, err
		}
	}
}

// Write is write(2) on fd, retried on EINTR; under the race detector,
// the syscall package's, for its annotations.
func Write(fd uintptr, p []byte) (int, error) {
	for {
		n, err := syscall.Write(int(fd), p)
		if err != syscall.EINTR {
			return n, err
		}
	}
}
