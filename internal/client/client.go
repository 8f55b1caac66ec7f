// Package client is the CLI's (and `kaimon mcp`'s) client of kaimon-agentd:
// one method per verb over HTTP on the unix socket, API errors decoded into
// *verbs.Error, and the daemon started on demand when it is not running.
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/kaimon/kaimon/internal/apitype"
	"github.com/kaimon/kaimon/internal/config"
	"github.com/kaimon/kaimon/internal/procstat"
	"github.com/kaimon/kaimon/internal/verbs"
)

// Client talks to one daemon. Its zero value uses the default paths and
// auto-starts the daemon.
type Client struct {
	Paths config.Paths
	// NoAutostart makes an absent daemon an error instead of starting it.
	NoAutostart bool
	// DaemonBin is the kaimon-agentd to start; default: KAIMON_AGENTD_BIN,
	// else beside this executable, else on PATH.
	DaemonBin string

	// Dial, when set, makes each connection to the daemon instead of
	// dialing Paths.Socket(), as tailscale's local.Client.Dial does: a
	// daemon on another host reached through a child's stdin and stdout
	// (ssh HOST kaimon dial-stdio), or one a test serves on a pipe. Any
	// net.Conn will do; the event streams run over it too. Such a daemon is
	// not this machine's: it is never autostarted, StopDaemon cannot wait
	// for its pid, and an error is not explained by this shell's
	// environment. Set it before the first request.
	Dial func(ctx context.Context) (net.Conn, error)
	// Addr names the daemon Dial reaches in errors ("ssh build1");
	// default "the daemon's connection".
	Addr string

	hcOnce sync.Once
	hc     *http.Client

	envOnce sync.Once
	envHint string
}

// New returns a client for the paths the environment names.
func New() (*Client, error) {
	p, err := config.Resolve()
	if err != nil {
		return nil, err
	}
	return &Client{Paths: p, NoAutostart: os.Getenv("KAIMON_NO_AUTOSTART") == "1"}, nil
}

// DaemonDownError says the daemon could not be reached.
type DaemonDownError struct {
	Where string // where it was looked for: "socket PATH", or Client.Addr
	Err   error
	Hint  string
}

func (e *DaemonDownError) Error() string {
	return fmt.Sprintf("kaimon-agentd is not running (%s): %v; %s", e.Where, e.Err, e.Hint)
}

func (e *DaemonDownError) Unwrap() error { return e.Err }

func (c *Client) http() *http.Client {
	c.hcOnce.Do(func() {
		dial := c.Dial
		if dial == nil {
			sock := c.Paths.Socket()
			dial = func(ctx context.Context) (net.Conn, error) {
				var d net.Dialer
				return d.DialContext(ctx, "unix", sock)
			}
		}
		c.hc = &http.Client{Transport: &http.Transport{
			DialContext:        func(ctx context.Context, _, _ string) (net.Conn, error) { return dial(ctx) },
			DisableCompression: true,
		}}
	})
	return c.hc
}

// local says whether the daemon is this machine's, on Paths.Socket(): one
// that can be started, waited for by its pid, and compared with this
// shell's environment.
func (c *Client) local() bool { return c.Dial == nil }

// where names the daemon in errors: its socket, or what Dial reaches.
func (c *Client) where() string {
	switch {
	case c.local():
		return "socket " + c.Paths.Socket()
	case c.Addr != "":
		return c.Addr
	}
	return "the daemon's connection"
}

// CloseIdleConnections closes the connections kept for the next request;
// with Dial, each is one of Dial's (a child process, perhaps).
func (c *Client) CloseIdleConnections() { c.http().CloseIdleConnections() }

// Do sends one request to path with body (nil for GET) and decodes the JSON
// answer into out. A non-2xx answer is returned as *verbs.Error.
func (c *Client) Do(ctx context.Context, method, path string, body, out any) error {
	return c.do(ctx, method, path, body, out, !c.NoAutostart)
}

func (c *Client) do(ctx context.Context, method, path string, body, out any, autostart bool) error {
	var b []byte
	if body != nil {
		var err error
		if b, err = json.Marshal(body); err != nil {
			return err
		}
	}
	resp, err := c.roundTrip(ctx, method, path, b, autostart)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("reading the daemon's answer: %w", err)
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(data, out)
}

