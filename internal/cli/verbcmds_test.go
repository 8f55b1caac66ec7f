package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"

	"github.com/urfave/cli/v2"

	"github.com/kaimon/kaimon/internal/apitype"
	"github.com/kaimon/kaimon/internal/client"
	"github.com/kaimon/kaimon/internal/event"
	"github.com/kaimon/kaimon/internal/server/servertest"
	"github.com/kaimon/kaimon/internal/verbs"
)

// runService runs kaimon's command line args (after "kaimon") with svc as
// the verb commands' service, stdin as given, and colour off; it returns
// the exit code and both streams.
func runService(t *testing.T, svc verbs.Service, stdin string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	// Were a command to reach past the factory for a daemon, it finds none
	// and starts none, and writes nothing in the user's home.
	t.Setenv("KAIMON_HOME", t.TempDir())
	t.Setenv("KAIMON_NO_AUTOSTART", "1")
	t.Setenv("KAIMON_AGENTD_BIN", filepath.Join(t.TempDir(), "no-kaimon-agentd"))
	f := factory{service: func(*cli.Context) (verbs.Service, error) { return svc, nil }}
	var out, errb bytes.Buffer
	argv := append([]string{"kaimon", "--no-color"}, args...)
	code = runWith(context.Background(), f, argv, strings.NewReader(stdin), &out, &errb)
	return code, out.String(), errb.String()
}

