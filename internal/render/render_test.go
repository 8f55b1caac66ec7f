package render

import (
	"strings"
	"testing"

	"github.com/kaimon/kaimon/internal/apitype"
	"github.com/kaimon/kaimon/internal/event"
)

func env(kind event.Kind, turn int, data any) *event.Envelope {
	ev := event.New(kind, turn, data)
	return &event.Envelope{Kind: ev.Kind, Turn: turn, Data: ev.Data}
}

func TestWords(t *testing.T) {
	ok := ResultOf(env(event.Result, 2, event.ResultData{StopReason: "end_turn", Usage: event.UsageFigures{InputTokens: 7}}))
	if ok.Failed || ok.Head != "✓ turn 2 end_turn" || ok.Usage.InputTokens != 7 {
		t.Errorf("ok result %+v", ok)
	}
	bad := ResultOf(env(event.Result, 3, event.ResultData{StopReason: "error", Error: "overloaded"}))
	if !bad.Failed || bad.Head != "✗ turn 3 failed (error: overloaded)" {
		t.Errorf("failed result %+v", bad)
	}
	// A cancel did not complete the turn, but is said as what it is,
	// as kaimon run's usage line says it.
	cancelled := ResultOf(env(event.Result, 4, event.ResultData{StopReason: apitype.StopCancelled}))
	if !cancelled.Failed || !cancelled.Cancelled || cancelled.Head != "■ turn 4 cancelled" {
		t.Errorf("cancelled result %+v", cancelled)
	}
	if bad.Cancelled || ok.Cancelled {
		t.Errorf("only a cancel is cancelled: %+v %+v", ok, bad)
	}
	plan := PlanLines(env(event.Plan, 1, event.PlanData{Entries: []event.PlanEntry{{Content: "read", Status: "completed"}, {Content: "write", Status: "pending"}}}))
	if strings.Join(plan, "|") != "[completed] read|[pending] write" {
		t.Errorf("plan %q", plan)
	}
	d := &event.PermissionData{Decision: apitype.Deny, By: event.DecidedByTimeout, Message: "nobody answered"}
	if got := Decision(d); got != "denied by timeout (nobody answered)" {
		t.Errorf("decision %q", got)
	}
	if got := Clip("a\n  b c", 4); got != "a b…" {
		t.Errorf("clip %q", got)
	}
}
