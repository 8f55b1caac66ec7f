// Package fakeapi is a fake Anthropic Messages API for end-to-end tests of
// the real `claude` CLI (@anthropic-ai/claude-code). It listens on 127.0.0.1
// and answers the requests the CLI makes when ANTHROPIC_BASE_URL points at it:
//
//   - HEAD / and GET /: 200 (the CLI probes the base URL).
//   - POST /v1/messages (a ?beta=true query is accepted): with "stream": true
//     an Anthropic server-sent-event stream (message_start,
//     content_block_start / content_block_delta / content_block_stop per
//     block, message_delta, message_stop); otherwise one JSON message.
//   - POST /v1/messages/count_tokens: {"input_tokens":100}.
//   - anything else: 404 with an Anthropic error JSON body.
//
// Every POST /v1/messages is recorded (see [Server.Requests]); count_tokens
// and probes are not.
//
// # Scripts
//
// The reply is chosen from the last user text of the request: the last
// message with role "user"; if its content is a string, that string;
// otherwise its last text block that does not begin with "<" (the CLI
// injects "<system-reminder>" blocks). Within that text, the trigger phrase
// that occurs first (case-sensitive substring) selects the script. [Phrases]
// is their table for a person (the playgrounds print it); here each is
// told chunk by chunk:
//
//   - (no trigger) default: text "Hello from fakeapi (request #N)." in two or
//     more text_delta chunks, stop_reason end_turn. N counts the POST
//     /v1/messages requests this server has received, from 1.
//   - "please think": a thinking block (thinking_delta "Let me think",
//     " about this ", "briefly." then a signature_delta) followed by the text
//     "Thought about it. Answer: 42.", end_turn.
//   - "please use a tool": text "I will run a command." then a tool_use block
//     Bash {"command":"echo hi","description":"Print hi"} streamed as several
//     input_json_delta fragments, stop_reason tool_use.
//   - "run command: CMD": as "please use a tool" but the Bash command is CMD
//     (the rest of the line, trimmed) and the description "Run a command".
//   - "run commands: CMD1 ;; CMD2 ;; …": as "run command: CMD1", and each
//     tool follow-up of the turn calls Bash with the next command (the
//     follow-up script once all have run): several tool calls in one turn.
//   - "please write a file PATH": text "Writing the file." then tool_use
//     Write {"file_path":PATH,"content":"written by fakeapi\n"}, tool_use.
//   - "please read PATH": tool_use Read {"file_path":PATH}, tool_use.
//   - "please break off": a text block "part0 " … "part9 " whose stream is
//     dropped after three chunks; asked again without streaming (the CLI's
//     fallback), the whole reply. "please break off every time" drops that
//     request too.
//   - "please be slow": one text block of [SlowChunks] chunks "chunk0 ",
//     "chunk1 ", … with [SlowChunkDelay] between chunks; the stream stops as
//     soon as the client goes away.
//   - "please hold": one text block, [HoldFirst] (in two chunks) then
//     [HoldRest], whose stream stops after [HoldFirst] until the test calls
//     [Server.Release] (or the client goes away, or the server closes): a
//     reply caught mid-stream for as long as a test needs, with no timing.
//     Each Release lets one held stream (present or next) go on.
//   - "stream N chunks": one text block of N chunks "tok0 ", "tok1 ", …
//     without pauses (for benchmarks).
//   - "please fail": HTTP 500 with
//     {"type":"error","error":{"type":"api_error","message":"fakeapi: scripted failure"}}.
//   - "say exactly: TEXT": a text block holding exactly TEXT (the rest of the
//     user text after the trigger, which may span lines).
//   - "call tool: NAME JSON": a tool_use block calling tool NAME (e.g.
//     mcp__kaimon__agent_list) with input JSON (a JSON object; {} when
//     absent), streamed as several input_json_delta fragments, stop_reason
//     tool_use. NAME and JSON are the rest of the line, split at the first
//     space. A JSON that does not parse as an object is sent as {}.
//
// PATH and CMD are the rest of the line after the trigger, trimmed.
//
// If the last user message has no such text but holds tool_result blocks
// (the CLI sending a tool's output back), the reply is the tool follow-up:
// text "Tool said: RESULT. Done.", end_turn, where RESULT is the tool
// results' text (joined by newlines), followed by " (is_error)" when a result
// is marked is_error.
//
// Non-streaming requests get the same script rendered as one JSON message,
// without pauses; "please fail" fails them too.
//
// Side requests of the CLI get the default reply: without
// CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1, claude 2.1.197 sends a
// streaming title request (same model) whose user text is
// "<session>\nUSER TEXT\n</session>…", which the "<" rule skips. It is
// recorded like any request, with LastUserText "", and takes a request number.
//
// # Usage
//
// message_start reports usage input_tokens [InputTokens], output_tokens
// [StartOutputTokens], cache_creation_input_tokens 0 and
// cache_read_input_tokens [CacheReadTokens]; message_delta reports
// output_tokens [OutputTokens]. Non-streaming replies report
// [InputTokens], [OutputTokens] and [CacheReadTokens]. The message's model is
// the request's "model" field.
package fakeapi

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kaimon/kaimon/internal/testutil/fakescript"
)

