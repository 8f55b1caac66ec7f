package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/kaimon/kaimon/internal/agentbin"
	"github.com/kaimon/kaimon/internal/apitype"
	"github.com/kaimon/kaimon/internal/client"
	"github.com/kaimon/kaimon/internal/config"
	"github.com/kaimon/kaimon/internal/procstat"
	"github.com/kaimon/kaimon/internal/verbs"
)

// Check statuses of `kaimon doctor`. Only a FAIL makes it exit 1: a state
// kaimon handles by itself (no daemon yet: the first command starts it) is
// info, and one that limits what works is a warning.
const (
	checkOK   = "ok"
	checkInfo = "info"
	checkWarn = "warn"
	checkFail = "FAIL"
)

// Check is one line of `kaimon doctor`.
type Check struct {
	Check  string `json:"check"`
	Status string `json:"status"` // ok, info, warn or FAIL
	Detail string `json:"detail"`
	Fix    string `json:"fix,omitempty"`
}

// doctorReport is `kaimon doctor --json`.
type doctorReport struct {
	OK     bool    `json:"ok"` // no FAIL
	Checks []Check `json:"checks"`
}

// versionWait bounds an agent program's `--version`: a program that hangs
// instead of answering is itself a finding. gemini-cli's takes 3.2 s of
// CPU here (3.9 s on an idle machine), and more than 10 s on a busy one:
// a slow start is not a hang.
const versionWait = 30 * time.Second

// agentProgram is a program some backend runs, found as that backend finds it.
type agentProgram struct {
	prog    agentbin.Program // its catalogue row (or acp_agents entry)
	name    string           // on PATH
	env     string           // the variable that names it instead ("" for a configured agent)
	cfgKey  string           // the config file's key that names it (the daemon's agents get it as env)
	cfg     string           // that key's value, "" when unset
	cfgFile string           // the config file
	install string
	model   string // a model string that uses it
	// local is the pinned program in the kaimon checkout this kaimon was
	// built in (agentbin.Program.InCheckout), "" when there is none: what
	// scripts/demo.sh installs, and no PATH names.
	local string
}

// agentPrograms lists the programs of every backend, as agentbin's table
// has them: the claude CLI, the Codex CLI, then the ACP agents, each with the config key
// that config.ProgramBins maps onto its variable; then the config file's
// acp_agents (one with a built-in name replaces that agent's row, as it
// replaces its command).
func agentPrograms(cfg config.Config, cfgFile string) []agentProgram {
	program := func(p agentbin.Program, model string) agentProgram {
		b, _ := cfg.ProgramBin(p.Env)
		ap := agentProgram{prog: p, name: p.Bin, env: p.Env, cfgKey: b.Key, cfg: b.Value, cfgFile: cfgFile, install: p.Install, model: model}
		if root := checkoutRoot(); root != "" && isExecutable(p.InCheckout(root)) {
			ap.local = p.InCheckout(root)
		}
		return ap
	}
	configured := map[string]agentbin.Program{}
	var extra []agentbin.Program
	for _, p := range cfg.ACPAgents.Programs() {
		configured[p.Name] = p
		if _, builtin := agentbin.ACP[p.Name]; !builtin {
			extra = append(extra, p)
		}
	}
	fromConfig := func(p agentbin.Program) agentProgram {
		return agentProgram{prog: p, name: p.Bin, cfgKey: p.ConfigKey, cfg: p.Bin, cfgFile: cfgFile, install: p.Install, model: apitype.PrefixACP + p.Name}
	}
	out := []agentProgram{program(agentbin.Claude, verbs.DefaultModel), program(agentbin.Codex, apitype.PrefixCodex)}
	for _, n := range agentbin.ACPNames {
		if p, ok := configured[n]; ok {
			out = append(out, fromConfig(p))
			continue
		}
		out = append(out, program(agentbin.ACP[n], apitype.PrefixACP+n))
	}
	for _, p := range extra {
		out = append(out, fromConfig(p))
	}
	return out
}

