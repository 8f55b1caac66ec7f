package fleet

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/kaimon/kaimon/internal/client"
	"github.com/kaimon/kaimon/internal/config"
)

// The ssh options that bound a dead link: a connection that cannot be made
// fails after connectTimeout, and one that stops answering (a turn's
// stream, the master) after aliveInterval × aliveCount, give or take an
// interval: never a hang. A new command is bounded tighter still, by
// handshakeWait.
const (
	connectTimeout = 8
	aliveInterval  = 2
	aliveCount     = 3
	// controlPersist keeps the master connection this long after its last
	// channel closes, so that the next command costs a channel, not a
	// handshake.
	controlPersist = "10m"
)

// maxControlPath bounds the control socket's path: a unix socket's 107
// bytes, less the 17 that ssh appends to the master's temporary name
// before renaming it into place.
const maxControlPath = 107 - 17

// SSH reaches one host's daemon: each Dial starts one ssh child running
// `REMOTE_BIN dial-stdio` there, whose stdin and stdout are the connection.
// A kube:// target is reached the same way through `kubectl exec -i POD --
// REMOTE_BIN dial-stdio`: the transport is a command whose stdio reaches
// dial-stdio, and only its argv differs.
type SSH struct {
	Name      string // the host's name, for errors (a URL given directly names itself)
	Target    Target
	RemoteBin string // the kaimon to run there; empty: DefaultRemoteBin
	// ControlDir holds the master connection's socket (kaimon's socket
	// dir); empty: no master is shared.
	ControlDir string
	// Command replaces `ssh`, as git's GIT_SSH_COMMAND does: run by sh -c
	// with the arguments after it, so that `ssh -F FILE -i KEY` works.
	// Empty: KAIMON_SSH_COMMAND, else ssh.
	Command string
	// KubeCommand replaces `kubectl` for a kube:// target, as Command
	// replaces ssh. Empty: KAIMON_KUBECTL_COMMAND, else kubectl.
	KubeCommand string
	// NoAutostart runs `kaimon --no-autostart dial-stdio` there: a daemon
	// that is not running fails the connection instead of being started
	// (what a completion asks with, which must start nothing).
	NoAutostart bool

	// viaForward: a Dial of this process reached the daemon through the
	// master's forwarding, so there is none to ask for.
	viaForward atomic.Bool
	// noForward: the forwarding failed a probe in this process; its
	// later Dials go through dial-stdio, until Forward makes a new one.
	noForward atomic.Bool
	// primed is a connection ProbeForward checked and kept for the next
	// Dial: the first exchange's probe, ready for the first request.
	primeMu sync.Mutex
	primed  net.Conn
}

// ForHost is the transport of a configured host (or of a URL given
// directly, whose name is itself).
func ForHost(name string, h Host, controlDir string) (*SSH, error) {
	t, err := ParseURL(h.URL)
	if err != nil {
		return nil, err
	}
	return &SSH{Name: name, Target: t, RemoteBin: h.RemoteBin, ControlDir: controlDir}, nil
}

func (s *SSH) bin() string { return Host{RemoteBin: s.RemoteBin}.Bin() }

// Client is a client of the host's daemon through this transport, before
// any exchange: never autostarted here (dial-stdio starts it there), its
// errors naming the host.
func (s *SSH) Client(paths config.Paths) *client.Client {
	return &client.Client{Paths: paths, Dial: s.Dial, Addr: "host " + s.Name, NoAutostart: true}
}

// remoteCommand is the command run on the host: REMOTE_BIN
// [--no-autostart] dial-stdio.
func (s *SSH) remoteCommand() []string {
	if s.NoAutostart {
		return []string{s.bin(), "--no-autostart", "dial-stdio"}
	}
	return []string{s.bin(), "dial-stdio"}
}

// controlPath is the master's socket, or "" when kaimon's socket dir is too
// long to hold one (then every Dial makes its own connection). %C is a
// hash of the local host, remote host, port and user: one master per
// destination, of fixed length.
func (s *SSH) controlPath() string {
	if s.ControlDir == "" || s.Target.Kube {
		return ""
	}
	p := filepath.Join(s.ControlDir, "ssh-%C")
	if len(p)-2+40 > maxControlPath {
		return ""
	}
	return p
}

