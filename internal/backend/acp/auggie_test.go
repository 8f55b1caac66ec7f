package acp

import (
	"strings"
	"testing"

	"github.com/kaimon/kaimon/internal/policy"
)

// isQuestion says whether a recorded permission request is one of an
// agent's Questions (about no tool call).
func isQuestion(id string) bool {
	for _, a := range Agents {
		if _, ok := a.Questions[id]; ok {
			return true
		}
	}
	return false
}

// auggie's recorded session (auggie --acp 0.36.0 against fakeaugment,
// through a bare client, no indexing setting, save-file and launch-process
// set to ask): the workspace indexing question on the first prompt,
// answered "skip for this session", a text turn, a save-file allowed, a
// launch-process rejected, a slow turn cancelled.
func TestMapperAuggie(t *testing.T) {
	ag := Agents["auggie"]
	evs, tools := replayWith(t, "auggie-index-perm-cancel.jsonl", newMapperFor(ag))
	// The indexing preamble and "Indexing disabled …" are auggie's
	// notices, and its question is no tool call.
	if got := shape(evs, 1); got != "user_text turn_started assistant_text(Hello from fakeaugment (request #1).) usage result(end_turn)" {
		t.Fatalf("turn 1: %s", got)
	}
	if got := shape(evs, 2); got != "user_text turn_started tool_use(Save aug.txt +input) tool_result(completed) assistant_text(Tool said: File saved.  Saved file {/home/user/project/aug.txt}. Done.) usage result(end_turn)" {
		t.Fatalf("turn 2: %s", got)
	}
	// A rejected call fails, and the model goes on: the turn ends.
	if got := shape(evs, 3); got != "user_text turn_started tool_use(Run `touch denied.txt` +input) tool_result(failed) assistant_text(Tool said: Tool execution denied by user: launch-process. Done.) usage result(end_turn)" {
		t.Fatalf("turn 3: %s", got)
	}
	if got := shape(evs, 4); got != "user_text turn_started assistant_text(chunk0 ) usage result(cancelled)" {
		t.Fatalf("turn 4: %s", got)
	}
	// Titles describe the calls: a preset knows them by kind.
	if strings.Join(tools, " ") != "Edit Bash" {
		t.Fatalf("tools %v", tools)
	}
	// Its prompt responses carry no usage.
	m := newMapperFor(ag)
	replayWith(t, "auggie-index-perm-cancel.jsonl", m)
	if note := m.UsageNote(); note != "usage not reported by this agent" {
		t.Fatalf("usage note %q", note)
	}
	// A mapper that does not know auggie's ways takes its notices for
	// the model's text.
	plain, _ := replay(t, "auggie-index-perm-cancel.jsonl")
	if got := shape(plain, 1); !strings.Contains(got, "Augment would like to index") {
		t.Fatalf("plain mapper turn 1: %s", got)
	}
}

func TestAuggieNotice(t *testing.T) {
	for text, want := range map[string]bool{
		"Indexing disabled for current workspace `/home/user/project`\n\n":                   true,
		"Indexing disabled for current workspace `/home/user/project` for this session.\n\n": true,
		"Augment would like to index your workspace to provide better …\n\nWorkspace: `/x`":  true,
		"Indexing disabled for current workspace `/x`, and then the model said more":         false,
		"I think Augment would like to index your workspace":                                 false,
	} {
		if got := auggieNotice.MatchString(text); got != want {
			t.Errorf("notice %q: %v, want %v", text, got, want)
		}
	}
}

