package local

import (
	"encoding/json"
	"strings"
	"testing"
)

// recSink records what a stream parser hands on.
type recSink struct {
	log []string
}

func (r *recSink) text(s string)    { r.log = append(r.log, "text "+s) }
func (r *recSink) thought(s string) { r.log = append(r.log, "thought "+s) }
func (r *recSink) toolStart(i int, id, name string) {
	r.log = append(r.log, "start "+string(rune('0'+i))+" "+id+" "+name)
}
func (r *recSink) toolArgs(i int, f string) { r.log = append(r.log, "args "+string(rune('0'+i))+" "+f) }

func TestParseOllamaStream(t *testing.T) {
	in := `{"model":"m","created_at":"x","message":{"role":"assistant","content":"","thinking":"Let me"},"done":false}
{"model":"m","created_at":"x","message":{"role":"assistant","content":"","thinking":" think"},"done":false}
{"model":"m","created_at":"x","message":{"role":"assistant","content":"Hel"},"done":false}

{"model":"m","created_at":"x","message":{"role":"assistant","content":"lo"},"done":false}
{"model":"m","created_at":"x","message":{"role":"assistant","content":"","tool_calls":[{"function":{"name":"bash","arguments":{"command":"ls"}}}]},"done":false}
{"model":"m","created_at":"x","message":{"role":"assistant","content":""},"done":true,"done_reason":"stop","prompt_eval_count":12,"eval_count":3}
`
	var s recSink
	res, err := parseOllamaStream(strings.NewReader(in), &s)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"thought Let me", "thought  think", "text Hel", "text lo", "start 0  bash"}
	if strings.Join(s.log, "|") != strings.Join(want, "|") {
		t.Fatalf("sink saw %q, want %q", s.log, want)
	}
	if res.Content != "Hello" || res.Thinking != "Let me think" || res.Stop != "stop" ||
		res.Usage.InputTokens != 12 || res.Usage.OutputTokens != 3 || len(res.Calls) != 1 ||
		res.Calls[0].Name != "bash" || string(res.Calls[0].Arguments) != `{"command":"ls"}` {
		t.Fatalf("result = %+v", res)
	}
}

func TestParseOllamaStreamErrors(t *testing.T) {
	for name, in := range map[string]string{
		"mid-stream error": `{"message":{"role":"assistant","content":"par"},"done":false}
{"error":"model runner crashed"}
`,
		"cut short": `{"message":{"role":"assistant","content":"par"},"done":false}
`,
		"not json": "<html>\n",
	} {
		_, err := parseOllamaStream(strings.NewReader(in), &recSink{})
		if err == nil {
			t.Errorf("%s: no error", name)
		}
		if name == "mid-stream error" && !strings.Contains(err.Error(), "model runner crashed") {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestParseOpenAIStream(t *testing.T) {
	in := `: keep-alive

data: {"id":"c","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}

data: {"id":"c","choices":[{"index":0,"delta":{"reasoning_content":"hm"},"finish_reason":null}]}

data: {"id":"c","choices":[{"index":0,"delta":{"reasoning":"m."},"finish_reason":null}]}

data: {"id":"c","choices":[{"index":0,"delta":{"content":"I will"},"finish_reason":null}]}

data: {"id":"c","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"edit_file","arguments":""}}]},"finish_reason":null}]}

data: {"id":"c","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"path\":"}}]},"finish_reason":null}]}

data: {"id":"c","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"\"a.txt\"}"}}]},"finish_reason":null}]}

data: {"id":"c","choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"id":"call_2","type":"function","function":{"name":"bash","arguments":"{}"}}]},"finish_reason":null}]}

data: {"id":"c","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}

data: {"id":"c","choices":[],"usage":{"prompt_tokens":40,"completion_tokens":9,"total_tokens":49,"prompt_tokens_details":{"cached_tokens":8}}}

data: [DONE]

`
	var s recSink
	res, err := parseOpenAIStream(strings.NewReader(in), &s)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"thought hm", "thought m.", "text I will", "start 0 call_1 edit_file",
		`args 0 {"path":`, `args 0 "a.txt"}`, "start 1 call_2 bash", "args 1 {}"}
	if strings.Join(s.log, "|") != strings.Join(want, "|") {
		t.Fatalf("sink saw %q, want %q", s.log, want)
	}
	if res.Content != "I will" || res.Thinking != "hmm." || res.Stop != "tool_calls" ||
		res.Usage.InputTokens != 40 || res.Usage.OutputTokens != 9 || res.Usage.CacheReadTokens != 8 || len(res.Calls) != 2 {
		t.Fatalf("result = %+v", res)
	}
	if c := res.Calls[0]; c.ID != "call_1" || c.Name != "edit_file" || string(c.Arguments) != `{"path":"a.txt"}` {
		t.Fatalf("call 0 = %+v", c)
	}
}

func TestParseOpenAIStreamErrors(t *testing.T) {
	_, err := parseOpenAIStream(strings.NewReader("data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"x\"}}]}\n\ndata: {\"error\":{\"message\":\"out of memory\",\"code\":500}}\n\n"), &recSink{})
	if err == nil || !strings.Contains(err.Error(), "out of memory") {
		t.Fatalf("mid-stream error: %v", err)
	}
	_, err = parseOpenAIStream(strings.NewReader("data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"x\"}}]}\n\n"), &recSink{})
	if err == nil {
		t.Fatal("a stream cut short is not an error")
	}
	// Arguments that never became JSON are kept as a string.
	res, err := parseOpenAIStream(strings.NewReader(`data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c","function":{"name":"bash","arguments":"{\"comm"}}]},"finish_reason":"tool_calls"}]}`+"\n\ndata: [DONE]\n"), &recSink{})
	if err != nil || len(res.Calls) != 1 || !json.Valid(res.Calls[0].Arguments) || string(res.Calls[0].Arguments) != `"{\"comm"` {
		t.Fatalf("bad arguments: %+v %v", res, err)
	}
}

func TestOllamaHost(t *testing.T) {
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	for in, want := range map[string]string{
		"":                        DefaultOllamaURL,
		"0.0.0.0":                 "http://0.0.0.0:11434",
		"example.com":             "http://example.com:11434",
		"example.com:1234":        "http://example.com:1234",
		":1234":                   "http://127.0.0.1:1234",
		"http://example.com":      "http://example.com:80",
		"https://example.com":     "https://example.com:443",
		"https://example.com/api": "https://example.com:443/api",
		"[::1]:5000":              "http://[::1]:5000",
		"::1":                     "http://[::1]:11434",
		"example.com:99999":       "http://example.com:11434",
	} {
		if got := OllamaURL(env(map[string]string{"OLLAMA_HOST": in}), ""); got != want {
			t.Errorf("OLLAMA_HOST=%q: %s, want %s", in, got, want)
		}
	}
	e := env(map[string]string{"OLLAMA_HOST": "h:1", "KAIMON_OLLAMA_URL": "http://k:2/"})
	if got := OllamaURL(e, "http://c:3"); got != "http://k:2" {
		t.Errorf("KAIMON_OLLAMA_URL does not win: %s", got)
	}
	if got := OllamaURL(env(map[string]string{"OLLAMA_HOST": "h:1"}), "http://c:3"); got != "http://c:3" {
		t.Errorf("ollama_url does not win over OLLAMA_HOST: %s", got)
	}
	if got := VMLXURL(env(nil), ""); got != DefaultVMLXURL {
		t.Errorf("vmlx default: %s", got)
	}
}