// roundTrip sends one request and returns a 2xx response, whose body the
// caller closes. A daemon that is down is started once (unless autostart
// is off); a non-2xx answer is decoded into *verbs.Error.
func (c *Client) roundTrip(ctx context.Context, method, path string, body []byte, autostart bool) (*http.Response, error) {
	for attempt := 0; ; attempt++ {
		var rd io.Reader
		if body != nil {
			rd = bytes.NewReader(body)
		}
		req, err := http.NewRequestWithContext(ctx, method, "http://kaimon"+path, rd)
		if err != nil {
			return nil, err
		}
		if body != nil {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := c.http().Do(req)
		if err != nil {
			var ue *url.Error
			if errors.As(err, &ue) {
				err = ue.Err // the request line adds nothing for a person
			}
			if attempt == 0 && isDown(err) {
				if err := c.ensureDaemon(ctx, err, autostart); err != nil {
					return nil, err
				}
				continue
			}
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return nil, &DaemonDownError{Where: c.where(), Err: err, Hint: "is kaimon-agentd running? try `kaimon daemon status`"}
		}
		if resp.StatusCode/100 != 2 {
			defer resp.Body.Close()
			data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
			var e verbs.Error
			if json.Unmarshal(data, &e) != nil || e.Message == "" {
				return nil, &verbs.Error{Code: verbs.CodeInternal, Message: fmt.Sprintf("daemon answered %s: %s", resp.Status, bytes.TrimSpace(data))}
			}
			return nil, &e
		}
		return resp, nil
	}
}

func isDown(err error) bool {
	return errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ECONNREFUSED)
}

