package e2e

import (
	"bytes"
	"context"
	"errors"

	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"

	"github.com/kaimon/kaimon/internal/testutil/fakeapi"
	"github.com/kaimon/kaimon/internal/verbs"
)

// ptyKaimon is kaimon running in a pseudo-terminal of its own: stdin,
// stdout and stderr all the terminal, as a person runs it. Writing "\x03"
// to the terminal is Ctrl-C: the line discipline signals kaimon, which
// leads its own session and process group.
type ptyKaimon struct {
	t    *testing.T
	cmd  *exec.Cmd
	tty  *os.File // the terminal's master side
	mu   sync.Mutex
	out  bytes.Buffer // everything kaimon wrote to the terminal
	read chan struct{}
	done chan struct{}
	code int
}

// ptyEnv is the installation's environment with colour allowed (the
// harness sets NO_COLOR=1 for everything) and a terminal type, and then
// extra NAME=value pairs.
func (e *kenv) ptyEnv(extra ...string) []string {
	var env []string
	for _, kv := range e.env {
		if !strings.HasPrefix(kv, "NO_COLOR=") && !strings.HasPrefix(kv, "TERM=") {
			env = append(env, kv)
		}
	}
	env = append(env, "TERM=xterm-256color")
	return append(env, extra...)
}

// kaimonPty starts kaimon args in a terminal of 200 columns with env; the
// test ends it if it is still running when the test ends.
func (e *kenv) kaimonPty(t *testing.T, env []string, args ...string) *ptyKaimon {
	t.Helper()
	cmd := exec.Command(filepath.Join(binDir, "kaimon"), args...)
	cmd.Dir, cmd.Env = e.work, env
	tty, err := pty.StartWithSize(cmd, &pty.Winsize{Rows: 40, Cols: 200})
	if err != nil {
		t.Fatal(err)
	}
	k := &ptyKaimon{t: t, cmd: cmd, tty: tty, read: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(k.read)
		buf := make([]byte, 4096)
		for {
			n, err := tty.Read(buf)
			k.mu.Lock()
			k.out.Write(buf[:n])
			k.mu.Unlock()
			if err != nil {
				return // EIO once kaimon has exited and closed the terminal
			}
		}
	}()
	go func() {
		defer close(k.done)
		err := cmd.Wait()
		var ee *exec.ExitError
		switch {
		case errors.As(err, &ee):
			k.code = ee.ExitCode()
		case err != nil:
			k.code = -1
		}
	}()
	t.Cleanup(func() {
		select {
		case <-k.done:
		default:
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-k.done
		}
		tty.Close()
		<-k.read
	})
	return k
}

func (k *ptyKaimon) output() string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.out.String()
}

// waitOutput waits for the terminal to show want.
func (k *ptyKaimon) waitOutput(want string) {
	k.t.Helper()
	waitFor(k.t, "the terminal to show "+want, 90*time.Second, func() bool {
		return strings.Contains(k.output(), want)
	})
}

// wait waits for kaimon to exit and returns its exit code, once the
// terminal has given everything it wrote.
func (k *ptyKaimon) wait() int {
	k.t.Helper()
	select {
	case <-k.done:
	case <-time.After(3 * time.Minute):
		k.t.Fatalf("kaimon did not exit; the terminal shows:\n%s", k.output())
	}
	select {
	case <-k.read:
	case <-time.After(time.Minute):
		k.t.Fatalf("the terminal was not done after kaimon exited; it shows:\n%s", k.output())
	}
	return k.code
}

func (k *ptyKaimon) ctrlC() {
	k.t.Helper()
	if _, err := k.tty.Write([]byte{3}); err != nil {
		k.t.Fatal(err)
	}
}

