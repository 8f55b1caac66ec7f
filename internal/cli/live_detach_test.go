package cli

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"

	"github.com/kaimon/kaimon/internal/verbs"
)

// A detached run exits 130; with --json its error is the JSON object, as
// every other --json failure's, and run -C's says its agent is closed.
func TestDetachedReport(t *testing.T) {
	for _, json_ := range []bool{false, true} {
		var stderr bytes.Buffer
		app := &cli.App{
			Flags:     []cli.Flag{&cli.BoolFlag{Name: "json"}},
			ErrWriter: &stderr,
			Action: func(c *cli.Context) error {
				return fail(c, &detachedError{id: "a1", throwaway: true, closed: true})
			},
		}
		args := []string{"kaimon"}
		if json_ {
			args = append(args, "--json")
		}
		err := app.Run(args)
		if code := report(err, &stderr); code != ExitDetached {
			t.Fatalf("json=%v: exit %d, want %d", json_, code, ExitDetached)
		}
		out := stderr.String()
		if !json_ {
			if out != "kaimon: detached: closed agent a1, run -C's throwaway, with its turn\n" {
				t.Fatalf("stderr %q", out)
			}
			continue
		}
		var ve verbs.Error
		if err := json.Unmarshal([]byte(out), &ve); err != nil || ve.Code != codeDetached || !strings.Contains(ve.Message, "closed agent a1") {
			t.Fatalf("--json stderr %q (%v), want one JSON error of code %q", out, err, codeDetached)
		}
	}
}
