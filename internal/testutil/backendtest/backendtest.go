// Package backendtest makes backend options for tests as the session
// manager makes them at open: with the policy of their OpenArgs resolved,
// since a backend refuses options without one.
package backendtest

import (
	"testing"

	"github.com/kaimon/kaimon/internal/backend"
	"github.com/kaimon/kaimon/internal/policy"
)

// Resolved returns o with its policy resolved from o.OpenArgs (unless it
// has one), and fails t if the arguments do not resolve.
func Resolved(t testing.TB, o backend.Options) backend.Options {
	t.Helper()
	if o.Policy == nil {
		pol, err := policy.ForOpen(&o.OpenArgs, nil)
		if err != nil {
			t.Fatalf("options %+v: %v", o.OpenArgs, err)
		}
		o.Policy = pol
	}
	return o
}