// screen is what a terminal shows after out: the lines as text, for the
// little kaimon writes (printable text, CR, LF, colour, and the spinner's
// save cursor ESC 7, restore cursor ESC 8 and clear to the end of the line
// CSI K). Any other escape fails the test: kaimon would have garbled.
func screen(t *testing.T, out string) string {
	t.Helper()
	var lines [][]rune
	row, col, savedRow, savedCol := 0, 0, 0, 0
	put := func(r rune) {
		for len(lines) <= row {
			lines = append(lines, nil)
		}
		for len(lines[row]) < col {
			lines[row] = append(lines[row], ' ')
		}
		if col < len(lines[row]) {
			lines[row][col] = r
		} else {
			lines[row] = append(lines[row], r)
		}
		col++
	}
	rs := []rune(out)
	for i := 0; i < len(rs); i++ {
		switch r := rs[i]; {
		case r == '\r':
			col = 0
		case r == '\n':
			row++
		case r == 0x1b && i+1 < len(rs) && rs[i+1] == '7':
			savedRow, savedCol = row, col
			i++
		case r == 0x1b && i+1 < len(rs) && rs[i+1] == '8':
			row, col = savedRow, savedCol
			i++
		case r == 0x1b && i+1 < len(rs) && rs[i+1] == '[':
			j := i + 2
			for j < len(rs) && (rs[j] >= '0' && rs[j] <= '9' || rs[j] == ';') {
				j++
			}
			if j == len(rs) || rs[j] != 'm' && rs[j] != 'K' {
				t.Fatalf("unexpected escape %q in %q", string(rs[i:min(j+1, len(rs))]), out)
			}
			if rs[j] == 'K' && row < len(lines) && col < len(lines[row]) {
				lines[row] = lines[row][:col]
			}
			i = j
		case r == 0x1b:
			t.Fatalf("unexpected escape at %d in %q", i, out)
		default:
			put(r)
		}
	}
	var b strings.Builder
	for _, l := range lines {
		b.WriteString(strings.TrimRight(string(l), " ") + "\n")
	}
	return b.String()
}

// sgr matches a colour escape (Select Graphic Rendition).
var sgr = regexp.MustCompile(`\x1b\[[0-9;]*m`)

func (e *kenv) statusOf(t *testing.T, id string) verbs.AgentStatus {
	t.Helper()
	var st verbs.AgentStatus
	e.okJSON(&st, "status", id)
	return st
}

// TestLiveRun: `kaimon run` on a terminal renders the turn as it happens:
// the first half of a held reply is on the screen while the agent is still
// working, the rest follows once, a tool call is a line with its result,
// and the usage ends it on stderr; colour by default, none with NO_COLOR
// or TERM=dumb (where no escape at all is written).
func TestLiveRun(t *testing.T) {
	e := newEnv(t)
	id := e.ok("open", e.work)

	k := e.kaimonPty(t, e.ptyEnv(), "run", id, "please hold")
	k.waitOutput(fakeapi.HoldFirst)
	k.waitOutput(" working ") // the spinner, after the half line, while the model is silent
	if st := e.statusOf(t, id); st.Status != "working" {
		t.Fatalf("status while the reply is held: %q; the terminal shows:\n%s", st.Status, k.output())
	}
	if strings.Contains(k.output(), fakeapi.HoldRest) {
		t.Fatalf("the held half is on the terminal before its release:\n%s", k.output())
	}
	e.api.Release()
	if code := k.wait(); code != 0 {
		t.Fatalf("run exited %d:\n%s", code, k.output())
	}
	out := k.output()
	t.Logf("the terminal:\n%q", out)
	plain := screen(t, out)
	if !strings.HasPrefix(plain, fakeapi.HoldFirst+fakeapi.HoldRest+"\n") || strings.Count(plain, fakeapi.HoldRest) != 1 ||
		strings.ContainsAny(plain, "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏") {
		t.Fatalf("the screen does not show the reply once, whole, and first, spinner gone:\n%s", plain)
	}
	if !regexp.MustCompile(`✓ turn 1 · end_turn · tokens in \d+, out \d+.* · [0-9.]+m?s`).MatchString(plain) {
		t.Fatalf("no usage line:\n%q", out)
	}
	if !sgr.MatchString(out) {
		t.Fatalf("no colour on a terminal by default:\n%q", out)
	}

	// A tool call, without colour (NO_COLOR).
	k = e.kaimonPty(t, e.ptyEnv("NO_COLOR=1"), "run", id, "please use a tool")
	if code := k.wait(); code != 0 {
		t.Fatalf("run exited %d:\n%s", code, k.output())
	}
	out = k.output()
	t.Logf("the terminal:\n%q", out)
	for _, want := range []string{"→ Bash " + `{"command":"echo hi"`, "← Bash completed: hi", "Tool said: hi. Done.", "✓ turn 2 · end_turn"} {
		if !strings.Contains(out, want) {
			t.Errorf("NO_COLOR run lacks %q:\n%q", want, out)
		}
	}
	if sgr.MatchString(out) {
		t.Errorf("colour despite NO_COLOR=1:\n%q", out)
	}

	// TERM=dumb: no escape of any kind there. (--no-color is the cli's
	// TestStreamsDecide: the run's streams, on a terminal.)
	k = e.kaimonPty(t, e.ptyEnv("TERM=dumb"), "run", id, "please think")
	if code := k.wait(); code != 0 || !strings.Contains(k.output(), fakeapi.ThinkText) || strings.Contains(k.output(), "\x1b") {
		t.Errorf("TERM=dumb run: exit %d\n%q", code, k.output())
	}
	if out := k.output(); !strings.Contains(out, "thinking: Let me think about this briefly.") {
		t.Errorf("TERM=dumb run does not show the thought:\n%q", out)
	}
}

