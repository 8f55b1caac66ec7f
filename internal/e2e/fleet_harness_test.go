package e2e

// The fleet's test hosts: two real OpenSSH servers, each in a network
// namespace of its own, reached from this (the root) namespace over a veth
// pair, each with its own user account, the run's keys and pinned host
// keys. Every fleet test of one `go test` run shares the one pair (made on
// first use, torn down at the end of TestMain): hosts cost seconds, and CI's
// time is short. Tests still share nothing that matters: each test's ssh
// config sends its own KAIMON_HOME (sshd's AcceptEnv), so each test talks
// to a remote daemon of its own on a shared host, and may kill it; and a
// test that takes a link down takes a spare link of the host's, its own,
// so the others' links stay up.
//
// A run killed before TestMain's end (go test's -timeout panics) cannot
// tear its hosts down. Everything it made is named for its pid, kmf<PID>:
// the namespaces (kmf<PID>-h1), the users (kmf<PID>h1), the temp dir
// ($TMPDIR/kmf<PID>-*); deleting a namespace takes its links with it. The
// next run that makes hosts sweeps what a run no longer alive left
// (sweepStaleFleets).

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/kaimon/kaimon/internal/testutil/agents"
	"github.com/kaimon/kaimon/internal/testutil/fakeapi"
)

// fleetHost is one test host: a network namespace, the veth pairs
// joining it to the root namespace, a user, an sshd, and a fake model API
// inside the namespace that the host's agents talk to.
type fleetHost struct {
	name     string // ssh config alias and kaimon host name: h1, h2
	ns       string // network namespace
	user     string // the account ssh logs in as
	uid, gid int
	home     string // the user's home, in the fleet's temp dir
	addr     string // the main link's address in the namespace
	// links are the host's links: links[0] the main one, the others
	// spares, each for one test at a time to take down (spareLink).
	links    []*fleetLink
	hostKey  string // the host's public key line (type and key)
	sshd     *exec.Cmd
	sshdLog  *lockedBuffer
	sshdDone chan struct{}
	api      *fakeapi.Server // listens on the namespace's 127.0.0.1
}

// fleetLink is one veth pair between the root namespace and a host's, with
// a /30 of its own; sshd listens on every link's address.
type fleetLink struct {
	vethRoot string // the pair's end in the root namespace
	vethNS   string // the pair's end in the host's namespace
	rootAddr string
	addr     string // the namespace's end: where ssh connects
	busy     bool   // a spare a test holds (fleet.mu)
}

// spareLinks is how many spare links each host has: one per test that
// takes a link down.
const spareLinks = 2

// fleet is the run's pair of hosts and the client side's files.
type fleet struct {
	tag        string // prefix of every name this run makes: kmf<pid>
	dir        string // the run's temp dir; hosts' homes live under it
	key        string // the client's private key
	knownHosts string // pins each host's key
	sshConfig  string // Host h1 / h2 blocks: ssh -F sshConfig h1 true
	claude     string // the claude CLI, where the hosts' users can run it
	example    string // the example recording, where the hosts' users can read it
	hosts      []*fleetHost
	remotes    atomic.Int64 // numbers each test's remote KAIMON_HOME
	mu         sync.Mutex   // guards fleetLink.busy
}

var (
	fleetOnce sync.Once
	theFleet  *fleet
	fleetSkip string // why the hosts cannot be made here; "" when they can
	fleetErr  error  // why making them failed
)

