package backend

import (
	"fmt"
	"slices"
	"strings"
	"unicode"

	"github.com/kaimon/kaimon/internal/agentbin"
	"github.com/kaimon/kaimon/internal/apitype"
	"github.com/kaimon/kaimon/internal/suggest"
	"github.com/kaimon/kaimon/internal/verbs"
)

// moreAliases are the claude CLI's other model aliases, accepted as they
// are and not offered by completion.
var moreAliases = []string{"default", "opusplan", "sonnet[1m]", "opus[1m]", "haiku[1m]"}

// PrefixOf returns the backend prefix model starts with; false for a claude
// model.
func PrefixOf(model string) (apitype.ModelPrefix, bool) {
	model = strings.TrimSpace(model)
	for _, p := range apitype.ModelPrefixes {
		if strings.HasPrefix(model, p.Prefix) {
			return p, true
		}
	}
	return apitype.ModelPrefix{}, false
}

// Lookup returns the backend model selects: its prefix's, or Claude for a
// model without one. A model that begins with a word and a colon
// ("olama:qwen3") names a prefix, and one not in ModelPrefixes is refused
// (a bad argument naming the known ones and the nearest) rather than sent
// to the claude CLI, and so to a paid API, as a model name. A claude model
// never begins so: its names are aliases, claude-… ids (a hyphen before any
// colon), and provider ids with dots or slashes.
func Lookup(model string) (apitype.ModelPrefix, error) {
	if p, ok := PrefixOf(model); ok {
		return p, nil
	}
	m := strings.TrimSpace(model)
	word, _, ok := strings.Cut(m, ":")
	if !ok || !isWord(word) {
		if err := checkClaudeModel(m); err != nil {
			return apitype.ModelPrefix{}, err
		}
		return apitype.Claude, nil
	}
	msg := fmt.Sprintf("unknown model prefix %q in model %q: the prefixes are %s, and a claude model has none (%s, claude-…)",
		word+":", m, strings.Join(prefixList(), ", "), strings.Join(apitype.ModelAliases, ", "))
	if guess := guessModel(word, m[len(word)+1:]); guess != "" {
		msg += fmt.Sprintf("; did you mean %q?", guess)
	}
	return apitype.ModelPrefix{}, verbs.BadArg("%s", msg)
}

// guessModel returns the model word:rest was likely meant to be: rest
// under the prefix nearest to word, an ACP agent's name made an acp:
// model, or a claude alias given its effort after a slash; "" when none is
// near.
func guessModel(word, rest string) string {
	lower := strings.ToLower(word)
	known := make([]string, len(apitype.ModelPrefixes))
	for i, p := range apitype.ModelPrefixes {
		known[i] = strings.TrimSuffix(p.Prefix, ":")
	}
	if n := suggest.Nearest(lower, known, 0.7); n != "" {
		return n + ":" + rest
	}
	if slices.Contains(agentbin.ACPNames, lower) {
		return apitype.PrefixACP + lower + ":" + rest
	}
	if slices.Contains(apitype.ModelAliases, lower) {
		return lower + "/" + rest
	}
	return ""
}

// checkClaudeModel refuses a model without a prefix that the claude CLI
// would not take as a claude model: one neither an alias nor a claude-…
// id (which a provider's id holds too: us.anthropic.claude-…,
// claude-…@date), with an optional /<effort>. Such a model ("gpt-4o",
// "codex", "sonet") would be sent to the claude CLI, and its API, as a
// name; the error says what was likely meant and the model strings that
// would run it. "" is the default model.
func checkClaudeModel(m string) error {
	name := m
	if i := strings.LastIndexByte(name, '/'); i >= 0 {
		name = name[:i]
	}
	lower := strings.ToLower(name)
	if name == "" || slices.Contains(apitype.ModelAliases, name) || slices.Contains(moreAliases, name) || strings.Contains(lower, "claude-") {
		return nil
	}
	msg := fmt.Sprintf("model %q is not a claude model (an alias: %s, %s; or a claude-… id)", m, strings.Join(apitype.ModelAliases, ", "), strings.Join(moreAliases, ", "))
	if p, ok := agentbin.LookupACP(lower); ok {
		msg += fmt.Sprintf("; did you mean %q (the ACP agent %s)?", apitype.PrefixACP+p.Name, p.Title)
	} else if n := suggest.Nearest(lower, append(append([]string{}, apitype.ModelAliases...), moreAliases...), 0.8); n != "" {
		msg += fmt.Sprintf("; did you mean %q?", n+m[len(name):])
	} else if !strings.HasPrefix(name, "-") && !strings.ContainsFunc(name, unicode.IsSpace) {
		msg += fmt.Sprintf(": to run it on an agent that serves it, write e.g. %s, %s or %s",
			apitype.PrefixCodex+name, apitype.PrefixACP+"copilot:"+name, apitype.PrefixACP+"opencode:PROVIDER/"+name)
	}
	return verbs.BadArg("%s (`kaimon agents` lists what a model string can be)", msg)
}

// prefixList is ModelPrefixes' prefixes, in order.
func prefixList() []string {
	out := make([]string, len(apitype.ModelPrefixes))
	for i, p := range apitype.ModelPrefixes {
		out[i] = p.Prefix
	}
	return out
}

// isWord says whether s is a prefix's shape: a letter, then letters,
// digits or underscores. (By hand: a package-level regexp is work at
// every start of the CLI, which links this package.)
func isWord(s string) bool {
	for i, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z':
		case i > 0 && (r >= '0' && r <= '9' || r == '_'):
		default:
			return false
		}
	}
	return s != ""
}
