package session

import (
	"context"
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
	asLab := policy.WithCaller(bg, lab)
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

// An agent answering through the door may allow another agent's request
// only for a tool it runs unasked itself; it may always deny, and a person
// may allow anything.
func TestPermitCappedAtCaller(t *testing.T) {
	r := newPermRig(t)
	o := r.open(t, verbs.OpenArgs{ID: "kid", Permission: "lab"})
	resolve := func(preset string) *policy.Policy {
		p, err := policy.Resolve(policy.Options{Preset: preset, DisallowedTools: []string{}})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	asLab, asBypass := policy.WithCaller(bg, resolve("lab")), policy.WithCaller(bg, resolve("bypass"))

	got := ask(o, bash(1))
	p := r.rec.waitPending(t, 1)
	for _, always := range []bool{false, true} {
		_, err := r.m.Permit(asLab, &verbs.PermitArgs{AgentID: "kid", RequestID: p.RequestID, Decision: "allow", Always: always})
		if errCode(err) != verbs.CodeBadArgument || !strings.Contains(err.Error(), "must ask permission for Bash (it runs under preset lab)") ||
			!strings.Contains(err.Error(), verbs.PermitCommand("kid", p.RequestID, apitype.Allow)) {
			t.Fatalf("a lab agent allows Bash (always %v): %v", always, err)
		}
	}
	if !r.m.permits.IsPending("kid", p.RequestID) {
		t.Fatal("a refused allow decided the request")
	}
	if res, err := r.m.Permit(asLab, &verbs.PermitArgs{AgentID: "kid", RequestID: p.RequestID, Decision: "deny"}); err != nil || res.Permitted {
		t.Fatalf("a lab agent denies Bash: %+v %v", res, err)
	}
	if d := <-got; d.Allow {
		t.Fatalf("decision %+v", d)
	}

	for i, ctx := range []context.Context{asBypass, bg} {
		got = ask(o, bash(2+i))
		p = r.rec.waitPending(t, 3+2*i)
		if res, err := r.m.Permit(ctx, &verbs.PermitArgs{AgentID: "kid", RequestID: p.RequestID, Decision: "allow"}); err != nil || !res.Permitted {
			t.Fatalf("allow %d: %+v %v", i, res, err)
		}
		if d := <-got; !d.Allow {
			t.Fatalf("decision %d %+v", i, d)
		}
	}
}
