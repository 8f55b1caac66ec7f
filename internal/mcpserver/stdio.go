package mcpserver

import (
	"context"
	"io"
	"log"

	"github.com/mark3labs/mcp-go/server"

	"github.com/kaimon/kaimon/internal/verbs"
)

// StdioWorkers is how many tool calls the stdio server runs at once:
// agent_run blocks for a whole turn, so a client driving several agents
// needs more than mcp-go's default of 5.
const StdioWorkers = 32

// ServeStdio serves the tools against svc as an MCP server on in and out,
// the JSON-RPC of `kaimon mcp`, until in ends or ctx does (which is not an
// error). Its own errors go to errOut prefixed "kaimon mcp: ".
func ServeStdio(ctx context.Context, svc verbs.Service, o Options, in io.Reader, out, errOut io.Writer) error {
	s := server.NewStdioServer(New(svc, o))
	s.SetErrorLogger(log.New(errOut, "kaimon mcp: ", log.LstdFlags))
	server.WithWorkerPoolSize(StdioWorkers)(s)
	err := s.Listen(ctx, in, out)
	if ctx.Err() != nil {
		return nil // stopped by a signal: not an error
	}
	return err
}