// Connect opens one raw connection to this machine's daemon, starting it
// first when it is not running (unless NoAutostart): what `kaimon
// dial-stdio` bridges a remote client's ssh channel to.
func (c *Client) Connect(ctx context.Context) (net.Conn, error) {
	if !c.local() {
		return c.Dial(ctx)
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", c.Paths.Socket())
	if err == nil || !isDown(err) {
		return conn, err
	}
	if err := c.ensureDaemon(ctx, err, !c.NoAutostart); err != nil {
		return nil, err
	}
	return d.DialContext(ctx, "unix", c.Paths.Socket())
}

// Ping reports whether a daemon answers, without starting one.
func (c *Client) Ping(ctx context.Context) (*apitype.DaemonStatus, error) {
	var st apitype.DaemonStatus
	if err := c.do(ctx, "GET", "/v1/daemon", nil, &st, false); err != nil {
		return nil, err
	}
	return &st, nil
}

// Up is Ping that starts the daemon first when it is not running (and
// autostart is allowed): what a command does before it subscribes to the
// daemon's bus, which no request would otherwise have started.
func (c *Client) Up(ctx context.Context) (*apitype.DaemonStatus, error) {
	var st apitype.DaemonStatus
	if err := c.Do(ctx, "GET", "/v1/daemon", nil, &st); err != nil {
		return nil, err
	}
	return &st, nil
}

// ensureDaemon starts the daemon when allowed and waits for its socket.
func (c *Client) ensureDaemon(ctx context.Context, cause error, autostart bool) error {
	if !c.local() {
		return &DaemonDownError{Where: c.where(), Err: cause, Hint: "is kaimon-agentd running there?"}
	}
	if !autostart {
		hint := "start it with `kaimon daemon start`"
		// Only a client told not to autostart may say so; Ping and
		// StopDaemon never start a daemon, whatever the settings.
		if c.NoAutostart {
			hint += " (autostart is off: --no-autostart or KAIMON_NO_AUTOSTART=1)"
		}
		return &DaemonDownError{Where: c.where(), Err: cause, Hint: hint}
	}
	return c.StartDaemon(ctx)
}

// DaemonPath finds the kaimon-agentd binary.
func (c *Client) DaemonPath() (string, error) {
	if c.DaemonBin != "" {
		return c.DaemonBin, nil
	}
	if b := os.Getenv("KAIMON_AGENTD_BIN"); b != "" {
		return b, nil
	}
	if exe, err := os.Executable(); err == nil {
		p := filepath.Join(filepath.Dir(exe), "kaimon-agentd")
		if st, err := os.Stat(p); err == nil && !st.IsDir() {
			return p, nil
		}
	}
	p, err := exec.LookPath("kaimon-agentd")
	if err != nil {
		return "", fmt.Errorf("cannot find kaimon-agentd beside kaimon or on PATH (set KAIMON_AGENTD_BIN): %w", err)
	}
	return p, nil
}

// StartDaemon starts kaimon-agentd detached (its own session, output to
// <cache>/agentd.log) and waits until its socket answers.
func (c *Client) StartDaemon(ctx context.Context) error {
	if !c.local() {
		return fmt.Errorf("kaimon-agentd (%s) is not this machine's to start: start it where it runs", c.where())
	}
	bin, err := c.DaemonPath()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(c.Paths.CacheDir, 0o700); err != nil {
		return err
	}
	logf, err := os.OpenFile(c.Paths.DaemonLog(), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd := exec.Command(bin)
	cmd.Stdout, cmd.Stderr = logf, logf
	// Its own session, and no agent's tag: a kaimon run by an agent's
	// tool must not start a daemon that dies with that agent.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	cmd.Env = procstat.WithoutTag(os.Environ())
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting %s: %w", bin, err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	deadline := time.NewTimer(15 * time.Second)
	defer deadline.Stop()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		if conn, err := net.Dial("unix", c.Paths.Socket()); err == nil {
			conn.Close()
			return nil
		}
		select {
		case err := <-exited:
			// Another client may have started one first: ours found the
			// lock held and left, and the other's socket comes shortly
			// (it may still be loading its agents). Wait for it while the
			// lock stays held; a free lock means no daemon is coming.
			exited = nil
			if !c.lockHeld() {
				return fmt.Errorf("kaimon-agentd exited at start (%v); see %s", err, c.Paths.DaemonLog())
			}
		case <-deadline.C:
			return fmt.Errorf("kaimon-agentd did not open %s within 15s; see %s", c.Paths.Socket(), c.Paths.DaemonLog())
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}

// stopWait bounds how long StopDaemon waits for the daemon to exit: it
// closes every live agent first, each gently and then hard.
const stopWait = 30 * time.Second

// lockHeld says whether a daemon holds the socket dir's agentd.lock.
func (c *Client) lockHeld() bool {
	f, err := os.OpenFile(c.Paths.LockFile(), os.O_RDWR, 0)
	if err != nil {
		return false
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		return errors.Is(err, syscall.EWOULDBLOCK)
	}
	_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	return false
}

// StopDaemon asks the daemon to stop and returns once its process has
// exited, so that the next command can start a new daemon at once (the old
// one holds agentd.lock until then). It returns the stopped daemon's status,
// or nil when none was running.
func (c *Client) StopDaemon(ctx context.Context) (*apitype.DaemonStatus, error) {
	st, err := c.Ping(ctx)
	if err != nil {
		var d *DaemonDownError
		if errors.As(err, &d) {
			return nil, nil
		}
		return nil, err
	}
	// Never autostart here: a daemon that went away meanwhile is stopped.
	if err := c.do(ctx, "POST", "/v1/daemon/stop", struct{}{}, nil, false); err != nil {
		var d *DaemonDownError
		if !errors.As(err, &d) {
			return nil, err
		}
	}
	if !c.local() {
		return st, nil // its pid is another machine's (or this test's own)
	}
	// The pid, not the socket: the socket goes away first, while the daemon
	// still closes its agents and holds its lock. The lock is released
	// when the process exits (its descriptor is close-on-exec, so no agent
	// inherits it), exited zombies included.
	deadline := time.NewTimer(stopWait)
	defer deadline.Stop()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for procstat.Running(st.PID) {
		select {
		case <-deadline.C:
			return st, fmt.Errorf("kaimon-agentd (pid %d) did not exit within %s of being asked to stop; see %s, or end it with `kill %d`",
				st.PID, stopWait, c.Paths.DaemonLog(), st.PID)
		case <-ctx.Done():
			return st, ctx.Err()
		case <-tick.C:
		}
	}
	return st, nil
}

// explain puts before an error the daemon answered a verb with a sentence
// naming the relevant variables (config.Relevant) whose values differ
// between this client and the daemon, which was perhaps started by another
// shell or MCP client: the daemon runs its agents with its own
// environment, not the caller's. The difference leads: the daemon's own
// words ("the claude CLI is not on PATH") are true of its environment and
// would send the reader to fix this one. Errors about the agent registry (unknown
// agent, wrong state) and timeouts cannot come from the environment and
// stay as they are. It costs one GET /v1/daemon per client, and only on errors.
func (c *Client) explain(ctx context.Context, err error) error {
	var ve *verbs.Error
	if !errors.As(err, &ve) || ve.Code == verbs.CodeNotFound || ve.Code == verbs.CodeWrongState || ve.Code == verbs.CodeTimeout {
		return err
	}
	if !c.local() {
		return err // a daemon elsewhere has an environment of its own
	}
	c.envOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		defer cancel()
		st, err := c.Ping(ctx)
		if err != nil || st.Env == nil { // an older daemon does not say
			return
		}
		if diff := config.EnvDiff(st.Env, config.EnvFingerprints(os.Environ())); len(diff) > 0 {
			c.envHint = fmt.Sprintf("kaimon-agentd (pid %d) was started with a different %s than this environment has: "+
				"run `kaimon daemon restart` to restart it with this environment (this closes its live agents). "+
				"It answered, perhaps because of that:", st.PID, strings.Join(diff, ", "))
		}
	})
	if c.envHint == "" {
		return err
	}
	e := *ve
	e.Message = c.envHint + "\n" + ve.Message
	return &e
}

func call[R any](c *Client, ctx context.Context, name string, args any) (*R, error) {
	v := verbs.ByName(name)
	var out R
	if err := c.Do(ctx, "POST", v.Route(), args, &out); err != nil {
		return nil, c.explain(ctx, err)
	}
	return &out, nil
}

func (c *Client) Open(ctx context.Context, a *verbs.OpenArgs) (*verbs.OpenResult, error) {
	return call[verbs.OpenResult](c, ctx, "agent_open", a)
}
func (c *Client) Send(ctx context.Context, a *verbs.SendArgs) (*verbs.SendResult, error) {
	return call[verbs.SendResult](c, ctx, "agent_send", a)
}
func (c *Client) Run(ctx context.Context, a *verbs.RunArgs) (*verbs.RunResult, error) {
	return call[verbs.RunResult](c, ctx, "agent_run", a)
}
func (c *Client) Output(ctx context.Context, a *verbs.OutputArgs) (*verbs.OutputResult, error) {
	return call[verbs.OutputResult](c, ctx, "agent_output", a)
}
func (c *Client) Status(ctx context.Context, a *verbs.StatusArgs) (*verbs.AgentStatus, error) {
	return call[verbs.AgentStatus](c, ctx, "agent_status", a)
}
func (c *Client) SetModel(ctx context.Context, a *verbs.SetModelArgs) (*verbs.SetModelResult, error) {
	return call[verbs.SetModelResult](c, ctx, "agent_set_model", a)
}
func (c *Client) List(ctx context.Context, a *verbs.ListArgs) (*verbs.ListResult, error) {
	return call[verbs.ListResult](c, ctx, "agent_list", a)
}
func (c *Client) Interrupt(ctx context.Context, a *verbs.InterruptArgs) (*verbs.InterruptResult, error) {
	return call[verbs.InterruptResult](c, ctx, "agent_interrupt", a)
}
func (c *Client) Close(ctx context.Context, a *verbs.CloseArgs) (*verbs.CloseResult, error) {
	return call[verbs.CloseResult](c, ctx, "agent_close", a)
}
func (c *Client) Permit(ctx context.Context, a *verbs.PermitArgs) (*verbs.PermitResult, error) {
	return call[verbs.PermitResult](c, ctx, "agent_permit", a)
}

func (c *Client) Forget(ctx context.Context, a *verbs.ForgetArgs) (*verbs.ForgetResult, error) {
	return call[verbs.ForgetResult](c, ctx, "agent_forget", a)
}

func (c *Client) Diff(ctx context.Context, a *verbs.DiffArgs) (*verbs.DiffResult, error) {
	return call[verbs.DiffResult](c, ctx, "agent_diff", a)
}

var _ verbs.Service = (*Client)(nil)

// WriteDiff implements verbs.DiffWriter over GET /v1/agents/{id}/diff:
// the agent's whole diff, copied to w as the daemon sends it, where
// agent_diff's answer (Diff) is cut at verbs.DiffMax. A diff that did not
// end whole is an error, also after bytes of it were written.
func (c *Client) WriteDiff(ctx context.Context, a *verbs.DiffArgs, w io.Writer) (*verbs.DiffResult, error) {
	path := "/v1/agents/" + url.PathEscape(a.AgentID) + "/diff"
	if a.Stat {
		path += "?stat=1"
	}
	resp, err := c.roundTrip(ctx, "GET", path, nil, !c.NoAutostart)
	if err != nil {
		return nil, c.explain(ctx, err)
	}
	defer resp.Body.Close()
	dst := &writeErr{w: w}
	n, err := io.Copy(dst, resp.Body)
	switch {
	case dst.err != nil:
		return nil, dst.err
	case err != nil:
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("the diff of agent %s from %s broke off after %d bytes: %w", a.AgentID, c.where(), n, err)
	}
	if t := resp.Trailer.Get(apitype.DiffErrorTrailer); t != "" {
		var e verbs.Error
		if json.Unmarshal([]byte(t), &e) != nil || e.Message == "" {
			e = verbs.Error{Code: verbs.CodeInternal, Message: t}
		}
		e.Message = fmt.Sprintf("%s (after %d bytes of the diff)", e.Message, n)
		return nil, &e
	}
	var res verbs.DiffResult
	if err := json.Unmarshal([]byte(resp.Trailer.Get(apitype.DiffTrailer)), &res); err != nil {
		return nil, fmt.Errorf("the diff of agent %s from %s ended after %d bytes without its %s trailer: it may not be whole", a.AgentID, c.where(), n, apitype.DiffTrailer)
	}
	return &res, nil
}

var _ verbs.DiffWriter = (*Client)(nil)

// writeErr is a writer that keeps its first error: io.Copy's error does
// not say which side failed.
type writeErr struct {
	w   io.Writer
	err error
}

func (e *writeErr) Write(p []byte) (int, error) {
	n, err := e.w.Write(p)
	if err != nil && e.err == nil {
		e.err = err
	}
	return n, err
}
