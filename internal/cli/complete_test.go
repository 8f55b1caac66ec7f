package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/kaimon/kaimon/internal/agentbin"
	"github.com/kaimon/kaimon/internal/apitype"
	"github.com/kaimon/kaimon/internal/config"
	"github.com/kaimon/kaimon/internal/event"
	"github.com/kaimon/kaimon/internal/fleet"
	"github.com/kaimon/kaimon/internal/session"
	"github.com/kaimon/kaimon/internal/verbs"
)

func testAgents() []verbs.ListEntry {
	return []verbs.ListEntry{
		{AgentID: "live1", AgentStatus: verbs.AgentStatus{Status: "idle", Model: "sonnet", Cwd: "/w"}},
		{AgentID: "live2", AgentStatus: verbs.AgentStatus{Status: "working", Model: "opus", Cwd: "/w"}},
		{AgentID: "dead1", AgentStatus: verbs.AgentStatus{Status: "dead", Model: "haiku", Cwd: "/w"}},
	}
}

// completeWords runs the completer on NewApp's tree with testAgents, and
// says whether it asked for the agents.
func completeWords(words ...string) (values []string, directive string, asked bool) {
	k := &completer{app: NewApp(), agents: func() []verbs.ListEntry { asked = true; return testAgents() }}
	comp := k.complete(words)
	for _, c := range comp.cands {
		values = append(values, c.value)
	}
	return values, comp.directive, asked
}

