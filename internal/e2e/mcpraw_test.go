package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kaimon/kaimon/internal/proc"
)

// Protocol 2026-07-28's request _meta keys.
const (
	metaProtocolVersion = "io.modelcontextprotocol/protocolVersion"
	metaClientInfo      = "io.modelcontextprotocol/clientInfo"
	metaClientCaps      = "io.modelcontextprotocol/clientCapabilities"
	modernProtocol      = "2026-07-28"
)

// rawMCP is a raw JSON-RPC client of `kaimon mcp` on stdio, speaking MCP
// 2026-07-28 by hand: no Go SDK's client is used, so that what goes over
// the wire (server/discover, the _meta every request carries, resultType,
// input_required rounds, and that nothing comes as a server request) is
// what the test sees, not what a library on both ends agrees on.
type rawMCP struct {
	t     testing.TB
	child *proc.Child
	in    io.WriteCloser
	// Caps are the clientCapabilities sent in each request's _meta.
	Caps map[string]any

	mu      sync.Mutex
	next    int
	waiting map[string]chan rawMessage
	// Notes are the notifications received, in order; Requests are the
	// server-initiated requests (none is allowed at 2026-07-28).
	Notes    []rawMessage
	Requests []rawMessage
	noted    chan struct{} // closed and replaced at each notification
	// wire is every line written ("> …") and read ("< …"), in order.
	wire []string
}

// rawMessage is one JSON-RPC message from the server.
type rawMessage struct {
	ID     json.RawMessage `json:"id,omitempty"`
	Method string          `json:"method,omitempty"`
	Params json.RawMessage `json:"params,omitempty"`
	Result json.RawMessage `json:"result,omitempty"`
	Error  *rawError       `json:"error,omitempty"`
}

type rawError struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

func (e *rawError) Error() string { return fmt.Sprintf("JSON-RPC error %d: %s", e.Code, e.Message) }

// startRawMCP starts `kaimon mcp` (with args) in e's installation, in a
// process group of its own, stopped at the test's end.
func startRawMCP(t testing.TB, e *kenv, caps map[string]any, args ...string) *rawMCP {
	t.Helper()
	cmd := exec.Command(filepath.Join(binDir, "kaimon"), append([]string{"mcp"}, args...)...)
	cmd.Dir, cmd.Env = e.work, e.env
	in, out, child := startPiped(t, cmd)
	c := &rawMCP{t: t, child: child, in: in, Caps: caps, waiting: map[string]chan rawMessage{}, noted: make(chan struct{})}
	t.Cleanup(c.Stop)
	go c.read(out)
	return c
}

// Stop closes the server's stdin and ends its process group.
func (c *rawMCP) Stop() {
	c.in.Close()
	c.child.Stop(5 * time.Second)
}

func (c *rawMCP) read(out io.Reader) {
	sc := bufio.NewScanner(out)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		c.mu.Lock()
		c.wire = append(c.wire, "< "+sc.Text())
		c.mu.Unlock()
		var m rawMessage
		if json.Unmarshal(sc.Bytes(), &m) != nil {
			c.t.Errorf("kaimon mcp wrote a line that is not JSON-RPC: %q", sc.Text())
			continue
		}
		c.mu.Lock()
		switch {
		case m.Method != "" && m.ID != nil:
			c.Requests = append(c.Requests, m)
		case m.Method != "":
			c.Notes = append(c.Notes, m)
			close(c.noted)
			c.noted = make(chan struct{})
		default:
			// The channel stays until Wait has taken the answer: an
			// answer may come before Wait looks.
			if ch := c.waiting[string(m.ID)]; ch != nil {
				select {
				case ch <- m:
				default:
				}
			}
		}
		c.mu.Unlock()
	}
}

// Meta is the _meta of a request: the protocol version, the client's
// info and its capabilities.
func (c *rawMCP) Meta() map[string]any {
	return map[string]any{
		metaProtocolVersion: modernProtocol,
		metaClientInfo:      map[string]any{"name": "kaimon-e2e-raw", "version": "1"},
		metaClientCaps:      c.Caps,
	}
}

// Send writes a request with params as given (their _meta included, or
// none) and returns the id it has, whose answer Wait takes.
func (c *rawMCP) Send(method string, params map[string]any) string {
	c.t.Helper()
	c.mu.Lock()
	c.next++
	id := fmt.Sprintf(`"raw-%d"`, c.next)
	ch := make(chan rawMessage, 1)
	c.waiting[id] = ch
	c.mu.Unlock()
	msg := map[string]any{"jsonrpc": "2.0", "id": json.RawMessage(id), "method": method}
	if params != nil {
		msg["params"] = params
	}
	b, _ := json.Marshal(msg)
	c.mu.Lock()
	c.wire = append(c.wire, "> "+string(b))
	c.mu.Unlock()
	if _, err := c.in.Write(append(b, '\n')); err != nil {
		c.t.Fatalf("writing %s: %v", method, err)
	}
	return id
}

