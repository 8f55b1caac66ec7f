package claude

import "fmt"

// SyntheticTurn is one turn of the claude CLI's stream-json stdout as kaimon
// reads it, for benchmarks (here and in the session package), shaped like the recorded traffic (../shared/fixtures/claude):
// system/init, a message of deltas text deltas, a Bash tool call streamed
// as input_json_delta, the assistant lines, the tool's result, a second
// message of deltas, and the result. Each line ends in its newline.
func SyntheticTurn(deltas int) [][]byte {
	const sid = `"session_id":"4491fac5-4627-40e3-8f3f-f18d0600346c"`
	uuid := func(i int) string { return fmt.Sprintf(`"uuid":"f68115f4-8b9e-475d-aded-%012x"`, i) }
	var lines [][]byte
	add := func(format string, args ...any) { lines = append(lines, []byte(fmt.Sprintf(format, args...)+"\n")) }
	add(`{"type":"system","subtype":"init","cwd":"/home/user/project",%s,"tools":["Task","Bash","Edit","Read","Write"],"mcp_servers":[],"model":"claude-opus-4-8","permissionMode":"default","apiKeySource":"ANTHROPIC_API_KEY","claude_code_version":"2.1.197",%s}`, sid, uuid(0))
	stream := func(ev string, i int) {
		add(`{"type":"stream_event","event":%s,%s,"parent_tool_use_id":null,%s}`, ev, sid, uuid(i))
	}
	message := func(n int) {
		stream(`{"type":"message_start","message":{"id":"msg_qctbp4q24cmx2wn4ao","type":"message","role":"assistant","model":"claude-opus-4-8","content":[],"stop_reason":null,"usage":{"input_tokens":100,"output_tokens":1}}}`, 1)
		stream(`{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`, 2)
		for i := 0; i < n; i++ {
			stream(fmt.Sprintf(`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"chunk%d "}}`, i), 3+i)
		}
		stream(`{"type":"content_block_stop","index":0}`, n+3)
	}
	message(deltas / 2)
	stream(`{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_01","name":"Bash","input":{}}}`, 9000)
	for i, p := range []string{`{\"command\"`, `: \"ls -la`, ` /tmp\"}`} {
		stream(fmt.Sprintf(`{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"%s"}}`, p), 9001+i)
	}
	add(`{"type":"assistant","message":{"id":"msg_qctbp4q24cmx2wn4ao","type":"message","role":"assistant","model":"claude-opus-4-8","content":[{"type":"text","text":"Let me look."}],"stop_reason":null,"usage":{"input_tokens":100,"output_tokens":1}},"parent_tool_use_id":null,%s,%s}`, sid, uuid(9010))
	add(`{"type":"assistant","message":{"id":"msg_qctbp4q24cmx2wn4ao","type":"message","role":"assistant","model":"claude-opus-4-8","content":[{"type":"tool_use","id":"toolu_01","name":"Bash","input":{"command":"ls -la /tmp"}}],"stop_reason":null},"parent_tool_use_id":null,%s,%s}`, sid, uuid(9011))
	add(`{"type":"user","message":{"role":"user","content":[{"tool_use_id":"toolu_01","type":"tool_result","content":"total 0\ndrwxrwxrwt 2 root root 40 Nov 30 06:46 .","is_error":false}]},"parent_tool_use_id":null,%s,%s,"timestamp":"2026-11-30T06:46:27.430Z"}`, sid, uuid(9012))
	message(deltas - deltas/2)
	add(`{"type":"assistant","message":{"id":"msg_2","type":"message","role":"assistant","model":"claude-opus-4-8","content":[{"type":"text","text":"Done: the directory is empty."}],"stop_reason":null},"parent_tool_use_id":null,%s,%s}`, sid, uuid(9013))
	add(`{"type":"result","subtype":"success","is_error":false,"duration_ms":1569,"num_turns":2,"result":"Done: the directory is empty.","stop_reason":"end_turn",%s,"total_cost_usd":0,"usage":{"input_tokens":200,"cache_creation_input_tokens":0,"cache_read_input_tokens":10,"output_tokens":40},"modelUsage":{},"permission_denials":[],%s}`, sid, uuid(9014))
	return lines
}
