package fakescript

import (
	"reflect"
	"strings"
	"testing"
)

func TestSplit(t *testing.T) {
	for _, tc := range []struct {
		s    string
		want []string
	}{
		{"", nil},
		{"a", []string{"a"}},
		{"ab", []string{"a", "b"}},
		{"ééé", []string{"éé", "é"}},
		{strings.Repeat("x", 40), []string{strings.Repeat("x", 16), strings.Repeat("x", 16), strings.Repeat("x", 8)}},
	} {
		if got := Split(tc.s, 16); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("Split(%q) = %q, want %q", tc.s, got, tc.want)
		}
	}
}

func TestCallTool(t *testing.T) {
	for _, tc := range []struct{ rest, name, input string }{
		{` mcp__kaimon__agent_list {"a": 1}` + "\nmore", "mcp__kaimon__agent_list", `{"a":1}`},
		{" Bash not-json", "Bash", "{}"},
		{" Read", "Read", "{}"},
		{" Write [1]", "Write", "{}"},
	} {
		name, input := CallTool(tc.rest)
		if name != tc.name || string(input) != tc.input {
			t.Errorf("CallTool(%q) = %q %s, want %q %s", tc.rest, name, input, tc.name, tc.input)
		}
	}
}
