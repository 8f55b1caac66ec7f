package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/kaimon/kaimon/internal/client"
	"github.com/kaimon/kaimon/internal/config"
	"github.com/kaimon/kaimon/internal/version"
)

// defaultLogLines is how many lines `kaimon daemon logs` shows.
const defaultLogLines = 50

func daemonLogsCmd() *cli.Command {
	return &cli.Command{
		Name:  "logs",
		Usage: "Print kaimon-agentd's own log (the last lines; -f follows it)",
		Description: "kaimon-agentd logs to its stderr, which kaimon sends to <cache>/agentd.log when it starts the daemon " +
			"(and the unit of `kaimon daemon install-unit` sends there too). This prints its last lines, and with -f follows it " +
			"until Ctrl-C. It needs no running daemon.\n\n   kaimon daemon logs -n 200\n   kaimon daemon logs -f",
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "follow", Aliases: []string{"f"}, Usage: "keep printing lines as the daemon writes them, until Ctrl-C"},
			&cli.IntFlag{Name: "lines", Aliases: []string{"n"}, Usage: "how many of the last lines to print (0: none, with -f only what comes)", Value: defaultLogLines},
		},
		Action: func(c *cli.Context) error {
			if err := needArgs(c, 0, "no arguments"); err != nil {
				return err
			}
			n := c.Int("lines")
			if n < 0 {
				return usagef("--lines must be 0 or more")
			}
			paths, err := config.Resolve()
			if err != nil {
				return err
			}
			path := paths.DaemonLog()
			f, err := os.Open(path)
			if errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("no daemon log yet at %s: kaimon-agentd writes it once kaimon starts it (`kaimon daemon start`, or any verb); "+
					"a kaimon-agentd run by a systemd unit other than install-unit's logs to the journal: journalctl --user -u kaimon-agentd", path)
			}
			if err != nil {
				return err
			}
			end, err := writeLastLines(c.App.Writer, f, n)
			if err != nil {
				f.Close()
				return fmt.Errorf("reading %s: %w", path, err)
			}
			if !c.Bool("follow") {
				return f.Close()
			}
			return followFile(c.Context, c.App.Writer, path, f, end)
		},
	}
}

// writeLastLines writes the last n lines of f (whose end it reads
// backwards, so that a long log costs only its tail) and returns the offset
// it read up to.
func writeLastLines(w io.Writer, f *os.File, n int) (int64, error) {
	st, err := f.Stat()
	if err != nil {
		return 0, err
	}
	size := st.Size()
	if n == 0 || size == 0 {
		return size, nil
	}
	const chunk = 64 << 10
	var tail []byte
	start := size
	for start > 0 {
		step := min(int64(chunk), start)
		start -= step
		buf := make([]byte, step)
		if _, err := f.ReadAt(buf, start); err != nil && !errors.Is(err, io.EOF) {
			return 0, err
		}
		tail = append(buf, tail...)
		// n lines need n newlines before them, the last line's own aside.
		if bytes.Count(bytes.TrimSuffix(tail, []byte("\n")), []byte("\n")) >= n {
			break
		}
	}
	// cut is the newline before the first line to print (-1: print all).
	body := bytes.TrimSuffix(tail, []byte("\n"))
	cut := len(body)
	for i := 0; i < n && cut >= 0; i++ {
		cut = bytes.LastIndexByte(body[:cut], '\n')
	}
	out := tail[cut+1:]
	_, err = w.Write(out)
	return size, err
}

// followPoll is how often -f looks for new lines. It polls rather than use
// inotify (fsnotify): one stat per quarter second is nothing, and it sees a
// log replaced or truncated (by a user's logrotate) without the watch
// juggling that an inotify watch on a renamed file needs.
const followPoll = 250 * time.Millisecond

