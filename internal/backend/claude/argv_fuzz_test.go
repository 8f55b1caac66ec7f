package claude

import (
	"slices"
	"strings"
	"testing"
	"unicode"

	"github.com/kaimon/kaimon/internal/verbs"
)

// FuzzParseModel checks what ParseModel accepts: the name goes on the
// CLI's argv after --model, so it must not read as a flag or hold
// whitespace, and an effort must be one the CLI knows.
func FuzzParseModel(f *testing.F) {
	for _, s := range [][2]string{
		{"", ""}, {"opus/xhigh", ""}, {"claude-sonnet-5", "medium"}, {"sonnet/low", "high"},
		{"/high", ""}, {"-x", ""}, {"a b", ""}, {"sonnet/", ""}, {" sonnet ", "max"}, {"a/b/low", ""},
	} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, model, effort string) {
		name, eff, err := ParseModel(model, effort)
		if err != nil {
			return
		}
		if name == "" || strings.HasPrefix(name, "-") || strings.IndexFunc(name, unicode.IsSpace) >= 0 {
			t.Fatalf("ParseModel(%q, %q) accepts the name %q", model, effort, name)
		}
		if eff != "" && !slices.Contains(verbs.Efforts, eff) {
			t.Fatalf("ParseModel(%q, %q) accepts the effort %q", model, effort, eff)
		}
	})
}
