package backend

import (
	"testing"

	"github.com/kaimon/kaimon/internal/event"
)

// An ACP agent's own options are picked by kind.
func TestDecisionOption(t *testing.T) {
	gemini := []event.PermissionOption{
		{OptionID: "proceed_always", Kind: "allow_always"},
		{OptionID: "proceed_once", Kind: "allow_once"},
		{OptionID: "cancel", Kind: "reject_once"},
	}
	for _, tc := range []struct {
		d    PermissionDecision
		want string
	}{
		{PermissionDecision{Allow: true}, "proceed_once"},
		{PermissionDecision{Allow: true, Always: true}, "proceed_always"},
		{PermissionDecision{}, "cancel"},
		{PermissionDecision{Always: true}, "cancel"},
	} {
		if got := tc.d.Option(gemini); got != tc.want {
			t.Errorf("%+v → %q, want %q", tc.d, got, tc.want)
		}
	}
	if got := (PermissionDecision{}).Option(nil); got != "" {
		t.Errorf("no options → %q", got)
	}
}
