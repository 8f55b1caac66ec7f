package agentbin

import (
	"strings"
	"testing"
)

// The table is whole: every ACP name has its program and every program
// its fields; no two programs share a variable or a key.
func TestTableIsWhole(t *testing.T) {
	if len(ACP) != len(ACPNames) {
		t.Errorf("ACP has %d programs, ACPNames %d names", len(ACP), len(ACPNames))
	}
	envs, keys := map[string]bool{}, map[string]bool{}
	for _, p := range All() {
		if p.Name == "" || p.Bin == "" || p.Env == "" || p.ConfigKey == "" || p.Install == "" {
			t.Errorf("program %+v: a field is empty", p)
		}
		if envs[p.Env] || keys[p.ConfigKey] {
			t.Errorf("program %s: variable %s or key %s is another program's too", p.Bin, p.Env, p.ConfigKey)
		}
		envs[p.Env], keys[p.ConfigKey] = true, true
		// An install without a version gets whatever npm has last,
		// which kaimon may not drive yet.
		if want := p.Package + "@" + p.Tested; !strings.HasSuffix(p.Install, " "+want) {
			t.Errorf("program %s: Install %q, want one of %s", p.Bin, p.Install, want)
		}
	}
}