func doctorCmd() *cli.Command {
	return &cli.Command{
		Name:  "doctor",
		Usage: "Check what kaimon needs and say how to fix what is wrong (exit 1 on a FAIL)",
		Description: "One line per check, ok, info, warn or FAIL, with a hint to fix it: the agent programs (those kaimon agents lists: " +
			"the claude CLI, the Codex CLI, each built-in ACP agent and the config file's acp_agents; KAIMON_*_BIN honoured) and their versions, the socket dir's owner and mode, the config " +
			"file, kaimon-agentd reachable and its version, its event bus socket, its MCP door, whether it could write every " +
			"agent's event log and record, and whether it runs with another environment than this shell's. A missing agent " +
			"program is a warning (one is enough, and replay:, ollama: and vmlx: models need none). A daemon that is not " +
			"running is information (the first command that needs it starts it), a warning with --no-autostart. " +
			"It never starts the daemon.",
		Flags: []cli.Flag{jsonFlag()},
		Action: func(c *cli.Context) error {
			if err := needArgs(c, 0, "no arguments"); err != nil {
				return err
			}
			rep := doctorReport{OK: true, Checks: doctor(c.Context, c.Bool("no-autostart"))}
			for _, ch := range rep.Checks {
				if ch.Status == checkFail {
					rep.OK = false
				}
			}
			if err := emit(c, rep, func(w io.Writer) {
				tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
				for _, ch := range rep.Checks {
					line := ch.Detail
					if ch.Fix != "" {
						line += " — " + ch.Fix
					}
					fmt.Fprintf(tw, "%s\t%s\t%s\n", ch.Status, ch.Check, line)
				}
				tw.Flush()
			}); err != nil {
				return err
			}
			if !rep.OK {
				// Said above, line by line: only the exit code is left.
				return &jsonReported{err: errors.New("kaimon doctor found a problem")}
			}
			return nil
		},
	}
}