// Token counts reported in every reply.
const (
	InputTokens       = 100 // usage.input_tokens
	OutputTokens      = 20  // usage.output_tokens in message_delta (and non-streaming replies)
	StartOutputTokens = 1   // usage.output_tokens in message_start
	CacheReadTokens   = 10  // usage.cache_read_input_tokens
)

// Trigger phrases, matched as case-sensitive substrings of the last user
// text; each has its row in [Phrases], which script matches from.
const (
	TriggerThink      = "please think"
	TriggerTool       = "please use a tool"
	TriggerRunCommand = "run command:"
	// TriggerRunCommands runs several Bash commands in one turn, one
	// after another (see the package doc).
	TriggerRunCommands = "run commands:"
	TriggerWriteFile   = "please write a file"
	TriggerRead        = "please read"
	TriggerSlow        = "please be slow"
	TriggerFail        = "please fail"
	TriggerBreak       = "please break off"
	TriggerSayExactly  = "say exactly:"
	TriggerCallTool    = "call tool:"
	TriggerHold        = "please hold"
	// "stream N chunks" is matched by a regular expression; see the package doc.
)

// Fixed texts of the scripts.
const (
	ThinkText       = "Thought about it. Answer: 42."
	ThinkSignature  = "ZmFrZS1zaWduYXR1cmU=" // base64("fake-signature")
	ToolText        = "I will run a command."
	WriteText       = "Writing the file."
	WrittenContent  = "written by fakeapi\n"
	FailMessage     = "fakeapi: scripted failure"
	SlowChunks      = 60
	SlowChunkDelay  = 250 * time.Millisecond
	ToolCommand     = "echo hi"
	ToolDescription = "Print hi"
	HoldFirst       = "First half, "
	HoldRest        = "second half."
	// breakAfter is how many chunks "please break off" streams before
	// it drops the connection.
	breakAfter = 3
	// defaultText is the reply to a message without a trigger, with the
	// request's number.
	defaultText = "Hello from fakeapi (request #%d)."
)

var streamChunksRE = regexp.MustCompile(`stream (\d+) chunks`)

// Request is one recorded POST /v1/messages.
type Request struct {
	Model        string // the request's "model" field
	LastUserText string // the text the script was chosen from ("" for a tool follow-up)
	Stream       bool   // the request's "stream" field
	// ToolResult is the text of the tool_result blocks when the request was
	// a tool follow-up, else "".
	ToolResult string
	// Tools are the names of the tools the request offered the model.
	Tools []string
	// System is the request's system prompt, its text blocks joined by
	// newlines.
	System string
	// History is the conversation the request carried, one "role: text"
	// per text block of its messages (the CLI's injected <…> blocks
	// skipped): what shows that a resumed session kept its earlier turns.
	History []string
}

// Server is a running fake API.
type Server struct {
	*fakescript.Host[Request]
	releases chan struct{} // one token per held stream let go (TriggerHold)
}

