package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// standIns puts an ssh and a kubectl on PATH that record each command
// line they are run with (one line each in ssh.argv, kubectl.argv of the
// returned dir) and fail as the real ones do when the target is not
// there: what kaimon would run, without reaching anything.
func standIns(t *testing.T) (dir string) {
	dir = t.TempDir()
	for name, fail := range map[string]string{
		"ssh":     `echo "ssh: Could not resolve hostname: Name or service not known" >&2; exit 255`,
		"kubectl": `echo 'Error from server (NotFound): pods not found' >&2; exit 1`,
	} {
		script := "#!/bin/sh\nprintf '%s\\n' \"$*\" >>'" + filepath.Join(dir, name+".argv") + "'\n" + fail + "\n"
		if err := os.WriteFile(filepath.Join(dir, name), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// runsOf are the command lines the stand-in name recorded.
func runsOf(t *testing.T, dir, name string) []string {
	b, err := os.ReadFile(filepath.Join(dir, name+".argv"))
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
}

// TestMCPHostIsAName: kaimon mcp with hosts configured takes a host's
// name, never a URL. agent_open with host ssh://attacker@127.0.0.1:1 or
// kube://default/somepod?context=prod is a tool error saying the person
// adds a URL with `kaimon host add`, and neither ssh nor kubectl ever
// runs towards it; the configured hosts are still reached through the
// same stand-ins (so that their silence about the URLs means something).
func TestMCPHostIsAName(t *testing.T) {
	bin := standIns(t)
	local := newEnv(t, "PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	local.ok("host", "add", "h1", "ssh://me@h1.invalid")
	local.ok("host", "add", "k1", "kube://ns/pod1")
	call, _ := startMCP(t, local.env)

	// The configured hosts go through the stand-ins, which fail.
	for _, h := range []string{"h1", "k1"} {
		if text, isErr := call("agent_open", map[string]any{"cwd": local.work, "host": h}); !isErr {
			t.Fatalf("agent_open on host %s, whose ssh or kubectl fails, succeeded: %s", h, text)
		}
	}
	for _, u := range []string{"ssh://attacker@127.0.0.1:1", "kube://default/somepod?context=prod"} {
		text, isErr := call("agent_open", map[string]any{"cwd": local.work, "host": u})
		if !isErr || !strings.Contains(text, "`kaimon host add NAME URL`") || !strings.Contains(text, "h1, k1") {
			t.Errorf("agent_open with host %s: %v %s; want a tool error naming the hosts and how the person adds a URL", u, isErr, text)
		}
		t.Logf("agent_open with host %s: %s", u, text)
	}
	// An open's own transport is its first exchange, done before its
	// call returns; kaimon mcp's following of each host is its own run,
	// of a configured host too.
	ssh, kube := runsOf(t, bin, "ssh"), runsOf(t, bin, "kubectl")
	t.Logf("ssh ran %q; kubectl ran %q", ssh, kube)
	if len(ssh) == 0 || len(kube) == 0 {
		t.Fatalf("the stand-ins did not run for the configured hosts: ssh %q, kubectl %q", ssh, kube)
	}
	for _, r := range ssh {
		if !strings.Contains(r, " -- me@h1.invalid") || strings.Contains(r, "attacker") {
			t.Errorf("ssh ran as %q: only h1 (me@h1.invalid) is configured", r)
		}
	}
	for _, r := range kube {
		if !strings.Contains(r, " pod1 -- ") || strings.Contains(r, "somepod") || strings.Contains(r, "prod") {
			t.Errorf("kubectl ran as %q: only k1 (pod1) is configured", r)
		}
	}
}
