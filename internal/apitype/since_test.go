package apitype

import (
	"maps"
	"testing"
)

// What FormatSince writes ParseSince reads back, in one order for one
// position.
func TestSinceRoundTrip(t *testing.T) {
	last := map[string]uint64{"b2": 7, "a1": 0, "c-3.x": 1 << 63}
	s := FormatSince(last)
	if want := "a1:0,b2:7,c-3.x:9223372036854775808"; s != want {
		t.Fatalf("FormatSince = %q, want %q", s, want)
	}
	got, err := ParseSince(s)
	if err != nil || !maps.Equal(got, last) {
		t.Fatalf("ParseSince(%q) = %v, %v", s, got, err)
	}
	if got, err := ParseSince(""); err != nil || len(got) != 0 {
		t.Fatalf(`ParseSince("") = %v, %v`, got, err)
	}
}
