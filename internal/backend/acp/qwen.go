package acp

// qwenModes maps kaimon's permission modes onto qwen-code's session modes.
// qwen starts in auto (its LLM classifier decides per call); default asks
// for edits and shell commands, auto-edit only for shell commands it does
// not deem safe (echo runs unasked), plan refuses both, yolo asks nothing.
var qwenModes = map[string]string{
	"default":           "default",
	"acceptEdits":       "auto-edit",
	"plan":              "plan",
	"auto":              "auto",
	"bypassPermissions": "yolo",
}
