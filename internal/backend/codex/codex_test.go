package codex

import (
	"testing"

	"github.com/kaimon/kaimon/internal/policy"
)

func TestParseModel(t *testing.T) {
	for _, c := range []struct{ model, effort, name, eff, err string }{
		{"codex:", "", "", "", ""},
		{"codex:gpt-5.4", "", "gpt-5.4", "", ""},
		{"codex:gpt-5.4/high", "", "gpt-5.4", "high", ""},
		{"codex:gpt-5.4/high", "low", "gpt-5.4", "low", ""},
		{"codex:/minimal", "", "", "minimal", ""},
		{"codex:gpt-5.4", "max", "gpt-5.4", "xhigh", ""},
		{"codex:gpt-5.4/extreme", "", "", "", `codex takes the reasoning efforts none, minimal, low, medium, high, xhigh, not "extreme"`},
		{"gpt-5.4", "", "", "", `model "gpt-5.4" is not a codex: model`},
	} {
		name, eff, err := ParseModel(c.model, c.effort)
		if (err == nil) != (c.err == "") || err != nil && err.Error() != c.err || name != c.name || eff != c.eff {
			t.Errorf("ParseModel(%q, %q) = %q, %q, %v; want %q, %q, %q", c.model, c.effort, name, eff, err, c.name, c.eff, c.err)
		}
	}
}

// Every permission mode a preset or permission_mode gives has Codex's
// approval policy and sandbox; full access only under bypass.
func TestModes(t *testing.T) {
	for _, m := range policy.PermissionModes {
		pm, ok := Modes[m]
		if !ok {
			t.Errorf("permission mode %s has no Codex approval policy and sandbox", m)
		}
		if (pm[1] == "danger-full-access" || pm[0] == "never") != (m == "bypassPermissions") {
			t.Errorf("permission mode %s runs Codex with %v", m, pm)
		}
	}
}
