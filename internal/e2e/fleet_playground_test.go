package e2e

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
)

// TestFleetPlayground is not a check but a place to try the fleet by hand
// (scripts/fleet-playground.sh runs it): with FLEET_PLAYGROUND_ENV=FILE
// it makes the run's two hosts and a local installation that knows them
// as h1 and h2, writes to FILE the shell lines that put a shell in that
// installation (source it), and holds everything until FILE is removed
// (or an hour has passed); then it tears it all down as a test does,
// failing on anything left behind. Without the variable it skips.
func TestFleetPlayground(t *testing.T) {
	file := os.Getenv("FLEET_PLAYGROUND_ENV")
	if file == "" {
		t.Skip("FLEET_PLAYGROUND_ENV=FILE is not set: this is the hand playground of scripts/fleet-playground.sh")
	}
	fe := newFleetEnv(t)
	var b strings.Builder
	b.WriteString("# kaimon's fleet playground: hosts h1 and h2 (each an sshd in a network namespace), and local.\n")
	for _, kv := range fe.env {
		k, v, _ := strings.Cut(kv, "=")
		if k == "PATH" {
			v = binDir + ":" + v
		}
		fmt.Fprintf(&b, "export %s=%s\n", k, shellQuote(v))
	}
	fmt.Fprintf(&b, "export PLAY_MODEL=%s\n", shellQuote(fe.replayModel()))
	for _, h := range fe.f.hosts {
		fmt.Fprintf(&b, "export PLAY_%s=%s # a project directory on %s\n", strings.ToUpper(h.name), shellQuote(fe.r.work[h.name]), h.name)
	}
	fmt.Fprintf(&b, "cd %s\n", shellQuote(fe.work))
	if err := os.WriteFile(file, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Logf("playground ready: source %s; remove it to end", file)
	for deadline := time.Now().Add(time.Hour); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if _, err := os.Stat(file); err != nil {
			return
		}
	}
	_ = os.Remove(file)
}

func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
