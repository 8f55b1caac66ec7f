package acp

import "regexp"

// auggie (`auggie --acp`, 0.36.0) declares two session modes: default (its
// agent, which runs every tool unasked) and ask, which only prefixes the
// prompt with "ONLY use retrieval tools" and still runs edits and
// commands. What holds is its own tool permission rules (--permission
// NAME:ask-user|allow|deny, over its settings' toolPermissions) and
// --remove-tool NAME, which keeps a tool from the model; kaimon sets them
// at spawn from the preset (Agent.PermissionFlag, AskTools, ExcludeFlag):
//
//   - default, lab, notebook (acceptEdits): its edit tools, commands and
//     web fetches ask; kaimon accepts an edit inside the cwd itself
//     (AsksEdits) and leaves the rest to the preset's deny list and to a
//     person. Tools the preset denies are removed.
//   - permission_mode default: the same, every edit asked of a person.
//   - plan: mode ask, its edit tools removed (AdvisoryPlan), commands and
//     web fetches asked.
//   - auto: as acceptEdits, said at open (auggieModeNotes).
//   - bypass: mode default with no rules: nothing asks.
var auggieModes = map[string]string{
	"default":           "default",
	"acceptEdits":       "default",
	"auto":              "default",
	"plan":              "ask",
	"bypassPermissions": "default",
}

// auggieModeNotes are the permission modes auggie cannot obey.
var auggieModeNotes = map[string]string{
	"auto": "auggie has no permission classifier, so auto runs as acceptEdits: edits inside the agent's directory are accepted, commands and web fetches asked",
}

// auggieTools are auggie's own tools (0.36.0: `auggie tools list`, and
// codebase-retrieval when the workspace is indexed) by the preset tool
// each stands for. view-session (auggie's own past sessions) and the
// task list stand for none a preset denies.
var auggieTools = map[string][]string{
	"Bash":      {"launch-process", "kill-process", "read-process", "write-process", "list-processes"},
	"Write":     {"save-file", "remove-files"},
	"Edit":      {"str-replace-editor", "apply_patch"},
	"Read":      {"view", "view-range-untruncated"},
	"Grep":      {"grep-search", "search-untruncated", "codebase-retrieval", "codebase-retrieval-raw"},
	"WebFetch":  {"web-fetch"},
	"TodoWrite": {"view_tasklist", "reorganize_tasklist", "update_tasks", "add_tasks"},
}

// auggieAsks are auggie's tools that change something or reach out: a
// command started or written to, a file saved, edited or removed, a page
// fetched. Its process tools that only watch or stop what was started run
// unasked.
var auggieAsks = []string{"launch-process", "write-process", "save-file", "remove-files", "str-replace-editor", "apply_patch", "web-fetch"}

// auggieQuestions: on the first prompt in a workspace its settings neither
// allow nor deny indexing (indexingAllowDirs, indexingDenyDirs), auggie
// asks whether to index it, which uploads the workspace to Augment: not a
// tool call of the turn, and not a preset's to give. Kaimon skips it for
// the session (reject_once), under every preset, and writes no setting.
var auggieQuestions = map[string]string{
	"workspace-indexing-permission": "kaimon does not let acp:auggie index the workspace (which uploads it to Augment) under any preset: " +
		"skipped for this session; to index, allow the directory in auggie's own settings (indexingAllowDirs in ~/.augment/settings.json)",
}

// auggieNotice matches auggie's notices about indexing, which it sends as
// message chunks: the question's preamble, and its "Indexing disabled for
// current workspace `DIR`[ for this session]." when the settings or the
// answer deny it.
var auggieNotice = regexp.MustCompile("(?s)^(Augment would like to index your workspace.*|Indexing disabled for current workspace `[^`]*`( for this session)?\\.?\\s*)$")
