package redact

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/kaimon/kaimon/internal/event"
)

// FuzzStream splits a text into deltas anywhere: what a Stream publishes
// of them adds up to the text as String redacts it whole (so to the
// block that follows them), and no delta holds a secret. The secrets
// are ones no tail of which begins another (as keys and tokens are); one
// begins with another.
func FuzzStream(f *testing.F) {
	f.Add("the key is sk-ant-fuzz-0123456789 and abcdefgh-and-more, abcdefgh.", uint64(0x0305070b0d111317))
	f.Add("sk-ant-fuzz-012345678 almost; sk-ant-fuzz-0123456789", uint64(1))
	f.Add("abcdefgabcdefgh-and-morabcdefgh-and-more", uint64(0xffffffffffffffff))
	r := New([]string{"ANTHROPIC_API_KEY=sk-ant-fuzz-0123456789", "A_TOKEN=abcdefgh", "B_TOKEN=abcdefgh-and-more"})
	f.Fuzz(func(t *testing.T, text string, cuts uint64) {
		if !utf8.ValidString(text) {
			t.Skip("JSON has no invalid UTF-8: the event's text is not the text")
		}
		var evs []event.Event
		for rest := text; rest != ""; cuts = cuts>>4 | cuts<<60 {
			n := min(len(rest), int(cuts&15)+1)
			for n < len(rest) && !utf8.RuneStart(rest[n]) {
				n++ // backends cut deltas between runes
			}
			evs = append(evs, event.NewText(event.AssistantText, 1, true, rest[:n]))
			rest = rest[n:]
		}
		evs = append(evs, event.NewText(event.AssistantText, 1, false, text))
		var deltas string
		for _, ev := range streamed(r, evs...) {
			if !event.IsDelta(ev.Data) {
				continue
			}
			d := event.TextOf(ev.Data)
			for _, sc := range r.secrets {
				if strings.Contains(d, sc.value) {
					t.Fatalf("a delta holds %q: %q", sc.value, d)
				}
			}
			deltas += d
		}
		if want := r.String(text); deltas != want {
			t.Fatalf("deltas add up to %q, want %q", deltas, want)
		}
	})
}
