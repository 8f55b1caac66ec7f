// Package unixsock binds the daemon's unix sockets (the control API and the
// event bus) the one way both need: in a directory of mode 0700, the socket
// 0600, a stale socket of a crashed daemon replaced, and every connection's
// peer uid checked (SO_PEERCRED) so that only the owner gets in.
package unixsock

import (
	"errors"
	"fmt"
	"log"
	"net"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"
)

// ErrInUse says that something answers on the socket already.
var ErrInUse = errors.New("socket in use")

// Listen binds path. A socket nobody answers on is stale and is replaced;
// one that answers is ErrInUse. The file is removed when the listener
// closes. what names the socket in the log line of a refused peer.
func Listen(path, what string) (net.Listener, error) {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("creating socket dir: %w", err)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return nil, fmt.Errorf("securing socket dir: %w", err)
	}
	if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
		c.Close()
		return nil, fmt.Errorf("%s: %w", path, ErrInUse)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("removing stale socket: %w", err)
	}
	old := syscall.Umask(0o177)
	ln, err := net.Listen("unix", path)
	syscall.Umask(old)
	if err != nil {
		return nil, err
	}
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return nil, err
	}
	ln.(*net.UnixListener).SetUnlinkOnClose(true)
	return newPeerListener(ln, os.Getuid(), what), nil
}

// RefusedLogEvery bounds the log of refused connections to one line in
// this long, which counts those left out: a stranger connecting in a loop
// must not fill the daemon's log.
var RefusedLogEvery = 10 * time.Second

func newPeerListener(ln net.Listener, uid int, what string) *peerListener {
	return &peerListener{Listener: ln, uid: uid, what: what, refused: &limitedLog{every: RefusedLogEvery, logf: log.Printf}}
}

// peerListener accepts only connections whose peer runs as uid.
type peerListener struct {
	net.Listener
	uid     int
	what    string
	refused *limitedLog
}

func (l *peerListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		cred, err := PeerCred(c)
		if err == nil && int(cred.Uid) == l.uid {
			return c, nil
		}
		uid := -1
		if cred != nil {
			uid = int(cred.Uid)
		}
		l.refused.printf("%s: refused a connection from uid %d (err %v)", l.what, uid, err)
		c.Close()
	}
}

// PeerCred returns the credentials of a unix connection's peer.
func PeerCred(c net.Conn) (*syscall.Ucred, error) {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return nil, errors.New("not a unix connection")
	}
	rc, err := uc.SyscallConn()
	if err != nil {
		return nil, err
	}
	var cred *syscall.Ucred
	var serr error
	if err := rc.Control(func(fd uintptr) {
		cred, serr = syscall.GetsockoptUcred(int(fd), syscall.SOL_SOCKET, syscall.SO_PEERCRED)
	}); err != nil {
		return nil, err
	}
	return cred, serr
}

// limitedLog logs at most one line per every; the next line it logs says
// how many it left out.
type limitedLog struct {
	mu         sync.Mutex
	every      time.Duration
	last       time.Time
	suppressed int
	logf       func(format string, a ...any)
	now        func() time.Time // nil: time.Now
}

func (l *limitedLog) printf(format string, a ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := time.Now
	if l.now != nil {
		now = l.now
	}
	t := now()
	if !l.last.IsZero() && t.Sub(l.last) < l.every {
		l.suppressed++
		return
	}
	if l.suppressed > 0 {
		format += fmt.Sprintf(" (and %d more like it in the %s since the last line, not logged)", l.suppressed, t.Sub(l.last).Round(time.Second))
	}
	l.last, l.suppressed = t, 0
	l.logf(format, a...)
}
