package cli

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// runIn runs kaimon in a fresh KAIMON_HOME whose config file holds config.
func runIn(t *testing.T, home string, args ...string) (int, string, string) {
	t.Helper()
	var out, errb strings.Builder
	code := Run(context.Background(), append([]string{"kaimon", "--no-color"}, args...), strings.NewReader(""), &out, &errb)
	return code, out.String(), errb.String()
}

// host add, ls and rm keep the hosts in the config file beside its other
// keys; every bad input is refused with its exit code and error, and
// leaves the file as it was.
func TestHostCommands(t *testing.T) {
	home := t.TempDir()
	t.Setenv("KAIMON_HOME", home)
	t.Setenv("KAIMON_NO_AUTOSTART", "1")
	t.Setenv("KAIMON_HOST", "")
	t.Setenv("KAIMON_SSH_COMMAND", "true") // host rm's ssh -O exit reaches no one
	cfg := filepath.Join(home, "config.json")
	if err := os.WriteFile(cfg, []byte(`{"dead_kept": 4}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, out, errs := runIn(t, home, "host", "add", "h1", "ssh://me@build1:2222", "--remote-bin", "/opt/kaimon"); code != 0 || !strings.Contains(out, "added host h1") {
		t.Fatalf("host add: exit %d %q %q", code, out, errs)
	}
	if code, _, errs := runIn(t, home, "host", "add", "h2", "ssh://[::1]"); code != 0 {
		t.Fatalf("host add h2: exit %d %q", code, errs)
	}
	before, _ := os.ReadFile(cfg)
	if !strings.Contains(string(before), `"dead_kept": 4`) {
		t.Errorf("the config file lost its other keys:\n%s", before)
	}

	code, out, _ := runIn(t, home, "host", "ls")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != 0 || len(lines) != 4 || !strings.HasPrefix(lines[1], "local") || !strings.Contains(lines[2], "ssh://me@build1:2222") ||
		!strings.Contains(lines[2], "/opt/kaimon") || !strings.Contains(lines[3], "kaimon") {
		t.Errorf("host ls: exit %d\n%s", code, out)
	}
	code, out, _ = runIn(t, home, "host", "ls", "--json")
	var rows []hostEntry
	if err := json.Unmarshal([]byte(out), &rows); code != 0 || err != nil || len(rows) != 3 || rows[1].Name != "h1" || rows[2].URL != "ssh://[::1]" {
		t.Errorf("host ls --json: exit %d %v\n%s", code, err, out)
	}

	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"host", "add", "h1", "ssh://other"}, 1, "host h1 is already configured (ssh://me@build1:2222): to replace it, `kaimon host rm h1` first"},
		{[]string{"host", "add", "h3", "http://build3"}, 2, `unknown scheme "http"`},
		{[]string{"host", "add", "h3", "ssh://"}, 2, "has no host"},
		{[]string{"host", "add", "h3", "ssh://b:99999"}, 2, "not a number from 1 to 65535"},
		{[]string{"host", "add", "h3", "ssh://b/path"}, 2, "path"},
		{[]string{"host", "add", "local", "ssh://b"}, 2, "this machine"},
		{[]string{"host", "add", "a/b", "ssh://b"}, 2, "cannot name a host"},
		{[]string{"host", "add", "h3"}, 2, "NAME URL"},
		{[]string{"host", "rm", "h9"}, 2, "the configured hosts are h1, h2"},
		{[]string{"--host", "h9", "list"}, 2, `no host is named "h9"`},
		{[]string{"list", "--host", "ftp://x"}, 2, "ssh://[USER@]HOST[:PORT]"},
		{[]string{"status", "h9/abc"}, 2, `no host is named "h9"`},
		{[]string{"status", "h9/abc", "--json"}, 2, `no host is named "h9"`},
		{[]string{"--host", "h1", "close", "h2/abc"}, 2, "--host names h1"},
		{[]string{"--host", "h1", "open"}, 2, `open on host h1 takes DIR as an absolute path there (got ".")`},
		{[]string{"open", "src/app", "--id", "h2/a1"}, 2, `open on host h2 takes DIR as an absolute path there (got "src/app")`},
		{[]string{"--host", "h1", "run", "-C", ".", "hi"}, 2, `open on host h1 takes DIR as an absolute path there (got ".")`},
		{[]string{"--host", "h1", "open", "/srv/app", "--mcp-config", "mcp.json"}, 2, `open on host h1 takes --mcp-config as an absolute path there (got "mcp.json")`},
		{[]string{"--host", "h1", "run", "-C", "/srv/app", "--mcp-config", "m.json", "hi"}, 2, `takes --mcp-config as an absolute path there`},
	} {
		code, out, errs := runIn(t, home, tc.args...)
		if code != tc.code || !strings.Contains(errs, tc.want) {
			t.Errorf("kaimon %s: exit %d, stderr %q; want exit %d and %q (stdout %q)", strings.Join(tc.args, " "), code, errs, tc.code, tc.want, out)
		}
		if usage := strings.Contains(errs, "--help' for usage"); usage != (tc.code == ExitUsage) {
			t.Errorf("kaimon %s: exit %d, stderr %q: want the pointer to --help with exit 2 and only then", strings.Join(tc.args, " "), code, errs)
		}
		if after, _ := os.ReadFile(cfg); string(after) != string(before) {
			t.Errorf("kaimon %s changed the config file:\n%s", strings.Join(tc.args, " "), after)
		}
	}
	t.Setenv("KAIMON_HOST", "nosuch")
	if code, _, errs := runIn(t, home, "list"); code != 2 || !strings.Contains(errs, "KAIMON_HOST") {
		t.Errorf("KAIMON_HOST=nosuch list: exit %d %q", code, errs)
	}
	t.Setenv("KAIMON_HOST", "")

	if code, out, _ := runIn(t, home, "host", "rm", "h1"); code != 0 || !strings.Contains(out, "removed host h1") {
		t.Errorf("host rm h1: exit %d %q", code, out)
	}
	after, _ := os.ReadFile(cfg)
	if strings.Contains(string(after), "build1") || !strings.Contains(string(after), `"dead_kept": 4`) {
		t.Errorf("after rm:\n%s", after)
	}
}

// host ls --check says which hosts answer, each with its error, and exits
// 1 when one does not: here a host whose "ssh" fails as ssh does.
func TestHostCheck(t *testing.T) {
	home := t.TempDir()
	t.Setenv("KAIMON_HOME", home)
	t.Setenv("KAIMON_NO_AUTOSTART", "1")
	ssh := filepath.Join(home, "fake-ssh")
	if err := os.WriteFile(ssh, []byte("#!/bin/sh\necho 'ssh: connect to host nowhere port 22: No route to host' >&2\nexit 255\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("KAIMON_SSH_COMMAND", ssh)
	if code, _, errs := runIn(t, home, "host", "add", "down", "ssh://nowhere"); code != 0 {
		t.Fatalf("host add: %d %s", code, errs)
	}
	code, out, errs := runIn(t, home, "host", "ls", "--check")
	if code != 1 || !strings.Contains(out, "FAIL: host down: ssh failed: ssh: connect to host nowhere port 22: No route to host") ||
		!strings.Contains(out, "not running (it starts on use)") || !strings.Contains(errs, "1 of 2 hosts failed") {
		t.Errorf("host ls --check: exit %d\n%s\n%s", code, out, errs)
	}
	code, _, errs = runIn(t, home, "--host", "down", "list")
	if code != 1 || !strings.Contains(errs, "host down: ssh failed: ssh: connect to host nowhere") {
		t.Errorf("--host down list: exit %d %q", code, errs)
	}
}

// A command on this machine alone never reads the hosts: a config file
// that does not parse stops only what names a host.
func TestBrokenConfigStopsOnlyHostCommands(t *testing.T) {
	home := t.TempDir()
	t.Setenv("KAIMON_HOME", home)
	t.Setenv("KAIMON_NO_AUTOSTART", "1")
	t.Setenv("KAIMON_HOST", "")
	if err := os.WriteFile(filepath.Join(home, "config.json"), []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, _, errs := runIn(t, home, "status", "a1"); code != 1 || !strings.Contains(errs, "not running") {
		t.Errorf("status a1: exit %d %q", code, errs)
	}
	if code, _, errs := runIn(t, home, "status", "h1/a1"); code != 1 || !strings.Contains(errs, "fix or remove it") {
		t.Errorf("status h1/a1: exit %d %q", code, errs)
	}
}
