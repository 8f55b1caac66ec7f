package codex

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"

	"github.com/kaimon/kaimon/internal/backend/host"
	"github.com/kaimon/kaimon/internal/proc"
)

// app-server speaks JSON-RPC 2.0 on stdio, one message a line, without
// the "jsonrpc" member: kaimon's requests (initialize, thread/*, turn/*),
// their responses, Codex's notifications, and Codex's requests of kaimon
// (approvals), which kaimon answers.

// message is any one line of the protocol.
type message struct {
	ID     json.RawMessage `json:"id,omitempty"`
	Method string          `json:"method,omitempty"`
	Params json.RawMessage `json:"params,omitempty"`
	Result json.RawMessage `json:"result,omitempty"`
	Error  *rpcError       `json:"error,omitempty"`
}

// rpcError is a JSON-RPC error object.
type rpcError struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

func (e *rpcError) Error() string { return e.Message }

// request is a request kaimon sends.
type request struct {
	ID     int64  `json:"id"`
	Method string `json:"method"`
	Params any    `json:"params,omitempty"`
}

// notification is a notification kaimon sends.
type notification struct {
	Method string `json:"method"`
	Params any    `json:"params,omitempty"`
}

// response answers a request of Codex's.
type response struct {
	ID     json.RawMessage `json:"id"`
	Result any             `json:"result,omitempty"`
	Error  *rpcError       `json:"error,omitempty"`
}

// calls are kaimon's requests waiting for their responses.
type calls struct {
	mu      sync.Mutex
	next    int64
	pending map[int64]chan message
	closed  bool
}

// begin registers the next request id and the channel its response
// comes on; the channel is closed if the process goes first.
func (c *calls) begin() (int64, chan message) {
	ch := make(chan message, 1)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.next++
	if c.closed {
		close(ch)
		return c.next, ch
	}
	if c.pending == nil {
		c.pending = map[int64]chan message{}
	}
	c.pending[c.next] = ch
	return c.next, ch
}

func (c *calls) forget(id int64) {
	c.mu.Lock()
	delete(c.pending, id)
	c.mu.Unlock()
}

// deliver hands a response to its waiter; false for an id nobody waits
// for.
func (c *calls) deliver(m message) bool {
	id, err := strconv.ParseInt(string(m.ID), 10, 64)
	if err != nil {
		return false
	}
	c.mu.Lock()
	ch, ok := c.pending[id]
	delete(c.pending, id)
	c.mu.Unlock()
	if ok {
		ch <- m // buffered: one response per id
	}
	return ok
}

// close ends every wait: the process is gone.
func (c *calls) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	for id, ch := range c.pending {
		close(ch)
		delete(c.pending, id)
	}
}

// call sends a request on p and waits for its result, until ctx ends.
func (c *calls) call(ctx context.Context, p *host.Process, method string, params any) (json.RawMessage, error) {
	id, ch := c.begin()
	defer c.forget(id)
	if err := p.WriteJSON(request{ID: id, Method: method, Params: params}); err != nil {
		return nil, fmt.Errorf("writing %s to codex: %w", method, err)
	}
	select {
	case m, ok := <-ch:
		switch {
		case !ok:
			return nil, proc.ErrExited
		case m.Error != nil:
			return nil, fmt.Errorf("codex refused %s: %w", method, m.Error)
		}
		return m.Result, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("codex did not answer %s: %w", method, ctx.Err())
	}
}