func TestCompleteWords(t *testing.T) {
	t.Parallel()
	var presets, modes, efforts, kinds []string
	presets = append(presets, verbs.PresetNames...)
	modes = append(modes, verbs.PermissionModes...)
	efforts = append(efforts, verbs.Efforts...)
	for _, k := range event.Kinds {
		kinds = append(kinds, string(k))
	}
	var models []string
	models = append(models, apitype.ModelAliases...)
	for _, p := range apitype.ModelPrefixes {
		models = append(models, p.Prefix)
	}
	prefixed := func(p string, vs []string) []string {
		var out []string
		for _, v := range vs {
			out = append(out, p+v)
		}
		return out
	}
	live := []string{"live1", "live2"}
	var daemonSubs []string
	for _, c := range NewApp().Command("daemon").Subcommands {
		daemonSubs = append(daemonSubs, c.Name)
	}
	cases := []struct {
		words     []string
		want      []string // exactly, in order
		directive string
	}{
		{words: []string{"daemon", ""}, want: append(slices.Clone(daemonSubs), "help")},
		{words: []string{"daemon", "st"}, want: []string{"start", "stop", "status"}},
		{words: []string{"completion", ""}, want: Shells},
		{words: []string{"completion", "z"}, want: []string{"zsh"}},
		{words: []string{"completion", "bash", ""}}, // one argument only
		{words: []string{"schema", ""}, want: []string{"events", "verbs", "openapi"}},
		{words: []string{"schema", "o"}, want: []string{"openapi"}},
		{words: []string{"help", "daemon", ""}, want: daemonSubs},
		{words: []string{"help", "clo"}, want: []string{"close"}},
		{words: []string{"open", "-p", ""}, want: presets},
		{words: []string{"open", "--permission", "sp"}, want: []string{"specialist"}},
		{words: []string{"run", "--permission-mode", ""}, want: modes},
		{words: []string{"open", "--permission-mode=a"}, want: []string{"--permission-mode=acceptEdits", "--permission-mode=auto"}},
		{words: []string{"open", "--effort", ""}, want: efforts},
		{words: []string{"output", "--which", ""}, want: verbs.Whiches},
		{words: []string{"open", "-m", ""}, want: models},
		{words: []string{"open", "--model", "acp:"}, want: append([]string{"acp:"}, prefixed("acp:", agentbin.ACPNames)...)},
		{words: []string{"open", "--model", "opus/"}, want: prefixed("opus/", verbs.Efforts)},
		{words: []string{"set-model", "live1", ""}, want: models},
		{words: []string{"set-model", "live1", "so"}, want: []string{"sonnet"}},
		{words: []string{"tail", "--kinds", ""}, want: kinds},
		{words: []string{"tail", "--kinds", "usage,tool_r"}, want: []string{"usage,tool_result"}},
		{words: []string{"tail", ""}, want: []string{"agent:", "agent:live1", "agent:live2", "agent:dead1"}},
		{words: []string{"tail", "agent:", "agent:l"}, want: []string{"agent:live1", "agent:live2"}},
		{words: []string{"run", "-C", ""}, directive: directiveDirs},
		{words: []string{"run", "-C", ".", ""}}, // -C DIR TEXT: the text
		{words: []string{"run", "--timeout", "1m", "-C", "."}, directive: directiveDirs},
		{words: []string{"open", "--mcp-config", ""}, directive: directiveFiles},
		{words: []string{"open", "--mcp-config=x"}, directive: directiveFiles},
		{words: []string{"open", ""}, directive: directiveDirs},
		{words: []string{"open", "--id", ""}, want: []string{"dead1"}},
		{words: []string{"open", "--resume", "--id", "d"}, want: []string{"dead1"}},
		{words: []string{"run", "--id", ""}, want: []string{"dead1"}}, // open's flag: agent_open's id
		{words: []string{"forget", ""}, want: []string{"dead1"}},
		{words: []string{"forget", "dead1", ""}, want: []string{"dead1"}},
		{words: []string{"permit", "live1", "req", ""}, want: apitype.Strings(apitype.Decisions)},
		{words: []string{"permit", "live1", ""}, want: apitype.Strings(apitype.Decisions)}, // REQUEST_ID may be left out
		{words: []string{"permit", "live1", "al"}, want: []string{"allow"}},
		{words: []string{"permit", "live1", "allow", ""}}, // it was: nothing beyond
		{words: []string{"permit", "--always", ""}, want: live},
		{words: []string{"send", "live1", ""}},          // TEXT
		{words: []string{"send", "live1", "hello", ""}}, // nothing beyond
		{words: []string{"--no-autostart", "daemon", "r"}, want: []string{"restart"}},
		{words: []string{"nosuch", ""}},
		{words: []string{"send", "--", "-"}, want: nil},
		{words: []string{"completion", "--", ""}, want: Shells},
	}
	// Every verb whose first positional is agent_id offers the live agents,
	// or every agent when it only reads (output, status), with flags before
	// it of either kind.
	for _, c := range NewApp().Commands {
		if v := verbs.ByName(c.Name); v != nil && len(v.Positional) > 0 && v.Positional[0] == "agent_id" {
			ids := live
			if v.ReadOnly {
				ids = append(append([]string{}, live...), "dead1")
			}
			cases = append(cases, struct {
				words     []string
				want      []string
				directive string
			}{words: []string{c.Name, ""}, want: ids})
			var w []string
			for _, f := range c.Flags {
				if c.Name == "run" && f.Names()[0] == oneShotFlag {
					continue // run -C DIR TEXT takes no ID
				}
				w = append(w, "--"+f.Names()[0])
				if takesValue(f) {
					w = append(w, "x")
				}
			}
			cases = append(cases, struct {
				words     []string
				want      []string
				directive string
			}{words: append(append([]string{c.Name}, w...), "l"), want: live})
			if len(ids) > len(live) {
				cases = append(cases, struct {
					words     []string
					want      []string
					directive string
				}{words: []string{c.Name, "d"}, want: []string{"dead1"}})
			}
		}
	}
	for _, c := range cases {
		got, dir, _ := completeWords(c.words...)
		if !slices.Equal(got, c.want) || dir != c.directive {
			t.Errorf("%q: got %q directive %q; want %q directive %q", c.words, got, dir, c.want, c.directive)
		}
	}
}