// needFleet returns the run's hosts, making them on first use. Without
// root, ip or sshd the test skips saying what is missing, except in CI
// (where .ci/run installs them and runs as root): there it fails.
func needFleet(t testing.TB) *fleet {
	t.Helper()
	needClaude(t) // the hosts' agents are the real claude CLI
	fleetOnce.Do(func() {
		if fleetSkip = fleetMissing(); fleetSkip != "" {
			return
		}
		theFleet, fleetErr = newFleet()
	})
	if fleetSkip != "" {
		msg := "no fleet test hosts: " + fleetSkip
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	if fleetErr != nil {
		t.Fatal("making the fleet test hosts: ", fleetErr)
	}
	return theFleet
}

// sshdBin is Debian's sshd; it must be named by its absolute path, as it
// re-executes itself for each connection.
const sshdBin = "/usr/sbin/sshd"

// fleetMissing says what the hosts need and this machine lacks, or "".
func fleetMissing() string {
	if os.Geteuid() != 0 {
		return "network namespaces and user accounts need root (CI runs as root)"
	}
	if _, err := os.Stat(sshdBin); err != nil {
		return sshdBin + " is missing: install Debian's openssh-server (scripts/setup-test.sh does)"
	}
	for _, p := range []string{"ip", "ssh", "ssh-keygen", "useradd", "userdel"} {
		if _, err := exec.LookPath(p); err != nil {
			return p + " is not on PATH: install iproute2, openssh-client and passwd (scripts/setup-test.sh does)"
		}
	}
	return ""
}

// newFleet makes the two hosts. On failure it undoes what it made.
func newFleet() (f *fleet, err error) {
	sweepStaleFleets()
	f = &fleet{tag: fmt.Sprintf("kmf%d", os.Getpid())}
	defer func() {
		if err != nil {
			if terr := f.teardown(); terr != nil {
				err = fmt.Errorf("%w; and tearing down: %v", err, terr)
			}
			f = nil
		}
	}()
	// The homes live here: others must be able to pass through it.
	if f.dir, err = os.MkdirTemp("", f.tag+"-"); err != nil {
		return f, err
	}
	if err = os.Chmod(f.dir, 0o755); err != nil {
		return f, err
	}
	// The users run the binaries TestMain built.
	if err = os.Chmod(binDir, 0o755); err != nil {
		return f, err
	}
	// The claude CLI lives in the checkout's node_modules, which may be
	// under a directory closed to other users (a clone in mktemp -d's
	// 0700 dir, or in /root): the hosts' users run a link to the same
	// file from here, or a copy where the two are on different devices.
	if f.claude, err = reachableCopy(claudeBin, filepath.Join(f.dir, "claude")); err != nil {
		return f, err
	}
	// So is the recording the replay agents play.
	if f.example, err = reachableCopy(exampleLog(), filepath.Join(f.dir, "hello.events.jsonl")); err != nil {
		return f, err
	}
	// sshd wants its privilege-separation dir, which the distribution's
	// service unit makes at boot; with no service running, nothing has.
	if err = os.MkdirAll("/run/sshd", 0o755); err != nil {
		return f, err
	}
	f.key = filepath.Join(f.dir, "client_key")
	if err = runCmd("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", f.tag, "-f", f.key); err != nil {
		return f, err
	}
	pub, err := os.ReadFile(f.key + ".pub")
	if err != nil {
		return f, err
	}
	for i := 1; i <= 2; i++ {
		h := &fleetHost{
			name: fmt.Sprintf("h%d", i),
			ns:   fmt.Sprintf("%s-h%d", f.tag, i),
			user: fmt.Sprintf("%sh%d", f.tag, i),
		}
		h.home = filepath.Join(f.dir, h.name)
		// Interface names hold 15 bytes: kmf<pid>h1s2p fits.
		for j := 0; j <= spareLinks; j++ {
			name := fmt.Sprintf("%sh%d", f.tag, i)
			if j > 0 {
				name += fmt.Sprintf("s%d", j)
			}
			h.links = append(h.links, &fleetLink{vethRoot: name, vethNS: name + "p"})
		}
		f.hosts = append(f.hosts, h)
		if err = f.makeHost(h, pub); err != nil {
			return f, fmt.Errorf("host %s: %w", h.name, err)
		}
	}
	if err = f.writeClientFiles(f.sshConfig, nil, nil, ""); err != nil {
		return f, err
	}
	// Each host answers, as its user, with the run's keys, and finds the
	// binaries and the agent program it is given.
	for _, h := range f.hosts {
		out, err := f.ssh(30*time.Second, h.name, `command -v kaimon || { echo "kaimon is not on PATH ($PATH)"; exit 1; }
test -x "$KAIMON_CLAUDE_BIN" || { echo "$(id -un) cannot run $KAIMON_CLAUDE_BIN: every directory on its path must be open to other users"; exit 1; }
id -un`)
		if err != nil {
			return f, fmt.Errorf("ssh %s: %v: %s\nsshd log:\n%s", h.name, err, out, h.sshdLog)
		}
		if !strings.Contains(out, filepath.Join(binDir, "kaimon")) || !strings.Contains(out, h.user) {
			return f, fmt.Errorf("ssh %s: want kaimon from %s and user %s; got %q", h.name, binDir, h.user, out)
		}
	}
	return f, nil
}

// makeHost makes host h: link, user, keys, fake API, sshd.
func (f *fleet) makeHost(h *fleetHost, clientPub []byte) error {
	if err := runCmd("ip", "netns", "add", h.ns); err != nil {
		return err
	}
	for _, l := range h.links {
		// Picked one at a time: each one's root address, once added,
		// takes its /30 out of the next pick.
		if err := l.pickSubnet(); err != nil {
			return err
		}
		steps := [][]string{
			{"ip", "link", "add", l.vethRoot, "type", "veth", "peer", "name", l.vethNS, "netns", h.ns},
			{"ip", "addr", "add", l.rootAddr + "/30", "dev", l.vethRoot},
			{"ip", "link", "set", l.vethRoot, "up"},
			{"ip", "-n", h.ns, "addr", "add", l.addr + "/30", "dev", l.vethNS},
			{"ip", "-n", h.ns, "link", "set", l.vethNS, "up"},
		}
		for _, s := range steps {
			if err := runCmd(s[0], s[1:]...); err != nil {
				return err
			}
		}
	}
	h.addr = h.links[0].addr
	// '*' is no password but not a locked account, which sshd without PAM
	// would refuse even a key for.
	for _, s := range [][]string{
		{"ip", "-n", h.ns, "link", "set", "lo", "up"},
		{"useradd", "--no-create-home", "--home-dir", h.home, "--shell", "/bin/sh", "--password", "*", "--user-group", h.user},
	} {
		if err := runCmd(s[0], s[1:]...); err != nil {
			return err
		}
	}
	var err error
	if h.uid, h.gid, err = lookupUser(h.user); err != nil {
		return err
	}
	// The home: the user's, with the client key authorized (sshd's
	// StrictModes checks these modes and owners).
	for _, d := range []string{h.home, filepath.Join(h.home, ".ssh"), filepath.Join(h.home, "tmp")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return err
		}
	}
	if err := os.WriteFile(filepath.Join(h.home, ".ssh", "authorized_keys"), clientPub, 0o600); err != nil {
		return err
	}
	if err := chownTree(h.home, h.uid, h.gid); err != nil {
		return err
	}
	// The host's own files, root's, outside the user's home.
	etc := filepath.Join(f.dir, "sshd-"+h.name)
	if err := os.Mkdir(etc, 0o700); err != nil {
		return err
	}
	hostKey := filepath.Join(etc, "host_ed25519")
	if err := runCmd("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", h.name, "-f", hostKey); err != nil {
		return err
	}
	pub, err := os.ReadFile(hostKey + ".pub")
	if err != nil {
		return err
	}
	fields := strings.Fields(string(pub))
	h.hostKey = fields[0] + " " + fields[1]
	if h.api, err = fakeAPIIn(h.ns); err != nil {
		return err
	}
	// What the remote daemon and its agents need, as sshd gives it to
	// every session: kaimon on PATH, the claude CLI's settings for this
	// namespace's fake API, as newEnv sets it up locally. Which claude
	// runs (KAIMON_CLAUDE_BIN) the client's config sends (AcceptEnv), so
	// that a benchmark's remote daemons can run fakeclaude.
	env := append([]string{
		"PATH=" + binDir + ":/usr/local/bin:/usr/bin:/bin",
		"NO_COLOR=1",
		"GORACE=" + os.Getenv("GORACE"), // what run set for every local process
	}, agents.ClaudeOffline(h.api.URL(), filepath.Join(h.home, "tmp"))...)
	cfg := filepath.Join(etc, "sshd_config")
	// h1 lets a client forward a connection to a unix socket of its
	// user's (what kaimon's warm calls ride on: sshd denies a socket, as
	// a port, unless AllowTcpForwarding permits local forwards); h2 keeps
	// the strict default of a locked-down server, so that the fallback to
	// dial-stdio is what every test of h2 drives.
	forwarding := "AllowTcpForwarding no"
	if h.name == "h1" {
		forwarding = "AllowTcpForwarding local\nAllowStreamLocalForwarding local\nGatewayPorts no"
	}
	var listen strings.Builder
	for _, l := range h.links {
		fmt.Fprintf(&listen, "ListenAddress %s:22\n", l.addr)
	}
	conf := fmt.Sprintf(`# sshd for kaimon's fleet tests: host %s of run %s
%sHostKey %s
PidFile none
UsePAM no
AllowUsers %s
PermitRootLogin no
AuthenticationMethods publickey
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
AuthorizedKeysFile .ssh/authorized_keys
StrictModes yes
AllowAgentForwarding no
%s
X11Forwarding no
PermitTunnel no
PrintMotd no
PrintLastLog no
MaxSessions 64
# A client gone with its link is let go, as a server would, rather than
# held until TCP gives up.
ClientAliveInterval 2
ClientAliveCountMax 3
MaxStartups 64:30:128
LogLevel INFO
AcceptEnv KAIMON_HOME KAIMON_CLAUDE_BIN
SetEnv %s
`, h.name, f.tag, listen.String(), hostKey, h.user, forwarding, strings.Join(env, " "))
	if err := os.WriteFile(cfg, []byte(conf), 0o600); err != nil {
		return err
	}
	if err := runCmd(sshdBin, "-t", "-f", cfg); err != nil {
		return err
	}
	h.sshdLog = &lockedBuffer{}
	h.sshd = exec.Command("ip", "netns", "exec", h.ns, sshdBin, "-D", "-e", "-f", cfg)
	h.sshd.Stdout, h.sshd.Stderr = h.sshdLog, h.sshdLog
	h.sshd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := h.sshd.Start(); err != nil {
		return err
	}
	h.sshdDone = make(chan struct{})
	go func() { _ = h.sshd.Wait(); close(h.sshdDone) }()
	// Ready when it accepts a connection on its (last) address.
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", net.JoinHostPort(h.links[len(h.links)-1].addr, "22"), time.Second)
		if err == nil {
			c.Close()
			return nil
		}
		select {
		case <-h.sshdDone:
			return fmt.Errorf("sshd exited: %s", h.sshdLog)
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("sshd does not accept on %s: %v\n%s", h.addr, err, h.sshdLog)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// pickSubnet picks a /30 in 10.251.0.0/16 that no interface here has an
// address in and no route names: the only addresses the tests use.
func (l *fleetLink) pickSubnet() error {
	have, err := net.InterfaceAddrs()
	if err != nil {
		return err
	}
	for try := 0; try < 50; try++ {
		n, _ := rand.Int(rand.Reader, big.NewInt(1<<14))
		base := int(n.Int64()) * 4 // 0..65532, a multiple of 4
		_, subnet, _ := net.ParseCIDR(fmt.Sprintf("10.251.%d.%d/30", base>>8, base&0xff))
		taken := false
		for _, a := range have {
			if ip, _, err := net.ParseCIDR(a.String()); err == nil && subnet.Contains(ip) {
				taken = true
			}
		}
		if out, err := exec.Command("ip", "-4", "route", "show", "match", subnet.IP.String()).Output(); err != nil || strings.Contains(string(out), subnet.IP.String()) {
			taken = true
		}
		if !taken {
			ip := subnet.IP.To4()
			l.rootAddr = net.IPv4(ip[0], ip[1], ip[2], ip[3]+1).String()
			l.addr = net.IPv4(ip[0], ip[1], ip[2], ip[3]+2).String()
			return nil
		}
	}
	return errors.New("no free /30 in 10.251.0.0/16")
}

// fakeAPIIn serves a fake model API on 127.0.0.1 inside namespace ns. A
// socket belongs to the namespace of the thread that made it, so one
// locked thread moves there for the listen and back. Should the move back
// fail, the thread stays locked: a locked thread ends with its goroutine,
// so no other goroutine ever runs in the wrong namespace. The server's own
// goroutines run on other threads; its socket stays in ns.
func fakeAPIIn(ns string) (*fakeapi.Server, error) {
	type res struct {
		s   *fakeapi.Server
		err error
	}
	ch := make(chan res, 1)
	go func() {
		runtime.LockOSThread()
		home, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			ch <- res{err: err}
			return
		}
		defer unix.Close(home)
		fd, err := unix.Open("/run/netns/"+ns, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			ch <- res{err: err}
			return
		}
		defer unix.Close(fd)
		if err := unix.Setns(fd, unix.CLONE_NEWNET); err != nil {
			ch <- res{err: fmt.Errorf("setns %s: %w", ns, err)}
			return
		}
		s, err := fakeapi.Start()
		if err := unix.Setns(home, unix.CLONE_NEWNET); err == nil {
			runtime.UnlockOSThread()
		}
		ch <- res{s, err}
	}()
	r := <-ch
	return r.s, r.err
}

// writeClientFiles writes the known_hosts pinning each host's key at
// every address (once) and an ssh config at path with a block per host;
// remoteHome, when not nil, names the KAIMON_HOME each host's sessions get
// (SetEnv), via the link an alias reaches a host by (default: its main
// link), and claude the agent program the sessions' daemons run
// (KAIMON_CLAUDE_BIN; "" is the real claude CLI).
func (f *fleet) writeClientFiles(path string, remoteHome map[string]string, via map[string]*fleetLink, claude string) error {
	if f.knownHosts == "" {
		f.knownHosts = filepath.Join(f.dir, "known_hosts")
		var kh strings.Builder
		for _, h := range f.hosts {
			for _, l := range h.links {
				fmt.Fprintf(&kh, "%s %s\n", l.addr, h.hostKey)
			}
		}
		if err := os.WriteFile(f.knownHosts, []byte(kh.String()), 0o600); err != nil {
			return err
		}
	}
	if path == "" {
		f.sshConfig = filepath.Join(f.dir, "ssh_config")
		path = f.sshConfig
	}
	var b strings.Builder
	for _, h := range f.hosts {
		addr := h.addr
		if l := via[h.name]; l != nil {
			addr = l.addr
		}
		// The alias names one link; the settings hold at every address,
		// so that kaimon's ssh://USER@ADDR finds them too.
		fmt.Fprintf(&b, "Host %s\n\tHostName %s\n", h.name, addr)
		fmt.Fprintf(&b, "Host %s", h.name)
		for _, l := range h.links {
			fmt.Fprintf(&b, " %s", l.addr)
		}
		fmt.Fprintf(&b, "\n\tUser %s\n\tPort 22\n", h.user)
		if claude == "" {
			claude = f.claude
		}
		fmt.Fprintf(&b, "\tSetEnv KAIMON_CLAUDE_BIN=%s", claude)
		if rh := remoteHome[h.name]; rh != "" {
			fmt.Fprintf(&b, " KAIMON_HOME=%s", rh)
		}
		b.WriteString("\n")
	}
	fmt.Fprintf(&b, `Host *
	IdentityFile %s
	IdentitiesOnly yes
	IdentityAgent none
	UserKnownHostsFile %s
	GlobalKnownHostsFile /dev/null
	StrictHostKeyChecking yes
	UpdateHostKeys no
	CheckHostIP no
	BatchMode yes
	ConnectTimeout 5
	LogLevel ERROR
`, f.key, f.knownHosts)
	return os.WriteFile(path, []byte(b.String()), 0o600)
}

// spareLink gives test t a spare link of host h for itself, to take down
// without cutting the others off h; it is given back, up, when t ends.
func (f *fleet) spareLink(t testing.TB, h *fleetHost) *fleetLink {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, l := range h.links[1:] {
		if !l.busy {
			l.busy = true
			t.Cleanup(func() {
				f.mu.Lock()
				defer f.mu.Unlock()
				l.busy = false
			})
			return l
		}
	}
	t.Fatalf("host %s has no spare link left: raise spareLinks", h.name)
	return nil
}

// ssh runs a command on a host with the run's config, and fails if it has
// not ended within d.
func (f *fleet) ssh(d time.Duration, host string, command string) (string, error) {
	return sshWith(d, f.sshConfig, host, command)
}

func sshWith(d time.Duration, cfg, host, command string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	out, err := exec.CommandContext(ctx, "ssh", "-F", cfg, host, command).CombinedOutput()
	if ctx.Err() != nil {
		return string(out), fmt.Errorf("ssh %s %q did not end within %s", host, command, d)
	}
	return string(out), err
}

func (f *fleet) host(name string) *fleetHost {
	for _, h := range f.hosts {
		if h.name == name {
			return h
		}
	}
	panic("no fleet host " + name)
}

// remote is one test's view of the fleet: its ssh config, which gives it
// a remote KAIMON_HOME of its own on each host, so its remote daemons are
// its own.
type remote struct {
	f         *fleet
	sshConfig string
	home      map[string]string     // host name → remote KAIMON_HOME
	work      map[string]string     // host name → a project directory there
	via       map[string]*fleetLink // host name → the link it is reached by, when not the main one
	claude    string                // the remote daemons' agent program; "" is the real claude CLI
}

// newRemote gives test t remote homes on every host and an ssh config
// that sends them; at the end of t it stops the remote daemons, fails t if
// any process of theirs outlives that, and removes the homes.
func (f *fleet) newRemote(t testing.TB, dir string) *remote {
	t.Helper()
	return f.newRemoteVia(t, dir, nil, "")
}

// newRemoteVia is newRemote with some hosts reached by other links than
// their main ones (a spareLink), and whose remote daemons run claude as
// their claude CLI (fakeclaude, for a benchmark; "" is the real one).
func (f *fleet) newRemoteVia(t testing.TB, dir string, via map[string]*fleetLink, claude string) *remote {
	t.Helper()
	r := &remote{f: f, sshConfig: filepath.Join(dir, "ssh_config"), home: map[string]string{}, work: map[string]string{}, via: via, claude: claude}
	n := f.remotes.Add(1)
	for _, h := range f.hosts {
		rh := filepath.Join(h.home, "k"+strconv.FormatInt(n, 10))
		r.home[h.name] = rh
		r.work[h.name] = filepath.Join(rh, "project")
		if err := os.MkdirAll(r.work[h.name], 0o700); err != nil {
			t.Fatal(err)
		}
		if err := chownTree(rh, h.uid, h.gid); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.writeClientFiles(r.sshConfig, r.home, r.via, r.claude); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.cleanup(t) })
	return r
}

