package acp

import (
	"encoding/json"
	"io"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"github.com/tidwall/gjson"

	"github.com/kaimon/kaimon/internal/event"
)

// The filter takes the requests nonStandard answers off the stream and
// passes every other line as it was: notifications, responses, a request
// of another method, a notification of the method (no id), and a line
// over its buffer that names the method; and it drops the quiet
// notifications (but not a request under their prefix).
func TestRequestFilter(t *testing.T) {
	long := `{"jsonrpc":"2.0","id":9,"method":"craft/drainMidTurnQueue","params":{"pad":"` + strings.Repeat("x", filterLine) + `"}}`
	in := strings.Join([]string{
		`{"jsonrpc":"2.0","method":"session/update","params":{}}`,
		`{"jsonrpc":"2.0","id":0,"method":"craft/drainMidTurnQueue","params":{"sessionId":"s"}}`,
		`{"jsonrpc":"2.0","id":1,"result":{}}`,
		`{"jsonrpc":"2.0","id":"x","method":"craft/other","params":{}}`,
		`{"jsonrpc":"2.0","method":"craft/drainMidTurnQueue","params":{}}`,
		long,
		`{"jsonrpc":"2.0","id":2,"method":"craft/drainMidTurnQueue"}`,
		`{"jsonrpc":"2.0","method":"qwen/notify/session/mode-update","params":{"v":1,"currentModeId":"default"}}`,
		`{"jsonrpc":"2.0","id":4,"method":"qwen/notify/not-a-notification","params":{}}`,
		`{"jsonrpc":"2.0","id":3,"result":"last, no newline"}`,
	}, "\n")
	var ids []string
	f := newRequestFilter(iotest.OneByteReader(strings.NewReader(in)), func(id json.RawMessage, method string, _ json.RawMessage) {
		if method != "craft/drainMidTurnQueue" {
			t.Errorf("answered %s", method)
		}
		ids = append(ids, string(id))
	})
	out, err := io.ReadAll(f)
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Join([]string{
		`{"jsonrpc":"2.0","method":"session/update","params":{}}`,
		`{"jsonrpc":"2.0","id":1,"result":{}}`,
		`{"jsonrpc":"2.0","id":"x","method":"craft/other","params":{}}`,
		`{"jsonrpc":"2.0","method":"craft/drainMidTurnQueue","params":{}}`,
		long,
		`{"jsonrpc":"2.0","id":4,"method":"qwen/notify/not-a-notification","params":{}}`,
		`{"jsonrpc":"2.0","id":3,"result":"last, no newline"}`,
	}, "\n")
	if string(out) != want {
		t.Fatalf("passed on:\n%.500s\nwant:\n%.500s", out, want)
	}
	if strings.Join(ids, " ") != "0 2" {
		t.Fatalf("answered ids %v", ids)
	}
}

// An agent's craft/drainMidTurnQueue is answered: nothing to drain, and
// whether kaimon holds a turn queued behind the one in flight.
func TestDrainMidTurnQueueAnswered(t *testing.T) {
	b, s := standin(t, "drain")
	if err := b.Send(1, "first"); err != nil {
		t.Fatal(err)
	}
	if err := b.Send(2, "second, queued behind the first"); err != nil {
		t.Fatal(err)
	}
	texts := map[int]string{}
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) && len(texts) < 2 {
		for _, ev := range s.events() {
			if ev.Kind == event.AssistantText && !gjson.GetBytes(ev.Data, "delta").Bool() {
				texts[ev.Turn] = gjson.GetBytes(ev.Data, "content.text").String()
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	if texts[1] != `{"hasQueuedPrompt": true, "messages": []}` || texts[2] != `{"hasQueuedPrompt": false, "messages": []}` {
		t.Fatalf("the drain answers, as the agent saw them: %v", texts)
	}
}