// Every command and every flag of the tree is offered, with no list kept by
// hand: commands added later are completed too.
func TestCompleteCoversTheTree(t *testing.T) {
	t.Parallel()
	app := NewApp()
	top, _, _ := completeWords("")
	var walk func(path []string, cmds []*cli.Command, offered []string)
	walk = func(path []string, cmds []*cli.Command, offered []string) {
		for _, c := range cmds {
			if c.Hidden {
				if slices.Contains(offered, c.Name) {
					t.Errorf("%v: hidden %s offered", path, c.Name)
				}
				continue
			}
			if !slices.Contains(offered, c.Name) {
				t.Errorf("after %q: %s not offered (got %q)", path, c.Name, offered)
			}
			p := append(slices.Clone(path), c.Name)
			flags, _, _ := completeWords(append(slices.Clone(p), "-")...)
			for _, f := range c.Flags {
				for _, n := range f.Names() {
					want := "--" + n
					if len(n) == 1 {
						want = "-" + n
					}
					if !slices.Contains(flags, want) {
						t.Errorf("%q: flag %s not offered (got %q)", p, want, flags)
					}
				}
			}
			if !slices.Contains(flags, "--help") {
				t.Errorf("%q: --help not offered", p)
			}
			if len(c.Subcommands) > 0 {
				subs, _, _ := completeWords(append(slices.Clone(p), "")...)
				walk(p, c.Subcommands, subs)
			}
		}
	}
	walk(nil, app.Commands, top)
	if !slices.Contains(top, "help") {
		t.Errorf("help not offered at the top: %q", top)
	}
	if slices.Contains(top, completeCmdName) {
		t.Errorf("%s is offered", completeCmdName)
	}
}

// --host completes local and the configured hosts, before the command or
// after it (where the CLI takes global flags too).
func TestCompleteHosts(t *testing.T) {
	t.Parallel()
	for _, words := range [][]string{{"--host", ""}, {"--host=", ""}, {"list", "--host", ""}, {"status", "--host", ""}} {
		k := &completer{app: NewApp(), hosts: func() map[string]fleet.Host {
			return map[string]fleet.Host{"h2": {URL: "ssh://h2"}, "h1": {URL: "ssh://me@h1"}}
		}}
		if words[0] == "--host=" {
			words = []string{"--host="}
		}
		var got []string
		for _, c := range k.complete(words).cands {
			got = append(got, c.value)
		}
		want := []string{"local", "h1", "h2"}
		if words[0] == "--host=" {
			want = []string{"--host=local", "--host=h1", "--host=h2"}
		}
		if !slices.Equal(got, want) {
			t.Errorf("%q: %q, want %q", words, got, want)
		}
	}
}

// A global flag after the command is completed when none of the
// command's fits, and its value is not taken for a positional.
func TestCompleteGlobalFlagsAfterTheCommand(t *testing.T) {
	t.Parallel()
	k := &completer{app: NewApp(), hosts: func() map[string]fleet.Host { return map[string]fleet.Host{"h1": {URL: "ssh://h1"}} }}
	values := func(words ...string) []string {
		var got []string
		for _, c := range k.complete(words).cands {
			got = append(got, c.value)
		}
		return got
	}
	if got := values("list", "--ho"); !slices.Equal(got, []string{"--host"}) {
		t.Errorf("list --ho<TAB>: %q, want --host", got)
	}
	if got := values("tail", "--no-c"); !slices.Equal(got, []string{"--no-color"}) {
		t.Errorf("tail --no-c<TAB>: %q, want --no-color", got)
	}
	if got := values("send", "x", "--"); slices.Contains(got, "--host") {
		t.Errorf("send x --<TAB> offers the global --host among the command's own: %q", got)
	}
	// The value of --host after the command is not open's DIR: the word
	// after it is.
	if got := k.complete([]string{"open", "--host", "h1", ""}); got.directive != directiveDirs {
		t.Errorf("open --host h1 <TAB>: %+v, want directories", got)
	}
}

