package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kaimon/kaimon/internal/testutil/agents"
	"github.com/kaimon/kaimon/internal/testutil/fakeapi"
)

// TestFleetPlayground is not a check but a place to try the fleet by hand
// (scripts/fleet-playground.sh runs it): with FLEET_PLAYGROUND_ENV=FILE
// it makes the run's two hosts and a local installation that knows them
// as h1 and h2, writes to FILE the shell lines that put a shell in that
// installation and print its banner (source it), and holds everything
// until FILE is removed
// (or an hour has passed); then it tears it all down as a test does,
// failing on anything left behind. Without the variable it skips.
func TestFleetPlayground(t *testing.T) {
	file := os.Getenv("FLEET_PLAYGROUND_ENV")
	if file == "" {
		t.Skip("FLEET_PLAYGROUND_ENV=FILE is not set: this is the hand playground of scripts/fleet-playground.sh")
	}
	fe := newFleetEnv(t)
	// The hosts share this machine's files, each as its own user: one
	// directory all of them may write is at the same path on every host,
	// for open --host any, which may place the agent on any of them.
	anyDir := filepath.Join(fe.f.dir, "any")
	if err := os.Mkdir(anyDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(anyDir, 0o1777); err != nil { // as /tmp: each removes only its own
		t.Fatal(err)
	}
	var b strings.Builder
	b.WriteString("# kaimon's fleet playground: hosts h1 and h2 (each an sshd in a network namespace), and local.\n")
	for _, kv := range fe.env {
		k, v, _ := strings.Cut(kv, "=")
		if k == "PATH" {
			v = binDir + ":" + v
		}
		fmt.Fprintf(&b, "export %s=%s\n", k, shellQuote(v))
	}
	vars := [][3]string{{"PLAY_MODEL", fe.replayModel(), "a replay agent (examples/hello.events.jsonl), on any host: open --host h1 --model \"$PLAY_MODEL\" \"$PLAY_H1\""}}
	for _, h := range fe.f.hosts {
		vars = append(vars, [3]string{"PLAY_" + strings.ToUpper(h.name), fe.r.work[h.name], "a project directory on " + h.name})
	}
	vars = append(vars, [3]string{"PLAY_ANY", anyDir, "a directory at the same path on every host, local too: --host any open --model \"$PLAY_MODEL\" \"$PLAY_ANY\""})
	for _, v := range vars {
		fmt.Fprintf(&b, "export %s=%s\n", v[0], shellQuote(v[1]))
	}
	fmt.Fprintf(&b, "cd %s\n", shellQuote(fe.work))
	// The banner, printed as the file is sourced.
	b.WriteString("cat >&2 <<'END_OF_BANNER'\n")
	b.WriteString("== kaimon fleet playground: hosts h1 and h2 (each an sshd in a network namespace, its own user), and local\n")
	for _, v := range vars {
		fmt.Fprintf(&b, "   $%-10s  %s\n", v[0], v[2])
	}
	b.WriteString("== a claude agent (--model sonnet) on any host talks to a fake model API; it answers a turn by the first of these phrases in it:\n")
	if err := fakeapi.WritePhrases(&b, "   "); err != nil {
		t.Fatal(err)
	}
	b.WriteString("== exit the shell to tear it all down\nEND_OF_BANNER\n")
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

// TestFleetPlaygroundScript: scripts/fleet-playground.sh as a person runs
// it, with no ~/.bashrc: its shell has the playground's environment
// (kaimon on PATH, the PLAY_ variables; without a .bashrc it once had
// none), the banner names $PLAY_ANY and the fake's phrases, and $PLAY_ANY
// is a directory every host has: three opens with --host any land on
// local, h1 and h2, each in it. The playground's own test tears its hosts
// down and fails on anything left; the script says so when it does.
func TestFleetPlaygroundScript(t *testing.T) {
	if os.Getenv("FLEET_PLAYGROUND_ENV") != "" {
		t.Skip("this is the test that starts the playground, not the playground")
	}
	if why := fleetMissing(); why != "" {
		if os.Getenv("CI") != "" {
			t.Fatal("no fleet test hosts: " + why)
		}
		t.Skip("no fleet test hosts: " + why)
	}
	needClaude(t)
	// The script runs scripts/setup-test.sh, which must not run npm ci
	// from a test (it replaces node_modules).
	nm := filepath.Join(agents.RepoRoot(), "node_modules")
	lock, err1 := os.Stat(filepath.Join(agents.RepoRoot(), "package-lock.json"))
	installed, err2 := os.Stat(filepath.Join(nm, ".package-lock.json"))
	if fi, err := os.Lstat(nm); err != nil || fi.Mode()&os.ModeSymlink == 0 && (err1 != nil || err2 != nil || lock.ModTime().After(installed.ModTime())) {
		t.Skip("node_modules is not up to date: scripts/setup-test.sh would run npm ci")
	}
	home := t.TempDir() // no .bashrc
	before, _ := filepath.Glob(filepath.Join(os.TempDir(), "kaimon-fleet-playground.*"))
	r := runScriptIn(t, scriptEnv(t, home), `command -v kaimon
for i in 1 2 3; do id=$(kaimon --host any open --model "$PLAY_MODEL" "$PLAY_ANY" </dev/null) && echo "opened $id" && ids="$ids $id"; done
for i in 1 2 3; do id=$(kaimon --host any open "$PLAY_ANY" </dev/null) && waiters="$waiters $id" && kaimon send "$id" "run command: touch /tmp/inbox-$i-$$" </dev/null >/dev/null; done
for n in $(seq 120); do [ "$(kaimon list --waiting --all-hosts </dev/null | grep -c 'kaimon permit')" = 3 ] && break; sleep 0.5; done
echo "--- inbox"
kaimon list --waiting --all-hosts </dev/null
echo "--- end of inbox"
for id in $waiters; do kaimon permit "$id" deny </dev/null; done
for id in $ids $waiters; do kaimon close "$id" </dev/null; done
exit
`, 15*time.Minute, "fleet-playground.sh")
	if r.code != 0 || strings.Contains(r.stderr, "the tear-down failed") {
		t.Fatalf("fleet-playground.sh: %s", r)
	}
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if len(lines) == 0 || !strings.HasSuffix(lines[0], "/kaimon") {
		t.Fatalf("kaimon is not on the playground shell's PATH:\n%s", r)
	}
	var hosts []string
	for _, l := range lines[1:] {
		if id, ok := strings.CutPrefix(l, "opened "); ok {
			h, _, _ := strings.Cut(id, "/")
			hosts = append(hosts, h)
		}
	}
	slices.Sort(hosts)
	if !slices.Equal(hosts, []string{"h1", "h2", "local"}) {
		t.Errorf("three opens with --host any in $PLAY_ANY landed on %v, want one on each host:\n%s", hosts, r)
	}
	// The inbox across the hosts: the three claude agents, each asking to
	// touch a file outside $PLAY_ANY, each with its permit line.
	_, inbox, _ := strings.Cut(r.stdout, "--- inbox\n")
	inbox, _, _ = strings.Cut(inbox, "--- end of inbox")
	t.Logf("kaimon list --waiting --all-hosts in the fleet playground:\n%s", inbox)
	if rows := strings.Split(strings.TrimSpace(inbox), "\n"); len(rows) != 4 || !strings.HasPrefix(rows[0], "AGENT ") ||
		strings.Count(inbox, "Bash: touch /tmp/inbox-") != 3 || strings.Count(inbox, "kaimon permit ") != 3 {
		t.Errorf("the inbox is not the three waiting agents:\n%s", r)
	}
	if strings.Count(r.stdout, "denied") != 3 {
		t.Errorf("permit ID deny did not answer each agent's one request:\n%s", r)
	}
	for _, w := range []string{"$PLAY_ANY", "same path on every host", "   please be slow "} {
		if !strings.Contains(r.stderr, w) {
			t.Errorf("the banner does not say %q:\n%s", w, r.stderr)
		}
	}
	after, _ := filepath.Glob(filepath.Join(os.TempDir(), "kaimon-fleet-playground.*"))
	for _, d := range after {
		if !slices.Contains(before, d) {
			t.Errorf("fleet-playground.sh left %s behind", d)
		}
	}
}
