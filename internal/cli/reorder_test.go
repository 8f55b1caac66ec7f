package cli

import (
	"reflect"
	"strings"
	"testing"
)

func TestInterspersed(t *testing.T) {
	app := NewApp()
	cases := []struct{ in, want string }{
		{"kaimon run ID TEXT --timeout 1m", "kaimon run --timeout 1m -- ID TEXT"},
		{"kaimon --no-autostart output ID --turn 2 --json", "kaimon --no-autostart output --turn 2 --json -- ID"},
		{"kaimon open . --allow Bash --only --allow=Read", "kaimon open --allow Bash --only --allow=Read -- ."},
		{"kaimon send ID -", "kaimon send -- ID -"},
		{"kaimon send ID -- --not-a-flag", "kaimon send -- ID --not-a-flag"},
		{"kaimon daemon status --json", "kaimon daemon status --json"},
		{"kaimon list", "kaimon list"},
		{"kaimon nosuch x --y", "kaimon nosuch x --y"},
	}
	for _, c := range cases {
		got := strings.Join(interspersed(app, strings.Fields(c.in)), " ")
		if got != c.want {
			t.Errorf("%s\n got %s\nwant %s", c.in, got, c.want)
		}
	}
	// A text with spaces stays one argument.
	got := interspersed(app, []string{"kaimon", "run", "ID", "two words", "--json"})
	if want := []string{"kaimon", "run", "--json", "--", "ID", "two words"}; !reflect.DeepEqual(got, want) {
		t.Errorf("got %q", got)
	}
}
