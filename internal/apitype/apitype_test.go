package apitype

import (
	"encoding/json"
	"slices"
	"testing"
)

// The words on the wire, pinned: renaming a constant here changes what
// every client reads, so it must show up as a failing test, not pass
// quietly through the types.
func TestWireWords(t *testing.T) {
	b, err := json.Marshal(struct {
		S []AgentState
		D []Decision
	}{AgentStates, Decisions})
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"S":["starting","idle","working","dead"],"D":["allow","deny"]}`; string(b) != want {
		t.Errorf("wire words %s, want %s", b, want)
	}
}

func TestValidAndPast(t *testing.T) {
	for _, s := range AgentStates {
		if !s.Valid() {
			t.Errorf("%q not valid", s)
		}
	}
	for _, s := range []AgentState{"", "permission", "Dead"} {
		if s.Valid() {
			t.Errorf("%q valid", s)
		}
	}
	for _, d := range Decisions {
		if !d.Valid() || DecisionOf(d == Allow) != d {
			t.Errorf("decision %q: valid %v, DecisionOf %q", d, d.Valid(), DecisionOf(d == Allow))
		}
	}
	if got := []string{Allow.Past(), Deny.Past(), Decision("ask").Past()}; !slices.Equal(got, []string{"allowed", "denied", "ask"}) {
		t.Errorf("Past: %v", got)
	}
	if Decision("").Valid() || Decision("allowed").Valid() {
		t.Error("a word outside Decisions is valid")
	}
}