// doctor runs every check, in the order a new user meets them; noAutostart
// says the daemon will not be started on demand.
func doctor(ctx context.Context, noAutostart bool) []Check {
	var out []Check
	add := func(name, status, detail, fix string) {
		out = append(out, Check{Check: name, Status: status, Detail: detail, Fix: fix})
	}
	paths, err := config.Resolve()
	if err != nil {
		add("paths", checkFail, err.Error(), "set KAIMON_HOME or HOME")
		return out
	}

	cfg, err := config.Load(paths.ConfigFile)
	switch {
	case err != nil:
		add("config", checkFail, err.Error(), "fix the JSON, or move the file away to use the defaults")
	case fileExists(paths.ConfigFile):
		add("config", checkOK, paths.ConfigFile, "")
	default:
		add("config", checkOK, paths.ConfigFile+" absent: the defaults apply", "")
	}

	found := 0
	programs := agentPrograms(cfg, paths.ConfigFile)
	for i, f := range findPrograms(ctx, programs) {
		if f.status == checkOK {
			found++
		}
		out = append(out, f.check(programs[i].name))
	}
	if found == 0 {
		add("agents", checkWarn, "no agent program found: only models that need none work (replay:, ollama:, vmlx:)",
			"to drive the claude CLI or an ACP agent, install one of the programs above (the claude CLI: "+programs[0].install+")")
	}

	out = append(out, checkSockDir(paths.SockDir))

	cl := &client.Client{Paths: paths, NoAutostart: true}
	st, err := pingOnly(ctx, cl)
	switch {
	case err != nil:
		add("daemon", checkFail, fmt.Sprintf("kaimon-agentd at %s does not answer: %v", paths.Socket(), err),
			"see `kaimon daemon logs`; `kaimon daemon restart` starts it afresh")
		return out
	case st == nil && noAutostart:
		add("daemon", checkWarn, "kaimon-agentd is not running (socket "+paths.Socket()+"), and autostart is off (--no-autostart or KAIMON_NO_AUTOSTART=1)",
			"start it with `kaimon daemon start`; if it fails, see `kaimon daemon logs`")
		return out
	case st == nil:
		add("daemon", checkInfo, "kaimon-agentd is not running (socket "+paths.Socket()+"); the first command that needs it starts it",
			"to start it now: `kaimon daemon start`")
		return out
	}
	me, d := cliBuild(), Build{Version: st.Version, Commit: st.Commit}
	if me.differs(d) {
		add("daemon", checkWarn, fmt.Sprintf("kaimon-agentd pid %d runs %s, this kaimon is %s", st.PID, d, me),
			"run `kaimon daemon restart` to run this version (it closes the live agents)")
	} else {
		add("daemon", checkOK, fmt.Sprintf("kaimon-agentd pid %d, version %s, socket %s", st.PID, d, st.Socket), "")
	}

	if fi, err := os.Stat(paths.EventsSocket()); err != nil || fi.Mode().Type() != os.ModeSocket {
		add("event bus", checkFail, paths.EventsSocket()+" is not a socket", "`kaimon daemon restart`; see `kaimon daemon logs` for why the bus did not bind")
	} else {
		add("event bus", checkOK, paths.EventsSocket(), "")
	}

	out = append(out, checkDoor(ctx, st))
	out = append(out, checkWrites(ctx, cl, st, paths.CacheDir)...)

	if st.Env == nil {
		add("environment", checkWarn, "kaimon-agentd is too old to report its environment", "`kaimon daemon restart`")
	} else if diff := config.EnvDiff(st.Env, config.EnvFingerprints(os.Environ())); len(diff) > 0 {
		add("environment", checkWarn, "kaimon-agentd was started with a different "+strings.Join(diff, ", ")+" than this shell has; its agents use the daemon's",
			"run `kaimon daemon restart` from this shell to give it this environment (it closes the live agents)")
	} else {
		add("environment", checkOK, "kaimon-agentd runs with this shell's agent programs and model API settings", "")
	}
	return out
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

func isExecutable(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0
}

// checkoutRoot is the kaimon checkout this kaimon runs from (bin/kaimon,
// as scripts/build.sh builds it), "" when it runs from elsewhere: there
// `npm ci` put the pinned agent programs.
func checkoutRoot() string {
	exe, err := os.Executable()
	if err != nil {
		return ""
	}
	return checkoutOf(exe)
}

// checkoutOf is the checkout of the program exe, "" when exe is not in one.
func checkoutOf(exe string) string {
	exe, err := filepath.EvalSymlinks(exe)
	if err != nil {
		return ""
	}
	root := filepath.Dir(filepath.Dir(exe))
	if !fileExists(filepath.Join(root, "package.json")) {
		return ""
	}
	return root
}

// foundProgram is where an agent program was found and what it says of
// itself: doctor's check and kaimon agents' row are both made from it.
type foundProgram struct {
	status  string // checkOK, checkWarn (not found, or no version) or checkFail (named but not there)
	path    string // absolute, "" when not found
	from    string // where the path came from: the variable, the config key, or PATH
	version string // the first line of its --version
	problem string // what is wrong, when status is not ok
	fix     string
}

// findProgram finds the program as its backend does ($env, else the
// config file's value, else PATH) and asks its version.
func findProgram(ctx context.Context, p agentProgram) foundProgram {
	var f foundProgram
	named, fromEnv := "", false
	if p.env != "" {
		named, fromEnv = os.Getenv(p.env), true
	}
	if named == "" && p.cfg != "" {
		named, fromEnv = p.cfg, false
	}
	var path string
	if named != "" {
		var err error
		if path, err = exec.LookPath(named); err != nil && !errors.Is(err, exec.ErrDot) {
			f.status = checkFail
			switch {
			case fromEnv:
				f.problem = fmt.Sprintf("%s=%s (from the environment) is not an executable", p.env, named)
				f.fix = "point " + p.env + " at the program, or unset it to use " + p.name + " on PATH"
				if p.cfg != "" {
					f.fix += " (or the config file's " + p.cfgKey + ", " + p.cfg + ")"
				}
			case p.prog.Configured:
				f.problem = fmt.Sprintf("%s %q in %s is not an executable", p.cfgKey, named, p.cfgFile)
				f.fix = "point " + p.cfgKey + " in " + p.cfgFile + " at the agent's program (a path, or a name on PATH); then `kaimon daemon restart`"
			default:
				f.problem = fmt.Sprintf("%s %q in %s is not an executable", p.cfgKey, named, p.cfgFile)
				f.fix = "point " + p.cfgKey + " in " + p.cfgFile + " at the program, or remove the key to use " + p.name + " on PATH; then `kaimon daemon restart`"
			}
			return f
		}
		f.from = p.env
		if !fromEnv {
			f.from = p.cfgKey
		}
	} else {
		var err error
		if path, err = exec.LookPath(p.name); err != nil && !errors.Is(err, exec.ErrDot) {
			f.status, f.problem = checkWarn, "not found on PATH (needed only for --model "+p.model+")"
			f.fix = "install it with `" + p.install + "`, or set " + p.env
			if p.local != "" {
				// The pinned one is here already (scripts/demo.sh put
				// it there): the agents need only be pointed at it.
				has, pin := npmPackageVersion(p.local), p.prog.Package+"@"+p.prog.Tested
				switch has {
				case pin:
					has = "the pinned " + pin
				case "":
					has = p.prog.Package + " (kaimon tests " + p.prog.Tested + ")"
				default:
					has += " (kaimon tests " + p.prog.Tested + ": `npm ci` there installs it)"
				}
				f.problem += "; this kaimon checkout has " + has + " at " + p.local
				f.fix = "to use it: `export " + p.env + "=" + p.local + "`"
				if p.cfgKey != "" {
					f.fix += " (or set " + p.cfgKey + " in " + p.cfgFile + ")"
				}
				f.fix += ", then `kaimon daemon restart` if kaimon-agentd runs"
			}
			return f
		}
		f.from = "PATH"
	}
	if abs, err := filepath.Abs(path); err == nil {
		path = abs
	}
	f.path = path
	v, err := "", error(nil)
	if p.prog.NoVersionFlag {
		if v = npmPackageVersion(path); v == "" {
			v = "version unknown (it has no --version, and no npm package)"
		}
	} else {
		v, err = programVersion(ctx, path)
	}
	if err != nil {
		f.status, f.problem = checkWarn, fmt.Sprintf("%s: `--version` failed: %v", path, err)
		f.fix = "run `" + path + " --version` to see why"
		if p.install != "" {
			f.fix += "; reinstall with `" + p.install + "`"
		}
		return f
	}
	f.status, f.version = checkOK, v
	return f
}

// checkAgent is doctor's line for one program.
func checkAgent(ctx context.Context, p agentProgram) Check { return findProgram(ctx, p).check(p.name) }

// check is doctor's line for the program called name.
func (f foundProgram) check(name string) Check {
	ch := Check{Check: name, Status: f.status, Detail: f.problem, Fix: f.fix}
	if f.status == checkOK {
		ch.Detail = f.version + " (" + f.path + ")"
	}
	return ch
}

// findPrograms runs findProgram on each program at once: each --version
// is a program's start (gemini-cli's takes seconds), and they are
// independent.
func findPrograms(ctx context.Context, ps []agentProgram) []foundProgram {
	out := make([]foundProgram, len(ps))
	var wg sync.WaitGroup
	for i, p := range ps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[i] = findProgram(ctx, p)
		}()
	}
	wg.Wait()
	return out
}