// TestLiveRunCtrlC: Ctrl-C during a live run interrupts the turn, not the
// agent (exit 3, the agent idle afterwards); a second Ctrl-C detaches
// (exit 130) and leaves the agent alive; run -C closes its throwaway when
// the interrupted run ends. A detached run -C's words and its close are
// the cli's TestTurnCtrlCTwiceDetaches, with a fake service.
func TestLiveRunCtrlC(t *testing.T) {
	e := newEnv(t)
	id := e.ok("open", e.work)

	k := e.kaimonPty(t, e.ptyEnv(), "run", id, "please hold")
	k.waitOutput(fakeapi.HoldFirst)
	k.ctrlC()
	if code := k.wait(); code != 3 {
		t.Fatalf("interrupted run exited %d, want 3:\n%s", code, k.output())
	}
	t.Logf("the terminal:\n%q", k.output())
	if out := k.output(); !strings.Contains(out, "interrupting the turn of agent "+id) || !strings.Contains(out, "cancelled") {
		t.Fatalf("the terminal does not tell of the interrupt:\n%q", out)
	}
	// The cancel is said once, as a cancel: not also as a failure.
	if out := k.output(); strings.Count(out, "cancelled") != 1 || strings.Contains(out, "failed") || strings.Contains(out, "✗") {
		t.Fatalf("the terminal tells of the cancel more than once, or as a failure:\n%q", out)
	}
	waitFor(t, "the agent to be idle", 30*time.Second, func() bool { return e.statusOf(t, id).Status == "idle" })

	// Detach: the agent must not end its turn between the two Ctrl-Cs,
	// so its claude is stopped (SIGSTOP) before the first: it cannot
	// acknowledge the interrupt, as a busy agent may not.
	k = e.kaimonPty(t, e.ptyEnv(), "run", id, "please hold")
	k.waitOutput(fakeapi.HoldFirst)
	claude := e.claudeProcesses(t)
	for _, pid := range claude {
		_ = syscall.Kill(pid, syscall.SIGSTOP)
	}
	stopped := true
	defer func() {
		if stopped {
			for _, pid := range claude {
				_ = syscall.Kill(pid, syscall.SIGCONT)
			}
		}
	}()
	k.ctrlC()
	k.waitOutput("Ctrl-C again")
	k.ctrlC()
	if code := k.wait(); code != 130 {
		t.Fatalf("detached run exited %d, want 130:\n%s", code, k.output())
	}
	t.Logf("the terminal:\n%q", k.output())
	if out := k.output(); !strings.Contains(out, "detached: agent "+id+" goes on") {
		t.Fatalf("the terminal does not tell of the detach:\n%q", out)
	}
	for _, pid := range claude {
		_ = syscall.Kill(pid, syscall.SIGCONT)
	}
	stopped = false
	if st := e.statusOf(t, id); st.Status == "dead" {
		t.Fatalf("the agent died with the detach: %+v", st)
	}
	// Let go, claude reads the interrupt it was sent, and the turn ends.
	waitFor(t, "the detached turn to end", 60*time.Second, func() bool { return e.statusOf(t, id).Status == "idle" })

	// run -C: the throwaway agent is closed when the interrupted run ends.
	k = e.kaimonPty(t, e.ptyEnv(), "run", "-C", e.work, "please hold")
	k.waitOutput(fakeapi.HoldFirst)
	k.ctrlC()
	if code := k.wait(); code != 3 {
		t.Fatalf("interrupted run -C exited %d, want 3:\n%s", code, k.output())
	}
	var l verbs.ListResult
	e.okJSON(&l, "list")
	for _, a := range l.Agents {
		if a.AgentID != id && a.AgentStatus.Status != "dead" {
			t.Fatalf("run -C left its agent %s %s", a.AgentID, a.AgentStatus.Status)
		}
	}
	if len(l.Agents) != 2 {
		t.Fatalf("agents after run -C: %+v", l.Agents)
	}
}

