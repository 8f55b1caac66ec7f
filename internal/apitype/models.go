package apitype

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

// The model prefixes, by name for the daemon's table of constructors.
const (
	PrefixACP    = "acp:"
	PrefixCodex  = "codex:"
	PrefixOllama = "ollama:"
	PrefixVMLX   = "vmlx:"
	PrefixReplay = "replay:"
)

// ModelPrefixes are the design's backend prefixes, the one list the daemon
// picks backends from (each has its constructor there: a test checks),
// backend.Lookup refuses other prefixes by, and completion offers.
var ModelPrefixes = []ModelPrefix{
	{Prefix: PrefixACP, Backend: "acp", Doc: "an ACP agent: acp:<agent>[:<model>]"},
	{Prefix: PrefixCodex, Backend: "codex", Doc: "the Codex CLI over its app-server protocol: codex:[<model>][/<effort>]"},
	{Prefix: PrefixOllama, Backend: "ollama", Doc: "a local model served by Ollama: ollama:<tag>"},
	{Prefix: PrefixVMLX, Backend: "vmlx", Doc: "an MLX server's OpenAI-compatible API: vmlx:<tag>"},
	{Prefix: PrefixReplay, Backend: "replay", Doc: "re-emit a recorded event log: replay:<path>"},
}

// Claude is what backend.Lookup returns for a model without a prefix: the claude
// CLI's.
var Claude = ModelPrefix{Prefix: "", Backend: "claude", Doc: "the claude CLI: sonnet, opus, haiku or claude-…, with an optional /<effort>"}
