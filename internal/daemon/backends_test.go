package daemon

import (
	"errors"
	"strings"
	"testing"

	"github.com/kaimon/kaimon/internal/apitype"
	"github.com/kaimon/kaimon/internal/backend"
	"github.com/kaimon/kaimon/internal/config"
	"github.com/kaimon/kaimon/internal/verbs"
)

// Every model prefix, and a model without one, has its constructor, and
// the table has no row the prefixes do not name.
func TestEveryPrefixHasABackend(t *testing.T) {
	want := map[string]bool{apitype.Claude.Prefix: true}
	for _, p := range apitype.ModelPrefixes {
		want[p.Prefix] = true
	}
	table := backends(config.Defaults())
	for p := range want {
		if table[p] == nil {
			t.Errorf("prefix %q has no constructor", p)
		}
	}
	for p := range table {
		if !want[p] {
			t.Errorf("constructor of prefix %q, which apitype.ModelPrefixes does not name", p)
		}
	}
}

// An unknown prefix is refused before the claude backend looks for its
// program: with no claude CLI in the agent's environment (the backends
// read no other), the error is about the prefix.
func TestFactoryRefusesAnUnknownPrefix(t *testing.T) {
	o := backend.Options{OpenArgs: verbs.OpenArgs{ID: "x", Cwd: t.TempDir(), Model: "bogus:thing"}, Env: []string{"PATH=" + t.TempDir(), "KAIMON_CLAUDE_BIN="}}
	_, err := factory(config.Defaults())(o, nil)
	var ve *verbs.Error
	if !errors.As(err, &ve) || ve.Code != verbs.CodeBadArgument || !strings.Contains(ve.Message, `unknown model prefix "bogus:"`) ||
		strings.Contains(ve.Message, "claude CLI is not") {
		t.Fatalf("Factory(bogus:thing) = %v; want a bad argument naming the prefix", err)
	}
}

// Options without the policy resolved at open are a kaimon bug: every
// backend of the table refuses them, before it looks for its program or
// its model, instead of running under some default policy.
func TestEveryBackendRefusesOptionsWithoutAPolicy(t *testing.T) {
	models := map[string]string{apitype.Claude.Prefix: "sonnet"}
	for _, p := range apitype.ModelPrefixes {
		models[p.Prefix] = p.Prefix + "x"
	}
	models[apitype.PrefixACP] = apitype.PrefixACP + "opencode"
	for prefix, newB := range backends(config.Defaults()) {
		o := backend.Options{OpenArgs: verbs.OpenArgs{ID: "x", Cwd: t.TempDir(), Model: models[prefix]}, CacheDir: t.TempDir(),
			Env: []string{"PATH=" + t.TempDir()}}
		if _, err := newB(o, nil); err == nil || !strings.Contains(err.Error(), "without a resolved permission policy") {
			t.Errorf("backend of %q (model %s) given no policy: %v", prefix, o.Model, err)
		}
	}
}
