package fleet

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/kaimon/kaimon/internal/config"
	"github.com/kaimon/kaimon/internal/verbs"
)

func TestParseURL(t *testing.T) {
	good := map[string]Target{
		"ssh://build1":                   {Host: "build1"},
		"ssh://me@build1":                {User: "me", Host: "build1"},
		"ssh://me@build1:2222":           {User: "me", Host: "build1", Port: 2222},
		"ssh://10.0.0.2:22/":             {Host: "10.0.0.2", Port: 22},
		"ssh://[::1]:2200":               {Host: "::1", Port: 2200},
		"ssh://ci@[fe80::1]":             {User: "ci", Host: "fe80::1"},
		"ssh://a.example-host.dev:1":     {Host: "a.example-host.dev", Port: 1},
		"ssh://a.example-host.dev:65535": {Host: "a.example-host.dev", Port: 65535},
	}
	for s, want := range good {
		got, err := ParseURL(s)
		if err != nil || got != want {
			t.Errorf("ParseURL(%q) = %+v, %v; want %+v", s, got, err, want)
		}
	}
	bad := map[string]string{
		"build1":                 "no scheme",
		"http://build1":          `unknown scheme "http"`,
		"http://pod":             `unknown scheme "http"`,
		"ssh://":                 "no host",
		"ssh://me@":              "no host",
		"ssh://me@:22":           "no host",
		"ssh://build1:0":         "not a number from 1 to 65535",
		"ssh://build1:65536":     "not a number from 1 to 65535",
		"ssh://build1:ssh":       "",
		"ssh://build1:":          "empty port",
		"ssh://build1/home/me":   "path",
		"ssh://build1?x=1":       "query",
		"ssh://me:pw@build1":     "password",
		"ssh://-oProxyCommand=x": "'-'",
		"ssh://::1":              "",
	}
	for s, why := range bad {
		_, err := ParseURL(s)
		var ue *UsageError
		if err == nil || !errors.As(err, &ue) || !strings.Contains(err.Error(), why) || !strings.Contains(err.Error(), URLForms) {
			t.Errorf("ParseURL(%q) = %v; want a usage error saying %q and naming %s", s, err, why, URLForms)
		}
	}
}

func TestCheckName(t *testing.T) {
	for _, n := range []string{"h1", "build-1", "a_b.c", "X"} {
		if err := CheckName(n); err != nil {
			t.Errorf("CheckName(%q) = %v", n, err)
		}
	}
	for _, n := range []string{"", "local", "any", "a/b", "-a", ".a", "a b", "ssh://x", strings.Repeat("a", 65)} {
		if err := CheckName(n); err == nil {
			t.Errorf("CheckName(%q) accepted it", n)
		}
	}
}

// add and rm keep the config file's other keys; a refused add or rm leaves
// the file byte for byte as it was.
func TestHostsRoundTripKeepsOtherKeys(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config.json")
	orig := `{"claude_bin": "/opt/claude", "dead_kept": 3, "ollama_think": "high", "future_key": {"x": [1, 2]}}`
	if err := os.WriteFile(path, []byte(orig), 0o640); err != nil {
		t.Fatal(err)
	}
	if err := AddHost(path, "h1", Host{URL: "ssh://me@h1:2222", RemoteBin: "/opt/kaimon"}); err != nil {
		t.Fatal(err)
	}
	if err := AddHost(path, "h2", Host{URL: "ssh://h2"}); err != nil {
		t.Fatal(err)
	}
	hosts, err := LoadHosts(path)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]Host{"h1": {URL: "ssh://me@h1:2222", RemoteBin: "/opt/kaimon"}, "h2": {URL: "ssh://h2"}}
	if !reflect.DeepEqual(hosts, want) {
		t.Errorf("hosts = %+v, want %+v", hosts, want)
	}
	c, err := config.Load(path)
	if err != nil || c.ClaudeBin != "/opt/claude" || c.DeadKept != 3 || string(c.OllamaThink) != `"high"` {
		t.Errorf("the other keys changed: %+v, %v", c, err)
	}
	b, _ := os.ReadFile(path)
	if !strings.Contains(string(b), `"future_key"`) {
		t.Errorf("a key kaimon does not know was dropped:\n%s", b)
	}
	if st, _ := os.Stat(path); st.Mode().Perm() != 0o640 {
		t.Errorf("mode %v, want the file's own 0640", st.Mode().Perm())
	}

	before, _ := os.ReadFile(path)
	for _, tc := range []struct {
		name  string
		do    func() error
		usage bool // a usage error; else another (a name taken is no fault of the command line)
		want  string
	}{
		{"existing name", func() error { return AddHost(path, "h1", Host{URL: "ssh://other"}) }, false, "kaimon host rm h1"},
		{"bad name", func() error { return AddHost(path, "local", Host{URL: "ssh://x"}) }, true, "this machine"},
		{"bad url", func() error { return AddHost(path, "h3", Host{URL: "ftp://x"}) }, true, "unknown scheme"},
		{"unknown rm", func() error { return RemoveHost(path, "h9") }, true, "h1, h2"},
	} {
		err := tc.do()
		var ue *UsageError
		if err == nil || errors.As(err, &ue) != tc.usage || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v; want an error containing %q, a usage error: %v", tc.name, err, tc.want, tc.usage)
		}
		if after, _ := os.ReadFile(path); string(after) != string(before) {
			t.Errorf("%s changed the file:\n%s", tc.name, after)
		}
	}

	if err := RemoveHost(path, "h1"); err != nil {
		t.Fatal(err)
	}
	hosts, _ = LoadHosts(path)
	if _, ok := hosts["h1"]; ok || len(hosts) != 1 {
		t.Errorf("after rm h1: %+v", hosts)
	}
	ents, _ := os.ReadDir(filepath.Dir(path))
	if len(ents) != 1 {
		t.Errorf("temporary files left beside the config: %v", ents)
	}
}