// TestAuggiePresets: each preset onto auggie's mode, its permission rules
// and the tools it removes, and what is said at open.
func TestAuggiePresets(t *testing.T) {
	ag := Agents["auggie"]
	modes := []string{"default", "ask"}
	for _, c := range []struct {
		preset, mode string
		sessionMode  string
		args         string
		said         string
	}{
		{"default", "", "default",
			"--permission apply_patch:ask-user --permission launch-process:ask-user --permission remove-files:ask-user --permission save-file:ask-user " +
				"--permission str-replace-editor:ask-user --permission web-fetch:ask-user --permission write-process:ask-user", ""},
		{"default", "default", "default",
			"--permission apply_patch:ask-user --permission launch-process:ask-user --permission remove-files:ask-user --permission save-file:ask-user " +
				"--permission str-replace-editor:ask-user --permission web-fetch:ask-user --permission write-process:ask-user", ""},
		{"lab", "", "default",
			"--permission apply_patch:ask-user --permission launch-process:ask-user --permission remove-files:ask-user --permission save-file:ask-user " +
				"--permission str-replace-editor:ask-user --permission web-fetch:ask-user --permission write-process:ask-user", ""},
		// plan: ask mode, which does not hold by itself, and no edit tools.
		{"default", "plan", "ask",
			"--permission launch-process:ask-user --permission web-fetch:ask-user --permission write-process:ask-user " +
				"--remove-tool apply_patch --remove-tool remove-files --remove-tool save-file --remove-tool str-replace-editor", ""},
		{"auto", "", "default",
			"--permission apply_patch:ask-user --permission launch-process:ask-user --permission remove-files:ask-user --permission save-file:ask-user " +
				"--permission str-replace-editor:ask-user --permission web-fetch:ask-user --permission write-process:ask-user",
			"preset auto (permission mode auto) cannot be obeyed on acp:auggie: auggie has no permission classifier"},
		{"bypass", "", "default", "", ""},
		// notebook: auggie's own file and shell tools removed; web-fetch
		// still asks.
		{"notebook", "", "default",
			"--permission web-fetch:ask-user " +
				"--remove-tool apply_patch --remove-tool codebase-retrieval --remove-tool codebase-retrieval-raw --remove-tool grep-search --remove-tool kill-process " +
				"--remove-tool launch-process --remove-tool list-processes --remove-tool read-process --remove-tool remove-files --remove-tool save-file " +
				"--remove-tool search-untruncated --remove-tool str-replace-editor --remove-tool view --remove-tool view-range-untruncated --remove-tool write-process", ""},
		// specialist: every tool of auggie's kaimon knows is removed, but
		// one it does not know could not be: said.
		{"specialist", "", "default",
			"--remove-tool add_tasks --remove-tool apply_patch --remove-tool codebase-retrieval --remove-tool codebase-retrieval-raw --remove-tool grep-search " +
				"--remove-tool kill-process --remove-tool launch-process --remove-tool list-processes --remove-tool read-process --remove-tool remove-files " +
				"--remove-tool reorganize_tasklist --remove-tool save-file --remove-tool search-untruncated --remove-tool str-replace-editor --remove-tool update_tasks " +
				"--remove-tool view --remove-tool view-range-untruncated --remove-tool view_tasklist --remove-tool web-fetch --remove-tool write-process",
			"preset specialist is not fully enforced on acp:auggie: allowed_tools is meant to be the whole tool set"},
	} {
		pol, err := policy.Resolve(policy.Options{Preset: c.preset, PermissionMode: c.mode})
		if err != nil {
			t.Fatal(err)
		}
		name := c.preset + "/" + c.mode
		if got := sessionMode(ag, pol, modes); got != c.sessionMode {
			t.Errorf("%s: mode %q, want %q", name, got, c.sessionMode)
		}
		b := &Backend{agent: ag, pol: pol}
		if got := strings.Join(b.args(nil), " "); got != c.args {
			t.Errorf("%s: args\n%s\nwant\n%s", name, got, c.args)
		}
		if got := Enforcement(ag, pol); (c.said == "") != (got == "") || !strings.HasPrefix(got, c.said) {
			t.Errorf("%s: said %q, want %q…", name, got, c.said)
		}
	}
	// An allowed tool runs as auggie's mode says: no rule for it.
	pol, _ := policy.Resolve(policy.Options{Preset: "default", AllowedTools: []string{"Bash"}})
	if got := strings.Join(askRules(ag, pol), " "); strings.Contains(got, "launch-process") {
		t.Fatalf("Bash allowed, rules %s", got)
	}
	// Other agents take no such rules.
	if got := askRules(Agents["copilot"], pol); got != nil {
		t.Fatalf("copilot rules %v", got)
	}
}