// Start serves the fake API on 127.0.0.1 with a free port.
func Start() (*Server, error) { return StartAddr("127.0.0.1:0") }

// StartAddr serves the fake API on addr (host:port).
func StartAddr(addr string) (*Server, error) {
	s := &Server{releases: make(chan struct{}, 64)}
	h, err := fakescript.Listen[Request]("fakeapi", addr)
	if err != nil {
		return nil, err
	}
	s.Host = h
	h.Serve(s.serveHTTP)
	return s, nil
}

// New starts a server for a test and closes it when the test ends.
func New(t testing.TB) *Server {
	t.Helper()
	s, err := Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// Release lets one stream held by "please hold" go on: the one held now,
// or the next to be held.
func (s *Server) Release() { s.releases <- struct{}{} }

// URL is the base URL, http://127.0.0.1:PORT, for ANTHROPIC_BASE_URL.
func (s *Server) URL() string { return s.BaseURL() }

// Models returns the model of every recorded request, in order.
func (s *Server) Models() []string {
	reqs := s.Requests()
	out := make([]string, len(reqs))
	for i, r := range reqs {
		out[i] = r.Model
	}
	return out
}

func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.URL.Path == "/" && (r.Method == http.MethodHead || r.Method == http.MethodGet):
		s.Logf("%s /", r.Method)
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(http.StatusOK)
		if r.Method == http.MethodGet {
			io.WriteString(w, "fakeapi\n")
		}
	case r.URL.Path == "/v1/messages" && r.Method == http.MethodPost:
		s.messages(w, r)
	case r.URL.Path == "/v1/messages/count_tokens" && r.Method == http.MethodPost:
		s.Logf("POST %s", r.URL.Path)
		io.Copy(io.Discard, r.Body)
		writeJSON(w, http.StatusOK, map[string]int{"input_tokens": InputTokens})
	default:
		s.Logf("404 %s %s", r.Method, r.URL.Path)
		writeError(w, http.StatusNotFound, "not_found_error",
			fmt.Sprintf("fakeapi: no route for %s %s", r.Method, r.URL.Path))
	}
}

// apiRequest is the part of a Messages API request the fake looks at.
type apiRequest struct {
	Model  string          `json:"model"`
	Stream bool            `json:"stream"`
	System json.RawMessage `json:"system"`
	Tools  []struct {
		Name string `json:"name"`
	} `json:"tools"`
	Messages []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	} `json:"messages"`
}

type inBlock struct {
	Type    string          `json:"type"`
	Text    string          `json:"text"`
	Content json.RawMessage `json:"content"`
	IsError bool            `json:"is_error"`
}

// lastUser extracts the script text of the last user message, or, if it has
// none, the text of its tool_result blocks (followUp true).
func lastUser(req *apiRequest) (text, toolResult string, followUp bool) {
	for i := len(req.Messages) - 1; i >= 0; i-- {
		m := req.Messages[i]
		if m.Role != "user" {
			continue
		}
		var str string
		if json.Unmarshal(m.Content, &str) == nil {
			return str, "", false
		}
		var blocks []inBlock
		if json.Unmarshal(m.Content, &blocks) != nil {
			return "", "", false
		}
		var results []string
		haveText, isErr := false, false
		for _, b := range blocks {
			switch b.Type {
			case "text":
				if strings.HasPrefix(strings.TrimSpace(b.Text), "<") {
					continue
				}
				text, haveText = b.Text, true
			case "tool_result":
				results = append(results, contentText(b.Content))
				isErr = isErr || b.IsError
			}
		}
		if haveText || len(results) == 0 {
			return text, "", false
		}
		toolResult = strings.Join(results, "\n")
		if isErr {
			toolResult += " (is_error)"
		}
		return "", toolResult, true
	}
	return "", "", false
}

