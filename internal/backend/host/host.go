// Package host is the process side the backends that run an agent program
// on stdio share (the claude CLI, ACP agents): the spawn in its own process
// group, the stderr log, stdin writes with a deadline, the stdout reader
// and the watch over both ends, the exit report, and the permission
// requests pending while the process lives. Each backend keeps only its
// protocol.
package host

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/kaimon/kaimon/internal/agentbin"
	"github.com/kaimon/kaimon/internal/apitype"
	"github.com/kaimon/kaimon/internal/backend"
	"github.com/kaimon/kaimon/internal/event"
	"github.com/kaimon/kaimon/internal/proc"
)

// Timeouts of a hosted process.
const (
	// WriteTimeout bounds one write to the agent's stdin, so that an agent
	// that stopped reading cannot hang a caller forever.
	WriteTimeout = 10 * time.Second
	// DrainDelay is how long the reader may go on after the agent exited,
	// for a straggler that inherited its stdout.
	DrainDelay = 2 * time.Second
	// HangupGrace is how long the agent may live on after its stdout
	// closed: an exiting process closes stdout a moment before it is
	// reaped, but one that lingers can never be heard again and is
	// stopped.
	HangupGrace = 2 * time.Second
	// StopGrace is how long a stop lets the group exit on SIGTERM before
	// it is killed.
	StopGrace = 3 * time.Second
	// stderrTailBytes is how much of the stderr log an exit report quotes.
	stderrTailBytes = 2048
)

// Spec says what to run.
type Spec struct {
	// Name names the agent in messages: "claude", "acp:opencode".
	Name string
	Bin  string
	Args []string
	Dir  string
	Env  []string
	// LogPath is the per-agent stderr log, appended to; "" discards
	// stderr.
	LogPath string
}

// Process is one spawned agent program: the leader of its own process
// group, with its stdin and stdout on pipes and its stderr in the log.
// Its methods may be called on a nil *Process, which is a process that
// is not (or no longer) there.
type Process struct {
	name     string
	logPath  string
	logStart int64 // size of the stderr log when this process started

	// Child is the process; Stdout the read end of its stdout.
	Child  *proc.Child
	Stdout *os.File

	writeMu sync.Mutex
	stdin   *os.File
}

// CheckDir refuses a cwd that is not a directory.
func CheckDir(dir string) error {
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		if err == nil {
			err = errors.New("not a directory")
		}
		return fmt.Errorf("agent cwd %q: %w", dir, err)
	}
	return nil
}

