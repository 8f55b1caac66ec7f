package mcpserver

import (
	"strings"
	"testing"
)

func TestParseURI(t *testing.T) {
	for _, c := range []struct {
		uri, agent, what string
		ok               bool
	}{
		{"kaimon://agent/ab12", "ab12", "", true},
		{"kaimon://agent/ab12/output", "ab12", outputSuffix, true},
		{"kaimon://agent/ab12/events", "ab12", eventsSuffix, true},
		{AgentURI("h1/ab12") + "/events", "h1/ab12", eventsSuffix, true}, // another host's agent
		{"kaimon://agent/h1/ab12", "", "", false},                        // a slash not escaped
		{"kaimon://agent/", "", "", false},
		{"kaimon://agent/ab12/transcript", "", "", false},
		{"kaimon://agents", "", "", false},
		{"file:///etc/passwd", "", "", false},
	} {
		agent, what, ok := parseURI(c.uri)
		if agent != c.agent || what != c.what || ok != c.ok {
			t.Errorf("parseURI(%q) = %q %q %v, want %q %q %v", c.uri, agent, what, ok, c.agent, c.what, c.ok)
		}
	}
}

func TestLastLines(t *testing.T) {
	var b strings.Builder
	for i := 0; i < 1000; i++ {
		b.WriteString(strings.Repeat("x", 99) + "\n") // 100 bytes a line
	}
	got, err := lastLines(strings.NewReader(b.String()), 1050)
	if err != nil || got != strings.Repeat(strings.Repeat("x", 99)+"\n", 10) {
		t.Fatalf("lastLines kept %d bytes (%v), want the last 10 whole lines", len(got), err)
	}
	if got, _ := lastLines(strings.NewReader("a\nb\n"), 1<<20); got != "a\nb\n" {
		t.Fatalf("lastLines of a short log = %q", got)
	}
}

func TestAnswerOf(t *testing.T) {
	for _, c := range []struct {
		content any
		always  bool
		bad     bool
	}{
		{nil, false, false},
		{map[string]any{}, false, false},
		{map[string]any{"always": true}, true, false},
		{map[string]any{"always": "yes please"}, false, true},
		{"allow", false, true},
	} {
		always, bad := answerOf(c.content)
		if always != c.always || (bad != "") != c.bad {
			t.Errorf("answerOf(%v) = %v %q, want %v, bad %v", c.content, always, bad, c.always, c.bad)
		}
	}
}