// The daemon is asked only when an agent id is to be completed.
func TestCompleteAsksTheDaemonOnlyForIDs(t *testing.T) {
	t.Parallel()
	for _, w := range [][]string{{""}, {"open", "-p", ""}, {"send", "-"}, {"daemon", ""}, {"send", "x", ""}} {
		if _, _, asked := completeWords(w...); asked {
			t.Errorf("%q asked the daemon for its agents", w)
		}
	}
	if _, _, asked := completeWords("send", ""); !asked {
		t.Errorf("send ID did not ask for the agents")
	}
	// No daemon: no ids, and no error.
	k := &completer{app: NewApp(), agents: func() []verbs.ListEntry { return nil }}
	if got := k.complete([]string{"send", ""}); len(got.cands) != 0 {
		t.Errorf("no daemon: got %v", got.cands)
	}
}

// Through the real command line: __complete with no daemon prints what the
// tree gives, starts nothing, creates nothing, and exits 0; the flag of
// urfave's old mechanism is an unknown flag now.
func TestCompleteCommandRunsNoVerb(t *testing.T) {
	home := t.TempDir()
	t.Setenv("KAIMON_HOME", home)
	t.Setenv("KAIMON_SOCK_DIR", "")
	t.Setenv("KAIMON_NO_AUTOSTART", "")
	t.Setenv("KAIMON_AGENTD_BIN", filepath.Join(home, "no-such-agentd")) // were it started, it would fail loudly
	run := func(args ...string) (string, string, int) {
		var out, errb bytes.Buffer
		code := Run(context.Background(), append([]string{"kaimon"}, args...), strings.NewReader(""), &out, &errb)
		return out.String(), errb.String(), code
	}
	out, errs, code := run(completeCmdName, "--", "send", "")
	if code != 0 || out != "" || errs != "" {
		t.Errorf("__complete send '': exit %d, stdout %q, stderr %q; want 0 and nothing", code, out, errs)
	}
	out, _, code = run(completeCmdName, "--", "open", "--permission", "")
	if code != 0 || strings.Fields(out)[0] != verbs.PresetNames[0] {
		t.Errorf("__complete open --permission '': exit %d, %q", code, out)
	}
	out, _, code = run(completeCmdName, "--", "send", "--")
	if code != 0 || !strings.Contains(out, "--json") {
		t.Errorf("__complete send --: exit %d, %q", code, out)
	}
	if ents, _ := os.ReadDir(home); len(ents) != 0 {
		t.Errorf("__complete created %v in KAIMON_HOME", ents)
	}
	_, errs, code = run("send", "x", "--generate-bash-completion")
	if code != ExitUsage || !strings.Contains(errs, "generate-bash-completion") {
		t.Errorf("send --generate-bash-completion: exit %d, %q; want a usage error", code, errs)
	}
	help, _, _ := run("--help")
	if strings.Contains(help, completeCmdName) {
		t.Errorf("--help shows %s", completeCmdName)
	}
	man, err := NewApp().ToManWithSection(1)
	if err != nil || strings.Contains(man, completeCmdName) {
		t.Errorf("the man page shows %s (%v)", completeCmdName, err)
	}
}