// Spawn starts s in its own process group (proc.Start: the group is
// stopped with the daemon), stderr appended to s.LogPath.
func Spawn(s Spec) (*Process, error) {
	p := &Process{name: s.Name, logPath: s.LogPath}
	var stderr *os.File
	if s.LogPath != "" {
		if err := os.MkdirAll(filepath.Dir(s.LogPath), 0o700); err != nil {
			return nil, fmt.Errorf("%s stderr log: %w", s.Name, err)
		}
		f, err := os.OpenFile(s.LogPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
		if err != nil {
			return nil, fmt.Errorf("%s stderr log: %w", s.Name, err)
		}
		defer f.Close() // the child has its own copy
		if st, err := f.Stat(); err == nil {
			p.logStart = st.Size()
		}
		stderr = f
	}
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
	cmd := exec.Command(s.Bin, s.Args...)
	cmd.Dir = s.Dir
	cmd.Env = s.Env
	cmd.Stdin, cmd.Stdout = inR, outW
	if stderr != nil {
		cmd.Stderr = stderr
	}
	child, err := proc.Start(cmd)
	inR.Close()
	outW.Close()
	if err != nil {
		inW.Close()
		outR.Close()
		return nil, fmt.Errorf("starting %s (%s): %w", s.Name, s.Bin, err)
	}
	p.Child, p.Stdout, p.stdin = child, outR, inW
	return p, nil
}

// ID identifies the process, for the pid file; zero for a nil Process.
func (p *Process) ID() proc.Identity {
	if p == nil {
		return proc.Identity{}
	}
	return p.Child.ID
}

// Write writes to the agent's stdin with a deadline of WriteTimeout; after
// CloseInput it fails with proc.ErrExited. One Write is never interleaved
// with another.
func (p *Process) Write(b []byte) (int, error) {
	if p == nil {
		return 0, proc.ErrExited
	}
	p.writeMu.Lock()
	defer p.writeMu.Unlock()
	if p.stdin == nil {
		return 0, proc.ErrExited
	}
	_ = p.stdin.SetWriteDeadline(time.Now().Add(WriteTimeout))
	return p.stdin.Write(b)
}

// WriteJSON writes v as one line on the agent's stdin.
func (p *Process) WriteJSON(v any) error {
	line, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = p.Write(append(line, '\n'))
	return err
}

// CloseInput closes the agent's stdin.
func (p *Process) CloseInput() {
	if p == nil {
		return
	}
	p.writeMu.Lock()
	defer p.writeMu.Unlock()
	if p.stdin != nil {
		p.stdin.Close()
		p.stdin = nil
	}
}

// StderrTail returns the end of what this process wrote to its stderr log.
func (p *Process) StderrTail() string {
	return proc.LogTail(p.logPath, p.logStart, stderrTailBytes)
}

// Watch waits for the process to exit and for its stdout's reader to be
// done (readDone). Whichever ends first, the other is waited for only so
// long: a straggler holding stdout after the exit is cut off (Stdout
// closed after DrainDelay), and an agent living on after its stdout closed
// is stopped after HangupGrace, hangup being called first. Stdout is
// closed when Watch returns.
func (p *Process) Watch(readDone <-chan struct{}, hangup func()) {
	select {
	case <-p.Child.Done():
		select {
		case <-readDone:
		case <-time.After(DrainDelay):
			p.Stdout.Close() // a straggler holds stdout: stop reading
			<-readDone
		}
		p.Stdout.Close()
	case <-readDone:
		p.afterRead(hangup)
	}
}

// afterRead follows the end of the agent's stdout: it waits for the exit,
// and stops an agent living on after its stdout closed after HangupGrace,
// hangup called first. Stdout is closed when it returns.
func (p *Process) afterRead(hangup func()) {
	select {
	case <-p.Child.Done():
	case <-time.After(HangupGrace):
		// Its stdout is closed but it lives: nothing it does can reach
		// us, so its turn would never end.
		hangup()
		p.Child.Stop(StopGrace)
	}
	p.Stdout.Close()
}

// Serve is ReadLines and Watch in the caller's goroutine, one fewer for
// each agent's life (a daemon may host a thousand idle ones): the drain
// after an exit is a timer armed when the child is reaped (AfterExit),
// cutting stdout off after DrainDelay; the hangup grace follows the read
// as in Watch. Stdout is closed when Serve returns.
func (p *Process) Serve(max int, line func([]byte), skipped func(int64), idle, hangup func()) {
	read := make(chan struct{})
	p.Child.AfterExit(func() {
		time.AfterFunc(DrainDelay, func() {
			select {
			case <-read:
			default:
				p.Stdout.Close() // a straggler holds stdout: stop reading
			}
		})
	})
	p.ReadLines(max, line, skipped, idle)
	close(read)
	p.afterRead(hangup)
}

// ReadLines reads the agent's stdout line by line until it ends, handing
// each line (its newline included) to line, which must not keep it past
// its return (it may be in the read buffer: LineReader.ReadLine). A line
// over max bytes is not buffered whole but read past, and its size handed to skipped, so that a
// runaway agent cannot take the daemon's memory. While the agent prints
// nothing, the reader holds no buffer (LineReader). idle, when not nil,
// is called before every read of stdout, which may wait for the agent
// (mid-line too: a line longer than what one read gave), and at the end:
// a batch of what the lines handed out so far gave may be published then
// (backend.BatchSink), and is never held while the agent is silent.
func (p *Process) ReadLines(max int, line func([]byte), skipped func(int64), idle func()) {
	lr := NewLineReader(p.Stdout)
	if idle != nil {
		lr.idle = idle
		defer idle()
	}
	for {
		l, n, err := lr.ReadLine(max)
		if n > 0 {
			skipped(n)
		}
		if len(l) > 0 {
			line(l)
		}
		if err != nil {
			return
		}
	}
}

// ExitedEarly describes a process that exited before it was ready, with
// the end of its stderr; hungUp says kaimon stopped it because it closed
// its stdout.
func (p *Process) ExitedEarly(hungUp bool) error {
	<-p.Child.Done()
	msg := p.name + " exited before it was ready: " + p.Child.ExitDescription()
	if hungUp {
		msg = p.name + " closed its stdout before it was ready, and was stopped"
	}
	if tail := p.StderrTail(); tail != "" {
		msg += "; its stderr ends:\n" + tail
	} else if p.logPath != "" {
		msg += " (nothing on stderr; log " + p.logPath + ")"
	}
	return errors.New(msg)
}

// Ended says how the exited process ended, for people: its exit code, the
// signal that ended it, or, when hungUp, that kaimon stopped it after it
// did what hangup says ("closed its stdout").
func (p *Process) Ended(hungUp bool, hangup string) string {
	desc := p.Child.ExitDescription()
	switch {
	case hungUp:
		return p.name + " " + hangup + " but kept running, so kaimon stopped it (" + desc + ")"
	case !strings.HasPrefix(desc, "exit code"):
		return p.name + " was " + desc
	}
	return fmt.Sprintf("%s exited with code %d", p.name, p.Child.ExitCode())
}

// Turns is a backend's mapper as the exit report needs it.
type Turns interface {
	Current() int
	Abort(stopReason apitype.StopReason, msg string) []event.Event
}

// Report emits the end of a process that was ready, under the caller's
// emit lock, and returns the error for Sink.Exited. After Close (closing)
// the turns in flight end cancelled and the error is nil. Otherwise an
// error event says how it ended (msg, from Ended) with its exit code and
// the end of its stderr, the turns in flight end with an error, and the
// returned error quotes the stderr too.
func (p *Process) Report(sink backend.Sink, m Turns, closing bool, msg string) error {
	if closing {
		for _, ev := range m.Abort(apitype.StopCancelled, "the agent was closed") {
			sink.Emit(ev)
		}
		return nil
	}
	tail := p.StderrTail()
	sink.Emit(event.NewError(m.Current(), msg, map[string]any{"exitCode": p.Child.ExitCode(), "stderrTail": tail}))
	for _, ev := range m.Abort(apitype.StopError, msg) {
		sink.Emit(ev)
	}
	if tail != "" {
		msg += "; its stderr ends:\n" + tail
	}
	return errors.New(msg)
}

// LookupEnv returns the last value of key in env.
func LookupEnv(env []string, key string) string {
	v := ""
	for _, kv := range env {
		if k, val, ok := strings.Cut(kv, "="); ok && k == key {
			v = val
		}
	}
	return v
}

// SetEnv returns env with key set to value (replacing earlier values).
// When env already sets key to value only, once, it is returned itself,
// not copied: a backend keeps its agent's environment for the agent's
// life, and the session manager's already names the agent (never write
// into either in place).
func SetEnv(env []string, key, value string) []string {
	n, last := 0, ""
	for _, kv := range env {
		if k, _, ok := strings.Cut(kv, "="); ok && k == key {
			n, last = n+1, kv
		}
	}
	if n == 1 && last == key+"="+value {
		return slices.Clip(env) // an append to it must not write into the caller's array
	}
	out := make([]string, 0, len(env)+1)
	for _, kv := range env {
		if k, _, ok := strings.Cut(kv, "="); !ok || k != key {
			out = append(out, kv)
		}
	}
	return append(out, key+"="+value)
}

// FindProgram returns the absolute path of p's program as the agent's
// environment env names it: p.Env's value when set, else p.Bin on env's
// PATH (which may differ from the daemon's own). what names the program
// in errors ("the Codex CLI"); a missing one wraps backend.ErrNotFound and
// says how to install it or point at it.
func FindProgram(env []string, p agentbin.Program, what string) (string, error) {
	if v := LookupEnv(env, p.Env); v != "" {
		path, err := exec.LookPath(v)
		if err != nil && !errors.Is(err, exec.ErrDot) {
			return "", fmt.Errorf("%w: %s=%s is not an executable %s (%v): point it at one, or unset it to use %s on PATH",
				backend.ErrNotFound, p.Env, v, what, err, p.Bin)
		}
		return filepath.Abs(path)
	}
	path, err := LookPath(p.Bin, LookupEnv(env, "PATH"))
	if err != nil {
		return "", fmt.Errorf("%w: %s (%s) is not on PATH: install it with `%s`, or set %s to its path",
			backend.ErrNotFound, p.Bin, what, p.Install, p.Env)
	}
	return filepath.Abs(path)
}

// LookPath finds name in the directories of path (the agent's PATH, which
// may differ from the daemon's own); with no path, or a name with a
// slash, as exec.LookPath does.
func LookPath(name, path string) (string, error) {
	if path == "" || strings.ContainsRune(name, filepath.Separator) {
		return exec.LookPath(name)
	}
	for _, dir := range filepath.SplitList(path) {
		if dir == "" {
			continue
		}
		if p, err := exec.LookPath(filepath.Join(dir, name)); err == nil {
			return p, nil
		}
	}
	return "", exec.ErrNotFound
}