// followFile copies what is appended to path from offset until ctx ends,
// starting over when the file is truncated or replaced. It owns f: it
// closes it, and every file it opens after it, before it returns.
func followFile(ctx context.Context, w io.Writer, path string, f *os.File, offset int64) error {
	tick := time.NewTicker(followPoll)
	defer tick.Stop()
	defer func() { f.Close() }() // the file followed last, not the first
	for {
		if st, err := os.Stat(path); err == nil {
			cur, _ := f.Stat()
			if cur != nil && !os.SameFile(st, cur) { // replaced (rotated)
				if nf, err := os.Open(path); err == nil {
					// What the daemon wrote to the old file after the last
					// poll and before the rotation is there alone: print it
					// before the new file's lines.
					_, err := copyFrom(w, f, offset)
					f.Close()
					f, offset = nf, 0
					if err != nil {
						return err
					}
				}
			}
		}
		var err error
		if offset, err = copyFrom(w, f, offset); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return nil // Ctrl-C ends following; it is not an error
		case <-tick.C:
		}
	}
}

// copyFrom copies f from offset to its end, from its start when it has
// been truncated below offset, and returns the offset it read up to.
func copyFrom(w io.Writer, f *os.File, offset int64) (int64, error) {
	if st, err := f.Stat(); err == nil && st.Size() < offset {
		offset = 0 // truncated
	}
	n, err := io.Copy(w, io.NewSectionReader(f, offset, 1<<62))
	return offset + n, err
}

// unitName is the systemd user unit install-unit writes.
const unitName = "kaimon-agentd.service"

// unitEnvKept says whether the unit carries the variable: PATH (the daemon
// finds the agent programs on it), KAIMON_* (its paths and programs must be
// the ones this shell's kaimon uses) and ANTHROPIC_* (the model API the
// claude CLI reads). Everything config.Relevant names is among them.
func unitEnvKept(name string) bool {
	return name == "PATH" || strings.HasPrefix(name, "KAIMON_") || strings.HasPrefix(name, "ANTHROPIC_") || config.Relevant(name)
}

func daemonInstallUnitCmd() *cli.Command {
	return &cli.Command{
		Name:  "install-unit",
		Usage: "Write a systemd user unit that runs kaimon-agentd (prints the systemctl command to enable it)",
		Description: "Writes ~/.config/systemd/user/" + unitName + " (under $XDG_CONFIG_HOME when set), which runs the " +
			"kaimon-agentd beside this kaimon (else the one on PATH) in the foreground, logging to the file `kaimon daemon logs` " +
			"reads. It does not run systemctl: it prints the command that enables the service.\n\n" +
			"The daemon runs its agents with its own environment, not the caller's, and a systemd user service starts with " +
			"almost none. So the unit reads an environment file written beside the config file (agentd.env, mode 0600) holding " +
			"this shell's PATH and every KAIMON_* and ANTHROPIC_* variable set now: values stay out of the unit file, which " +
			"`systemctl --user show` prints to anyone who asks. Run install-unit again after changing them (then " +
			"`systemctl --user restart kaimon-agentd`), or add others with `systemctl --user edit kaimon-agentd`:\n\n" +
			"   [Service]\n   Environment=OPENAI_API_KEY=…\n\n" +
			"Once the service runs, restart or stop it with systemctl --user: `kaimon daemon restart` would start a daemon " +
			"outside the service.",
		Action: func(c *cli.Context) error {
			if err := needArgs(c, 0, "no arguments"); err != nil {
				return err
			}
			paths, err := config.Resolve()
			if err != nil {
				return err
			}
			bin, err := (&client.Client{}).DaemonPath()
			if err != nil {
				return err
			}
			if bin, err = filepath.Abs(bin); err != nil {
				return err
			}
			if st, err := os.Stat(bin); err != nil || st.IsDir() || st.Mode()&0o111 == 0 {
				return fmt.Errorf("%s is not an executable kaimon-agentd: install kaimon with scripts/install.sh, or set KAIMON_AGENTD_BIN", bin)
			}
			unitDir, err := systemdUserDir()
			if err != nil {
				return err
			}
			envFile := filepath.Join(filepath.Dir(paths.ConfigFile), "agentd.env")
			env, kept := unitEnvironment(os.Environ())
			if err := config.WriteFileAtomic(envFile, env, 0o600); err != nil {
				return err
			}
			// The log file's directory must exist before systemd opens it.
			if err := os.MkdirAll(paths.CacheDir, 0o700); err != nil {
				return err
			}
			unit := filepath.Join(unitDir, unitName)
			if err := config.WriteFileAtomic(unit, []byte(unitFile(bin, envFile, paths.DaemonLog())), 0o644); err != nil {
				return err
			}
			w := c.App.Writer
			fmt.Fprintf(w, "wrote %s (ExecStart %s)\n", unit, bin)
			fmt.Fprintf(w, "wrote %s (mode 0600): %s\n", envFile, strings.Join(kept, " "))
			fmt.Fprintf(w, "The service logs to %s (kaimon daemon logs).\n", paths.DaemonLog())
			fmt.Fprintf(w, "Enable it (first stop a daemon kaimon started by itself, with `kaimon daemon stop`):\n")
			fmt.Fprintf(w, "  systemctl --user daemon-reload && systemctl --user enable --now %s\n", strings.TrimSuffix(unitName, ".service"))
			fmt.Fprintf(w, "Then restart it with `systemctl --user restart %s` (kaimon daemon restart would start one outside the service).\n",
				strings.TrimSuffix(unitName, ".service"))
			return nil
		},
	}
}

