package bus

import (
	"errors"
	"fmt"
	"net"
	"strings"

	"github.com/kaimon/kaimon/internal/unixsock"
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

// listenUnix binds the bus's unix socket like the control socket: owner
// only, a stale one replaced.
func listenUnix(path string) (net.Listener, error) {
	ln, err := unixsock.Listen(path, "event bus")
	if errors.Is(err, unixsock.ErrInUse) {
		return nil, fmt.Errorf("%s is in use by another publisher (is another kaimon-agentd running?)", path)
	}
	return ln, err
}

// peerName names a subscriber for stats and logs: its pid on a unix
// socket, its address on tcp.
func peerName(c net.Conn) string {
	if cred, err := unixsock.PeerCred(c); err == nil {
		return fmt.Sprintf("pid %d", cred.Pid)
	}
	return c.RemoteAddr().String()
}
