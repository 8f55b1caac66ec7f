package cli

import (
	"context"
	"reflect"
	"strings"
	"testing"
)

func TestInterspersed(t *testing.T) {
	t.Parallel()
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
		// Global flags anywhere go before the command.
		{"kaimon tail agent:x --pretty --no-color", "kaimon --no-color tail --pretty -- agent:x"},
		{"kaimon --no-autostart daemon status --no-color --json", "kaimon --no-autostart --no-color daemon status --json"},
		{"kaimon run ID TEXT --no-autostart=true --timeout 1m", "kaimon --no-autostart=true run --timeout 1m -- ID TEXT"},
		{"kaimon send ID -- --no-color", "kaimon send -- ID --no-color"},
		// --host takes its value with it, wherever it goes.
		{"kaimon --host h1 status ID --json", "kaimon --host h1 status --json -- ID"},
		{"kaimon status ID --host h1 --json", "kaimon --host h1 status --json -- ID"},
		{"kaimon run ID TEXT --host=ssh://me@b:22 --timeout 1m", "kaimon --host=ssh://me@b:22 run --timeout 1m -- ID TEXT"},
		{"kaimon --no-color --host h1 host ls --check --host h2", "kaimon --no-color --host h1 --host h2 host ls --check"},
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

// A global flag after the command is taken, not refused as the command's
// unknown flag ("flag provided but not defined: -no-color").
func TestGlobalFlagAfterTheCommand(t *testing.T) {
	var out, errb strings.Builder
	code := Run(context.Background(), []string{"kaimon", "completion", "bash", "--no-color"}, strings.NewReader(""), &out, &errb)
	if code != ExitOK || !strings.Contains(out.String(), "complete") || errb.Len() > 0 {
		t.Fatalf("kaimon completion bash --no-color: exit %d, stderr %q", code, errb.String())
	}
}