// history lists the text blocks of every message as "role: text".
func history(req *apiRequest) []string {
	var out []string
	for _, m := range req.Messages {
		var str string
		if json.Unmarshal(m.Content, &str) == nil {
			out = append(out, m.Role+": "+str)
			continue
		}
		var blocks []inBlock
		_ = json.Unmarshal(m.Content, &blocks)
		for _, b := range blocks {
			if b.Type == "text" && !strings.HasPrefix(strings.TrimSpace(b.Text), "<") {
				out = append(out, m.Role+": "+b.Text)
			}
		}
	}
	return out
}

// contentText renders a tool_result content (string or blocks) as text.
func contentText(raw json.RawMessage) string {
	if len(raw) == 0 {
		return ""
	}
	var str string
	if json.Unmarshal(raw, &str) == nil {
		return str
	}
	var blocks []inBlock
	if json.Unmarshal(raw, &blocks) != nil {
		return string(raw)
	}
	var parts []string
	for _, b := range blocks {
		if b.Type == "text" {
			parts = append(parts, b.Text)
		} else {
			parts = append(parts, "["+b.Type+"]")
		}
	}
	return strings.Join(parts, "\n")
}

// block is one content block of a scripted reply.
type block struct {
	kind      string // "text", "thinking" or "tool_use"
	n         int    // number of deltas
	chunk     func(i int) string
	signature string // thinking
	toolName  string // tool_use
	delay     time.Duration
	holdAt    int // > 0: the stream waits for a Release before delta holdAt
}

func (b *block) full() string {
	var sb strings.Builder
	for i := 0; i < b.n; i++ {
		sb.WriteString(b.chunk(i))
	}
	return sb.String()
}

// reply is a scripted answer.
type reply struct {
	fail       bool
	blocks     []block
	stopReason string
	// breakAt > 0 drops the connection after that many deltas of the
	// first block, mid-stream: the API failing halfway through a reply.
	// With breakAll, a request without streaming is dropped too.
	breakAt  int
	breakAll bool
}

func fixedBlock(kind string, chunks ...string) block {
	return block{kind: kind, n: len(chunks), chunk: func(i int) string { return chunks[i] }}
}

// textBlock splits s into pieces of at most 16 runes (at least two pieces
// when s has two runes or more).
func textBlock(s string) block {
	return fixedBlock("text", fakescript.Split(s, 16)...)
}

func toolBlock(name string, kv ...string) block {
	return rawToolBlock(name, orderedJSON(kv...))
}

// rawToolBlock is a tool_use block of tool name with input, a JSON object.
func rawToolBlock(name string, input []byte) block {
	b := fixedBlock("tool_use", fakescript.Split(string(input), 10)...)
	b.toolName = name
	return b
}

// orderedJSON renders key/value string pairs as a JSON object in order.
func orderedJSON(kv ...string) []byte {
	var buf bytes.Buffer
	buf.WriteByte('{')
	for i := 0; i+1 < len(kv); i += 2 {
		if i > 0 {
			buf.WriteByte(',')
		}
		buf.Write(fakescript.JSON(kv[i]))
		buf.WriteByte(':')
		buf.Write(fakescript.JSON(kv[i+1]))
	}
	buf.WriteByte('}')
	return buf.Bytes()
}

// restOfLine returns the text after the trigger up to the end of its line.
func restOfLine(s string) string {
	if i := strings.IndexAny(s, "\r\n"); i >= 0 {
		s = s[:i]
	}
	return strings.TrimSpace(s)
}

// nextCommand is the next command of a "run commands:" turn whose tool
// follow-up req is: the turn's user text is the last user message with
// text, and each user message after it is one command's tool result.
func nextCommand(req *apiRequest) (string, bool) {
	results := 0
	for i := len(req.Messages) - 1; i >= 0; i-- {
		if req.Messages[i].Role != "user" {
			continue
		}
		text, _, followUp := lastUser(&apiRequest{Messages: req.Messages[i : i+1]})
		if followUp {
			results++
			continue
		}
		at := strings.Index(text, TriggerRunCommands)
		if at < 0 {
			return "", false
		}
		cmds := strings.Split(restOfLine(text[at+len(TriggerRunCommands):]), " ;; ")
		if results >= len(cmds) {
			return "", false
		}
		return strings.TrimSpace(cmds[results]), true
	}
	return "", false
}

