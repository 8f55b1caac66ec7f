package fakeclaude

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// Every line is JSON, and each delta carries a stamp Stamp reads back.
func TestTurn(t *testing.T) {
	at := time.Unix(1764000000, 123456789)
	var deltas int
	Turn(3, func() time.Time { return at }, func(l []byte) {
		var v struct {
			Event struct {
				Delta struct {
					Type, Text string
				}
			}
		}
		if err := json.Unmarshal(l, &v); err != nil || !strings.HasSuffix(string(l), "\n") {
			t.Fatalf("line %q: %v", l, err)
		}
		if v.Event.Delta.Type == "text_delta" {
			if got, ok := Stamp(v.Event.Delta.Text); ok {
				deltas++
				if !got.Equal(at) {
					t.Fatalf("stamp %v, want %v", got, at)
				}
			}
		}
	})
	if deltas != 3 {
		t.Fatalf("%d stamped deltas, want 3", deltas)
	}
	if Chunks("please stream 42 chunks at 500/s") != 42 || Rate("stream 42 chunks at 500/s") != 500 || Rate("stream 1 chunks") != 0 {
		t.Fatal("Chunks or Rate misread the text")
	}
}