// claudeProcesses lists this installation's claude CLI processes.
func (e *kenv) claudeProcesses(t *testing.T) []int {
	t.Helper()
	var out []int
	for _, pid := range e.processes() {
		b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
		if argv0, _, _ := bytes.Cut(b, []byte{0}); strings.Contains(filepath.Base(string(argv0)), "claude") {
			out = append(out, pid)
		}
	}
	if len(out) == 0 {
		t.Fatalf("no claude process among %s", describe(e.processes()))
	}
	return out
}

// TestRunPiped: with stdout a pipe, run prints the final text and nothing
// else, whatever streamed; Ctrl-C (SIGINT, as a CI job sends it)
// interrupts the turn there too.
func TestRunPiped(t *testing.T) {
	e := newEnv(t)
	id := e.ok("open", e.work)
	if r := e.kaimon("run", id, "please think"); r.code != 0 || r.stdout != fakeapi.ThinkText+"\n" {
		t.Fatalf("piped run: %s", r)
	}
	if r := e.kaimon("run", id, "please use a tool"); r.code != 0 || r.stdout != "Tool said: hi. Done.\n" {
		t.Fatalf("piped tool run: %s", r)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(binDir, "kaimon"), "run", id, "please hold")
	cmd.Dir, cmd.Env = e.work, e.env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	var so, se bytes.Buffer
	cmd.Stdout, cmd.Stderr = &so, &se
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var o verbs.OutputResult
	waitFor(t, "the held half to stream", 60*time.Second, func() bool {
		e.okJSON(&o, "output", id)
		return o.Turn == 3 && o.Text == fakeapi.HoldFirst
	})
	_ = cmd.Process.Signal(syscall.SIGINT)
	err := cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 3 {
		t.Fatalf("piped run after SIGINT: %v\nstdout: %s\nstderr: %s", err, so.String(), se.String())
	}
	if so.String() != fakeapi.HoldFirst+"\n" || !strings.Contains(se.String(), "interrupting the turn") {
		t.Fatalf("piped interrupted run:\nstdout: %q\nstderr: %s", so.String(), se.String())
	}
	if msg := se.String(); !strings.Contains(msg, "turn 3 was cancelled") || strings.Contains(msg, "failed") {
		t.Fatalf("piped interrupted run: the cancel is not said as one:\n%s", msg)
	}
	waitFor(t, "the agent to be idle", 30*time.Second, func() bool { return e.statusOf(t, id).Status == "idle" })
}

// TestLiveTailPretty: tail --pretty on a terminal is the same rendering,
// spinner included, for a turn sent by someone else; Ctrl-C ends tail as
// before (exit 0), since only run catches it.
func TestLiveTailPretty(t *testing.T) {
	e := newEnv(t)
	id := e.ok("open", e.work)
	// --from-start: the log, then live, so that nothing is missed
	// whenever tail is subscribed.
	k := e.kaimonPty(t, e.ptyEnv("NO_COLOR=1"), "tail", "agent:"+id, "--from-start", "--pretty")
	// The held half is a streamed chunk, which no log holds: the tail
	// must be subscribed before it streams.
	e.waitTopic("agent:"+id, 1)
	e.ok("send", id, "please hold")
	k.waitOutput("> please hold")
	k.waitOutput(fakeapi.HoldFirst)
	k.waitOutput(" working ")
	e.api.Release()
	k.waitOutput("✓ turn 1 end_turn")
	k.ctrlC()
	if code := k.wait(); code != 0 {
		t.Fatalf("tail after Ctrl-C exited %d:\n%s", code, k.output())
	}
	scr := screen(t, k.output())
	if !strings.Contains(scr, fakeapi.HoldFirst+fakeapi.HoldRest+"\n") || strings.ContainsAny(scr, "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏") {
		t.Fatalf("the screen:\n%s", scr)
	}
}