func TestRoute(t *testing.T) {
	f := &Fleet{Hosts: map[string]Host{"h1": {URL: "ssh://h1"}, "h2": {URL: "ssh://h2"}}}
	for id, want := range map[string][2]string{
		"abc":          {"", "abc"},
		"h1/abc":       {"h1", "abc"},
		"local/abc":    {"local", "abc"},
		"h2/agent:abc": {"h2", "agent:abc"},
		"a.b-c_d":      {"", "a.b-c_d"},
	} {
		h, bare, err := f.Route(id)
		if err != nil || h != want[0] || bare != want[1] {
			t.Errorf("Route(%q) = %q %q %v; want %q %q", id, h, bare, err, want[0], want[1])
		}
	}
	for id, why := range map[string]string{"h9/abc": "no host is named \"h9\"", "h1/": "HOST/ID", "any/x": "least busy"} {
		_, _, err := f.Route(id)
		var ue *UsageError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), why) {
			t.Errorf("Route(%q) = %v; want a usage error saying %q", id, err, why)
		}
	}
	f.Default, f.Pinned = "h1", true
	if _, _, err := f.Route("h2/abc"); err == nil || !strings.Contains(err.Error(), "--host names h1") {
		t.Errorf("an id of h2 under --host h1: %v", err)
	}
	if h, _, err := f.Route("h1/abc"); err != nil || h != "h1" {
		t.Errorf("an id of h1 under --host h1: %q %v", h, err)
	}
	if got := Qualify("h1", "abc"); got != "h1/abc" {
		t.Errorf("Qualify = %q", got)
	}
	for _, h := range []string{"", "local", "ssh://me@h1"} {
		if got := Qualify(h, "abc"); got != "abc" {
			t.Errorf("Qualify(%q) = %q, want the bare id", h, got)
		}
	}
}

