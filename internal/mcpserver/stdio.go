package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log"
	"sync"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/kaimon/kaimon/internal/verbs"
)

// StdioWorkers is how many tool calls the stdio server runs at once:
// agent_run blocks for a whole turn, so a client driving several agents
// needs more than mcp-go's default of 5.
const StdioWorkers = 32

// ServeStdio serves the tools against svc as an MCP server on in and out,
// the JSON-RPC of `kaimon mcp`, until in ends or ctx does (which is not an
// error). Its own errors go to errOut prefixed "kaimon mcp: ". With
// o.Follow, it orchestrates (see orchestrator).
func ServeStdio(ctx context.Context, svc verbs.Service, o Options, in io.Reader, out, errOut io.Writer) error {
	return serveStdio(ctx, svc, o, in, out, errOut, nil)
}

// serveStdio is ServeStdio, handing its orchestrator, if any, to seen
// (a test's look at it, or change of it) before it reads anything.
func serveStdio(ctx context.Context, svc verbs.Service, o Options, in io.Reader, out, errOut io.Writer, seen func(*orchestrator)) error {
	ctx, cancel := context.WithCancel(ctx)
	w := &wireWriter{w: out}
	var srv *server.MCPServer
	var or *orchestrator
	if o.Follow != nil {
		srv, or = newOrchestrating(ctx, svc, o, errOut)
		if seen != nil {
			seen(or)
		}
		w.written = or.written
		w.wire, or.rawWrite = or.wire, w.raw
		var stopFront func()
		in, stopFront = or.front(in)
		defer stopFront()
	} else {
		srv = New(svc, o)
	}
	s := server.NewStdioServer(srv)
	s.SetErrorLogger(log.New(errOut, "kaimon mcp: ", log.LstdFlags))
	server.WithWorkerPoolSize(StdioWorkers)(s)
	if or != nil {
		or.run()
	}
	err := s.Listen(ctx, in, w)
	stopped := ctx.Err() != nil
	cancel()
	if or != nil {
		or.wait()
	}
	if stopped {
		return nil // stopped by a signal: not an error
	}
	return err
}

// wireWriter is the stdio server's output. It makes each write whole
// (mcp-go writes its own requests to the client, elicitations among them,
// without the lock its responses take), and tells written the JSON-RPC id
// of each elicitation about a permission request, which the server needs
// to withdraw it (mcp-go keeps the ids to itself).
type wireWriter struct {
	mu      sync.Mutex
	w       io.Writer
	written func(askKey, any)
	// wire, when set, sees each message first (see orchestrator.wire).
	wire func([]byte) (act wireAction, before, after func())
}

// raw writes p as it is, whole.
func (ww *wireWriter) raw(p []byte) error {
	ww.mu.Lock()
	defer ww.mu.Unlock()
	_, err := ww.w.Write(p)
	return err
}

var elicitMethod = []byte(`"method":"` + string(mcp.MethodElicitationCreate) + `"`)

func (ww *wireWriter) Write(p []byte) (int, error) {
	var before, after func()
	if ww.wire != nil {
		var act wireAction
		act, before, after = ww.wire(p)
		if act == wireDrop {
			if after != nil {
				after()
			}
			return len(p), nil
		}
	}
	ww.mu.Lock()
	if before != nil {
		before()
	}
	n, err := ww.w.Write(p)
	ww.mu.Unlock()
	if after != nil {
		after()
	}
	if err == nil && ww.written != nil && bytes.Contains(p, elicitMethod) {
		var m struct {
			ID     any `json:"id"`
			Params struct {
				Meta map[string]json.RawMessage `json:"_meta"`
			} `json:"params"`
		}
		var k struct {
			Agent   string `json:"agent_id"`
			Request string `json:"request_id"`
		}
		if json.Unmarshal(p, &m) == nil && m.ID != nil && json.Unmarshal(m.Params.Meta[MetaPermission], &k) == nil && k.Request != "" {
			ww.written(askKey{k.Agent, k.Request}, m.ID)
		}
	}
	return n, err
}