// TestLiveRunAsksInline: `kaimon run` on a terminal asks the agent's
// permission request where the turn renders; y allows it (the real claude
// CLI runs the command), n denies it. The transcript is the issue's:
// a tool turn answered inline.
func TestLiveRunAsksInline(t *testing.T) {
	e := newEnv(t)
	id := e.ok("open", e.work) // preset default: a command outside the directory asks
	for _, tc := range []struct {
		key     string
		allowed bool
	}{{"y", true}, {"n", false}} {
		outside := filepath.Join(e.home, "outside-"+tc.key)
		k := e.kaimonPty(t, e.ptyEnv("NO_COLOR=1"), "run", id, fakeapi.TriggerRunCommand+" touch "+outside)
		k.waitOutput("allow? [y]es / [n]o")
		if _, err := k.tty.Write([]byte(tc.key + "\r")); err != nil {
			t.Fatal(err)
		}
		if code := k.wait(); code != 0 {
			t.Fatalf("run exited %d:\n%s", code, k.output())
		}
		out := k.output()
		t.Logf("the terminal (%s):\n%s", tc.key, screen(t, out))
		word := map[bool]string{true: "✓ permission for Bash allowed (user)", false: "✗ permission for Bash denied (user)"}[tc.allowed]
		if !strings.Contains(out, "? agent "+id+" asks permission for Bash") || !strings.Contains(out, word) {
			t.Fatalf("the terminal does not ask, or not tell the answer %q:\n%q", word, out)
		}
		if strings.Contains(out, "kaimon permit") {
			t.Fatalf("asked inline, yet told to answer elsewhere:\n%q", out)
		}
		if _, err := os.Stat(outside); (err == nil) != tc.allowed {
			t.Fatalf("answered %s: the command ran: %v", tc.key, err == nil)
		}
	}
}

// TestChat: `kaimon chat ID` on a terminal, with the real claude CLI: three
// turns, the second interrupted with Ctrl-C (the chat goes on), the third
// a tool call; Ctrl-D leaves with the agent alive and idle.
func TestChat(t *testing.T) {
	e := newEnv(t)
	id := e.ok("open", e.work)
	k := e.kaimonPty(t, e.ptyEnv("NO_COLOR=1"), "chat", id)
	type_ := func(s string) {
		t.Helper()
		if _, err := k.tty.Write([]byte(s)); err != nil {
			t.Fatal(err)
		}
	}
	k.waitOutput("> ")
	type_("say exactly: first of three\r")
	k.waitOutput("✓ turn 1")
	type_(fakeapi.TriggerHold + "\r")
	k.waitOutput(fakeapi.HoldFirst)
	k.ctrlC()
	k.waitOutput("■ turn 2 · cancelled")
	waitFor(t, "the agent to be idle", 30*time.Second, func() bool { return e.statusOf(t, id).Status == "idle" })
	type_(fakeapi.TriggerTool + "\r")
	k.waitOutput("✓ turn 3")
	type_("\x04") // Ctrl-D
	if code := k.wait(); code != 0 {
		t.Fatalf("chat exited %d:\n%s", code, k.output())
	}
	out := k.output()
	t.Logf("the terminal:\n%s", screen(t, out))
	for _, want := range []string{"first of three", "interrupting the turn of agent " + id, "← Bash completed: hi", "left the chat; agent " + id + " goes on"} {
		if !strings.Contains(out, want) {
			t.Errorf("the terminal lacks %q:\n%q", want, out)
		}
	}
	if st := e.statusOf(t, id); st.Status != "idle" || st.Turn != 3 {
		t.Fatalf("after the chat: %s at turn %d, want idle at 3", st.Status, st.Turn)
	}
}
