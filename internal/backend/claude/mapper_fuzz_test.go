package claude

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/kaimon/kaimon/internal/event"
)

// checkEvents fails on an event no consumer could handle: a kind outside
// the closed set, a negative turn, data that is not JSON.
func checkEvents(t *testing.T, evs []event.Event) {
	t.Helper()
	for _, ev := range evs {
		if !slices.Contains(event.Kinds, ev.Kind) {
			t.Fatalf("unknown kind %q", ev.Kind)
		}
		if ev.Turn < 0 {
			t.Fatalf("%s with turn %d", ev.Kind, ev.Turn)
		}
		if !json.Valid(ev.Data) {
			t.Fatalf("%s data is not JSON: %q", ev.Kind, ev.Data)
		}
	}
}

// FuzzMapper feeds arbitrary stdout through a Mapper with two turns pushed,
// one line per newline, as the backend does. Seeds: every line of the
// recorded stdout, alone and in runs of four (whole files are slow for the
// fuzzer to minimize). Run it with -fuzzminimizetime 1x: minimizing the
// large inputs it finds interesting stalls the fuzzer otherwise (no execs
// for minutes, seen with Go 1.26).
func FuzzMapper(f *testing.F) {
	dir := fixtureDir(f)
	paths, _ := filepath.Glob(filepath.Join(dir, "*.jsonl"))
	for _, p := range paths {
		lines := readLines(f, p)
		for i, l := range lines {
			f.Add(l)
			if i%4 == 0 {
				f.Add(bytes.Join(lines[i:min(i+4, len(lines))], []byte("\n")))
			}
		}
	}
	f.Add([]byte("not json\n{}\n[]\n\x00\xff"))
	f.Fuzz(func(t *testing.T, in []byte) {
		m := NewMapper()
		for i := 1; i <= 2; i++ {
			evs, _ := m.Push(i, "turn")
			checkEvents(t, evs)
		}
		for _, l := range bytes.Split(in, []byte("\n")) {
			out := m.Map(l)
			checkEvents(t, out.Events)
			// A line is malformed exactly when json.Valid refuses it or it
			// is not an object, whatever it holds.
			trimmed := bytes.TrimSpace(l)
			bad := len(trimmed) > 0 && (!json.Valid(trimmed) || trimmed[0] != '{')
			malformed := len(out.Events) == 1 && out.Events[0].Kind == event.Error &&
				strings.HasPrefix(gjson.GetBytes(out.Events[0].Data, "message").String(), "malformed line from claude: ")
			if bad != malformed {
				t.Fatalf("%q: malformed %v, json.Valid says %v", l, malformed, !bad)
			}
			if out.Ended < 0 {
				t.Fatalf("ended turn %d", out.Ended)
			}
		}
	})
}
