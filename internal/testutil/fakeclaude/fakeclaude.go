// Package fakeclaude is a stand-in for the claude CLI for benchmarks: it
// speaks the CLI's stream-json (the lines of the recorded captures in
// /work/shared/fixtures/claude, cli-partial-messages) at full speed, with no
// model behind it, so that what a benchmark measures is kaimon, not a model
// or node.
//
// Turn renders one turn: system/init, a text block streamed as N
// text_delta lines, its assistant copy, a Bash tool call streamed as
// input_json_delta lines, the tool's result, a short closing text, and the
// result. Each text delta carries the time it was written, so that a
// subscriber can compute agent stdout → subscriber latency: see Stamp.
//
// The program (cmd/fakeclaude) answers control requests (initialize,
// interrupt, set_model) with success and each user message with a turn.
package fakeclaude

import (
	"bytes"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Session is the fake's session id.
const Session = "5e28776c-7ec7-4f7b-8f44-7c2f3c9a4450"

// FixedEvents is how many envelopes kaimon publishes for a turn besides
// its N text deltas: status working, user_text, turn_started, the text
// block, tool_use announce, 5 tool_input_delta, tool_use complete,
// tool_result, the closing text's 2 deltas and its block, usage, result,
// status idle. Benchmarks check the count against it.
const FixedEvents = 18

// StampPrefix marks the send time in a delta's text: "tok<i>@<unix ns> ".
const StampPrefix = "@"

var stampRE = regexp.MustCompile(`@(\d{19}) `)

// Stamp returns the send time embedded in a delta's text.
func Stamp(text string) (time.Time, bool) {
	m := stampRE.FindStringSubmatch(text)
	if m == nil {
		return time.Time{}, false
	}
	ns, err := strconv.ParseInt(m[1], 10, 64)
	if err != nil {
		return time.Time{}, false
	}
	return time.Unix(0, ns), true
}

var (
	streamRE = regexp.MustCompile(`stream (\d+) chunks`)
	rateRE   = regexp.MustCompile(`at (\d+)/s`)
)

// Chunks is the number of deltas a user text asks for: "stream N chunks",
// else 1.
func Chunks(text string) int {
	if m := streamRE.FindStringSubmatch(text); m != nil {
		if n, err := strconv.Atoi(m[1]); err == nil {
			return n
		}
	}
	return 1
}

// Burst says whether a user text asks for its turn rendered whole and
// written in 64 KiB blocks ("… in bursts"), so that the agent outruns any
// reader.
func Burst(text string) bool { return strings.Contains(text, "in bursts") }

// Rate is the pace a user text asks for, deltas per second: "… at R/s";
// 0 (full speed) when absent.
func Rate(text string) int {
	if m := rateRE.FindStringSubmatch(text); m != nil {
		if n, err := strconv.Atoi(m[1]); err == nil {
			return n
		}
	}
	return 0
}

// Turn renders one turn of n text deltas, calling emit with each line
// (newline included) as soon as it is built; the slice is reused after
// emit returns. now stamps each delta (nil: time.Now).
func Turn(n int, now func() time.Time, emit func(line []byte)) { PacedTurn(n, 0, now, emit) }

// PacedTurn is Turn with its deltas paced at rate per second (0: full
// speed): delta i is written at start + i/rate, never before.
func PacedTurn(n, rate int, now func() time.Time, emit func(line []byte)) {
	if now == nil {
		now = time.Now
	}
	start := time.Now()
	var buf []byte
	line := func(format string, args ...any) {
		buf = fmt.Appendf(buf[:0], format, args...)
		buf = append(buf, '\n')
		emit(buf)
	}
	uuid := 0
	u := func() string { uuid++; return fmt.Sprintf("00000000-0000-4000-8000-%012d", uuid) }
	line(initLine, Session)
	line(`{"type":"system","subtype":"status","status":"requesting","uuid":"%s","session_id":"%s"}`, u(), Session)
	line(messageStart, "msg_qwjwumuliimx2wmlj5", Session, u())
	line(`{"type":"stream_event","event":{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}},"session_id":"%s","parent_tool_use_id":null,"uuid":"%s"}`, Session, u())
	var text bytes.Buffer
	for i := 0; i < n; i++ {
		if rate > 0 {
			time.Sleep(time.Until(start.Add(time.Duration(i) * time.Second / time.Duration(rate))))
		}
		chunk := fmt.Sprintf("tok%d%s%019d ", i, StampPrefix, now().UnixNano())
		text.WriteString(chunk)
		line(`{"type":"stream_event","event":{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"%s"}},"session_id":"%s","parent_tool_use_id":null,"uuid":"%s"}`, chunk, Session, u())
	}
	line(assistantText, "msg_qwjwumuliimx2wmlj5", text.String(), Session, u())
	line(blockStop, 0, Session, u())
	line(`{"type":"stream_event","event":{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_vd14f6r435mx2wmlj5","name":"Bash","input":{}}},"session_id":"%s","parent_tool_use_id":null,"uuid":"%s"}`, Session, u())
	for _, p := range []string{`{\"command\"`, `:\"echo hi\"`, `,\"descript`, `ion\":\"Prin`, `t hi\"}`} {
		line(`{"type":"stream_event","event":{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"%s"}},"session_id":"%s","parent_tool_use_id":null,"uuid":"%s"}`, p, Session, u())
	}
	line(`{"type":"assistant","message":{"id":"msg_qwjwumuliimx2wmlj5","type":"message","role":"assistant","model":"claude-opus-4-8","content":[{"type":"tool_use","id":"toolu_vd14f6r435mx2wmlj5","name":"Bash","input":{"command":"echo hi","description":"Print hi"}}],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":100,"output_tokens":1,"cache_creation_input_tokens":0,"cache_read_input_tokens":0},"context_management":null},"parent_tool_use_id":null,"session_id":"%s","uuid":"%s","request_id":"req_1t6hph1l0zvmx2wmlj5"}`, Session, u())
	line(blockStop, 1, Session, u())
	line(messageDelta, "tool_use", Session, u())
	line(`{"type":"stream_event","event":{"type":"message_stop"},"session_id":"%s","parent_tool_use_id":null,"uuid":"%s"}`, Session, u())
	line(`{"type":"user","message":{"role":"user","content":[{"tool_use_id":"toolu_vd14f6r435mx2wmlj5","type":"tool_result","content":"hi","is_error":false}]},"parent_tool_use_id":null,"session_id":"%s","uuid":"%s","timestamp":"2026-11-30T06:46:01.674Z","tool_use_result":{"stdout":"hi","stderr":"","interrupted":false,"isImage":false,"noOutputExpected":false}}`, Session, u())
	line(`{"type":"system","subtype":"status","status":"requesting","uuid":"%s","session_id":"%s"}`, u(), Session)
	line(messageStart, "msg_fdewhmw1fwtmx2wmllo", Session, u())
	line(`{"type":"stream_event","event":{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}},"session_id":"%s","parent_tool_use_id":null,"uuid":"%s"}`, Session, u())
	for _, c := range []string{"Tool said: hi. D", "one."} {
		line(`{"type":"stream_event","event":{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"%s"}},"session_id":"%s","parent_tool_use_id":null,"uuid":"%s"}`, c, Session, u())
	}
	line(assistantText, "msg_fdewhmw1fwtmx2wmllo", "Tool said: hi. Done.", Session, u())
	line(blockStop, 0, Session, u())
	line(messageDelta, "end_turn", Session, u())
	line(`{"type":"stream_event","event":{"type":"message_stop"},"session_id":"%s","parent_tool_use_id":null,"uuid":"%s"}`, Session, u())
	line(result, Session, u())
}

// Lines is Turn collected: the stdout lines of one turn of n deltas.
func Lines(n int) [][]byte {
	var out [][]byte
	Turn(n, func() time.Time { return time.Unix(1764000000, 0) }, func(l []byte) { out = append(out, bytes.Clone(l)) })
	return out
}

const (
	initLine      = `{"type":"system","subtype":"init","cwd":"/home/user/project","session_id":"%[1]s","tools":["Task","Bash","CronCreate","CronDelete","CronList","Edit","EnterWorktree","ExitWorktree","NotebookEdit","Read","ReportFindings","ScheduleWakeup","SendMessage","Skill","TaskCreate","TaskGet","TaskList","TaskOutput","TaskStop","TaskUpdate","WebFetch","WebSearch","Workflow","Write"],"mcp_servers":[],"model":"claude-opus-4-8[1m]","permissionMode":"default","slash_commands":["deep-research","update-config","verify","debug","code-review","simplify","batch","fewer-permission-prompts","loop","claude-api","run","run-skill-generator","clear","compact","config","context","heapdump","init","reload-skills","review","security-review","usage","insights","goal","team-onboarding"],"apiKeySource":"ANTHROPIC_API_KEY","claude_code_version":"2.1.197","output_style":"default","agents":["claude","Explore","general-purpose","Plan","statusline-setup"],"skills":["deep-research","update-config","verify","debug","code-review","simplify","batch","fewer-permission-prompts","loop","claude-api","run","run-skill-generator"],"plugins":[],"analytics_disabled":true,"product_feedback_disabled":true,"uuid":"29d0b08c-b389-4332-ba58-b7117c69467e","memory_paths":{"auto":"/home/user/home/.claude/projects/-home-user-project/memory/"},"fast_mode_state":"off"}`
	messageStart  = `{"type":"stream_event","event":{"type":"message_start","message":{"id":"%s","type":"message","role":"assistant","model":"claude-opus-4-8","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":100,"output_tokens":1,"cache_creation_input_tokens":0,"cache_read_input_tokens":0}}},"session_id":"%s","parent_tool_use_id":null,"uuid":"%s","ttft_ms":16}`
	assistantText = `{"type":"assistant","message":{"id":"%s","type":"message","role":"assistant","model":"claude-opus-4-8","content":[{"type":"text","text":"%s"}],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":100,"output_tokens":1,"cache_creation_input_tokens":0,"cache_read_input_tokens":0},"context_management":null},"parent_tool_use_id":null,"session_id":"%s","uuid":"%s","request_id":"req_1t6hph1l0zvmx2wmlj5"}`
	blockStop     = `{"type":"stream_event","event":{"type":"content_block_stop","index":%d},"session_id":"%s","parent_tool_use_id":null,"uuid":"%s"}`
	messageDelta  = `{"type":"stream_event","event":{"type":"message_delta","delta":{"stop_reason":"%s","stop_sequence":null},"usage":{"output_tokens":20}},"session_id":"%s","parent_tool_use_id":null,"uuid":"%s"}`
	result        = `{"type":"result","subtype":"success","is_error":false,"api_error_status":null,"duration_ms":151,"duration_api_ms":136,"ttft_ms":26,"ttft_stream_ms":25,"time_to_request_ms":11,"num_turns":2,"result":"Tool said: hi. Done.","stop_reason":"end_turn","session_id":"%s","total_cost_usd":0.003,"usage":{"input_tokens":200,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":40,"server_tool_use":{"web_search_requests":0,"web_fetch_requests":0},"service_tier":"standard","cache_creation":{"ephemeral_1h_input_tokens":0,"ephemeral_5m_input_tokens":0},"inference_geo":"","iterations":[],"speed":"standard"},"modelUsage":{"claude-opus-4-8[1m]":{"inputTokens":300,"outputTokens":60,"cacheReadInputTokens":0,"cacheCreationInputTokens":0,"webSearchRequests":0,"costUSD":0.003,"contextWindow":1000000,"maxOutputTokens":64000}},"permission_denials":[],"terminal_reason":"completed","fast_mode_state":"off","uuid":"%s"}`
)
