package policy

import "strings"

// Presets and allowed_tools speak the claude CLI's tool names (Bash, Write,
// …) and mcp__kaimon__VERB for kaimon's own verbs. ACP agents name their
// own tools in their own words (opencode's bash and write, gemini-cli's
// run_shell_command and write_file), so every check of an ACP agent's tool
// call first translates the agent's name with NativeToolName.

// KaimonTool is the name an owned agent knows kaimon's verb by, e.g.
// mcp__kaimon__agent_list.
func KaimonTool(verb string) string { return KaimonServer + "__" + verb }

// KaimonVerb returns the verb of a kaimon tool name, and whether tool is one.
func KaimonVerb(tool string) (string, bool) {
	verb, ok := strings.CutPrefix(tool, KaimonServer+"__")
	return verb, ok && verb != ""
}

// nativeNames maps the ACP agents' own tool names (lower case) to the
// claude CLI's, which presets and allowed_tools use.
var nativeNames = map[string]string{
	// opencode
	"bash": "Bash", "read": "Read", "write": "Write", "edit": "Edit", "multiedit": "Edit",
	"patch": "Edit", "apply_patch": "Edit", "glob": "Glob", "grep": "Grep", "list": "Glob",
	"webfetch": "WebFetch", "websearch": "WebSearch", "todowrite": "TodoWrite", "todoread": "TodoWrite",
	"task": "Task", "skill": "Skill", "question": "AskUserQuestion",
	// gemini-cli
	"run_shell_command": "Bash", "read_file": "Read", "read_many_files": "Read", "write_file": "Write",
	"replace": "Edit", "search_file_content": "Grep", "grep_search": "Grep", "list_directory": "Glob",
	"web_fetch": "WebFetch", "google_web_search": "WebSearch", "write_todos": "TodoWrite",
	"save_memory": "Write",
	// qwen-code (a gemini-cli fork: the names above, and these)
	"todo_write": "TodoWrite", "web_search": "WebSearch", "agent": "Agent",
	"ask_user_question": "AskUserQuestion", "notebook_edit": "NotebookEdit",
}

// kindNames maps an ACP tool kind to the tool a preset knows it by, for a
// call whose own name is unknown.
var kindNames = map[string]string{
	"execute": "Bash", "read": "Read", "edit": "Edit", "delete": "Edit", "move": "Edit",
	"search": "Grep", "fetch": "WebFetch",
}

// NativeToolName translates an agent's name of one of its tools into
// the name presets use: a claude CLI tool name (Bash, Read, Write, Edit,
// Glob, Grep, …), or mcp__kaimon__VERB for kaimon's own tools however the
// agent prefixes them (opencode: kaimon_VERB). A name it does not know is
// looked up by its ACP kind (execute → Bash, edit → Edit, …), else
// returned as is.
func NativeToolName(name, kind string) string {
	n := strings.TrimSpace(name)
	if v, ok := strings.CutPrefix(n, KaimonServer+"__"); ok {
		return KaimonTool(v)
	}
	if v, ok := strings.CutPrefix(n, "kaimon_"); ok && v != "" {
		return KaimonTool(v)
	}
	if v, ok := nativeNames[strings.ToLower(n)]; ok {
		return v
	}
	for _, t := range NativeFileTools {
		if n == t {
			return n
		}
	}
	if v, ok := kindNames[kind]; ok && (n == "" || strings.ContainsAny(n, " /")) {
		// A title rather than a name ("echo hi", "/home/u/x.txt").
		return v
	}
	if n == "" {
		return "other"
	}
	return n
}

// Mutating says whether a tool (by its preset name) changes files or runs
// commands: what a bridge refuses when it cannot ask kaimon.
func Mutating(tool string) bool {
	switch tool {
	case "Bash", "Monitor", "Write", "Edit", "MultiEdit", "NotebookEdit":
		return true
	}
	return false
}
