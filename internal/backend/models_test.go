package backend

import (
	"errors"
	"strings"
	"testing"

	"github.com/kaimon/kaimon/internal/apitype"
	"github.com/kaimon/kaimon/internal/verbs"
)

func TestPrefixOf(t *testing.T) {
	for model, want := range map[string]string{
		"acp:opencode:ollama/qwen2.5:14b": "acp", " ollama:qwen2.5": "ollama", "vmlx:m": "vmlx", "replay:/x.jsonl": "replay",
		"sonnet": "", "claude-sonnet-5/high": "", "": "", "acp": "",
	} {
		p, ok := PrefixOf(model)
		if ok != (want != "") || p.Backend != want {
			t.Errorf("PrefixOf(%q) = %+v, %v; want backend %q", model, p, ok, want)
		}
	}
	if p, _ := PrefixOf("acp:claude"); p.Prefix != apitype.PrefixACP {
		t.Errorf("acp:claude is not PrefixACP: %+v", p)
	}
}

// Lookup picks the backend of every model of the design's table, claude
// models with a colon among them, and refuses a prefix it does not know
// with the known ones and the nearest.
func TestLookup(t *testing.T) {
	for model, want := range map[string]string{
		"acp:opencode:ollama/qwen2.5:14b": "acp", "ollama:qwen3": "ollama", " vmlx:m": "vmlx", "replay:/x.jsonl": "replay",
		"": "claude", "sonnet": "claude", "opus/high": "claude", "claude-sonnet-5/max": "claude", "haiku": "claude",
		// Claude model ids with a colon: a provider's id, its version
		// after the colon (Bedrock), and a date after an @ (Vertex).
		"us.anthropic.claude-sonnet-4-20250514-v1:0": "claude", "claude-opus-4-1@20250805": "claude",
		"claude-sonnet-4:thinking": "claude", "sonnet[1m]": "claude",
	} {
		p, err := Lookup(model)
		if err != nil || p.Backend != want {
			t.Errorf("Lookup(%q) = %+v, %v; want backend %q", model, p, err, want)
		}
	}
	for model, want := range map[string]string{
		"olama:qwen3": `unknown model prefix "olama:" in model "olama:qwen3": the prefixes are acp:, codex:, ollama:, vmlx:, replay:, ` +
			`and a claude model has none (sonnet, opus, haiku, claude-…); did you mean "ollama:qwen3"?`,
		"Ollama:qwen3":  `did you mean "ollama:qwen3"?`,
		"vlmx:m":        `did you mean "vmlx:m"?`,
		"repaly:/x":     `did you mean "replay:/x"?`,
		"bogus:thing":   `unknown model prefix "bogus:" in model "bogus:thing": the prefixes are acp:, codex:, ollama:, vmlx:, replay:`,
		"opus:high":     `did you mean "opus/high"?`,
		"openai:gpt-5":  `the prefixes are acp:, codex:, ollama:, vmlx:, replay:`,
		" gemini:flash": `unknown model prefix "gemini:" in model "gemini:flash"`,
		"opencode:m":    `did you mean "acp:opencode:m"?`,
	} {
		_, err := Lookup(model)
		var ve *verbs.Error
		if !errors.As(err, &ve) || ve.Code != verbs.CodeBadArgument || !strings.Contains(ve.Message, want) {
			t.Errorf("Lookup(%q) = %v; want a bad argument saying %q", model, err, want)
		}
	}
	if _, err := Lookup("bogus:thing"); strings.Contains(err.Error(), "did you mean") {
		t.Errorf("Lookup(bogus:thing) guesses: %v", err)
	}
}

// A model without a prefix that is not a claude model is refused, with
// what was likely meant and the model strings that would run it.
func TestLookupRefusesNonClaudeModels(t *testing.T) {
	for _, m := range []string{"", "sonnet", "opus/high", "haiku", "default", "opusplan", "sonnet[1m]", "claude-sonnet-5", "claude-opus-4-8[1m]/low", "us.anthropic.claude-sonnet-4-5-v1:0", "claude-sonnet-4@20250514"} {
		if p, err := Lookup(m); err != nil || p != apitype.Claude {
			t.Errorf("Lookup(%q) = %v, %v; want the claude CLI", m, p, err)
		}
	}
	for m, want := range map[string]string{
		"gpt-4o":     `codex:gpt-4o, acp:copilot:gpt-4o or acp:opencode:PROVIDER/gpt-4o`,
		"codex":      `did you mean "acp:codex"`,
		"qwen-code":  `did you mean "acp:qwen"`,
		"sonet":      `did you mean "sonnet"?`,
		"sonet/high": `did you mean "sonnet/high"?`,
	} {
		_, err := Lookup(m)
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "kaimon agents") {
			t.Errorf("Lookup(%q) = %v; want a bad argument saying %s and kaimon agents", m, err, want)
		}
	}
}
