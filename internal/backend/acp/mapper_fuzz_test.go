package acp

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"

	sdk "github.com/coder/acp-go-sdk"
	"github.com/tidwall/gjson"

	"github.com/kaimon/kaimon/internal/apitype"
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

// FuzzMapper feeds arbitrary JSON lines to a Mapper with two turns pushed:
// a line that parses as a session/update's params is an Update, else one
// that parses as a prompt response ends the active turn, else it is
// skipped (the SDK refuses it before the mapper would see it). Seeds: the
// params and prompt results of every recorded session in testdata, alone
// and in runs of four (whole sessions are slow for the fuzzer to minimize).
func FuzzMapper(f *testing.F) {
	paths, _ := filepath.Glob(filepath.Join("testdata", "*.jsonl"))
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		var all [][]byte
		for _, l := range bytes.Split(b, []byte("\n")) {
			msg := gjson.GetBytes(l, "msg")
			var part []byte
			switch {
			case msg.Get("method").String() == "session/update":
				part = []byte(msg.Get("params").Raw)
			case msg.Get("result.stopReason").Exists():
				part = []byte(msg.Get("result").Raw)
			default:
				continue
			}
			all = append(all, part)
		}
		for i, part := range all {
			f.Add(part)
			if i%4 == 0 {
				f.Add(bytes.Join(all[i:min(i+4, len(all))], []byte("\n")))
			}
		}
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		m := NewMapper()
		for i := 1; i <= 2; i++ {
			evs, _ := m.Push(i, "turn")
			checkEvents(t, evs)
		}
		for _, l := range bytes.Split(in, []byte("\n")) {
			var n sdk.SessionNotification
			if json.Unmarshal(l, &n) == nil {
				checkEvents(t, m.Update(n).Events)
				continue
			}
			var r sdk.PromptResponse
			if json.Unmarshal(l, &r) == nil {
				evs, _ := m.End(r)
				checkEvents(t, evs)
			}
		}
		evs, _ := m.Fail("failed", nil)
		checkEvents(t, evs)
		checkEvents(t, m.Abort(apitype.StopError, "gone"))
	})
}