// trigger finds the phrase of [Phrases] that occurs first in text: its
// trigger ("stream" for "stream N chunks", with N) and the text after
// it; "" when text has none.
func trigger(text string) (best, rest string, streamN int) {
	pos := -1
	for _, p := range Phrases {
		if i := strings.Index(text, p.trigger); p.trigger != "" && i >= 0 && (pos < 0 || i < pos) {
			best, pos = p.trigger, i
		}
	}
	if loc := streamChunksRE.FindStringSubmatchIndex(text); loc != nil && (pos < 0 || loc[0] < pos) {
		if v, err := strconv.Atoi(text[loc[2]:loc[3]]); err == nil {
			return "stream", "", v
		}
	}
	if pos >= 0 {
		rest = text[pos+len(best):]
	}
	return best, rest, 0
}

// script chooses the reply for a request.
func script(text, toolResult string, followUp bool, n int) reply {
	if followUp {
		return reply{blocks: []block{textBlock("Tool said: " + toolResult + ". Done.")}, stopReason: "end_turn"}
	}
	best, rest, streamN := trigger(text)
	switch best {
	case TriggerThink:
		th := fixedBlock("thinking", "Let me think", " about this ", "briefly.")
		th.signature = ThinkSignature
		return reply{blocks: []block{th, fixedBlock("text", "Thought about it", ". Answer: 42.")}, stopReason: "end_turn"}
	case TriggerTool:
		return reply{blocks: []block{textBlock(ToolText),
			toolBlock("Bash", "command", ToolCommand, "description", ToolDescription)}, stopReason: "tool_use"}
	case TriggerRunCommand:
		return reply{blocks: []block{textBlock(ToolText),
			toolBlock("Bash", "command", restOfLine(rest), "description", "Run a command")}, stopReason: "tool_use"}
	case TriggerRunCommands:
		first, _, _ := strings.Cut(restOfLine(rest), " ;; ")
		return reply{blocks: []block{textBlock(ToolText),
			toolBlock("Bash", "command", strings.TrimSpace(first), "description", "Run a command")}, stopReason: "tool_use"}
	case TriggerWriteFile:
		return reply{blocks: []block{textBlock(WriteText),
			toolBlock("Write", "file_path", restOfLine(rest), "content", WrittenContent)}, stopReason: "tool_use"}
	case TriggerRead:
		return reply{blocks: []block{toolBlock("Read", "file_path", restOfLine(rest))}, stopReason: "tool_use"}
	case TriggerSlow:
		b := block{kind: "text", n: SlowChunks, chunk: func(i int) string { return "chunk" + strconv.Itoa(i) + " " }, delay: SlowChunkDelay}
		return reply{blocks: []block{b}, stopReason: "end_turn"}
	case "stream":
		b := block{kind: "text", n: streamN, chunk: func(i int) string { return "tok" + strconv.Itoa(i) + " " }}
		return reply{blocks: []block{b}, stopReason: "end_turn"}
	case TriggerFail:
		return reply{fail: true}
	case TriggerBreak:
		b := block{kind: "text", n: 10, chunk: func(i int) string { return "part" + strconv.Itoa(i) + " " }}
		return reply{blocks: []block{b}, stopReason: "end_turn", breakAt: breakAfter, breakAll: strings.Contains(rest, "every time")}
	case TriggerSayExactly:
		return reply{blocks: []block{textBlock(strings.TrimPrefix(rest, " "))}, stopReason: "end_turn"}
	case TriggerHold:
		b := fixedBlock("text", append(fakescript.Split(HoldFirst, 8), HoldRest)...)
		b.holdAt = b.n - 1
		return reply{blocks: []block{b}, stopReason: "end_turn"}
	case TriggerCallTool:
		name, input := fakescript.CallTool(rest)
		return reply{blocks: []block{rawToolBlock(name, input)}, stopReason: "tool_use"}
	}
	return reply{blocks: []block{textBlock(fmt.Sprintf(defaultText, n))}, stopReason: "end_turn"}
}

