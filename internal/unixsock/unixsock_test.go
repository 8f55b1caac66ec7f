package unixsock

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// A peer of another uid is refused, and a flood of them logs one line,
// not one each.
func TestRefusedLogIsRateLimited(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.sock")
	raw, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var lines []string
	ln := newPeerListener(raw, os.Getuid()+1, "test socket")
	ln.refused.logf = func(f string, a ...any) {
		mu.Lock()
		lines = append(lines, fmt.Sprintf(f, a...))
		mu.Unlock()
	}
	accepted := make(chan error, 1)
	go func() {
		c, err := ln.Accept()
		if c != nil {
			c.Close()
			err = fmt.Errorf("accepted a peer of another uid")
		}
		accepted <- err
	}()
	for i := 0; i < 50; i++ {
		c, err := net.Dial("unix", path)
		if err != nil {
			t.Fatal(err)
		}
		// The listener closes it: wait for that, so the refusals are done.
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		c.Read(make([]byte, 1))
		c.Close()
	}
	ln.Close()
	if err := <-accepted; err != nil && strings.Contains(err.Error(), "accepted") {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(lines) != 1 || !strings.Contains(lines[0], "test socket: refused a connection from uid") {
		t.Errorf("log lines %q", lines)
	}
	if ln.refused.suppressed != 49 {
		t.Errorf("suppressed %d, want 49", ln.refused.suppressed)
	}
}

// After the interval the next line is logged, with the count left out.
func TestLimitedLog(t *testing.T) {
	now := time.Unix(1000, 0)
	var lines []string
	l := &limitedLog{every: 10 * time.Second, now: func() time.Time { return now },
		logf: func(f string, a ...any) { lines = append(lines, fmt.Sprintf(f, a...)) }}
	for i := 0; i < 5; i++ {
		l.printf("refused %d", i)
		now = now.Add(time.Second)
	}
	now = now.Add(10 * time.Second)
	l.printf("refused %d", 5)
	want := []string{"refused 0", "refused 5 (and 4 more like it in the 15s since the last line, not logged)"}
	if fmt.Sprint(lines) != fmt.Sprint(want) {
		t.Errorf("lines %q, want %q", lines, want)
	}
}
