package session

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/kaimon/kaimon/internal/apitype"
	"github.com/kaimon/kaimon/internal/policy"
	"github.com/kaimon/kaimon/internal/verbs"
)

// An open on behalf of an agent (the door puts its policy in the context)
// is capped at that agent's policy once the options are whole: a fork or
// a resume that would inherit bypass is refused as a fresh bypass open
// is, and leaves nothing; what the parent may open, it opens, with the
// parent's deny list. A person's open is not capped.
func TestOpenCappedAtParent(t *testing.T) {
	r := newRig(t, 0)
	cwd := t.TempDir()
	if _, err := r.m.Open(bg, &verbs.OpenArgs{Cwd: cwd, ID: "free", Permission: "bypass"}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.m.Run(bg, decoded(&verbs.RunArgs{AgentID: "free", Text: "one"})); err != nil {
		t.Fatal(err)
	}
	lab, err := policy.Resolve(policy.Options{Preset: "lab", DisallowedTools: []string{}})
	if err != nil {
		t.Fatal(err)
	}
	asLab := policy.WithParent(bg, lab)
	refused := func(a verbs.OpenArgs) {
		t.Helper()
		_, err := r.m.Open(asLab, &a)
		var ve *verbs.Error
		if !errors.As(err, &ve) || ve.Code != verbs.CodeBadArgument ||
			!strings.Contains(ve.Message, "preset bypass runs without permission checks") || !strings.Contains(ve.Message, "runs under preset lab") {
			t.Errorf("lab opens %+v: %v, want refused naming bypass and lab", a, err)
		}
	}
	refused(verbs.OpenArgs{Cwd: cwd, ID: "kid", Permission: "bypass"})
	refused(verbs.OpenArgs{ID: "fk", Fork: "free"})
	for _, id := range []string{"kid", "fk"} {
		if _, err := r.m.Status(bg, &verbs.StatusArgs{AgentID: id}); err == nil || verbs.AsError(err).Code != verbs.CodeNotFound {
			t.Errorf("a refused open left agent %s: %v", id, err)
		}
	}
	if _, err := r.m.Close(bg, &verbs.CloseArgs{AgentID: "free"}); err != nil {
		t.Fatal(err)
	}
	before := readRecord(t, r.paths.CacheDir, "free")
	refused(verbs.OpenArgs{ID: "free", Resume: true})
	if after := readRecord(t, r.paths.CacheDir, "free"); after.Status != apitype.Dead || after.LastActivity != before.LastActivity {
		t.Errorf("a refused resume changed the record: %+v", after)
	}

	if _, err := r.m.Open(asLab, &verbs.OpenArgs{Cwd: cwd, ID: "kid", Permission: "lab"}); err != nil {
		t.Fatalf("lab opens lab: %v", err)
	}
	r.m.mu.Lock()
	kid := r.m.agents["kid"]
	r.m.mu.Unlock()
	kid.mu.Lock()
	pol := kid.opts.Policy
	kid.mu.Unlock()
	if pol.Preset.Name != "lab" || pol.Bypass() || !slices.Equal(pol.Deny, policy.RecursionGuard()) {
		t.Errorf("lab's lab child runs under %+v", pol)
	}
	if _, err := r.m.Open(bg, &verbs.OpenArgs{ID: "free", Resume: true}); err != nil {
		t.Errorf("a person's resume of a bypass agent: %v", err)
	}
}