func (s *Server) messages(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 256<<20))
	var req apiRequest
	if err == nil {
		err = json.Unmarshal(body, &req)
	}
	text, toolResult, followUp := lastUser(&req)
	tools := make([]string, 0, len(req.Tools))
	for _, t := range req.Tools {
		tools = append(tools, t.Name)
	}
	n := s.Record(Request{Model: req.Model, LastUserText: text, Stream: req.Stream, ToolResult: toolResult, Tools: tools, History: history(&req), System: contentText(req.System)})
	s.Logf("POST %s #%d model=%q stream=%v text=%q toolResult=%q", r.URL.Path, n, req.Model, req.Stream, fakescript.Clip(text), fakescript.Clip(toolResult))
	if err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request_error", "fakeapi: bad request body: "+err.Error())
		return
	}
	rep := script(text, toolResult, followUp, n)
	if cmd, ok := nextCommand(&req); ok && followUp {
		rep = reply{blocks: []block{textBlock(ToolText), toolBlock("Bash", "command", cmd, "description", "Run a command")}, stopReason: "tool_use"}
	}
	w.Header().Set("request-id", newID("req_"))
	if rep.fail {
		w.Header().Set("x-should-retry", "false")
		writeError(w, http.StatusInternalServerError, "api_error", FailMessage)
		return
	}
	msgID := newID("msg_")
	if !req.Stream {
		if rep.breakAll {
			if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
				conn.Close()
			}
			return
		}
		writeJSON(w, http.StatusOK, wholeMessage(msgID, req.Model, rep))
		return
	}
	s.stream(w, r.Context(), msgID, req.Model, rep)
}

func newID(prefix string) string {
	b := make([]byte, 12)
	rand.Read(b)
	return prefix + "fake" + hex.EncodeToString(b)
}

