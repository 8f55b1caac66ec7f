package cli

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/kaimon/kaimon/internal/schema"
)

// kaimon schema prints each subject's document, indented and ending in a
// newline, with no daemon; a missing or unknown subject is a usage error
// that lists them.
func TestSchemaCommand(t *testing.T) {
	for _, s := range schema.Subjects {
		code, out, errs := run(t, "schema", s)
		want, _ := schema.Document(s)
		var got, doc any
		_ = json.Unmarshal(want, &doc)
		if err := json.Unmarshal([]byte(out), &got); code != 0 || errs != "" || err != nil ||
			!strings.HasPrefix(out, "{\n  \"") || !strings.HasSuffix(out, "\n}\n") {
			t.Errorf("kaimon schema %s: exit %d, stderr %q, %v, stdout %.100q", s, code, errs, err, out)
		} else if b1, _ := json.Marshal(got); string(b1) != func() string { b, _ := json.Marshal(doc); return string(b) }() {
			t.Errorf("kaimon schema %s prints another document than schema.Document", s)
		}
	}
	for _, args := range [][]string{{"schema"}, {"schema", "event"}, {"schema", "events", "verbs"}} {
		if msg := oneUsageError(t, args, "kaimon schema"); !strings.Contains(msg, "events, verbs or openapi") {
			t.Errorf("kaimon %s: %q does not list the subjects", strings.Join(args, " "), msg)
		}
	}
}