func TestArgv(t *testing.T) {
	t.Setenv("KAIMON_SSH_COMMAND", "")
	dir := "/run/user/1000/kaimon"
	s := &SSH{Name: "h1", Target: Target{User: "me", Host: "build1", Port: 2222}, ControlDir: dir}
	opts := []string{"-o", "BatchMode=yes", "-o", "ConnectTimeout=8", "-o", "ServerAliveInterval=2", "-o", "ServerAliveCountMax=3",
		"-o", "ControlMaster=auto", "-o", "ControlPersist=10m", "-o", "ControlPath=" + dir + "/ssh-%C"}
	want := append(append([]string{"ssh"}, opts...), "-p", "2222", "--", "me@build1", "kaimon dial-stdio")
	if got := s.Argv(); !reflect.DeepEqual(got, want) {
		t.Errorf("argv\n got %q\nwant %q", got, want)
	}

	wantExit := append(append([]string{"ssh"}, opts...), "-p", "2222", "-O", "exit", "--", "me@build1")
	if got := s.MasterExitArgv(); !reflect.DeepEqual(got, wantExit) {
		t.Errorf("master exit argv\n got %q\nwant %q", got, wantExit)
	}

	// No port, no user, a remote_bin that needs quoting, no control dir.
	s = &SSH{Name: "h2", Target: Target{Host: "::1"}, RemoteBin: "/opt/my kaimon/kaimon"}
	want = append([]string{"ssh"}, opts[:8]...)
	want = append(want, "--", "::1", `'/opt/my kaimon/kaimon' dial-stdio`)
	if got := s.Argv(); !reflect.DeepEqual(got, want) {
		t.Errorf("argv\n got %q\nwant %q", got, want)
	}
	s.RemoteBin = "~/bin/kaimon"
	if got := s.Argv(); got[len(got)-1] != "~/bin/kaimon dial-stdio" {
		t.Errorf("~/bin/kaimon ran as %q", got[len(got)-1])
	}
	// A completion's connection starts no daemon there.
	s.NoAutostart = true
	if got := s.Argv(); got[len(got)-1] != "~/bin/kaimon --no-autostart dial-stdio" {
		t.Errorf("with NoAutostart the remote command is %q", got[len(got)-1])
	}

	// A socket dir too long for a control socket: no master.
	s = &SSH{Name: "h1", Target: Target{Host: "b"}, ControlDir: "/" + strings.Repeat("d", 60)}
	if got := strings.Join(s.Argv(), " "); strings.Contains(got, "Control") {
		t.Errorf("a control path past the limit: %s", got)
	}

	// KAIMON_SSH_COMMAND runs as git runs GIT_SSH_COMMAND.
	t.Setenv("KAIMON_SSH_COMMAND", "ssh -F /etc/my_config -i ~/.ssh/other")
	s = &SSH{Name: "h1", Target: Target{Host: "build1"}}
	got := s.Argv()
	if !reflect.DeepEqual(got[:4], []string{"sh", "-c", `ssh -F /etc/my_config -i ~/.ssh/other "$@"`, "ssh -F /etc/my_config -i ~/.ssh/other"}) ||
		got[len(got)-2] != "build1" || got[len(got)-1] != "kaimon dial-stdio" {
		t.Errorf("argv with KAIMON_SSH_COMMAND: %q", got)
	}
}

// fakeSSH makes KAIMON_SSH_COMMAND a script with body.
func fakeSSH(t *testing.T, body string) {
	p := filepath.Join(t.TempDir(), "fake-ssh")
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("KAIMON_SSH_COMMAND", p)
}

