package verbs

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/kaimon/kaimon/internal/apitype"
)

func TestDecodePermit(t *testing.T) {
	v := ByName("permit")
	if v == nil || v.Name != "agent_permit" || v.Route() != "/v1/agent_permit" {
		t.Fatalf("permit verb %+v", v)
	}
	a, err := v.Decode([]byte(`{"agent_id":"a","request_id":"p1","decision":"allow","always":true}`))
	if err != nil {
		t.Fatal(err)
	}
	if p := a.(*PermitArgs); p.AgentID != "a" || p.RequestID != "p1" || p.Decision != apitype.Allow || !p.Always {
		t.Fatalf("decoded %+v", p)
	}
	// Without request_id: the agent's one pending request, which the
	// daemon finds (session.Manager.Permit).
	if a, err := v.Decode([]byte(`{"agent_id":"a","decision":"deny"}`)); err != nil || a.(*PermitArgs).RequestID != "" {
		t.Fatalf("permit without request_id: %+v, %v", a, err)
	}
	for raw, want := range map[string]string{
		`{"agent_id":"a","request_id":"p1"}`:                                   "argument decision is required",
		`{"agent_id":"a","request_id":"p1","decision":"allow","always":"yes"}`: "argument always must be a boolean",
		`{"agent_id":"a","request_id":"p1","decision":"allowed"}`:              `decision "allowed" is not one of allow, deny`,
	} {
		_, err := v.Decode([]byte(raw))
		var ve *Error
		if !errors.As(err, &ve) || ve.Code != CodeBadArgument || !strings.Contains(ve.Message, want) {
			t.Errorf("%s: %v, want %q", raw, err, want)
		}
	}
}

func TestPermitCommand(t *testing.T) {
	if got := PermitCommand("a1", "r7", ""); got != "kaimon permit a1 r7 allow|deny" {
		t.Fatalf("PermitCommand with the choices: %q", got)
	}
	if got := PermitCommand("a1", "r7", apitype.Allow); got != "kaimon permit a1 r7 allow" {
		t.Fatalf("PermitCommand allow: %q", got)
	}
}

// agent_permit's decision enum is apitype.Decisions, word for word, in
// order: the verb table, the CLI's usage and check, completion and the
// permission events all read that one list.
func TestPermitDecisionEnumIsTheDecisions(t *testing.T) {
	var arg *Arg
	for i, a := range ByName("agent_permit").Args {
		if a.Name == "decision" {
			arg = &ByName("agent_permit").Args[i]
		}
	}
	if arg == nil {
		t.Fatal("agent_permit has no decision argument")
	}
	if !slices.Equal(arg.Enum, apitype.Strings(apitype.Decisions)) {
		t.Errorf("agent_permit's decision enum %v, apitype.Decisions %v", arg.Enum, apitype.Decisions)
	}
	if got := DecisionChoices(); got != "allow|deny" {
		t.Errorf("DecisionChoices() = %q", got)
	}
}
