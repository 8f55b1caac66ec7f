package nbio

import (
	"os"
	"syscall"
	"testing"
)

// Read and Write move bytes through a non-blocking pipe, and say EAGAIN,
// having done nothing, where a blocking call would wait: an empty pipe's
// read, a full pipe's write.
func TestReadWriteNonBlocking(t *testing.T) {
	r, w, err := os.Pipe() // non-blocking, in the runtime's poller
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	rfd, wfd := rawFd(t, r), rawFd(t, w)
	buf := make([]byte, 64)
	if n, err := Read(rfd, buf); err != syscall.EAGAIN || n > 0 {
		t.Fatalf("read of an empty pipe: %d, %v; want EAGAIN", n, err)
	}
	if n, err := Write(wfd, []byte("line\n")); err != nil || n != 5 {
		t.Fatalf("write: %d, %v", n, err)
	}
	if n, err := Read(rfd, buf); err != nil || string(buf[:n]) != "line\n" {
		t.Fatalf("read: %q, %v", buf[:max(n, 0)], err)
	}
	if n, err := Read(rfd, nil); n != 0 || err != nil {
		t.Fatalf("read of nothing: %d, %v", n, err)
	}
	block := make([]byte, 1<<20)
	total := 0
	for {
		n, err := Write(wfd, block)
		if err == syscall.EAGAIN {
			break
		}
		if err != nil || n <= 0 {
			t.Fatalf("filling the pipe: %d, %v", n, err)
		}
		total += n
	}
	if total == 0 {
		t.Fatal("a pipe that took nothing before EAGAIN")
	}
	w.Close()
	got := 0
	for {
		n, err := Read(rfd, block)
		if err != nil {
			t.Fatalf("draining: %v after %d of %d bytes", err, got, total)
		}
		if n == 0 {
			break // end of file
		}
		got += n
	}
	if got != total {
		t.Fatalf("read %d bytes back, wrote %d", got, total)
	}
}

// rawFd is f's descriptor without making it blocking (f.Fd would).
func rawFd(t *testing.T, f *os.File) uintptr {
	rc, err := f.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var fd uintptr
	if err := rc.Control(func(d uintptr) { fd = d }); err != nil {
		t.Fatal(err)
	}
	return fd
}