// programVersion runs `path --version` in a process group of its own,
// killed with its group when it overstays versionWait, and returns the first
// line it printed; for a program that prints none (claude-agent-acp serves
// ACP and knows no --version), the version of the npm package it belongs to.
// It starts the program with os/exec, not internal/proc, whose supervision
// (the daemon's exit waiter and subreaper) the kaimon binary does not link:
// a process group, signalled whole, is all a short-lived probe needs.
func programVersion(ctx context.Context, path string) (string, error) {
	var buf bytes.Buffer
	cmd := exec.Command(path, "--version")
	cmd.Stdout, cmd.Stderr = &buf, &buf
	// Bounded even if something the program left holds our pipe.
	cmd.WaitDelay = time.Second
	// Its own group, and SIGTERM should kaimon die meanwhile, as
	// internal/proc starts the daemon's children.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	if err := cmd.Start(); err != nil {
		return "", err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	// stop ends the group gently, then hard after a second, and waits
	// for the program's exit.
	stop := func() {
		pgid := cmd.Process.Pid
		_ = syscall.Kill(-pgid, syscall.SIGTERM)
		t := time.NewTimer(time.Second)
		defer t.Stop()
		select {
		case <-done:
			_ = syscall.Kill(-pgid, syscall.SIGKILL) // what it left in its group
		case <-t.C:
			_ = syscall.Kill(-pgid, syscall.SIGKILL)
			<-done
		}
	}
	timer := time.NewTimer(versionWait)
	defer timer.Stop()
	var err error
	select {
	case err = <-done:
	case <-timer.C:
		stop()
		return "", fmt.Errorf("no answer within %s (stopped)", versionWait)
	case <-ctx.Done():
		stop()
		return "", ctx.Err()
	}
	if err != nil && !errors.Is(err, exec.ErrWaitDelay) {
		return "", fmt.Errorf("%s: %s", procstat.ExitDescription(cmd.ProcessState), firstLine(buf.String()))
	}
	if v := firstLine(buf.String()); v != "" {
		return v, nil
	}
	if v := npmPackageVersion(path); v != "" {
		return v, nil
	}
	return "version unknown (it printed none)", nil
}