// Each verb's command line becomes the verb's Args struct, exactly: the
// fake service records what the command called it with. A usage error
// calls nothing and exits 2. Every verb of the table has a case.
func TestVerbCommandsParse(t *testing.T) {
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	none := []string{}
	type call struct {
		verb string
		args any
	}
	cases := []struct {
		args  []string
		stdin string
		want  []call // nil: a usage error
	}{
		{args: []string{"open", "/w"}, want: []call{{"agent_open", &verbs.OpenArgs{Cwd: "/w"}}}},
		{args: []string{"open"}, want: []call{{"agent_open", &verbs.OpenArgs{Cwd: wd}}}},
		{args: []string{"open", "-m", "opus/high", "--effort", "high", "-p", "lab", "--permission-mode", "plan",
			"--allow", "Read", "--allow", "Bash", "--only", "--disallow", "Task", "--mcp-config", "/m.json",
			"--system-prompt", "be brief", "--id", "a1", "/w"},
			want: []call{{"agent_open", &verbs.OpenArgs{Cwd: "/w", Model: "opus/high", Effort: "high", Permission: "lab",
				PermissionMode: "plan", AllowedTools: []string{"Read", "Bash"}, Only: true, DisallowedTools: &[]string{"Task"},
				MCPConfig: "/m.json", SystemPrompt: "be brief", ID: "a1"}}}},
		{args: []string{"open", "--no-recursion-guard", "/w"}, want: []call{{"agent_open", &verbs.OpenArgs{Cwd: "/w", DisallowedTools: &none}}}},
		{args: []string{"open", "--resume", "--id", "a1"}, want: []call{{"agent_open", &verbs.OpenArgs{ID: "a1", Resume: true}}}},
		{args: []string{"open", "--worktree", "--branch", "fix", "--base", "main", "/w"}, want: []call{{"agent_open", &verbs.OpenArgs{Cwd: "/w", Worktree: true, Branch: "fix", Base: "main"}}}},
		{args: []string{"open", "/w", "--model", "haiku"}, want: []call{{"agent_open", &verbs.OpenArgs{Cwd: "/w", Model: "haiku"}}}},
		{args: []string{"open", "--resume"}},
		{args: []string{"open", "/a", "/b"}},
		{args: []string{"open", "--no-recursion-guard", "--disallow", "Task", "/w"}},

		{args: []string{"send", "a1", "fix it"}, want: []call{{"agent_send", &verbs.SendArgs{AgentID: "a1", Text: "fix it"}}}},
		{args: []string{"send", "a1", "-"}, stdin: "from stdin\n", want: []call{{"agent_send", &verbs.SendArgs{AgentID: "a1", Text: "from stdin\n"}}}},
		{args: []string{"send", "a1"}},

		{args: []string{"run", "a1", "go"}, want: []call{{"agent_run", &verbs.RunArgs{AgentID: "a1", Text: "go", Timeout: verbs.DefaultTimeout}}}},
		{args: []string{"run", "--timeout", "90s", "a1", "-"}, stdin: "piped", want: []call{{"agent_run", &verbs.RunArgs{AgentID: "a1", Text: "piped", Timeout: 90}}}},
		{args: []string{"run", "-C", "/w", "-m", "haiku", "go"}, want: []call{
			{"agent_open", &verbs.OpenArgs{Cwd: "/w", Model: "haiku"}},
			{"agent_run", &verbs.RunArgs{AgentID: "t1", Text: "go", Timeout: verbs.DefaultTimeout}},
			{"agent_close", &verbs.CloseArgs{AgentID: "t1"}}}},
		{args: []string{"run", "a1"}},
		{args: []string{"run", "-C", "/w", "a1", "go"}},
		{args: []string{"run", "--timeout", "0s", "a1", "go"}},

		{args: []string{"output", "a1"}, want: []call{{"agent_output", &verbs.OutputArgs{AgentID: "a1", Which: verbs.DefaultWhich, MaxChars: verbs.DefaultMaxChars}}}},
		{args: []string{"output", "--turn", "2", "--which", "all", "--include-tools", "--max-chars", "10", "a1"},
			want: []call{{"agent_output", &verbs.OutputArgs{AgentID: "a1", Turn: 2, Which: "all", IncludeTools: true, MaxChars: 10}}}},
		{args: []string{"output"}},

		{args: []string{"status", "a1"}, want: []call{{"agent_status", &verbs.StatusArgs{AgentID: "a1"}}}},
		{args: []string{"status", "a1", "a2"}},

		{args: []string{"set-model", "a1", "opus"}, want: []call{{"agent_set_model", &verbs.SetModelArgs{AgentID: "a1", Model: "opus"}}}},
		{args: []string{"set-model", "a1"}},

		{args: []string{"list"}, want: []call{{"agent_list", &verbs.ListArgs{}}}},
		{args: []string{"list", "a1"}},

		{args: []string{"interrupt", "a1"}, want: []call{{"agent_interrupt", &verbs.InterruptArgs{AgentID: "a1"}}}},
		{args: []string{"interrupt"}},

		{args: []string{"close", "a1"}, want: []call{{"agent_close", &verbs.CloseArgs{AgentID: "a1"}}}},
		{args: []string{"close"}},

		{args: []string{"permit", "a1", "r1", "allow", "--always"}, want: []call{{"agent_permit", &verbs.PermitArgs{AgentID: "a1", RequestID: "r1", Decision: apitype.Allow, Always: true}}}},
		{args: []string{"permit", "a1", "r1", "deny"}, want: []call{{"agent_permit", &verbs.PermitArgs{AgentID: "a1", RequestID: "r1", Decision: apitype.Deny}}}},
		{args: []string{"permit", "a1", "r1", "maybe"}},
		// Without REQUEST_ID: the daemon answers the agent's one pending request.
		{args: []string{"permit", "a1", "allow"}, want: []call{{"agent_permit", &verbs.PermitArgs{AgentID: "a1", Decision: apitype.Allow}}}},
		{args: []string{"permit", "a1", "maybe"}},
		{args: []string{"permit", "a1"}},

		{args: []string{"forget", "a1", "--force", "--delete-branch"}, want: []call{{"agent_forget", &verbs.ForgetArgs{AgentIDs: []string{"a1"}, Force: true, DeleteBranch: true}}}},
		{args: []string{"diff", "a1"}, want: []call{{"agent_diff", &verbs.DiffArgs{AgentID: "a1"}}}},
		{args: []string{"diff", "a1", "--stat"}, want: []call{{"agent_diff", &verbs.DiffArgs{AgentID: "a1", Stat: true}}}},
		{args: []string{"diff"}},
		{args: []string{"forget", "a1", "a2", "--logs"}, want: []call{{"agent_forget", &verbs.ForgetArgs{AgentIDs: []string{"a1", "a2"}, Logs: true}}}},
		{args: []string{"forget", "--all-dead", "--older-than", "7d"}, want: []call{{"agent_forget", &verbs.ForgetArgs{AgentIDs: []string{}, AllDead: true, OlderThan: "7d"}}}},
		{args: []string{"forget"}},
		{args: []string{"forget", "a1", "--all-dead"}},
	}
	covered := map[string]bool{}
	for _, c := range cases {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			fake := (&servertest.Fake{}).Returns("open", &verbs.OpenResult{AgentID: "t1"}, nil)
			code, out, errs := runService(t, fake, c.stdin, c.args...)
			var got []call
			for _, c := range fake.Calls() {
				got = append(got, call{c.Verb, c.Args})
			}
			if c.want == nil {
				if code != ExitUsage || len(got) != 0 || out != "" || !strings.HasPrefix(errs, "kaimon: ") {
					t.Fatalf("want a usage error (exit 2, no call); got exit %d, calls %+v, stdout %q, stderr %q", code, got, out, errs)
				}
				return
			}
			if code != ExitOK {
				t.Fatalf("exit %d, stderr %q", code, errs)
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Fatalf("calls:\n got %s\nwant %s", show(got), show(c.want))
			}
		})
		for _, w := range c.want {
			covered[w.verb] = true
		}
	}
	for _, v := range verbs.All {
		if !covered[v.Name] {
			t.Errorf("no parse case calls %s (kaimon %s)", v.Name, v.CLI)
		}
	}
}

