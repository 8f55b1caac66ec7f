package main

import (
	"bytes"
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kaimon/kaimon/internal/manpage"
)

// The real binary: --help prints the usage and exits 0, as -h does; an
// argument it does not take is one line and a pointer, exit 2. Neither
// starts a daemon.
func TestHelpAndUsage(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "kaimon-agentd")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	run := func(arg string) (int, string, string) {
		cmd := exec.Command(bin, arg)
		cmd.Env = []string{"KAIMON_HOME=" + t.TempDir()} // were it to run, it would run there
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			t.Fatal(err)
		}
		return cmd.ProcessState.ExitCode(), out.String(), errb.String()
	}
	// Every spelling of the one table works, and --help shows it.
	for _, o := range manpage.AgentdOptions {
		for _, arg := range o.Args {
			code, out, errs := run(arg)
			switch o.Action {
			case manpage.AgentdHelp:
				if code != 0 || out != manpage.AgentdUsage() || errs != "" {
					t.Errorf("kaimon-agentd %s: exit %d, stderr %q, stdout:\n%s", arg, code, errs, out)
				}
			case manpage.AgentdVersion:
				if code != 0 || !strings.HasPrefix(out, "kaimon-agentd ") || strings.Count(out, "\n") != 1 || errs != "" {
					t.Errorf("kaimon-agentd %s: exit %d, stderr %q, stdout %q", arg, code, errs, out)
				}
			default:
				t.Errorf("kaimon-agentd %s: no test for action %d", arg, o.Action)
			}
			if !strings.Contains(manpage.AgentdUsage(), arg) {
				t.Errorf("kaimon-agentd --help does not mention %s", arg)
			}
		}
	}
	want := "kaimon-agentd: unknown argument \"--bogus\": it takes none but --help and --version\nRun 'kaimon-agentd --help' for usage.\n"
	if code, out, errs := run("--bogus"); code != 2 || out != "" || errs != want {
		t.Errorf("kaimon-agentd --bogus: exit %d, stdout %q, stderr %q; want exit 2 and %q", code, out, errs, want)
	}
}