// Argv is the command line of one Dial.
func (s *SSH) Argv() []string {
	if s.Target.Kube {
		return s.kubeArgv()
	}
	args := []string{
		"-o", "BatchMode=yes",
		"-o", "ConnectTimeout=" + strconv.Itoa(connectTimeout),
		"-o", "ServerAliveInterval=" + strconv.Itoa(aliveInterval),
		"-o", "ServerAliveCountMax=" + strconv.Itoa(aliveCount),
	}
	if cp := s.controlPath(); cp != "" {
		args = append(args, "-o", "ControlMaster=auto", "-o", "ControlPersist="+controlPersist, "-o", "ControlPath="+cp)
	}
	if s.Target.Port != 0 {
		args = append(args, "-p", strconv.Itoa(s.Target.Port))
	}
	// "--": a destination is never read as an option.
	// ssh joins the remote command's words into one line for the remote
	// shell: the program's path is quoted for it.
	remote := s.remoteCommand()
	remote[0] = shellWord(remote[0])
	args = append(args, "--", s.Target.Destination(), strings.Join(remote, " "))
	cmd := s.Command
	if cmd == "" {
		cmd = os.Getenv("KAIMON_SSH_COMMAND")
	}
	return commandArgv(cmd, "ssh", args)
}

// kubeArgv is `kubectl [--context CTX] exec -i [-n NS] [-c C] POD --
// REMOTE_BIN dial-stdio`. kubectl passes the command's words as they are
// (no remote shell joins them), so REMOTE_BIN is one word, unquoted; and
// it exits with the command's status, as ssh does.
func (s *SSH) kubeArgv() []string {
	t := s.Target
	var args []string
	if t.Context != "" {
		args = append(args, "--context", t.Context)
	}
	args = append(args, "exec", "-i")
	if t.Namespace != "" {
		args = append(args, "-n", t.Namespace)
	}
	if t.Container != "" {
		args = append(args, "-c", t.Container)
	}
	args = append(append(args, t.Pod, "--"), s.remoteCommand()...)
	cmd := s.KubeCommand
	if cmd == "" {
		cmd = os.Getenv("KAIMON_KUBECTL_COMMAND")
	}
	return commandArgv(cmd, "kubectl", args)
}

// commandArgv runs args with the program def, or with cmd when it is set,
// as git runs GIT_SSH_COMMAND: by sh -c with the arguments after it, so
// that cmd may carry options of its own ("ssh -F FILE -i KEY").
func commandArgv(cmd, def string, args []string) []string {
	if cmd == "" {
		return append([]string{def}, args...)
	}
	return append([]string{"sh", "-c", cmd + ` "$@"`, cmd}, args...)
}

// via names the program that reaches the host, for errors.
func (s *SSH) via() string {
	if s.Target.Kube {
		return "kubectl"
	}
	return "ssh"
}

// MasterExitArgv is the command line that ends the host's master
// connection (ssh -O exit), or nil when no master is shared.
func (s *SSH) MasterExitArgv() []string { return s.masterArgv("-O", "exit") }

// masterArgv is a command line for the host's master (ssh's options,
// then extra, e.g. -O exit), or nil when no master is shared.
func (s *SSH) masterArgv(extra ...string) []string {
	if s.controlPath() == "" {
		return nil
	}
	argv := s.Argv()
	i := slices.Index(argv, "--")
	return slices.Concat(argv[:i], extra, []string{"--", s.Target.Destination()})
}

// runMaster runs a command for the master (masterArgv), bounded, in a
// process group of its own.
func runMaster(ctx context.Context, argv []string) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	return cmd.Run()
}

// masterKey names the master this transport shares, as ssh's %C does
// (the destination and port; the local host is this one for every
// transport): two transports with one key share one master, and one
// forwarding. "" when no master is shared.
func (s *SSH) masterKey() string {
	if s.controlPath() == "" {
		return ""
	}
	return s.Target.Destination() + " " + strconv.Itoa(s.Target.Port)
}

// StopMasterOf ends the master of host name (h), which `kaimon host rm`
// has just removed, unless one of the hosts left (rest) shares it: ssh
// keeps one master per destination, not per name, so two names of one
// destination (another remote_bin, say) share one master, and the name
// left keeps using it.
func StopMasterOf(ctx context.Context, name string, h Host, rest map[string]Host, controlDir string) {
	tr, err := ForHost(name, h, controlDir)
	if err != nil {
		return
	}
	for other, oh := range rest {
		if o, err := ForHost(other, oh, controlDir); other != name && err == nil && o.masterKey() != "" && o.masterKey() == tr.masterKey() {
			return
		}
	}
	tr.StopMaster(ctx)
}

