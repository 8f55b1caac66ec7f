package fakeopenai

import (
	"bufio"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// postResponses streams one Responses request and returns its events' data
// in order.
func postResponses(t *testing.T, s *Server, body string) []map[string]any {
	t.Helper()
	res, err := http.Post(s.URL()+"/responses", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != 200 {
		t.Fatalf("status %d", res.StatusCode)
	}
	var evs []map[string]any
	sc := bufio.NewScanner(res.Body)
	event := ""
	for sc.Scan() {
		line := sc.Text()
		if e, ok := strings.CutPrefix(line, "event: "); ok {
			event = e
		}
		if d, ok := strings.CutPrefix(line, "data: "); ok {
			var v map[string]any
			if err := json.Unmarshal([]byte(d), &v); err != nil {
				t.Fatal(err)
			}
			if v["type"] != event {
				t.Fatalf("event %q carries type %v", event, v["type"])
			}
			evs = append(evs, v)
		}
	}
	return evs
}

// deltas joins the events' deltas of one type.
func deltas(evs []map[string]any, typ string) string {
	var b strings.Builder
	for _, e := range evs {
		if e["type"] == typ {
			b.WriteString(e["delta"].(string))
		}
	}
	return b.String()
}

func types(evs []map[string]any) string {
	var ts []string
	for _, e := range evs {
		ts = append(ts, e["type"].(string))
	}
	return strings.Join(ts, " ")
}

func TestResponsesText(t *testing.T) {
	s := New(t)
	evs := postResponses(t, s, `{"model":"m","stream":true,"instructions":"sys","tools":[{"type":"function","name":"exec_command"}],
		"input":[{"type":"message","role":"user","content":[{"type":"input_text","text":"<environment_context>x</environment_context>"}]},
		{"type":"message","role":"user","content":[{"type":"input_text","text":"say exactly: hi there"}]}]}`)
	want := "response.created response.output_item.added response.content_part.added response.output_text.delta response.output_text.delta response.output_text.done response.output_item.done response.completed"
	if got := types(evs); got != want {
		t.Fatalf("events %s\nwant %s", got, want)
	}
	if d := deltas(evs, "response.output_text.delta"); d != "hi there" {
		t.Fatalf("delta %v", d)
	}
	u := evs[len(evs)-1]["response"].(map[string]any)["usage"].(map[string]any)
	if u["input_tokens"] != float64(InputTokens) || u["output_tokens"] != float64(OutputTokens) {
		t.Fatalf("usage %v", u)
	}
	r := s.Requests()[0]
	if r.LastUserText != "say exactly: hi there" || r.System != "sys" || len(r.Tools) != 1 || r.Tools[0] != "exec_command" {
		t.Fatalf("recorded %+v", r)
	}
}

func TestResponsesToolCallAndFollowUp(t *testing.T) {
	s := New(t)
	evs := postResponses(t, s, `{"model":"m","stream":true,"tools":[{"type":"function","name":"exec_command"}],
		"input":[{"type":"message","role":"user","content":[{"type":"input_text","text":"call tool: exec_command {\"cmd\":\"echo hi\"}"}]}]}`)
	want := "response.created response.output_item.added response.function_call_arguments.delta response.function_call_arguments.delta response.function_call_arguments.done response.output_item.done response.completed"
	if got := types(evs); got != want {
		t.Fatalf("events %s\nwant %s", got, want)
	}
	item := evs[5]["item"].(map[string]any)
	if item["type"] != "function_call" || item["name"] != "exec_command" || item["arguments"] != `{"cmd":"echo hi"}` || item["call_id"] == "" {
		t.Fatalf("item %v", item)
	}
	if a := deltas(evs, "response.function_call_arguments.delta"); a != `{"cmd":"echo hi"}` {
		t.Fatalf("argument deltas %q", a)
	}
	evs = postResponses(t, s, `{"model":"m","stream":true,"tools":[{"type":"function","name":"exec_command"}],
		"input":[{"type":"message","role":"user","content":[{"type":"input_text","text":"call tool: exec_command {}"}]},
		{"type":"function_call","call_id":"call_fake_1","name":"exec_command","arguments":"{}"},
		{"type":"function_call_output","call_id":"call_fake_1","output":"hi"}]}`)
	if d := deltas(evs, "response.output_text.delta"); d != "Tool said: hi. Done." {
		t.Fatalf("follow-up delta %v (%s)", d, types(evs))
	}
	if r := s.Requests()[1]; r.ToolResult != "hi" {
		t.Fatalf("recorded %+v", r)
	}
}

func TestResponsesThinkNoStreamAndFail(t *testing.T) {
	s := New(t)
	evs := postResponses(t, s, `{"model":"m","stream":true,"tools":[{"type":"function","name":"x"}],"input":[{"type":"message","role":"user","content":"please think"}]}`)
	if got := types(evs); !strings.HasPrefix(got, "response.created response.output_item.added response.reasoning_summary_text.delta") {
		t.Fatalf("events %s", got)
	}
	res, err := http.Post(s.URL()+"/responses", "application/json", strings.NewReader(`{"model":"m","input":[{"type":"message","role":"user","content":"hello"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	var obj struct {
		Output []struct {
			Content []struct{ Text string }
		}
		Usage struct {
			InputTokens int `json:"input_tokens"`
		}
	}
	json.NewDecoder(res.Body).Decode(&obj)
	res.Body.Close()
	if len(obj.Output) != 1 || !strings.HasPrefix(obj.Output[0].Content[0].Text, "Hello from fakeopenai") || obj.Usage.InputTokens != InputTokens {
		t.Fatalf("non-stream %+v", obj)
	}
	res, err = http.Post(s.URL()+"/responses", "application/json", strings.NewReader(`{"model":"m","tools":[{"type":"function","name":"x"}],"input":[{"type":"message","role":"user","content":"please fail"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 500 {
		t.Fatalf("fail status %d", res.StatusCode)
	}
}