// show prints calls with their arguments, not the arguments' addresses.
func show[C any](cs []C) string {
	var b strings.Builder
	for _, c := range cs {
		v := reflect.ValueOf(c)
		fmt.Fprintf(&b, "%v %+v; ", v.Field(0), v.Field(1).Elem().Elem())
	}
	return b.String()
}

// Each verb's command, run against a fake service served on a socket
// (servertest: the real routes and the real client), prints its answer
// for people and with --json, and maps errors to exit codes: the human
// and JSON output byte for byte. Every verb of the table has a case.
func TestVerbCommandsRun(t *testing.T) {
	notFound := &verbs.Error{Code: verbs.CodeNotFound, Message: "no agent a9 (see `kaimon list`)"}
	failed := &verbs.Error{Code: verbs.CodeTurnFailed, Message: "agent a1 turn 3 failed: stop reason error", Text: "half an answer"}
	status := &verbs.AgentStatus{Status: "working", Model: "claude-sonnet-5", Cwd: "/w", Turn: 3, CreatedAt: "2026-12-01T10:00:00Z",
		LastActivity: "2026-12-01T10:05:00Z", SessionID: "s-1", Transcript: "/t.jsonl", EventLog: "/a1.events.jsonl",
		Usage:              event.UsageFigures{InputTokens: 100, OutputTokens: 20, CacheReadTokens: 5, ThoughtTokens: 8},
		PendingPermissions: []verbs.PendingPermission{{RequestID: "r1", Tool: "Bash", Title: "Bash: ls", ExpiresAt: "2026-12-01T10:10:00Z"}}}
	cases := []struct {
		verb          string // the table's name of the verb the fake answers
		res           any
		err           error
		args          []string
		code          int
		stdout, stder string
	}{
		{"agent_open", &verbs.OpenResult{AgentID: "a1"}, nil, []string{"open", "/w"}, 0, "a1\n", ""},
		{"agent_open", &verbs.OpenResult{AgentID: "a1"}, nil, []string{"open", "--json", "/w"}, 0, `{"agent_id":"a1"}` + "\n", ""},
		{"agent_open", nil, &verbs.Error{Code: verbs.CodeUnavailable, Message: "the claude CLI is not on PATH"}, []string{"open", "/w"},
			1, "", "kaimon: the claude CLI is not on PATH\n"},
		{"agent_open", nil, &verbs.Error{Code: verbs.CodeUnavailable, Message: "the claude CLI is not on PATH"}, []string{"open", "--json", "/w"},
			1, "", `{"code":"unavailable","error":"the claude CLI is not on PATH"}` + "\n"},

		{"agent_send", &verbs.SendResult{Turn: 4}, nil, []string{"send", "a1", "hi"}, 0, "4\n", ""},
		{"agent_send", &verbs.SendResult{Turn: 4}, nil, []string{"send", "--json", "a1", "hi"}, 0, `{"turn":4}` + "\n", ""},
		{"agent_send", nil, notFound, []string{"send", "a9", "hi"}, 1, "", "kaimon: no agent a9 (see `kaimon list`)\n"},
		{"agent_send", nil, notFound, []string{"send", "--json", "a9", "hi"}, 1, "", `{"code":"not_found","error":"no agent a9 (see ` + "`kaimon list`" + `)"}` + "\n"},

		{"agent_run", &verbs.RunResult{Text: "done."}, nil, []string{"run", "a1", "go"}, 0, "done.\n", ""},
		{"agent_run", &verbs.RunResult{Text: "done."}, nil, []string{"run", "--json", "a1", "go"}, 0, `{"text":"done."}` + "\n", ""},
		{"agent_run", nil, failed, []string{"run", "a1", "go"}, ExitTurnFailed, "half an answer\n", "kaimon: agent a1 turn 3 failed: stop reason error\n"},
		{"agent_run", nil, failed, []string{"run", "--json", "a1", "go"}, ExitTurnFailed, "",
			`{"code":"turn_failed","error":"agent a1 turn 3 failed: stop reason error","text":"half an answer"}` + "\n"},
		{"agent_run", nil, &verbs.Error{Code: verbs.CodeTimeout, Message: "turn 3 of agent a1 did not end within 1s", Text: "so far"},
			[]string{"run", "--timeout", "1s", "a1", "go"}, ExitTimeout, "so far\n", "kaimon: turn 3 of agent a1 did not end within 1s\n"},

		{"agent_output", &verbs.OutputResult{AgentID: "a1", Turn: 2, Which: "last_message", Status: "working", Text: "partial", Truncated: true, DroppedChars: 7,
			LogErrors: []string{"line 9 is torn"}}, nil, []string{"output", "a1"}, 0, "partial\n",
			"(turn 2 still running: partial output)\n(truncated: 7 characters dropped; raise --max-chars)\nkaimon: output: line 9 is torn; skipped, so this output may lack it\n"},
		{"agent_output", &verbs.OutputResult{AgentID: "a1", Turn: 2, Which: "last_message", Status: "idle", Done: true, Text: "all"}, nil,
			[]string{"output", "--json", "a1"}, 0,
			`{"agent_id":"a1","turn":2,"which":"last_message","status":"idle","done":true,"text":"all","truncated":false,"dropped_chars":0,"usage":{"inputTokens":0,"outputTokens":0,"cacheReadTokens":0,"cacheCreationTokens":0,"costUsd":0}}` + "\n", ""},

		{"agent_status", status, nil, []string{"status", "a1"}, 0,
			"status          working (asks permission)\n" +
				"permission      r1 asks for Bash: ls (denied if unanswered by 2026-12-01T10:10:00Z)\n" +
				"                answer: kaimon permit a1 r1 allow   (or deny)\n" +
				"model           claude-sonnet-5\n" +
				"cwd             /w\n" +
				"turn            3\n" +
				"usage           in 100  out 20  cache read 5  cache write 0  (out includes 8 thinking)\n" +
				"created         2026-12-01T10:00:00Z\n" +
				"last activity   2026-12-01T10:05:00Z\n" +
				"session         s-1\n" +
				"transcript      /t.jsonl\n" +
				"event log       /a1.events.jsonl\n" +
				"queues prompts  false\n", ""},
		{"agent_status", nil, notFound, []string{"status", "--json", "a9"}, 1, "", `{"code":"not_found","error":"no agent a9 (see ` + "`kaimon list`" + `)"}` + "\n"},

		{"agent_set_model", &verbs.SetModelResult{Switched: true}, nil, []string{"set-model", "a1", "opus"}, 0, "switched\n", ""},
		{"agent_set_model", &verbs.SetModelResult{}, nil, []string{"set-model", "a1", "opus"}, 0, "not switched (the agent refused; close and reopen it with --model)\n", ""},
		{"agent_set_model", &verbs.SetModelResult{Switched: true}, nil, []string{"set-model", "--json", "a1", "opus"}, 0, `{"switched":true}` + "\n", ""},

		{"agent_list", &verbs.ListResult{Agents: []verbs.ListEntry{}}, nil, []string{"list"}, 0, "", "no agents (open one with `kaimon open DIR`)\n"},
		{"agent_list", &verbs.ListResult{Agents: []verbs.ListEntry{
			{AgentID: "a1", AgentStatus: verbs.AgentStatus{Status: "idle", Model: "claude-sonnet-5", Cwd: "/w", Turn: 2, Usage: event.UsageFigures{InputTokens: 10, OutputTokens: 3}}},
			{AgentID: "b22", AgentStatus: verbs.AgentStatus{Status: "dead", Reason: "closed", Model: "haiku", Cwd: "/x"}}}}, nil,
			[]string{"list"}, 0,
			"ID   STATUS         MODEL            TURN  TOKENS IN/OUT  CWD\n" +
				"a1   idle           claude-sonnet-5  2     10/3           /w\n" +
				"b22  dead (closed)  haiku            0     0/0            /x\n", ""},
		{"agent_list", &verbs.ListResult{Agents: []verbs.ListEntry{}}, nil, []string{"list", "--json"}, 0, `{"agents":[]}` + "\n", ""},
		{"agent_list", &verbs.ListResult{Agents: []verbs.ListEntry{
			{AgentID: "a1", AgentStatus: verbs.AgentStatus{Status: "idle", Model: "m", Cwd: "/wt/a1", Worktree: "/wt/a1", Branch: "kaimon/a1", Dirty: true}},
			{AgentID: "b2", AgentStatus: verbs.AgentStatus{Status: "idle", Model: "m", Cwd: "/wt/b2", Worktree: "/wt/b2", Branch: "fix"}},
			{AgentID: "c3", AgentStatus: verbs.AgentStatus{Status: "idle", Model: "m", Cwd: "/x"}}}}, nil,
			[]string{"list"}, 0,
			"ID  STATUS  MODEL  TURN  TOKENS IN/OUT  BRANCH      CWD\n" +
				"a1  idle    m      0     0/0            kaimon/a1*  /wt/a1\n" +
				"b2  idle    m      0     0/0            fix         /wt/b2\n" +
				"c3  idle    m      0     0/0            -           /x\n", ""},

		{"agent_diff", &verbs.DiffResult{AgentID: "a1", Branch: "kaimon/a1", BaseCommit: "0123456789abcdef", Diff: "diff --git a/x b/x\n"}, nil,
			[]string{"diff", "a1"}, 0, "diff --git a/x b/x\n", ""},
		{"agent_diff", &verbs.DiffResult{AgentID: "a1", Branch: "kaimon/a1", BaseCommit: "0123456789abcdef"}, nil,
			[]string{"diff", "a1"}, 0, "", "(no changes on kaimon/a1 since 0123456789ab)\n"},
		{"agent_diff", nil, verbs.WrongState("agent_diff: agent a1 has no worktree"), []string{"diff", "a1"}, 1, "", "kaimon: agent_diff: agent a1 has no worktree\n"},
		{"agent_diff", &verbs.DiffResult{AgentID: "a1", Branch: "kaimon/a1", BaseCommit: "0123", Diff: "+x\n" + verbs.DiffCutNote("a1"), Truncated: true}, nil,
			[]string{"diff", "--json", "a1"}, 0, `{"agent_id":"a1","worktree":"","branch":"kaimon/a1","base_commit":"0123","diff":"+x\n[kaimon: the diff is cut here, at 256 KiB: ` +
				"`kaimon diff a1`" + ` prints the whole]\n","truncated":true}` + "\n", ""},

		{"agent_interrupt", &verbs.InterruptResult{Interrupted: true}, nil, []string{"interrupt", "a1"}, 0, "interrupted\n", ""},
		{"agent_interrupt", &verbs.InterruptResult{}, nil, []string{"interrupt", "a1"}, 0, "nothing to interrupt\n", ""},
		{"agent_interrupt", nil, &verbs.Error{Code: verbs.CodeUnavailable, Message: "agent a1 did not acknowledge the interrupt"},
			[]string{"interrupt", "a1"}, 1, "", "kaimon: agent a1 did not acknowledge the interrupt\n"},

		{"agent_close", &verbs.CloseResult{Closed: true}, nil, []string{"close", "a1"}, 0, "closed\n", ""},
		{"agent_close", &verbs.CloseResult{}, nil, []string{"close", "a1"}, 0, "already closed\n", ""},
		{"agent_close", &verbs.CloseResult{Closed: true}, nil, []string{"close", "--json", "a1"}, 0, `{"closed":true}` + "\n", ""},

		{"agent_permit", &verbs.PermitResult{Permitted: true}, nil, []string{"permit", "a1", "r1", "allow"}, 0, "allowed\n", ""},
		{"agent_permit", &verbs.PermitResult{}, nil, []string{"permit", "a1", "r1", "deny"}, 0, "denied\n", ""},
		{"agent_permit", nil, &verbs.Error{Code: verbs.CodeWrongState, Message: "no pending request r1 of agent a1"},
			[]string{"permit", "--json", "a1", "r1", "allow"}, 1, "", `{"code":"wrong_state","error":"no pending request r1 of agent a1"}` + "\n"},

		{"agent_forget", &verbs.ForgetResult{Forgotten: []string{"a1", "a2"}}, nil, []string{"forget", "a1", "a2"}, 0, "a1\na2\n", ""},
		{"agent_forget", &verbs.ForgetResult{Forgotten: []string{"a1"}, Kept: []verbs.ForgetKept{{AgentID: "a2", Worktree: "/wt/a2", Reason: "its worktree /wt/a2 has uncommitted changes"}}},
			nil, []string{"forget", "a1", "a2"}, 1, "a1\n", "kaimon: agent a2 is kept: its worktree /wt/a2 has uncommitted changes\n"},
		{"agent_forget", &verbs.ForgetResult{Forgotten: []string{}}, nil, []string{"forget", "--all-dead"}, 0, "", "no dead agent matched: nothing forgotten\n"},
		{"agent_forget", &verbs.ForgetResult{Forgotten: []string{"a1"}}, nil, []string{"forget", "--json", "a1"}, 0, `{"forgotten":["a1"]}` + "\n", ""},
	}
	covered := map[string]bool{}
	for _, c := range cases {
		covered[c.verb] = true
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			fake := (&servertest.Fake{}).Returns(c.verb, c.res, c.err)
			code, out, errs := runService(t, servertest.New(t, fake), "", c.args...)
			if code != c.code || out != c.stdout || errs != c.stder {
				t.Errorf("exit %d, want %d\nstdout:\n%s\nwant:\n%s\nstderr:\n%s\nwant:\n%s", code, c.code, out, c.stdout, errs, c.stder)
			}
			if got := fake.Calls(); len(got) != 1 || got[0].Verb != c.verb {
				t.Errorf("the service took %s; want one %s", show(got), c.verb)
			}
		})
	}
	for _, v := range verbs.All {
		if !covered[v.Name] {
			t.Errorf("no run case for %s (kaimon %s)", v.Name, v.CLI)
		}
	}
}

// A daemon the service cannot reach is exit 1 with the client's words, or
// with --json the API's error object, code unavailable: through a client
// whose Dial is refused, as an unreachable host's would be.
func TestVerbCommandDaemonDown(t *testing.T) {
	down := &client.Client{Addr: "ssh build1", Dial: func(context.Context) (net.Conn, error) {
		return nil, fmt.Errorf("dial: %w", syscall.ECONNREFUSED)
	}}
	msg := "kaimon-agentd is not running (ssh build1): dial: connection refused; is kaimon-agentd running there?"
	if code, out, errs := runService(t, down, "", "status", "a1"); code != ExitError || out != "" || errs != "kaimon: "+msg+"\n" {
		t.Errorf("status: exit %d, stdout %q, stderr %q", code, out, errs)
	}
	code, out, errs := runService(t, down, "", "list", "--json")
	if code != ExitError || out != "" || errs != `{"code":"unavailable","error":"`+msg+`"}`+"\n" {
		t.Errorf("list --json: exit %d, stdout %q, stderr %q", code, out, errs)
	}
	var de *client.DaemonDownError
	_, err := down.List(context.Background(), &verbs.ListArgs{})
	if !errors.As(err, &de) {
		t.Fatalf("the client's error is %T", err)
	}
}
