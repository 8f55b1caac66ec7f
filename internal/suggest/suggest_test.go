package suggest

import "testing"

func TestNearest(t *testing.T) {
	names := []string{"run", "send", "status", "ollama", "vmlx", "replay", "acp", "rename"}
	for _, tc := range []struct {
		name string
		near float64
		want string
	}{
		{"sned", 0.7, "send"},
		{"rnu", 0.7, "run"}, // a swap Jaro-Winkler scores below a guess
		{"olama", 0.7, "ollama"},
		{"xyzzy", 0.7, ""}, // nothing near: no guess
		{"stauts", 0.99, "status"},
		{"st", 0.99, "status"}, // the one name it begins
		{"re", 0.99, ""},       // two begin with it: no guess
		{"r", 0.99, ""},        // one letter begins too many words to guess from
		{"statuses", 0.99, ""}, // longer than the name it begins with
	} {
		if got := Nearest(tc.name, names, tc.near); got != tc.want {
			t.Errorf("Nearest(%q, %v) = %q, want %q", tc.name, tc.near, got, tc.want)
		}
	}
}