func (r *remote) cleanup(t testing.TB) {
	for _, h := range r.f.hosts {
		rh := r.home[h.name]
		// The remote kaimon stops its own daemon (no daemon: a no-op).
		if out, err := sshWith(30*time.Second, r.sshConfig, h.name, "kaimon daemon stop"); err != nil {
			t.Errorf("stopping the remote daemon on %s: %v: %s", h.name, err, out)
		}
		var left []int
		deadline := time.Now().Add(10 * time.Second)
		for {
			left = processesWithEnv("KAIMON_HOME=" + rh)
			if len(left) == 0 || time.Now().After(deadline) {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		if len(left) > 0 {
			t.Errorf("processes left on host %s after its daemon stopped: %s", h.name, describe(left))
			for _, pid := range left {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
		checkEventLogs(t, filepath.Join(rh, "cache", "agents"))
		// The remote daemon's log must show no panic and, under
		// KAIMON_E2E_RACE, no data race, as a local one's (kenv.cleanup).
		if b, err := os.ReadFile(filepath.Join(rh, "cache", "agents", "agentd.log")); err == nil {
			for _, bad := range []string{"DATA RACE", "panic:"} {
				if bytes.Contains(b, []byte(bad)) {
					t.Errorf("kaimon-agentd's log on %s shows %q:\n%s", h.name, bad, b)
				}
			}
		}
		if err := os.RemoveAll(rh); err != nil {
			t.Error(err)
		}
	}
}

// addr is the address the test reaches host by.
func (r *remote) addr(host string) string {
	if l := r.via[host]; l != nil {
		return l.addr
	}
	return r.f.host(host).addr
}

// ssh runs a command on a host as test t's remote side sees it.
func (r *remote) ssh(d time.Duration, host, command string) (string, error) {
	return sshWith(d, r.sshConfig, host, command)
}

// teardown undoes everything newFleet made, and says what it could not,
// or what it found left behind: a process in a host's namespace other
// than its sshd (a remote daemon or agent some test leaked), a namespace,
// a link, a user, or the temp dir that outlived its removal.
func (f *fleet) teardown() error {
	var errs []error
	for _, h := range f.hosts {
		if h.api != nil {
			h.api.Close()
		}
		if h.sshd != nil && h.sshd.Process != nil {
			// What runs in the namespace besides sshd's listener is a
			// leak, unless it is a connection's sshd on its way out.
			var left []int
			deadline := time.Now().Add(10 * time.Second)
			for {
				left = nil
				for _, pid := range netnsPids(h.ns) {
					if pid != h.sshd.Process.Pid {
						left = append(left, pid)
					}
				}
				if len(left) == 0 || time.Now().After(deadline) {
					break
				}
				time.Sleep(50 * time.Millisecond)
			}
			if len(left) > 0 {
				errs = append(errs, fmt.Errorf("host %s: processes left in its namespace: %s", h.name, describe(left)))
				for _, pid := range left {
					if pid != os.Getpid() { // never this test: see fakeAPIIn
						_ = syscall.Kill(pid, syscall.SIGKILL)
					}
				}
			}
			_ = syscall.Kill(-h.sshd.Process.Pid, syscall.SIGTERM)
			select {
			case <-h.sshdDone:
			case <-time.After(10 * time.Second):
				_ = syscall.Kill(-h.sshd.Process.Pid, syscall.SIGKILL)
				<-h.sshdDone
			}
		}
		// Anything still in the namespace (killed above, being reaped)
		// would keep it alive after ip netns del.
		waitGone(func() bool { return len(netnsPids(h.ns)) == 0 }, 10*time.Second)
		if pids := netnsPids(h.ns); len(pids) > 0 {
			errs = append(errs, fmt.Errorf("host %s: processes outlived SIGKILL in its namespace: %s", h.name, describe(pids)))
		}
		if nsExists(h.ns) {
			if err := runCmd("ip", "netns", "del", h.ns); err != nil {
				errs = append(errs, err)
			}
		}
		// Deleting the namespace deletes the pairs with an end inside;
		// a connection still closing in there can keep it a while.
		waitGone(func() bool {
			for _, l := range h.links {
				if exists("ip", "link", "show", l.vethRoot) {
					return false
				}
			}
			return true
		}, 10*time.Second)
		for _, l := range h.links {
			if exists("ip", "link", "show", l.vethRoot) {
				if err := runCmd("ip", "link", "del", l.vethRoot); err != nil {
					errs = append(errs, err)
				}
			}
		}
		if exists("id", "-u", h.user) {
			if err := runCmd("userdel", h.user); err != nil {
				errs = append(errs, err)
			}
		}
		// Check: nothing of the host is left.
		if nsExists(h.ns) {
			errs = append(errs, fmt.Errorf("host %s: namespace %s is left", h.name, h.ns))
		}
		for _, l := range h.links {
			if exists("ip", "link", "show", l.vethRoot) {
				errs = append(errs, fmt.Errorf("host %s: link %s is left", h.name, l.vethRoot))
			}
		}
		if exists("id", "-u", h.user) {
			errs = append(errs, fmt.Errorf("host %s: user %s is left", h.name, h.user))
		}
	}
	if f.dir != "" {
		if err := os.RemoveAll(f.dir); err != nil {
			errs = append(errs, err)
		}
		if _, err := os.Stat(f.dir); err == nil {
			errs = append(errs, fmt.Errorf("%s is left", f.dir))
		}
	}
	return errors.Join(errs...)
}

// staleFleet matches the names a run's hosts are given (fleet.tag).
var staleFleet = regexp.MustCompile(`^kmf([0-9]+)(?:-h[0-9]+|h[0-9]+|-.+)$`)

// sweepStaleFleets removes what runs that are no longer alive left of
// their hosts (a run killed by go test's -timeout): the processes in
// their namespaces, the namespaces, the users and the temp dirs, each
// named for the run's pid. A pid still alive is left alone, whatever it
// now is.
func sweepStaleFleets() {
	dead := func(name string) bool {
		m := staleFleet.FindStringSubmatch(name)
		if m == nil {
			return false
		}
		pid, err := strconv.Atoi(m[1])
		return err == nil && pid != os.Getpid() && syscall.Kill(pid, 0) == syscall.ESRCH
	}
	if out, err := exec.Command("ip", "netns", "list").Output(); err == nil {
		for _, l := range strings.Split(string(out), "\n") {
			if f := strings.Fields(l); len(f) > 0 && dead(f[0]) {
				for _, pid := range netnsPids(f[0]) {
					_ = syscall.Kill(pid, syscall.SIGKILL)
				}
				waitGone(func() bool { return len(netnsPids(f[0])) == 0 }, 5*time.Second)
				_ = runCmd("ip", "netns", "del", f[0])
			}
		}
	}
	if b, err := os.ReadFile("/etc/passwd"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if user, _, _ := strings.Cut(l, ":"); dead(user) {
				_ = runCmd("userdel", user)
			}
		}
	}
	if entries, err := os.ReadDir(os.TempDir()); err == nil {
		for _, e := range entries {
			if e.IsDir() && dead(e.Name()) {
				_ = os.RemoveAll(filepath.Join(os.TempDir(), e.Name()))
			}
		}
	}
}

// teardownFleet tears down the run's hosts if a test made them; TestMain
// calls it after the tests, and fails the run if anything was left.
func teardownFleet() error {
	if theFleet == nil {
		return nil
	}
	return theFleet.teardown()
}

// netnsPids lists the processes in namespace ns (none when it is gone).
func netnsPids(ns string) []int {
	out, err := exec.Command("ip", "netns", "pids", ns).Output()
	if err != nil {
		return nil
	}
	var pids []int
	for _, f := range strings.Fields(string(out)) {
		if pid, err := strconv.Atoi(f); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids
}

func waitGone(gone func() bool, d time.Duration) {
	deadline := time.Now().Add(d)
	for !gone() && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
}

// runCmd runs a setup command, its output in the error when it fails.
func runCmd(name string, args ...string) error {
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %v: %s", name, strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return nil
}

// nsExists says whether namespace ns is there (ip netns add made it).
func nsExists(ns string) bool {
	_, err := os.Stat("/run/netns/" + ns)
	return err == nil
}

// exists says whether a query command (ip link show, id -u) succeeds.
func exists(name string, args ...string) bool {
	return exec.Command(name, args...).Run() == nil
}

func lookupUser(name string) (uid, gid int, err error) {
	out, err := exec.Command("id", "-u", name).Output()
	if err != nil {
		return 0, 0, fmt.Errorf("id -u %s: %w", name, err)
	}
	if uid, err = strconv.Atoi(strings.TrimSpace(string(out))); err != nil {
		return 0, 0, err
	}
	out, err = exec.Command("id", "-g", name).Output()
	if err != nil {
		return 0, 0, fmt.Errorf("id -g %s: %w", name, err)
	}
	gid, err = strconv.Atoi(strings.TrimSpace(string(out)))
	return uid, gid, err
}

func chownTree(root string, uid, gid int) error {
	return filepath.Walk(root, func(path string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(path, uid, gid)
	})
}

// lockedBuffer is an io.Writer that sshd's output goes to while tests
// read it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// reachableCopy makes to the program at from (symlinks followed): a hard
// link when both are on one device, else a copy, mode 0755.
func reachableCopy(from, to string) (string, error) {
	src, err := filepath.EvalSymlinks(from)
	if err != nil {
		return "", err
	}
	if err := os.Link(src, to); err == nil {
		return to, nil
	}
	in, err := os.Open(src)
	if err != nil {
		return "", err
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o755)
	if err != nil {
		return "", err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return "", err
	}
	return to, out.Close()
}