// Wait is the answer to request id: its result, or its error.
func (c *rawMCP) Wait(id string, timeout time.Duration) (json.RawMessage, *rawError) {
	c.t.Helper()
	c.mu.Lock()
	ch := c.waiting[id]
	c.mu.Unlock()
	if ch == nil {
		c.t.Fatalf("request %s: not waiting for it", id)
	}
	select {
	case m := <-ch:
		c.mu.Lock()
		delete(c.waiting, id)
		c.mu.Unlock()
		return m.Result, m.Error
	case <-time.After(timeout):
		c.t.Fatalf("request %s: no answer within %v", id, timeout)
		return nil, nil
	}
}

// Call sends method with params plus the _meta of c and waits for its
// answer (3 minutes at most).
func (c *rawMCP) Call(method string, params map[string]any) (json.RawMessage, *rawError) {
	c.t.Helper()
	p := map[string]any{"_meta": c.Meta()}
	for k, v := range params {
		p[k] = v
	}
	return c.Wait(c.Send(method, p), 3*time.Minute)
}

// MustCall is Call that fails the test on a JSON-RPC error.
func (c *rawMCP) MustCall(method string, params map[string]any) json.RawMessage {
	c.t.Helper()
	r, err := c.Call(method, params)
	if err != nil {
		c.t.Fatalf("%s: %v", method, err)
	}
	return r
}

// Discover is server/discover's result.
func (c *rawMCP) Discover() json.RawMessage {
	c.t.Helper()
	return c.MustCall("server/discover", nil)
}

// WaitNote waits for a notification that match accepts, among those
// received so far and to come.
func (c *rawMCP) WaitNote(what string, timeout time.Duration, match func(rawMessage) bool) rawMessage {
	c.t.Helper()
	deadline := time.After(timeout)
	seen := 0
	for {
		c.mu.Lock()
		notes, noted := c.Notes, c.noted
		c.mu.Unlock()
		for ; seen < len(notes); seen++ {
			if match(notes[seen]) {
				return notes[seen]
			}
		}
		select {
		case <-noted:
		case <-deadline:
			c.t.Fatalf("no notification of %s within %v; had %d", what, timeout, len(notes))
		}
	}
}

// ServerRequests are the server-initiated requests received so far.
func (c *rawMCP) ServerRequests() []rawMessage {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]rawMessage(nil), c.Requests...)
}

// rawToolResult is a tools/call result as the wire has it, an MRTR
// round's (input_required) included.
type rawToolResult struct {
	ResultType        string          `json:"resultType"`
	IsError           bool            `json:"isError"`
	StructuredContent json.RawMessage `json:"structuredContent"`
	Content           []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	} `json:"content"`
	InputRequests map[string]rawInputRequest `json:"inputRequests"`
	RequestState  string                     `json:"requestState"`
}

// rawInputRequest is one of an input_required result's inputRequests.
type rawInputRequest struct {
	Method string `json:"method"`
	Params struct {
		Mode            string                     `json:"mode"`
		Message         string                     `json:"message"`
		RequestedSchema json.RawMessage            `json:"requestedSchema"`
		Meta            map[string]json.RawMessage `json:"_meta"`
	} `json:"params"`
}

// Text is the result's text content.
func (r rawToolResult) Text() string {
	var s []string
	for _, c := range r.Content {
		s = append(s, c.Text)
	}
	return strings.Join(s, "\n")
}

// Tool calls tool name with args, and with extra params besides (an MRTR
// retry's inputResponses and requestState), and reads its result.
func (c *rawMCP) Tool(name string, args map[string]any, extra map[string]any) rawToolResult {
	c.t.Helper()
	p := map[string]any{"name": name, "arguments": args}
	for k, v := range extra {
		p[k] = v
	}
	raw := c.MustCall("tools/call", p)
	var r rawToolResult
	if err := json.Unmarshal(raw, &r); err != nil {
		c.t.Fatalf("%s: result %s: %v", name, raw, err)
	}
	return r
}

// Answer is the retry of an MRTR round: the call again, with the answer
// (an elicitation result) under key and the round's requestState.
func (c *rawMCP) Answer(name string, args map[string]any, key string, answer map[string]any, state string) rawToolResult {
	c.t.Helper()
	return c.Tool(name, args, map[string]any{"inputResponses": map[string]any{key: answer}, "requestState": state})
}

// Wire is the exchange so far, one JSON-RPC line each, "> " for what the
// client wrote and "< " for what it read: a session's transcript.
func (c *rawMCP) Wire() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.wire...)
}
