// Package pyzmq finds a Python with libzmq bindings (Debian's python3-zmq),
// the independent subscriber the bus tests read the bus with, and the
// subscriber script they run with it.
package pyzmq

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/kaimon/kaimon/internal/testutil/agents"
)

// Python is Debian's python3, the one python3-zmq installs for: a python3
// earlier on PATH (pyenv, say) usually lacks zmq.
const Python = "/usr/bin/python3"

// Need returns the python to run, or skips the test when it cannot import
// zmq; in CI (CI set), where .ci/run installs python3-zmq, that fails the
// test instead.
func Need(t testing.TB) string {
	t.Helper()
	out, err := exec.Command(Python, "-c", "import zmq; print(zmq.zmq_version())").CombinedOutput()
	if err == nil {
		return Python
	}
	msg := "libzmq's Python bindings are missing (" + Python + ": " + string(out) + "): apt-get install python3-zmq"
	if os.Getenv("CI") != "" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

// Script is the subscriber script, internal/e2e/testdata/sub.py.
func Script() string {
	return filepath.Join(agents.RepoRoot(), "internal", "e2e", "testdata", "sub.py")
}
