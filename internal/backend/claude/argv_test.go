package claude

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/kaimon/kaimon/internal/backend"
	"github.com/kaimon/kaimon/internal/policy"
	"github.com/kaimon/kaimon/internal/testutil/backendtest"
	"github.com/kaimon/kaimon/internal/verbs"
)

// guard is the default recursion guard as --disallowedTools elements.
var guard = policy.RecursionGuard()

func withBase(rest ...string) []string {
	return append(append([]string{}, baseArgs...), rest...)
}

func cat(parts ...[]string) []string {
	var out []string
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

func TestArgs(t *testing.T) {
	dir := t.TempDir()
	mcpFile := filepath.Join(dir, "mcp.json")
	if err := os.WriteFile(mcpFile, []byte(`{"mcpServers":{}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	native := policy.NativeFileTools
	deny := func(extra ...string) []string { return cat([]string{"--disallowedTools"}, extra, guard) }

	tests := []struct {
		name    string
		o       backend.Options
		want    []string
		wantErr string
	}{
		{name: "empty model defaults to sonnet",
			want: withBase(cat([]string{"--model", "sonnet", "--permission-mode", "acceptEdits"}, deny())...)},
		{name: "resume", o: backend.Options{ResumeSession: "s-1"},
			want: withBase(cat([]string{"--model", "sonnet", "--permission-mode", "acceptEdits"}, deny(), []string{"--resume", "s-1"})...)},
		{name: "fork: the forked session, into a new one", o: backend.Options{Fork: &backend.Fork{AgentID: "p", Session: "s-1", Cwd: "/p"}},
			want: withBase(cat([]string{"--model", "sonnet", "--permission-mode", "acceptEdits"}, deny(), []string{"--resume", "s-1", "--fork-session"})...)},
		{name: "fork and resume", o: backend.Options{ResumeSession: "s-2", Fork: &backend.Fork{AgentID: "p", Session: "s-1"}},
			wantErr: "fork and resume contradict each other"},
		{name: "alias opus", o: backend.Options{OpenArgs: verbs.OpenArgs{Model: "opus"}},
			want: withBase(cat([]string{"--model", "opus", "--permission-mode", "acceptEdits"}, deny())...)},
		{name: "alias haiku", o: backend.Options{OpenArgs: verbs.OpenArgs{Model: "haiku"}},
			want: withBase(cat([]string{"--model", "haiku", "--permission-mode", "acceptEdits"}, deny())...)},
		{name: "pinned id", o: backend.Options{OpenArgs: verbs.OpenArgs{Model: "claude-sonnet-5"}},
			want: withBase(cat([]string{"--model", "claude-sonnet-5", "--permission-mode", "acceptEdits"}, deny())...)},
		{name: "inline effort suffix", o: backend.Options{OpenArgs: verbs.OpenArgs{Model: "sonnet/high"}},
			want: withBase(cat([]string{"--model", "sonnet", "--effort", "high", "--permission-mode", "acceptEdits"}, deny())...)},
		{name: "inline effort on an id", o: backend.Options{OpenArgs: verbs.OpenArgs{Model: "claude-sonnet-5/low"}},
			want: withBase(cat([]string{"--model", "claude-sonnet-5", "--effort", "low", "--permission-mode", "acceptEdits"}, deny())...)},
		{name: "effort option without suffix", o: backend.Options{OpenArgs: verbs.OpenArgs{Model: "opus", Effort: "max"}},
			want: withBase(cat([]string{"--model", "opus", "--effort", "max", "--permission-mode", "acceptEdits"}, deny())...)},
		{name: "effort option overrides suffix", o: backend.Options{OpenArgs: verbs.OpenArgs{Model: "sonnet/low", Effort: "high"}},
			want: withBase(cat([]string{"--model", "sonnet", "--effort", "high", "--permission-mode", "acceptEdits"}, deny())...)},
		{name: "bad effort suffix", o: backend.Options{OpenArgs: verbs.OpenArgs{Model: "sonnet/turbo"}},
			wantErr: `unknown effort "turbo" in model "sonnet/turbo": use one of low, medium, high, xhigh, max`},
		{name: "bad effort option", o: backend.Options{OpenArgs: verbs.OpenArgs{Model: "sonnet", Effort: "extreme"}},
			wantErr: `unknown effort "extreme": use one of low, medium, high, xhigh, max`},
		{name: "bad effort option even with a good suffix", o: backend.Options{OpenArgs: verbs.OpenArgs{Model: "sonnet/low", Effort: "extreme"}},
			wantErr: `unknown effort "extreme"`},
		{name: "suffix without model", o: backend.Options{OpenArgs: verbs.OpenArgs{Model: "/high"}},
			wantErr: "names an effort but no model"},
		{name: "model that reads as a flag", o: backend.Options{OpenArgs: verbs.OpenArgs{Model: "--help"}},
			wantErr: "is not a claude model"},
		{name: "claude id with a space", o: backend.Options{OpenArgs: verbs.OpenArgs{Model: "claude-sonnet-5 --help"}},
			wantErr: "bad claude model"},

		{name: "preset default", o: backend.Options{OpenArgs: verbs.OpenArgs{Permission: "default"}},
			want: withBase(cat([]string{"--model", "sonnet", "--permission-mode", "acceptEdits"}, deny())...)},
		{name: "preset notebook", o: backend.Options{OpenArgs: verbs.OpenArgs{Permission: "notebook"}},
			want: withBase(cat([]string{"--model", "sonnet", "--permission-mode", "acceptEdits",
				"--allowedTools", "mcp__kaimon"}, deny(native...))...)},
		{name: "preset specialist", o: backend.Options{OpenArgs: verbs.OpenArgs{Permission: "specialist"}},
			want: withBase(cat([]string{"--model", "sonnet", "--permission-mode", "acceptEdits"}, deny(native...))...)},
		{name: "preset lab", o: backend.Options{OpenArgs: verbs.OpenArgs{Permission: "lab"}},
			want: withBase(cat([]string{"--model", "sonnet", "--permission-mode", "acceptEdits",
				"--allowedTools", "mcp__kaimon"}, deny())...)},
		{name: "preset auto", o: backend.Options{OpenArgs: verbs.OpenArgs{Permission: "auto"}},
			want: withBase(cat([]string{"--model", "sonnet", "--permission-mode", "auto"}, deny())...)},
		{name: "preset bypass", o: backend.Options{OpenArgs: verbs.OpenArgs{Permission: "bypass"}},
			want: withBase(cat([]string{"--model", "sonnet", "--permission-mode", "bypassPermissions",
				"--dangerously-skip-permissions"}, deny())...)},
		{name: "unknown preset", o: backend.Options{OpenArgs: verbs.OpenArgs{Permission: "yolo"}},
			wantErr: `unknown permission preset "yolo"`},
		{name: "permission_mode overrides the preset's mode", o: backend.Options{OpenArgs: verbs.OpenArgs{Permission: "lab", PermissionMode: "plan"}},
			want: withBase(cat([]string{"--model", "sonnet", "--permission-mode", "plan",
				"--allowedTools", "mcp__kaimon"}, deny())...)},
		{name: "permission_mode keeps bypass's skip flag", o: backend.Options{OpenArgs: verbs.OpenArgs{Permission: "bypass", PermissionMode: "default"}},
			want: withBase(cat([]string{"--model", "sonnet", "--permission-mode", "default",
				"--dangerously-skip-permissions"}, deny())...)},
		{name: "unknown permission_mode", o: backend.Options{OpenArgs: verbs.OpenArgs{PermissionMode: "yes"}},
			wantErr: `unknown permission_mode "yes"`},

		{name: "allowed_tools compose with the preset", o: backend.Options{OpenArgs: verbs.OpenArgs{Permission: "notebook", AllowedTools: []string{"Bash(git *)", "WebFetch"}}},
			want: withBase(cat([]string{"--model", "sonnet", "--permission-mode", "acceptEdits",
				"--allowedTools", "mcp__kaimon", "Bash(git *)", "WebFetch"}, deny(native...))...)},
		{name: "allowed_tools replace the allowance under specialist", o: backend.Options{OpenArgs: verbs.OpenArgs{Permission: "specialist", AllowedTools: []string{"mcp__kaimon__slate_add_cell"}}},
			want: withBase(cat([]string{"--model", "sonnet", "--permission-mode", "acceptEdits",
				"--allowedTools", "mcp__kaimon__slate_add_cell"}, deny(native...))...)},
		{name: "explicit disallowed_tools replace the guard", o: backend.Options{OpenArgs: verbs.OpenArgs{DisallowedTools: &[]string{"WebSearch"}}},
			want: withBase("--model", "sonnet", "--permission-mode", "acceptEdits", "--disallowedTools", "WebSearch")},
		{name: "empty disallowed_tools removes the guard", o: backend.Options{OpenArgs: verbs.OpenArgs{DisallowedTools: &[]string{}}},
			want: withBase("--model", "sonnet", "--permission-mode", "acceptEdits")},
		{name: "empty disallowed_tools keeps the preset's deny list", o: backend.Options{OpenArgs: verbs.OpenArgs{Permission: "notebook", DisallowedTools: &[]string{}}},
			want: withBase(cat([]string{"--model", "sonnet", "--permission-mode", "acceptEdits",
				"--allowedTools", "mcp__kaimon", "--disallowedTools"}, native)...)},
		{name: "empty tool name", o: backend.Options{OpenArgs: verbs.OpenArgs{AllowedTools: []string{" "}}},
			wantErr: "empty tool name"},

		{name: "only with built-ins", o: backend.Options{OpenArgs: verbs.OpenArgs{Only: true, AllowedTools: []string{"Read", "Bash(git *)", "Bash(ls)", "Grep"}}},
			want: withBase(cat([]string{"--model", "sonnet", "--permission-mode", "acceptEdits",
				"--tools", "Read", "Bash", "Grep", "--strict-mcp-config",
				"--allowedTools", "Read", "Bash(git *)", "Bash(ls)", "Grep"}, deny())...)},
		{name: "only with no tools", o: backend.Options{OpenArgs: verbs.OpenArgs{Only: true, Permission: "specialist"}},
			want: withBase(cat([]string{"--model", "sonnet", "--permission-mode", "acceptEdits",
				"--tools", "", "--strict-mcp-config"}, deny(native...))...)},
		{name: "only refuses MCP tools", o: backend.Options{OpenArgs: verbs.OpenArgs{Only: true, AllowedTools: []string{"Read", "mcp__kaimon__slate_add_cell"}}},
			wantErr: "the kaimon MCP door's port is not known, so an agent restricted with only cannot be given MCP tools"},
		{name: "only refuses a preset's MCP allowance", o: backend.Options{OpenArgs: verbs.OpenArgs{Only: true, Permission: "lab"}},
			wantErr: "cannot be given MCP tools"},
		{name: "only refuses mcp_config", o: backend.Options{OpenArgs: verbs.OpenArgs{Only: true, AllowedTools: []string{"Read"}, MCPConfig: mcpFile}},
			wantErr: "only refuses a caller-supplied mcp_config"},

		{name: "system_prompt", o: backend.Options{OpenArgs: verbs.OpenArgs{SystemPrompt: "Be terse.\nAnswer in French."}},
			want: withBase(cat([]string{"--model", "sonnet", "--permission-mode", "acceptEdits"}, deny(),
				[]string{"--append-system-prompt", "Be terse.\nAnswer in French."})...)},
		{name: "mcp_config", o: backend.Options{OpenArgs: verbs.OpenArgs{MCPConfig: mcpFile}},
			want: withBase(cat([]string{"--model", "sonnet", "--permission-mode", "acceptEdits"}, deny(),
				[]string{"--mcp-config", mcpFile})...)},
		{name: "missing mcp_config", o: backend.Options{OpenArgs: verbs.OpenArgs{MCPConfig: filepath.Join(dir, "nope.json")}},
			wantErr: "no such file"},
		{name: "mcp_config that is a directory", o: backend.Options{OpenArgs: verbs.OpenArgs{MCPConfig: dir}},
			wantErr: "is a directory"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// The session resolves the policy at open, and refuses
			// there what does not resolve (an unknown preset).
			o := tc.o
			var got []string
			pol, err := policy.ForOpen(&o.OpenArgs, nil)
			if o.Policy = pol; err == nil {
				got, err = Args(&o)
			}
			if tc.wantErr != "" {
				if err == nil {
					t.Fatalf("Args = %q, want error containing %q", got, tc.wantErr)
				}
				if !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %q, want it to contain %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Args: %v", err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("Args =\n  %q\nwant\n  %q", got, tc.want)
			}
		})
	}
}

func TestArgsGuardPresentByDefault(t *testing.T) {
	o := backendtest.Resolved(t, backend.Options{})
	got, err := Args(&o)
	if err != nil {
		t.Fatal(err)
	}
	i := indexOf(got, "--disallowedTools")
	if i < 0 {
		t.Fatalf("no --disallowedTools in %q", got)
	}
	for _, want := range []string{"mcp__kaimon__agent_open", "mcp__kaimon__agent_close", "Agent", "Task", "Workflow"} {
		if indexOf(got[i:], want) < 0 {
			t.Errorf("recursion guard lacks %s: %q", want, got[i:])
		}
	}
}

func indexOf(list []string, s string) int {
	for i, v := range list {
		if v == s {
			return i
		}
	}
	return -1
}

func TestParseModel(t *testing.T) {
	for _, tc := range []struct{ model, effort, name, eff string }{
		{"", "", "sonnet", ""},
		{"opus/xhigh", "", "opus", "xhigh"},
		{"claude-sonnet-5", "medium", "claude-sonnet-5", "medium"},
		{"sonnet/low", "high", "sonnet", "high"},
	} {
		name, eff, err := ParseModel(tc.model, tc.effort)
		if err != nil || name != tc.name || eff != tc.eff {
			t.Errorf("ParseModel(%q, %q) = %q, %q, %v; want %q, %q", tc.model, tc.effort, name, eff, err, tc.name, tc.eff)
		}
	}
}

// A model with a prefix is not a claude model, whichever the prefix: the
// claude agent refuses it (agent_set_model) instead of sending it to the
// API as a name.
func TestParseModelRefusesAPrefix(t *testing.T) {
	for model, want := range map[string]string{
		"olama:qwen3":  `unknown model prefix "olama:"`,
		"ollama:qwen3": `the ollama backend's, not a claude model`,
		"acp:opencode": `the acp backend's, not a claude model`,
	} {
		if _, _, err := ParseModel(model, ""); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseModel(%q) = %v; want an error saying %q", model, err, want)
		}
	}
	if name, _, err := ParseModel("us.anthropic.claude-sonnet-4-20250514-v1:0", ""); err != nil || name != "us.anthropic.claude-sonnet-4-20250514-v1:0" {
		t.Errorf("a Bedrock id with its colon: %q, %v", name, err)
	}
}

// A fork needs the forked transcript where the CLI keeps it for the forked
// agent's cwd; a fork in another cwd copies it to that cwd's project dir,
// where the CLI looks for it, and one in the same cwd copies nothing.
func TestForkTranscripts(t *testing.T) {
	home := t.TempDir()
	env := []string{"HOME=" + home}
	parentCwd, forkCwd := t.TempDir(), t.TempDir()
	o := backend.Options{OpenArgs: verbs.OpenArgs{Cwd: forkCwd}, Fork: &backend.Fork{AgentID: "p1", Session: "s-1", Cwd: parentCwd}}
	if _, _, err := forkTranscripts(env, &o); err == nil || !strings.Contains(err.Error(), "cannot fork agent p1's claude session s-1") {
		t.Fatalf("a fork without the forked transcript: %v", err)
	}
	from := TranscriptPath(env, parentCwd, "s-1")
	if err := os.MkdirAll(filepath.Dir(from), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(from, []byte("{}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	gotFrom, to, err := forkTranscripts(env, &o)
	if err != nil || gotFrom != from || to != TranscriptPath(env, forkCwd, "s-1") || to == from {
		t.Fatalf("fork into another cwd: %q %q %v", gotFrom, to, err)
	}
	b := &Backend{forkFrom: gotFrom, forkTo: to}
	if made, err := b.copyForked(); err != nil || !made {
		t.Fatalf("copy: %v %v", made, err)
	}
	if data, err := os.ReadFile(to); err != nil || string(data) != "{}\n" {
		t.Fatalf("the copy: %q %v", data, err)
	}
	b.removeForkCopy(true)
	if _, err := os.Stat(to); err == nil {
		t.Fatal("the copy of a failed start was kept")
	}
	o.Cwd = parentCwd
	if _, to, err := forkTranscripts(env, &o); err != nil || to != "" {
		t.Fatalf("fork in the same cwd: %q %v", to, err)
	}
}
