package procstat

import (
	"os/exec"
	"slices"
	"testing"
)

// How a process ended reads the same for an exit and for a signal as the
// daemon's errors and doctor's findings quote it.
func TestExitDescription(t *testing.T) {
	for script, want := range map[string]string{
		"exit 3":     "exit code 3",
		"kill -9 $$": "killed by signal 9 (killed)",
	} {
		cmd := exec.Command("sh", "-c", script)
		_ = cmd.Run()
		if got := ExitDescription(cmd.ProcessState); got != want {
			t.Errorf("sh -c %q: %q; want %q", script, got, want)
		}
	}
	if got := ExitDescription(nil); got != "exit code -1" {
		t.Errorf("no exit status: %q", got)
	}
}

// WithoutTag drops every tag and keeps the rest in order.
func TestWithoutTag(t *testing.T) {
	env := []string{"A=1", TagEnv + "=x", "B=2", TagEnv + "=y", TagEnv + "X=3"}
	if got, want := WithoutTag(env), []string{"A=1", "B=2", TagEnv + "X=3"}; !slices.Equal(got, want) {
		t.Errorf("WithoutTag(%q) = %q; want %q", env, got, want)
	}
}
