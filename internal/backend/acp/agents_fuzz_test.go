package acp

import (
	"strings"
	"testing"
	"unicode"
)

// FuzzParseModel checks what ParseModel accepts: a known agent, and a
// model (handed to the agent's own model switch) that does not read as a
// flag and holds no whitespace.
func FuzzParseModel(f *testing.F) {
	for _, s := range []string{
		"acp:opencode", "acp:opencode:ollama/qwen2.5:14b", "acp:claude:haiku", "acp:gemini:gemini-2.5-pro",
		"acp:codex", "sonnet", "acp:claude:-x", "acp:claude: a b ", "acp:gemini:", " acp:claude:opus ",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		a, model, err := ParseModel(s)
		if err != nil {
			return
		}
		if a == nil || Agents[a.Name] != a {
			t.Fatalf("ParseModel(%q) accepts an unknown agent %+v", s, a)
		}
		if strings.HasPrefix(model, "-") || strings.IndexFunc(model, unicode.IsSpace) >= 0 {
			t.Fatalf("ParseModel(%q) accepts the model %q", s, model)
		}
	})
}
