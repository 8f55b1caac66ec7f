// Package procstat is what a process's clients need to know of processes
// without supervising any: what the kernel says of one (/proc/<pid>/stat:
// its state, its start time), how one ended, and the variable that ties a
// child's descendants to it. internal/proc, which starts and stops the
// daemon's children, builds on it; the CLI and the daemon's client, which
// only ask whether the daemon still runs and start it untagged, link this
// alone (a test of internal/cli bans internal/proc from the kaimon binary).
package procstat

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// TagEnv is the environment variable internal/proc gives each child it
// starts, with a value unique to that child: its descendants inherit it,
// and it is what still ties them to the child once the child died and
// they were re-parented (to the daemon when it is a subreaper, to init
// otherwise), where the parent chain, the process group and the session
// no longer do (the claude CLI runs each Bash tool in a session of its
// own). A descendant that clears its environment (env -i) is found only
// while the chain through it stands.
const TagEnv = "KAIMON_PROC_TAG"

// WithoutTag is env less any TagEnv: what a process started to outlive
// the one that starts it (the daemon, autostarted by a kaimon that an
// agent's tool runs) must be given, or it is taken for that agent's
// leftover and stopped with it.
func WithoutTag(env []string) []string {
	out := make([]string, 0, len(env)+1)
	for _, kv := range env {
		if !strings.HasPrefix(kv, TagEnv+"=") {
			out = append(out, kv)
		}
	}
	return out
}

// Fields returns the fields of /proc/<pid>/stat after the command name:
// f[0] is field 3 (state), f[1] field 4 (parent), f[2] field 5 (process
// group), f[19] field 22 (start time).
func Fields(pid string) ([]string, error) {
	b, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return nil, err
	}
	// The command name (field 2) is in parentheses and may hold spaces:
	// count fields after its closing parenthesis.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return nil, fmt.Errorf("malformed /proc/%s/stat", pid)
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 20 {
		return nil, fmt.Errorf("short /proc/%s/stat", pid)
	}
	return f, nil
}

// Gone says whether a state of Fields (f[0]) is a process that has
// exited: a zombie not reaped yet, or one dead.
func Gone(state string) bool { return state == "Z" || state == "X" }

// StartTime reads pid's start time from /proc (clock ticks since boot):
// with the pid, it names one process instance, never a stranger that
// reused the pid.
func StartTime(pid int) (uint64, error) {
	f, err := Fields(strconv.Itoa(pid))
	if err != nil {
		return 0, err
	}
	return strconv.ParseUint(f[19], 10, 64)
}

// Running says whether process pid exists and is not a zombie.
func Running(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return false
	}
	f, err := Fields(strconv.Itoa(pid))
	if err != nil {
		return !errors.Is(err, os.ErrNotExist)
	}
	return !Gone(f[0])
}

// ExitDescription says how a process that ended with ps ended, for error
// messages: "exit code N" or "killed by signal N (name)"; "exit code -1"
// when ps is nil (it never ran to an exit status).
func ExitDescription(ps *os.ProcessState) string {
	if ps == nil {
		return "exit code -1"
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return fmt.Sprintf("killed by signal %d (%v)", int(ws.Signal()), ws.Signal())
	}
	return fmt.Sprintf("exit code %d", ps.ExitCode())
}
