package fleet

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/kaimon/kaimon/internal/apitype"
)

// A warm call is one channel of the master and nothing more: once a Dial
// through dial-stdio has reached the host's daemon (starting it when it
// was not running) and the handshake has named its socket, Forward asks
// the master (ssh -O forward) to forward a unix socket in kaimon's 0700
// socket dir to it. A connection to that socket becomes a
// direct-streamlocal channel that sshd connects to the daemon's socket as
// the ssh user, so the daemon's peer-credential check still holds; no
// process is started on either side, and nothing listens on a network.
// The forwarding lives in the master (ControlPersist), so later kaimon
// processes use it too; it ends with the master (ssh -O exit, StopMaster).

// refusedSuffix marks a forwarding that the host's sshd refused
// (AllowStreamLocalForwarding no): the calls of every process go through
// dial-stdio until the master is stopped.
const refusedSuffix = ".refused"

// forwardPath is the local end of the master's forwarding to the host's
// daemon, or "" when there is no master (kube://, or a socket dir too
// long). It is named by the destination, as the master's own socket is
// (%C): shorter than the control path, so it fits as that does.
func (s *SSH) forwardPath() string {
	k := s.masterKey()
	if k == "" {
		return ""
	}
	sum := sha256.Sum256([]byte(k))
	return filepath.Join(s.ControlDir, "fwd-"+hex.EncodeToString(sum[:8])+".sock")
}

// errNoForward: this Dial does not try the forwarding.
var errNoForward = errors.New("no forwarding")

// dialForward connects through the master's forwarding and checks that
// the daemon answers there. The check is needed because the master
// accepts the connection before sshd has tried the daemon's socket: a
// daemon that is not running (its socket gone, or stale), or an sshd that
// refuses the channel, shows only as the connection closed. A probe that
// gets no answer was never handled, so nothing is lost by dialing again
// through dial-stdio, which starts the daemon.
func (s *SSH) dialForward(ctx context.Context) (net.Conn, error) {
	c, _, err := s.probeForward(ctx)
	return c, err
}

// probeForward is dialForward that also returns the daemon's status, the
// probe's answer: what the first exchange asks (ProbeForward).
func (s *SSH) probeForward(ctx context.Context) (net.Conn, *apitype.DaemonStatus, error) {
	p := s.forwardPath()
	if p == "" || s.noForward.Load() {
		return nil, nil, errNoForward
	}
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", p)
	if err != nil {
		return nil, nil, err // no forwarding yet, or its master is gone
	}
	st, err := probe(ctx, c)
	if err != nil {
		c.Close()
		if ctx.Err() == nil {
			s.noForward.Store(true)
		}
		return nil, nil, err
	}
	return c, st, nil
}

// ProbeForward reaches the daemon through the master's forwarding, when
// there is one that answers, and returns its status: the first exchange,
// done by the probe that checks the channel, so that a warm command pays
// one round trip for both. The connection is kept for this process's
// next Dial (its first request) rather than closed. ok is false when the
// forwarding is not there or did not answer: the caller then asks as
// usual (through dial-stdio).
func (s *SSH) ProbeForward(ctx context.Context) (st *apitype.DaemonStatus, ok bool) {
	c, st, err := s.probeForward(ctx)
	if err != nil {
		return nil, false
	}
	s.viaForward.Store(true)
	s.primeMu.Lock()
	if s.primed != nil {
		s.primed.Close()
	}
	s.primed = c
	s.primeMu.Unlock()
	return st, true
}

// takePrimed is the connection ProbeForward kept, once.
func (s *SSH) takePrimed() net.Conn {
	s.primeMu.Lock()
	defer s.primeMu.Unlock()
	c := s.primed
	s.primed = nil
	return c
}

// probe asks the daemon on c for its status (GET /v1/daemon) and reads
// the whole answer, so that c is left at the start of the next one.
func probe(ctx context.Context, c net.Conn) (*apitype.DaemonStatus, error) {
	stop := context.AfterFunc(ctx, func() { _ = c.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	if _, err := io.WriteString(c, "GET /v1/daemon HTTP/1.1\r\nHost: kaimon\r\n\r\n"); err != nil {
		return nil, err
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return nil, err
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	var st apitype.DaemonStatus
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("the daemon's status: %s", resp.Status)
	}
	if err == nil {
		err = json.Unmarshal(body, &st)
	}
	if !stop() && err == nil {
		err = ctx.Err() // the deadline is set on c: it is no use now
	}
	if err != nil {
		return nil, err
	}
	return &st, nil
}

// Forward asks the host's master to forward forwardPath to the daemon's
// socket remoteSock (from the handshake), unless this process already
// reached the daemon through it. Each failure is silent: the calls go on
// through dial-stdio. A forwarding that the host's sshd refuses is
// cancelled and marked, so that later processes do not try it again
// until the master is stopped.
func (s *SSH) Forward(ctx context.Context, remoteSock string) {
	p := s.forwardPath()
	// ssh reads -L's spec at its colons.
	if p == "" || s.viaForward.Load() || !filepath.IsAbs(remoteSock) || strings.Contains(p+remoteSock, ":") {
		return
	}
	if _, err := os.Stat(p + refusedSuffix); err == nil {
		return
	}
	spec := p + ":" + remoteSock
	// StreamLocalBindUnlink: a socket left by a master that is gone is
	// replaced.
	if runMaster(ctx, s.masterArgv("-o", "StreamLocalBindUnlink=yes", "-O", "forward", "-L", spec)) != nil {
		return
	}
	s.noForward.Store(false)
	c, err := s.dialForward(ctx)
	if err == nil {
		c.Close()
		return
	}
	if ctx.Err() != nil {
		return
	}
	// The daemon answered through dial-stdio a moment ago, so it is the
	// channel that was refused.
	_ = runMaster(ctx, s.masterArgv("-O", "cancel", "-L", spec))
	_ = os.Remove(p)
	_ = os.WriteFile(p+refusedSuffix, []byte("the host's sshd refused to forward kaimon-agentd's socket ("+err.Error()+"): calls go through dial-stdio until `kaimon host rm` removes this file\n"), 0o600)
}

// probeFirst is ProbeForward for a transport that may be nil (a test's
// client without ssh).
func (s *SSH) probeFirst(ctx context.Context) (*apitype.DaemonStatus, bool) {
	if s == nil {
		return nil, false
	}
	return s.ProbeForward(ctx)
}