type usage struct {
	InputTokens              int `json:"input_tokens"`
	OutputTokens             int `json:"output_tokens"`
	CacheCreationInputTokens int `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int `json:"cache_read_input_tokens"`
}

type message struct {
	ID           string  `json:"id"`
	Type         string  `json:"type"`
	Role         string  `json:"role"`
	Model        string  `json:"model"`
	Content      []any   `json:"content"`
	StopReason   *string `json:"stop_reason"`
	StopSequence *string `json:"stop_sequence"`
	Usage        usage   `json:"usage"`
}

type textContent struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

type thinkingContent struct {
	Type      string `json:"type"`
	Thinking  string `json:"thinking"`
	Signature string `json:"signature"`
}

type toolUseContent struct {
	Type  string          `json:"type"`
	ID    string          `json:"id"`
	Name  string          `json:"name"`
	Input json.RawMessage `json:"input"`
}

func wholeMessage(id, model string, rep reply) message {
	stop := rep.stopReason
	m := message{ID: id, Type: "message", Role: "assistant", Model: model, Content: []any{}, StopReason: &stop,
		Usage: usage{InputTokens: InputTokens, OutputTokens: OutputTokens, CacheReadInputTokens: CacheReadTokens}}
	for _, b := range rep.blocks {
		switch b.kind {
		case "text":
			m.Content = append(m.Content, textContent{"text", b.full()})
		case "thinking":
			m.Content = append(m.Content, thinkingContent{"thinking", b.full(), b.signature})
		case "tool_use":
			m.Content = append(m.Content, toolUseContent{"tool_use", newID("toolu_"), b.toolName, json.RawMessage(b.full())})
		}
	}
	return m
}

var errGone = errors.New("fakeapi: client gone")

// Server-sent event payloads, with fields in the order the real API uses.
type (
	messageStartEvent struct {
		Type    string  `json:"type"`
		Message message `json:"message"`
	}
	blockStartEvent struct {
		Type         string `json:"type"`
		Index        int    `json:"index"`
		ContentBlock any    `json:"content_block"`
	}
	blockDeltaEvent struct {
		Type  string          `json:"type"`
		Index int             `json:"index"`
		Delta json.RawMessage `json:"delta"`
	}
	blockStopEvent struct {
		Type  string `json:"type"`
		Index int    `json:"index"`
	}
	messageDeltaEvent struct {
		Type  string `json:"type"`
		Delta struct {
			StopReason   string  `json:"stop_reason"`
			StopSequence *string `json:"stop_sequence"`
		} `json:"delta"`
		Usage struct {
			OutputTokens int `json:"output_tokens"`
		} `json:"usage"`
	}
	messageStopEvent struct {
		Type string `json:"type"`
	}
)

func (s *Server) stream(w http.ResponseWriter, ctx context.Context, msgID, model string, rep reply) {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	send := func(event string, data any) error {
		select {
		case <-ctx.Done():
			return errGone
		case <-s.Done():
			return errGone
		default:
		}
		if _, err := fmt.Fprintf(w, "event: %s\ndata: %s\n\n", event, fakescript.JSON(data)); err != nil {
			return err
		}
		return rc.Flush()
	}
	pause := func(d time.Duration) error {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
			return nil
		case <-ctx.Done():
			return errGone
		case <-s.Done():
			return errGone
		}
	}
	err := func() error {
		start := message{ID: msgID, Type: "message", Role: "assistant", Model: model, Content: []any{},
			Usage: usage{InputTokens: InputTokens, OutputTokens: StartOutputTokens, CacheReadInputTokens: CacheReadTokens}}
		if err := send("message_start", messageStartEvent{"message_start", start}); err != nil {
			return err
		}
		for idx, b := range rep.blocks {
			var cb any
			var deltaType, field string
			switch b.kind {
			case "text":
				cb, deltaType, field = textContent{"text", ""}, "text_delta", "text"
			case "thinking":
				cb, deltaType, field = thinkingContent{"thinking", "", ""}, "thinking_delta", "thinking"
			case "tool_use":
				cb = toolUseContent{"tool_use", newID("toolu_"), b.toolName, json.RawMessage("{}")}
				deltaType, field = "input_json_delta", "partial_json"
			}
			if err := send("content_block_start", blockStartEvent{"content_block_start", idx, cb}); err != nil {
				return err
			}
			for i := 0; i < b.n; i++ {
				if i > 0 && b.delay > 0 {
					if err := pause(b.delay); err != nil {
						return err
					}
				}
				if b.holdAt > 0 && i == b.holdAt {
					select {
					case <-s.releases:
					case <-ctx.Done():
						return errGone
					case <-s.Done():
						return errGone
					}
				}
				if rep.breakAt > 0 && idx == 0 && i == rep.breakAt {
					// Drop the connection: no more events, no end.
					if conn, _, err := rc.Hijack(); err == nil {
						conn.Close()
					}
					return errGone
				}
				d := json.RawMessage(orderedJSON("type", deltaType, field, b.chunk(i)))
				if err := send("content_block_delta", blockDeltaEvent{"content_block_delta", idx, d}); err != nil {
					return err
				}
			}
			if b.signature != "" {
				d := json.RawMessage(orderedJSON("type", "signature_delta", "signature", b.signature))
				if err := send("content_block_delta", blockDeltaEvent{"content_block_delta", idx, d}); err != nil {
					return err
				}
			}
			if err := send("content_block_stop", blockStopEvent{"content_block_stop", idx}); err != nil {
				return err
			}
		}
		md := messageDeltaEvent{Type: "message_delta"}
		md.Delta.StopReason = rep.stopReason
		md.Usage.OutputTokens = OutputTokens
		if err := send("message_delta", md); err != nil {
			return err
		}
		return send("message_stop", messageStopEvent{"message_stop"})
	}()
	if err != nil {
		s.Logf("stream %s ended early: %v", msgID, err)
	}
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	w.Write(fakescript.JSON(v))
}

func writeError(w http.ResponseWriter, code int, typ, msg string) {
	type detail struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	}
	writeJSON(w, code, struct {
		Type  string `json:"type"`
		Error detail `json:"error"`
	}{"error", detail{typ, msg}})
}