// With no daemon, the ids are those the registry on disk records (written
// here as the daemon writes them), each dead: offered where a dead or any
// agent is named, not where a live one is; read without starting a daemon.
func TestCompleteIDsFromRecordsWithoutDaemon(t *testing.T) {
	home := t.TempDir()
	t.Setenv("KAIMON_HOME", home)
	t.Setenv("KAIMON_SOCK_DIR", "")
	t.Setenv("KAIMON_CACHE_DIR", "")
	t.Setenv("KAIMON_NO_AUTOSTART", "")
	t.Setenv("KAIMON_AGENTD_BIN", filepath.Join(home, "no-such-agentd"))
	paths, err := config.Resolve()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(paths.CacheDir, 0o700); err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for i, r := range []session.Record{
		{OpenArgs: verbs.OpenArgs{ID: "was-idle", Cwd: "/w", Model: "sonnet"}, Status: apitype.Idle, CreatedAt: t0.Add(time.Hour)},
		{OpenArgs: verbs.OpenArgs{ID: "closed1", Cwd: "/w", Model: "opus"}, Status: apitype.Dead, Reason: session.ReasonClosed, CreatedAt: t0},
	} {
		b, _ := json.Marshal(&r)
		if err := os.WriteFile(paths.Agent(r.ID).Record, b, 0o600); err != nil {
			t.Fatal(i, err)
		}
	}
	// Not records: another agent file, and a record whose id is not its name's.
	os.WriteFile(paths.Agent("x1").Events, []byte("{}\n"), 0o600)
	os.WriteFile(paths.Agent("renamed").Record, []byte(`{"id":"other","cwd":"/w"}`), 0o600)
	run := func(words ...string) string {
		var out, errb bytes.Buffer
		code := Run(context.Background(), append([]string{"kaimon", completeCmdName, "--"}, words...), strings.NewReader(""), &out, &errb)
		if code != 0 || errb.Len() > 0 {
			t.Errorf("__complete %q: exit %d, stderr %q", words, code, errb.String())
		}
		return out.String()
	}
	if got, want := run("status", ""), "closed1\tdead opus /w\nwas-idle\tdead sonnet /w\n"; got != want {
		t.Errorf("status <TAB> with no daemon = %q, want %q", got, want)
	}
	if got := run("forget", "c"); got != "closed1\tdead opus /w\n" {
		t.Errorf("forget c<TAB> with no daemon = %q", got)
	}
	if got := run("send", ""); got != "" {
		t.Errorf("send <TAB> with no daemon (no agent is live) = %q", got)
	}
	if _, err := os.Stat(paths.SockDir); !os.IsNotExist(err) {
		t.Errorf("completing made %s (%v): a daemon was started?", paths.SockDir, err)
	}
}

// An id argument offers the configured hosts as HOST/ beside this
// machine's ids; once the id names a configured host, that host's agents,
// qualified (the host is asked only then, and a host not configured is
// asked nothing).
func TestCompleteQualifiedIDs(t *testing.T) {
	t.Parallel()
	var asked []string
	k := func() *completer {
		return &completer{app: NewApp(), agents: testAgents, hosts: func() map[string]fleet.Host { return map[string]fleet.Host{"h1": {}, "h2": {}} },
			hostAgents: func(h string) []verbs.ListEntry {
				asked = append(asked, h)
				return []verbs.ListEntry{
					{AgentID: "r1", AgentStatus: verbs.AgentStatus{Status: "idle"}},
					{AgentID: "r2", AgentStatus: verbs.AgentStatus{Status: "dead"}},
				}
			}}
	}
	values := func(words ...string) []string {
		var out []string
		for _, c := range k().complete(words).cands {
			out = append(out, c.value)
		}
		return out
	}
	for _, c := range []struct {
		words []string
		want  []string
		asked []string
	}{
		{[]string{"status", ""}, []string{"live1", "live2", "dead1", "h1/", "h2/"}, nil},
		{[]string{"status", "h"}, []string{"h1/", "h2/"}, nil},
		{[]string{"status", "h1/"}, []string{"h1/r1", "h1/r2"}, []string{"h1"}},
		{[]string{"close", "h2/"}, []string{"h2/r1"}, []string{"h2"}},
		{[]string{"forget", "h1/r"}, []string{"h1/r2"}, []string{"h1"}},
		{[]string{"status", "h9/"}, nil, nil},
		{[]string{"status", "live"}, []string{"live1", "live2"}, nil},
	} {
		asked = nil
		if got := values(c.words...); !slices.Equal(got, c.want) || !slices.Equal(asked, c.asked) {
			t.Errorf("%q: %q (asked %q), want %q (asked %q)", c.words, got, asked, c.want, c.asked)
		}
	}
}
