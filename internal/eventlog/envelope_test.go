package eventlog

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/kaimon/kaimon/internal/apitype"
	"github.com/kaimon/kaimon/internal/event"
)

// AppendEnvelope writes the line Append writes for the envelope's record,
// and refuses data that is not JSON, writing nothing.
func TestAppendEnvelopeSameLine(t *testing.T) {
	dir := t.TempDir()
	a, _, err := Open(filepath.Join(dir, "a"))
	if err != nil {
		t.Fatal(err)
	}
	b, _, err := Open(filepath.Join(dir, "b"))
	if err != nil {
		t.Fatal(err)
	}
	ts := time.Date(2026, 12, 1, 5, 0, 0, 123, time.UTC)
	for i, ev := range []event.Event{
		event.NewText(event.AssistantText, 1, false, "a <reply> & \"more\"\n"),
		event.New(event.Result, 1, event.ResultData{StopReason: apitype.StopEndTurn}),
		{Kind: event.ToolResult, Turn: 2, Data: json.RawMessage("{\"update\": {\"toolCallId\": \"x\"}}")},
	} {
		env := ev.Stamp("id", uint64(i+1), ts)
		rec := env.Record()
		if err := a.Append(&rec); err != nil {
			t.Fatal(err)
		}
		if err := b.AppendEnvelope(&env); err != nil {
			t.Fatal(err)
		}
	}
	bad := event.Event{Kind: event.Error, Data: json.RawMessage(`{"x":`)}.Stamp("id", 9, ts)
	if err := b.AppendEnvelope(&bad); err == nil {
		t.Error("AppendEnvelope of bad data: no error")
	}
	a.Close()
	b.Close()
	x, _ := os.ReadFile(filepath.Join(dir, "a"))
	y, _ := os.ReadFile(filepath.Join(dir, "b"))
	if !bytes.Equal(x, y) {
		t.Errorf("AppendEnvelope wrote\n%s\nAppend wrote\n%s", y, x)
	}
}
