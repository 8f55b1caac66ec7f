package bus

import (
	"errors"
	"fmt"
	"log"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// Endpoints returns the bus's endpoints: the ipc socket first, then the
// extra ones of the config file ("bus_endpoints").
func Endpoints(eventsSocket string, extra []string) []string {
	return append([]string{"ipc://" + eventsSocket}, extra...)
}

// splitEndpoint parses "ipc://PATH" and "tcp://HOST:PORT" into a network
// and an address for package net.
func splitEndpoint(ep string) (network, addr string, err error) {
	scheme, rest, ok := strings.Cut(ep, "://")
	if !ok || rest == "" {
		return "", "", fmt.Errorf("endpoint %q: want ipc:///path/to.sock or tcp://host:port", ep)
	}
	switch scheme {
	case "ipc":
		return "unix", rest, nil
	case "tcp":
		if _, _, err := net.SplitHostPort(rest); err != nil {
			return "", "", fmt.Errorf("endpoint %q: %v", ep, err)
		}
		return "tcp", rest, nil
	}
	return "", "", fmt.Errorf("endpoint %q: the bus speaks ipc:// and tcp://, not %s://", ep, scheme)
}

// listen binds one endpoint and returns the listener and the endpoint as
// bound (a tcp port 0 replaced by the real one).
func listen(ep string) (net.Listener, string, error) {
	network, addr, err := splitEndpoint(ep)
	if err != nil {
		return nil, "", err
	}
	if network == "tcp" {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return nil, "", err
		}
		return ln, "tcp://" + ln.Addr().String(), nil
	}
	ln, err := listenUnix(addr)
	if err != nil {
		return nil, "", err
	}
	return ln, ep, nil
}

// listenUnix binds a unix socket with mode 0600 in a directory of mode
// 0700. A socket nobody answers on is stale (a crashed daemon's) and is
// replaced; one that answers belongs to a running publisher.
func listenUnix(path string) (net.Listener, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("creating socket dir: %w", err)
	}
	if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
		c.Close()
		return nil, fmt.Errorf("%s is in use by another publisher (is another kaimon-agentd running?)", path)
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
	// Remove the file when the listener closes, like the control socket.
	ln.(*net.UnixListener).SetUnlinkOnClose(true)
	return &peerListener{Listener: ln, uid: os.Getuid()}, nil
}

// peerListener accepts only connections whose peer runs as uid, as the
// control socket does: the events of every agent are the owner's business.
type peerListener struct {
	net.Listener
	uid int
}

func (l *peerListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		cred, err := peerCred(c)
		if err == nil && int(cred.Uid) == l.uid {
			return c, nil
		}
		uid := -1
		if cred != nil {
			uid = int(cred.Uid)
		}
		log.Printf("event bus: refused a subscriber of uid %d (err %v)", uid, err)
		c.Close()
	}
}

func peerCred(c net.Conn) (*syscall.Ucred, error) {
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

// peerName names a subscriber for stats and logs: its pid on a unix
// socket, its address on tcp.
func peerName(c net.Conn) string {
	if cred, err := peerCred(c); err == nil {
		return fmt.Sprintf("pid %d", cred.Pid)
	}
	return c.RemoteAddr().String()
}
