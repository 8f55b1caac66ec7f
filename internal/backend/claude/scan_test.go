package claude

import (
	"testing"

	"github.com/tidwall/gjson"
)

// pickRaw and str agree with gjson.Get on the objects they are given.
func TestPickRawAgreesWithGjson(t *testing.T) {
	objs := []string{
		`{"type":"stream_event","event":{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"a \"b\" \\"}},"parent_tool_use_id":null}`,
		`{ "type" : "x" , "event" : [1, {"a": "}"}], "parent_tool_use_id" : "toolu_1", "type": "second" }`,
		`{"ty\u0070e":"escaped key","event":-1.5e3,"parent_tool_use_id":true}`,
		`{"event":"\\\\","type":"\\\"","x":{}}`,
		`{}`, `{"a":{"b":[[],{}]},"type":""}`,
	}
	keys := []string{"type", "event", "parent_tool_use_id", "missing"}
	for _, o := range objs {
		if !gjson.Valid(o) {
			t.Fatalf("test object not valid: %s", o)
		}
		out := make([]string, len(keys))
		pickRaw(o, keys, out)
		for i, k := range keys {
			want := gjson.Get(o, k)
			if out[i] != want.Raw {
				t.Errorf("%s: %s raw = %q, want %q", o, k, out[i], want.Raw)
			}
			if got := str(out[i]); got != want.String() {
				t.Errorf("%s: %s str = %q, want %q", o, k, got, want.String())
			}
		}
	}
}

func FuzzPickRaw(f *testing.F) {
	f.Add(`{"type":"a","event":{"x":"}"},"parent_tool_use_id":null}`)
	f.Add(`{"a":"\\\"","type":[1,"]"]}`)
	f.Fuzz(func(t *testing.T, o string) {
		if !gjson.Valid(o) || !gjson.Parse(o).IsObject() {
			return
		}
		keys := []string{"type", "event", "parent_tool_use_id"}
		out := make([]string, len(keys))
		pickRaw(o, keys, out)
		for i, k := range keys {
			if want := gjson.Get(o, k); out[i] != want.Raw || str(out[i]) != want.String() {
				t.Fatalf("%s: %s = %q/%q, want %q/%q", o, k, out[i], str(out[i]), want.Raw, want.String())
			}
		}
	})
}