func firstLine(s string) string {
	sc := bufio.NewScanner(strings.NewReader(s))
	for sc.Scan() {
		if l := strings.TrimSpace(sc.Text()); l != "" {
			return l
		}
	}
	return ""
}

// npmPackageVersion is "name@version" of the package.json nearest above
// the program's real file (npm links bin entries into the package).
func npmPackageVersion(path string) string {
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		return ""
	}
	for dir, i := filepath.Dir(real), 0; i < 4; dir, i = filepath.Dir(dir), i+1 {
		b, err := os.ReadFile(filepath.Join(dir, "package.json"))
		if err != nil {
			continue
		}
		var pkg struct{ Name, Version string }
		if json.Unmarshal(b, &pkg) == nil && pkg.Version != "" {
			return pkg.Name + "@" + pkg.Version
		}
	}
	return ""
}

// checkSockDir wants the socket dir owned by this user with mode 0700: the
// daemon creates it so; anything else lets others reach the sockets or
// keeps the daemon from binding.
func checkSockDir(dir string) Check {
	ch := Check{Check: "socket dir"}
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		ch.Status, ch.Detail = checkOK, dir+" not made yet (kaimon-agentd makes it, mode 0700)"
		return ch
	case err != nil:
		ch.Status, ch.Detail, ch.Fix = checkFail, err.Error(), "check the permissions of its parent"
		return ch
	case !fi.IsDir():
		ch.Status, ch.Detail, ch.Fix = checkFail, dir+" is not a directory", "remove it, or set KAIMON_SOCK_DIR elsewhere"
		return ch
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Getuid() {
		ch.Status, ch.Detail = checkFail, fmt.Sprintf("%s belongs to uid %d, not to you (uid %d)", dir, st.Uid, os.Getuid())
		ch.Fix = "remove it (kaimon-agentd makes its own), or set KAIMON_SOCK_DIR to a directory of yours"
		return ch
	}
	if perm := fi.Mode().Perm(); perm != 0o700 {
		ch.Status, ch.Detail, ch.Fix = checkFail, fmt.Sprintf("%s has mode %04o, not 0700", dir, perm), "chmod 700 "+dir
		return ch
	}
	ch.Status, ch.Detail = checkOK, dir+" (yours, 0700)"
	return ch
}