// StopMaster ends the host's master connection, if one runs: what a test
// ends its own with (`kaimon host rm` asks StopMasterOf). A master that is
// not running is no error.
func (s *SSH) StopMaster(ctx context.Context) {
	argv := s.MasterExitArgv()
	if argv == nil {
		return
	}
	if _, err := os.Stat(s.ControlDir); err != nil {
		return
	}
	_ = runMaster(ctx, argv)
	// ssh leaves its forwarding's socket behind; and a new master may
	// find the host's sshd allowing forwarding after all.
	if p := s.forwardPath(); p != "" {
		_ = os.Remove(p)
		_ = os.Remove(p + refusedSuffix)
	}
}

// shellWord quotes w for the remote shell (ssh joins its command's words
// into one line that the remote user's shell runs) unless it needs none; a
// leading ~ stays unquoted so that ~/bin/kaimon works.
func shellWord(w string) string {
	safe := func(s string) bool {
		for _, c := range s {
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune("-_./+:=@%,", c)) {
				return false
			}
		}
		return true
	}
	if w != "" && safe(w) {
		return w
	}
	if rest, ok := strings.CutPrefix(w, "~/"); ok && safe(rest) {
		return w
	}
	return "'" + strings.ReplaceAll(w, "'", `'\''`) + "'"
}

// Error is a failed ssh: its exit status and what it said, with the
// host's name.
type Error struct {
	Host      string
	Exit      int
	Stderr    string
	RemoteBin string
	Via       string // the transport's program: ssh, or kubectl
}

func (e *Error) Error() string {
	said := strings.TrimSpace(e.Stderr)
	if said == "" {
		said = "nothing on stderr"
	}
	via := e.Via
	if via == "" {
		via = "ssh"
	}
	switch {
	case e.Exit == 127:
		return fmt.Sprintf("host %s: %s was not found there (%s exited 127: %s): install kaimon on the remote PATH, or name it with "+
			"`kaimon host rm %s` and `kaimon host add %s URL --remote-bin PATH`", e.Host, e.RemoteBin, via, said, e.Host, e.Host)
	case e.Exit == 255 && via == "ssh":
		return fmt.Sprintf("host %s: ssh failed: %s", e.Host, said)
	case via != "ssh":
		// kubectl's own failures (no such pod, no access) and the
		// command's exit share its status: say both may be.
		return fmt.Sprintf("host %s: %s exited %d (its own failure, or `%s dial-stdio`'s there): %s", e.Host, via, e.Exit, e.RemoteBin, said)
	}
	// ssh exits with the remote command's status: dial-stdio's own.
	return fmt.Sprintf("host %s: `%s dial-stdio` exited %d there: %s", e.Host, e.RemoteBin, e.Exit, said)
}

// Dial connects to the host's daemon: through the master's forwarding of
// its socket when there is one and the daemon answers through it (a
// channel of the master, no process on either side), else by dialStdio.
func (s *SSH) Dial(ctx context.Context) (net.Conn, error) {
	if c := s.takePrimed(); c != nil {
		return c, nil
	}
	if c, err := s.dialForward(ctx); err == nil {
		s.viaForward.Store(true)
		return c, nil
	} else if ctx.Err() != nil {
		return nil, fmt.Errorf("host %s: %w", s.Name, err)
	}
	return s.dialStdio()
}

// dialStdio starts ssh and returns its stdio as a connection to the
// host's daemon; dial-stdio there starts the daemon when it is not
// running. The child has its own process group, killed and reaped on
// Close.
func (s *SSH) dialStdio() (net.Conn, error) {
	if cp := s.controlPath(); cp != "" {
		if err := os.MkdirAll(s.ControlDir, 0o700); err != nil {
			return nil, err
		}
	}
	argv := s.Argv()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return nil, err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		outR.Close()
		outW.Close()
		return nil, err
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, errW
	err = cmd.Start()
	inR.Close()
	outW.Close()
	errW.Close()
	if err != nil {
		inW.Close()
		outR.Close()
		errR.Close()
		return nil, fmt.Errorf("host %s: starting %s: %w", s.Name, argv[0], err)
	}
	c := &conn{ssh: s, cmd: cmd, in: inW, out: outR, errR: errR, exited: make(chan struct{}), stderrDone: make(chan struct{})}
	go c.readStderr()
	go func() {
		c.waitErr = cmd.Wait()
		close(c.exited)
	}()
	return c, nil
}

