package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kaimon/kaimon/internal/proc"
	"github.com/kaimon/kaimon/internal/testutil/fakeapi"
	"github.com/kaimon/kaimon/internal/verbs"
)

// tmuxScreen runs one program full-screen in a tmux server of its own (its
// own socket in a temp dir), to type at it and read its screen.
type tmuxScreen struct {
	t    *testing.T
	sock string
	env  []string
}

// newTmux starts `tmux new-session` with a w×h window running argv with
// env. The server is killed at cleanup, which runs before the harness's
// leak check (cleanups run last registered first).
func newTmux(t *testing.T, env []string, dir string, w, h int, argv ...string) *tmuxScreen {
	t.Helper()
	if _, err := exec.LookPath("tmux"); err != nil {
		msg := "tmux is not installed: run scripts/setup-test.sh"
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	tm := &tmuxScreen{t: t, sock: filepath.Join(t.TempDir(), "sock"), env: append(env, "TERM=xterm-256color")}
	t.Cleanup(func() {
		// The server and the program in it; a server already gone is fine.
		_ = tm.cmd("kill-server").Run()
	})
	args := []string{"new-session", "-d", "-x", strconv.Itoa(w), "-y", strconv.Itoa(h), "-c", dir}
	tm.run(append(args, argv...)...)
	// The window keeps the size given, not the size of a client (there is
	// none).
	tm.run("set-option", "-g", "window-size", "manual")
	return tm
}

func (tm *tmuxScreen) cmd(args ...string) *exec.Cmd {
	c := exec.Command("tmux", append([]string{"-S", tm.sock, "-f", "/dev/null"}, args...)...)
	c.Env = tm.env
	proc.Setpgid(c) // the client; the server makes a session of its own
	return c
}

func (tm *tmuxScreen) run(args ...string) string {
	tm.t.Helper()
	out, err := tm.cmd(args...).CombinedOutput()
	if err != nil {
		tm.t.Fatalf("tmux %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// screen is what the pane shows now, one string per line.
func (tm *tmuxScreen) screen() string {
	tm.t.Helper()
	return tm.run("capture-pane", "-p")
}

func (tm *tmuxScreen) keys(keys ...string) {
	tm.t.Helper()
	tm.run(append([]string{"send-keys"}, keys...)...)
}

// waitScreen polls the screen until cond holds and returns it; on timeout
// the test fails showing the last screen.
func (tm *tmuxScreen) waitScreen(what string, cond func(s string) bool) string {
	tm.t.Helper()
	var s string
	deadline := time.Now().Add(30 * time.Second)
	for {
		s = tm.screen()
		if cond(s) {
			return s
		}
		if time.Now().After(deadline) {
			tm.t.Fatalf("timed out waiting for %s; the screen:\n%s", what, s)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// row is the screen line of the table that starts with id, "" if none.
func row(screen, id string) string {
	for _, l := range strings.Split(screen, "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), id+" ") {
			return l
		}
	}
	return ""
}

// TestMonitor drives `kaimon monitor` in tmux against a daemon with a live
// agent that has done a turn and a dead one, and reads the screen.
func TestMonitor(t *testing.T) {
	e := newEnv(t)
	live := e.ok("open", e.work, "--id", "live1", "--allow", "Bash")
	// A turn with a tool call the CLI really runs.
	if out := e.ok("run", live, "please use a tool"); out != "Tool said: hi. Done." {
		t.Fatalf("run = %q", out)
	}
	dead := e.ok("open", e.work, "--id", "dead1")
	e.ok("close", dead)

	tm := newTmux(t, e.env, e.work, 100, 30, filepath.Join(binDir, "kaimon"), "monitor")

	// Both rows, each with its status; the live one is selected and its
	// feed shows the turn it did before the monitor started, its tool
	// call one line with the call's outcome.
	s := tm.waitScreen("rows for both agents and the live one's feed", func(s string) bool {
		return strings.Contains(row(s, live), "idle") && strings.Contains(row(s, dead), "dead") &&
			strings.Contains(s, "Tool said: hi. Done.")
	})
	if strings.Count(s, "⚙ Bash") != 1 || !strings.Contains(s, "✓ completed") || !strings.Contains(s, "> please use a tool") {
		t.Errorf("the feed does not show the tool call as one completed line:\n%s", s)
	}
	for _, want := range []string{"ID", "STATUS", "MODEL", "CWD", "TURN", "sonnet", "feed " + live} {
		if !strings.Contains(s, want) {
			t.Errorf("screen lacks %q:\n%s", want, s)
		}
	}
	if r := row(s, live); !strings.Contains(r, " 1 ") {
		t.Errorf("live row does not show turn 1: %q", r)
	}
	if path := os.Getenv("KAIMON_MONITOR_SNAPSHOT"); path != "" {
		if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
			t.Errorf("writing the snapshot: %v", err)
		}
	}

	// A turn sent while the monitor is up: its reply comes in the feed,
	// and the row counts the turn.
	e.ok("send", live, "say exactly: streamed while you watch")
	tm.waitScreen("the new reply in the feed", func(s string) bool {
		return strings.Contains(s, "streamed while you watch") && strings.Contains(s, "✓ turn 2") &&
			strings.Contains(row(s, live), " 2 ")
	})

	// Enter: the history from the event log, scrollable; Esc leaves it.
	tm.keys("Enter")
	tm.waitScreen("the history screen", func(s string) bool {
		return strings.Contains(s, "history "+live) && strings.Contains(s, "> please use a tool") &&
			strings.Contains(s, "streamed while you watch")
	})
	// It is live: a turn sent while it is open comes into it.
	e.ok("send", live, "say exactly: seen in the history")
	tm.waitScreen("the new turn in the open history", func(s string) bool {
		return strings.Contains(s, "history "+live) && strings.Contains(s, "seen in the history") &&
			strings.Contains(s, "✓ turn 3")
	})
	tm.keys("/", "tool", "Enter")
	tm.waitScreen("the search's match", func(s string) bool { return strings.Contains(s, `match 1/`) })
	tm.keys("Escape")
	tm.waitScreen("the table again", func(s string) bool {
		return !strings.Contains(s, "history "+live) && strings.Contains(s, "STATUS") && row(s, dead) != ""
	})

	// s types a turn for the selected agent and sends it; i interrupts
	// it: the row works, then the turn ends cancelled.
	tm.keys("s")
	tm.waitScreen("the turn prompt", func(s string) bool { return strings.Contains(s, "turn for "+live+" (enter sends") })
	tm.keys(fakeapi.TriggerHold, "Enter")
	tm.waitScreen("the sent turn working", func(s string) bool {
		return strings.Contains(s, "sent turn 4 to "+live) && strings.Contains(row(s, live), "working") && strings.Contains(s, strings.TrimSpace(fakeapi.HoldFirst))
	})
	tm.keys("i")
	s = tm.waitScreen("the turn interrupted", func(s string) bool {
		return strings.Contains(s, "interrupted "+live) && strings.Contains(s, "■ turn 4 cancelled") && strings.Contains(row(s, live), "idle")
	})
	t.Logf("the monitor after s and i:\n%s", s)
	tm.keys("Escape") // the notice goes; the key line is back

	// A smaller window: the layout redraws within 80 columns, header,
	// rows and key line still there. (The key line is part of what is
	// waited for: until the monitor redraws, tmux shows the old frame
	// cut to 24 rows, which has the rest but not its bottom line.)
	tm.run("resize-window", "-x", "80", "-y", "24")
	tm.waitScreen("the layout at 80×24, with its key line", func(s string) bool {
		lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
		if len(lines) > 24 || !strings.HasPrefix(lines[0], "kaimon monitor") {
			return false
		}
		for _, l := range lines {
			if len([]rune(l)) > 80 {
				return false
			}
		}
		return strings.Contains(s, "STATUS") && row(s, live) != "" && row(s, dead) != "" &&
			strings.Contains(s, "feed "+live) && strings.Contains(s, "q quit")
	})

	// x on the live agent asks, y closes it: its row turns dead, and the
	// daemon says so too.
	tm.keys("x")
	tm.waitScreen("the close prompt", func(s string) bool { return strings.Contains(s, "close agent "+live+"? y/n") })
	tm.keys("y")
	tm.waitScreen("the live agent dead", func(s string) bool {
		return strings.Contains(row(s, live), "dead") && strings.Contains(s, "0 live")
	})
	var st verbs.AgentStatus
	e.okJSON(&st, "status", live)
	if st.Status != "dead" {
		t.Fatalf("after x y, agent_status says %q", st.Status)
	}

	// The daemon goes away: the monitor says so and waits, without
	// starting one; back, it reads the list again, and a new agent shows.
	e.ok("daemon", "stop")
	tm.waitScreen("the monitor waiting for the daemon", func(s string) bool {
		return strings.Contains(s, "daemon not running — waiting")
	})
	if r := e.kaimon("--no-autostart", "daemon", "status"); r.code == 0 {
		t.Fatalf("the monitor started a daemon: %s", r)
	}
	e.ok("daemon", "start")
	fresh := e.ok("open", e.work, "--id", "fresh1")
	tm.waitScreen("the monitor back with the new agent", func(s string) bool {
		return !strings.Contains(s, "not running") && strings.Contains(row(s, fresh), "idle") &&
			strings.Contains(row(s, live), "dead") && strings.Contains(row(s, dead), "dead")
	})

	// x on a dead agent asks, since a forgotten agent cannot be resumed;
	// y forgets it: its row goes, and so does the daemon's record. Live
	// agents come first: fresh1, then live1, dead1.
	tm.keys("j", "j", "x")
	tm.waitScreen("the forget prompt", func(s string) bool {
		return strings.Contains(s, "forget dead agent "+dead+"? it can't be resumed after: y/n")
	})
	tm.keys("y")
	tm.waitScreen("the dead agent forgotten", func(s string) bool {
		return strings.Contains(s, "forgot "+dead) && row(s, dead) == "" && row(s, live) != ""
	})
	if out := e.ok("list", "--json"); strings.Contains(out, `"`+dead+`"`) {
		t.Fatalf("after x on the dead agent, agent_list still has it: %s", out)
	}

	// q quits: the session, and so the tmux server, ends.
	tm.keys("q")
	waitFor(t, "the monitor to quit", 30*time.Second, func() bool { return tm.cmd("has-session").Run() != nil })
}

// TestMonitorMidTurn starts the monitor while a turn streams: the text the
// turn streamed before it came is in the feed, and the rest joins it once.
// Then an agent opened under its eyes shows, after a turn, the model
// agent_status names (claude-sonnet-5), not the alias it was opened with.
func TestMonitorMidTurn(t *testing.T) {
	e := newEnv(t)
	id := e.ok("open", e.work, "--id", "mid1")
	turn := e.ok("send", id, "please hold")
	waitFor(t, "the first half streamed", 30*time.Second, func() bool {
		var o verbs.OutputResult
		e.okJSON(&o, "output", id)
		return !o.Done && o.Text == fakeapi.HoldFirst
	})
	tm := newTmux(t, e.env, e.work, 100, 30, filepath.Join(binDir, "kaimon"), "monitor")
	tm.waitScreen("the half streamed before the monitor", func(s string) bool {
		return strings.Contains(row(s, id), "working") && strings.Contains(s, strings.TrimSpace(fakeapi.HoldFirst))
	})
	e.api.Release()
	s := tm.waitScreen("the turn over, whole", func(s string) bool {
		return strings.Contains(s, fakeapi.HoldFirst+fakeapi.HoldRest) && strings.Contains(s, "✓ turn "+turn)
	})
	if n := strings.Count(s, strings.TrimSpace(fakeapi.HoldFirst)); n != 1 {
		t.Errorf("the first half is on the screen %d times:\n%s", n, s)
	}

	// An agent opened while the monitor runs: after its first turn, its
	// MODEL is what agent_status (and so `kaimon list`) says, the name the
	// agent gave for the alias it was opened with.
	fresh := e.ok("open", e.work, "--id", "fresh1", "--model", "sonnet")
	tm.waitScreen("the new agent's row", func(s string) bool { return strings.Contains(row(s, fresh), "idle") })
	e.ok("run", fresh, "say exactly: hi")
	var st verbs.AgentStatus
	e.okJSON(&st, "status", fresh)
	t.Logf("agent_status model after a turn: %q", st.Model)
	tm.waitScreen("the row's model as agent_status says", func(s string) bool {
		f := strings.Fields(row(s, fresh))
		return len(f) > 2 && f[2] == st.Model
	})
	tm.keys("q")
	waitFor(t, "the monitor to quit", 30*time.Second, func() bool { return tm.cmd("has-session").Run() != nil })
}

// TestMonitorOnce checks `kaimon monitor --once`: the table as plain text
// when piped, and exit 1 with a sentence when no daemon runs.
func TestMonitorOnce(t *testing.T) {
	e := newEnv(t)
	r := e.kaimon("--no-autostart", "monitor", "--once")
	if r.code != 1 || !strings.Contains(r.stderr, "kaimon-agentd is not running") || r.stdout != "" {
		t.Fatalf("monitor --once without a daemon: %s", r)
	}
	if r := e.kaimon("monitor", "--once"); r.code != 1 || !strings.Contains(r.stderr, "does not start it") {
		t.Fatalf("monitor --once started a daemon, or said nothing: %s", r)
	}
	if r := e.kaimon("monitor"); r.code != 1 || !strings.Contains(r.stderr, "needs a terminal") || r.stdout != "" {
		t.Fatalf("monitor, piped: %s", r)
	}
	live := e.ok("open", e.work, "--id", "alive")
	e.ok("run", live, "say exactly: hi")
	dead := e.ok("open", e.work, "--id", "gone")
	e.ok("close", dead)
	out := e.ok("monitor", "--once")
	lines := strings.Split(out, "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "ID") || !strings.Contains(lines[0], "STATUS") {
		t.Fatalf("monitor --once printed:\n%s", out)
	}
	if strings.Contains(out, "\x1b") {
		t.Errorf("monitor --once piped printed escape sequences: %q", out)
	}
	if f := strings.Fields(row(out, live)); len(f) < 5 || f[1] != "idle" || !strings.Contains(f[2], "sonnet") || f[3] != e.work || f[4] != "1" {
		t.Errorf("live row = %q", row(out, live))
	}
	if f := strings.Fields(row(out, dead)); len(f) < 2 || f[1] != "dead" {
		t.Errorf("dead row = %q", row(out, dead))
	}
}

// TestMonitorPermission answers a real agent's question from the monitor:
// opencode asks before it runs bash; the row shows the waiting permission
// and the feed the command that answers it; p then a allows it.
func TestMonitorPermission(t *testing.T) {
	e := newACPEnv(t, "opencode")
	id := e.ok("open", "--model", "acp:opencode:fake/fake-model", "--id", "oc1", e.work)
	tm := newTmux(t, e.env, e.work, 100, 30, filepath.Join(binDir, "kaimon"), "monitor")
	tm.waitScreen("the agent's row", func(s string) bool { return strings.Contains(row(s, id), "idle") })

	turn := e.ok("send", id, `call tool: bash {"command":"echo hi-from-bash","description":"echo"}`)
	tm.waitScreen("the question", func(s string) bool {
		return strings.Contains(row(s, id), "permission") && strings.Contains(s, "? permission asked: ") &&
			strings.Contains(s, "kaimon permit "+id+" ")
	})
	// --once has no bus: it reads the wait from agent_list.
	if once := e.ok("monitor", "--once"); !strings.Contains(row(once, id), "permission") {
		t.Fatalf("monitor --once while a permission is pending:\n%s", once)
	}
	tm.keys("p")
	s := tm.waitScreen("the answer prompt", func(s string) bool { return strings.Contains(s, "a=allow d=deny") })
	t.Logf("the monitor asking:\n%s", s)
	tm.keys("a")
	s = tm.waitScreen("the turn over", func(s string) bool {
		return strings.Contains(row(s, id), "idle") && strings.Contains(s, "allowed by user") &&
			strings.Contains(s, "✓ turn "+turn+" end_turn")
	})
	t.Logf("the monitor answered:\n%s", s)
	if out := e.ok("output", id, "--turn", turn); out != "Tool said: hi-from-bash\n. Done." {
		t.Fatalf("the allowed tool turn's output = %q", out)
	}
	tm.keys("q")
	waitFor(t, "the monitor to quit", 30*time.Second, func() bool { return tm.cmd("has-session").Run() != nil })
}