// checkWrites says whether the daemon could write its agents' files: an
// event log write that failed stopped its agent; a record write that
// failed leaves the record behind the agent (its status says so), so that
// a restarted daemon would know the agent as its last written record has
// it. A record still behind is a FAIL; faults since made good are
// warnings.
func checkWrites(ctx context.Context, cl *client.Client, st *apitype.DaemonStatus, cacheDir string) []Check {
	var out []Check
	if f := st.LogFaults; f != nil {
		ch := Check{Check: "event logs", Status: checkOK, Detail: "every event log write succeeded since kaimon-agentd started"}
		if f.Count > 0 {
			ch.Status = checkWarn
			ch.Detail = fmt.Sprintf("%d event log writes failed since kaimon-agentd started, each stopping its agent; last: agent %s at %s: %s",
				f.Count, f.LastAgent, f.LastAt, f.LastError)
			ch.Fix = "make room in " + cacheDir + "; resume a stopped agent with `kaimon open --id ID --resume`"
		}
		out = append(out, ch)
	}
	f := st.RecordFaults
	if f == nil {
		return out // a daemon too old to count them
	}
	ch := Check{Check: "records", Status: checkOK, Detail: "every agent's record is written"}
	var behind []string
	if f.Count > 0 {
		l, err := cl.List(ctx, &verbs.ListArgs{})
		if err != nil {
			ch.Status, ch.Detail = checkWarn, fmt.Sprintf("%d record writes failed; listing the agents to see which are behind: %v", f.Count, err)
			return append(out, ch)
		}
		for _, a := range l.Agents {
			if a.RecordError != "" {
				behind = append(behind, a.AgentID+" ("+a.RecordError+")")
			}
		}
	}
	switch {
	case len(behind) > 0:
		ch.Status = checkFail
		ch.Detail = fmt.Sprintf("the records of %d agents are behind: %s; a restarted kaimon-agentd would know them as their last written records have them",
			len(behind), strings.Join(behind, "; "))
		ch.Fix = "make room in " + cacheDir + " (or fix what is in the way); a record is written again at its agent's next change"
	case f.Count > 0:
		ch.Status = checkWarn
		ch.Detail = fmt.Sprintf("%d record writes failed since kaimon-agentd started, all written since; last: agent %s at %s: %s",
			f.Count, f.LastAgent, f.LastAt, f.LastError)
	}
	return append(out, ch)
}

// checkDoor connects to the MCP door the daemon reports.
func checkDoor(ctx context.Context, st *apitype.DaemonStatus) Check {
	ch := Check{Check: "mcp door"}
	if st.Door == "" {
		ch.Status, ch.Detail = checkWarn, "kaimon-agentd runs without its MCP door: its agents cannot call back into kaimon"
		ch.Fix = "see `kaimon daemon logs` for why it did not open; `kaimon daemon restart`"
		return ch
	}
	u, err := url.Parse(st.Door)
	if err != nil || u.Host == "" {
		ch.Status, ch.Detail, ch.Fix = checkFail, fmt.Sprintf("kaimon-agentd reports a door %q that is not a URL", st.Door), "`kaimon daemon restart`"
		return ch
	}
	d := net.Dialer{Timeout: 2 * time.Second}
	conn, err := d.DialContext(ctx, "tcp", u.Host)
	if err != nil {
		ch.Status, ch.Detail, ch.Fix = checkFail, fmt.Sprintf("%s does not accept connections: %v", st.Door, err), "`kaimon daemon restart`; see `kaimon daemon logs`"
		return ch
	}
	conn.Close()
	ch.Status, ch.Detail = checkOK, st.Door
	return ch
}