// conn is one ssh child's stdio.
type conn struct {
	ssh     *SSH
	cmd     *exec.Cmd
	in      *os.File // the child's stdin
	out     *os.File // the child's stdout
	errR    *os.File // the child's stderr
	exited  chan struct{}
	waitErr error

	stderrMu   sync.Mutex
	stderr     bytes.Buffer
	stderrDone chan struct{}

	closeOnce sync.Once
	closed    atomic.Bool // by Close: the child's end is ours, not a failure
}

// maxStderr bounds what is kept of ssh's stderr: its last words matter.
const maxStderr = 8 << 10

func (c *conn) readStderr() {
	defer close(c.stderrDone)
	buf := make([]byte, 4096)
	for {
		n, err := c.errR.Read(buf)
		c.stderrMu.Lock()
		c.stderr.Write(buf[:n])
		if over := c.stderr.Len() - maxStderr; over > 0 {
			c.stderr.Next(over)
		}
		c.stderrMu.Unlock()
		if err != nil {
			return
		}
	}
}

// failure is the error for a connection that ended: nil when ssh exited 0
// (the far side closed it), else ssh's exit and words. It waits a bounded
// time for the child to exit: it closes its stdout as it exits.
func (c *conn) failure() error {
	select {
	case <-c.exited:
	case <-time.After(5 * time.Second):
		return nil
	}
	// Whatever ssh wrote before it exited is in the pipe now; a process it
	// left behind (a master) may hold the pipe open, so read on only
	// briefly.
	_ = c.errR.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
	<-c.stderrDone
	var ee *exec.ExitError
	if !errors.As(c.waitErr, &ee) || c.closed.Load() {
		return nil
	}
	c.stderrMu.Lock()
	said := c.stderr.String()
	c.stderrMu.Unlock()
	code := ee.ExitCode()
	if code < 0 {
		code = 255 // killed by a signal
	}
	return &Error{Host: c.ssh.Name, Exit: code, Stderr: said, RemoteBin: c.ssh.bin(), Via: c.ssh.via()}
}

func (c *conn) Read(p []byte) (int, error) {
	n, err := c.out.Read(p)
	if err == io.EOF {
		if f := c.failure(); f != nil {
			return n, f
		}
	}
	return n, err
}

func (c *conn) Write(p []byte) (int, error) {
	n, err := c.in.Write(p)
	if err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
		if f := c.failure(); f != nil {
			return n, f
		}
	}
	return n, err
}

// Close ends the child: its pipes closed, its process group killed, and
// the child reaped.
func (c *conn) Close() error {
	c.closeOnce.Do(func() {
		select {
		case <-c.exited:
		default:
			c.closed.Store(true)
			_ = syscall.Kill(-c.cmd.Process.Pid, syscall.SIGKILL)
		}
		c.in.Close()
		c.out.Close()
		<-c.exited
		_ = c.errR.SetReadDeadline(time.Now())
		<-c.stderrDone
		c.errR.Close()
	})
	return nil
}

// CloseWrite closes the child's stdin: the far side reads its end.
func (c *conn) CloseWrite() error { return c.in.Close() }

func (c *conn) LocalAddr() net.Addr  { return addr("kaimon") }
func (c *conn) RemoteAddr() net.Addr { return addr(c.ssh.via() + " " + c.ssh.Name) }

func (c *conn) SetDeadline(t time.Time) error {
	return errors.Join(c.in.SetWriteDeadline(t), c.out.SetReadDeadline(t))
}
func (c *conn) SetReadDeadline(t time.Time) error  { return c.out.SetReadDeadline(t) }
func (c *conn) SetWriteDeadline(t time.Time) error { return c.in.SetWriteDeadline(t) }

// addr names an end of an ssh connection.
type addr string

func (a addr) Network() string { return "ssh" }
func (a addr) String() string  { return string(a) }
