package backend

import "strings"

// ModelAliases are the claude CLI's model family aliases, each resolved by
// the CLI to its latest model of that family. Any other claude-… id is
// taken as given.
var ModelAliases = []string{"sonnet", "opus", "haiku"}

// ModelPrefix is the start of a model string that selects a backend other
// than the claude CLI.
type ModelPrefix struct {
	Prefix  string // e.g. "acp:"
	Backend string // e.g. "acp"
	Doc     string // what follows the prefix, for help and completion
}

// PrefixACP selects an ACP agent: acp:<agent>[:<model>].
const PrefixACP = "acp:"

// ModelPrefixes are the design's backend prefixes, the one list the daemon
// picks backends from and completion offers.
var ModelPrefixes = []ModelPrefix{
	{Prefix: PrefixACP, Backend: "acp", Doc: "an ACP agent: acp:<agent>[:<model>]"},
	{Prefix: "ollama:", Backend: "ollama", Doc: "a local model served by Ollama: ollama:<tag>"},
	{Prefix: "vmlx:", Backend: "vmlx", Doc: "an MLX server's OpenAI-compatible API: vmlx:<tag>"},
	{Prefix: "replay:", Backend: "replay", Doc: "re-emit a recorded event log: replay:<path>"},
}

// PrefixOf returns the backend prefix model starts with; false for a claude
// model.
func PrefixOf(model string) (ModelPrefix, bool) {
	model = strings.TrimSpace(model)
	for _, p := range ModelPrefixes {
		if strings.HasPrefix(model, p.Prefix) {
			return p, true
		}
	}
	return ModelPrefix{}, false
}