// The connection is the child's stdio, both ways, and Close reaps it.
func TestConnIsTheChildsStdio(t *testing.T) {
	fakeSSH(t, `exec cat`)
	s := &SSH{Name: "h1", Target: Target{Host: "h1"}}
	c, err := s.Dial(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write([]byte("ping\n")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 5)
	if _, err := io.ReadFull(c, buf); err != nil || string(buf) != "ping\n" {
		t.Fatalf("read %q, %v", buf, err)
	}
	pid := c.(*conn).cmd.Process.Pid
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if c.(*conn).cmd.ProcessState == nil {
		t.Errorf("ssh child %d not reaped after Close", pid)
	}
}

// A failed ssh is an error naming the host and saying what ssh said; 127
// (no kaimon there) names remote_bin and how to set it.
func TestConnErrors(t *testing.T) {
	for _, tc := range []struct {
		body string
		want []string
	}{
		{`echo "sh: 1: /opt/kaimon: not found" >&2; exit 127`, []string{"host h1", "/opt/kaimon was not found", "not found", "--remote-bin PATH"}},
		{`echo "ssh: connect to host h1 port 22: Connection refused" >&2; exit 255`, []string{"host h1: ssh failed", "Connection refused"}},
		{`echo "kaimon: kaimon-agentd exited at start" >&2; exit 1`, []string{"host h1: `/opt/kaimon dial-stdio` exited 1 there", "exited at start"}},
	} {
		fakeSSH(t, tc.body)
		s := &SSH{Name: "h1", Target: Target{Host: "h1"}, RemoteBin: "/opt/kaimon"}
		c, err := s.Dial(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		_, _ = c.Write([]byte("GET / HTTP/1.1\r\n\r\n"))
		_, err = io.ReadAll(c)
		var se *Error
		if !errors.As(err, &se) {
			t.Fatalf("%s: read error %v, want an *Error", tc.body, err)
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %q lacks %q", tc.body, err, w)
			}
		}
		c.Close()
	}
}

// Named puts the host in front of an error that does not name it, once.
func TestNamed(t *testing.T) {
	if got := Named("h1", errors.New("connection refused")).Error(); got != "host h1: connection refused" {
		t.Errorf("Named: %q", got)
	}
	ssh := &Error{Host: "h1", Exit: 255, Stderr: "ssh: Could not resolve hostname h1"}
	if got := Named("h1", fmt.Errorf("GET /v1/daemon: %w", ssh)).Error(); got != "host h1: ssh failed: ssh: Could not resolve hostname h1" {
		t.Errorf("Named of a failed ssh: %q", got)
	}
}

// A URL picks a host only in the CLI's fleet (New: --host, KAIMON_HOST);
// a fleet that takes names (kaimon mcp's) refuses one, at Check and at
// Transport alike, saying how the person makes it a name, and its
// unknown-name error offers no URL forms.
func TestURLsOnlyFromThePerson(t *testing.T) {
	hosts := map[string]Host{"h1": {URL: "ssh://h1"}}
	cli, err := New(config.Paths{ConfigFile: filepath.Join(t.TempDir(), "none.json")}, "ssh://me@build1:2222", true)
	if err != nil {
		t.Fatalf("the CLI's --host ssh://me@build1:2222: %v", err)
	}
	if tr, err := cli.Transport("ssh://me@build1:2222"); err != nil || tr.Target.Host != "build1" {
		t.Fatalf("the CLI's transport of a URL: %+v %v", tr, err)
	}
	names := &Fleet{Hosts: hosts}
	for _, u := range []string{"ssh://attacker@127.0.0.1:1", "kube://default/somepod?context=prod", "ssh://h1"} {
		for what, err := range map[string]error{
			"Check":     names.Check(u),
			"Transport": func() error { _, err := names.Transport(u); return err }(),
		} {
			var ue *UsageError
			if !errors.As(err, &ue) || !strings.Contains(err.Error(), "`kaimon host add NAME URL`") || !strings.Contains(err.Error(), "h1") {
				t.Errorf("%s(%q) of a fleet of names: %v; want a usage error naming h1 and how to add a URL", what, u, err)
			}
		}
	}
	if err := names.Check("h9"); err == nil || strings.Contains(err.Error(), "ssh://") || !strings.Contains(err.Error(), "h1") {
		t.Errorf("Check(h9) of a fleet of names: %v; want the configured hosts, and no URL forms", err)
	}
	if err := names.Check(strings.Repeat("ssh://", 1<<16)); err == nil || len(err.Error()) > 1000 {
		t.Errorf("Check of a huge URL: an error of %d bytes, want a short one", len(err.Error()))
	}
}

// A diff asked by a prefix comes back with the whole id its host
// resolved, qualified as the prefix was given.
func TestRequalify(t *testing.T) {
	for _, c := range [][3]string{
		{"web/f98", "f98a0c1d", "web/f98a0c1d"},
		{"local/f98", "f98a0c1d", "local/f98a0c1d"},
		{"f98", "f98a0c1d", "f98a0c1d"},
		{"f98a0c1d", "f98a0c1d", "f98a0c1d"},
	} {
		if got := Requalify(c[0], c[1]); got != c[2] {
			t.Errorf("Requalify(%q, %q) = %q, want %q", c[0], c[1], got, c[2])
		}
	}
}

// A daemon's error about an agent named by a prefix names its whole id:
// the lines to paste from it are qualified with the host as well.
func TestQualifyErrWholeIDs(t *testing.T) {
	err := verbs.BadArg("agent_permit: agent f98a0c1d has 2 pending permission requests:\n  p1 asks for Bash: ls: kaimon permit f98a0c1d p1 deny\n" +
		"no agent f98; see kaimon status f98. Not f9 nor xf98a0c1d.")
	got := qualifyErr(err, "f98", "web/f98").Error()
	for _, want := range []string{"agent web/f98a0c1d has", "kaimon permit web/f98a0c1d p1 deny", "no agent web/f98;", "kaimon status web/f98.", "Not f9 nor xf98a0c1d."} {
		if !strings.Contains(got, want) {
			t.Errorf("%q does not say %q", got, want)
		}
	}
}