// systemdUserDir is where systemd looks for a user's own units.
func systemdUserDir() (string, error) {
	if x := os.Getenv("XDG_CONFIG_HOME"); filepath.IsAbs(x) {
		return filepath.Join(x, "systemd", "user"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("cannot find the home directory for the unit (%v): set HOME", err)
	}
	return filepath.Join(home, ".config", "systemd", "user"), nil
}

// unitEnvironment is the environment file's content: the kept variables,
// sorted, each single-quoted (systemd takes single-quoted text literally)
// or, when the value holds a single quote, double-quoted with systemd's
// escapes. It returns the names written.
func unitEnvironment(environ []string) ([]byte, []string) {
	var b bytes.Buffer
	b.WriteString("# kaimon-agentd's environment, written by `kaimon daemon install-unit` from the shell that ran it.\n" +
		"# Run it again to refresh, or edit this file; then: systemctl --user restart kaimon-agentd\n")
	var names []string
	vals := map[string]string{}
	for _, kv := range environ {
		name, val, ok := strings.Cut(kv, "=")
		if !ok || val == "" || !unitEnvKept(name) || strings.ContainsAny(val, "\n\r") {
			continue
		}
		if _, dup := vals[name]; !dup {
			names = append(names, name)
		}
		vals[name] = val
	}
	sort.Strings(names)
	for _, name := range names {
		v := vals[name]
		if !strings.Contains(v, "'") {
			fmt.Fprintf(&b, "%s='%s'\n", name, v)
			continue
		}
		r := strings.NewReplacer(`\`, `\\`, `"`, `\"`, "$", `\$`, "`", "\\`")
		fmt.Fprintf(&b, "%s=\"%s\"\n", name, r.Replace(v))
	}
	return b.Bytes(), names
}

// unitFile is the unit. kaimon-agentd runs in the foreground and never
// forks, so Type=exec; it holds agentd.lock itself (one daemon per socket
// dir) and writes no pid file. On stop, SIGTERM goes to the daemon alone
// (KillMode=mixed): it closes its agents gently and then hard, whole
// process groups, within TimeoutStopSec; systemd's SIGKILL to what is
// left of the cgroup comes only after.
func unitFile(bin, envFile, logFile string) string {
	esc := func(s string) string { return strings.ReplaceAll(s, "%", "%%") } // systemd specifiers
	exec := esc(bin)
	if strings.ContainsAny(exec, " \t\"'\\") {
		exec = `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(exec) + `"`
	}
	out := "StandardOutput=append:" + esc(logFile) + "\nStandardError=inherit\n"
	if strings.ContainsAny(logFile, " \t") {
		out = "# The log path holds a space, which StandardOutput=append: cannot name: see journalctl --user -u kaimon-agentd.\n"
	}
	return fmt.Sprintf(`# Written by kaimon daemon install-unit (kaimon %s). Enable it with
#   systemctl --user daemon-reload && systemctl --user enable --now kaimon-agentd
[Unit]
Description=kaimon-agentd: owner of kaimon's headless coding-agent sessions
Documentation=man:kaimon-agentd(8) man:kaimon(1)

[Service]
Type=exec
ExecStart=%s
EnvironmentFile=-%s
%sKillMode=mixed
TimeoutStopSec=45
Restart=on-failure
RestartSec=2

[Install]
WantedBy=default.target
`, version.String(), exec, esc(envFile), out)
}
