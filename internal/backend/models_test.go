package backend

import "testing"

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
	if p, _ := PrefixOf("acp:claude"); p.Prefix != PrefixACP {
		t.Errorf("acp: is not PrefixACP: %+v", p)
	}
}
