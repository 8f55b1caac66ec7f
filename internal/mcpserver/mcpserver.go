// Package mcpserver builds kaimon's MCP tools from the verb table: one tool
// per verb, with the verb's name, a description made of its doc and its
// return, and an input schema giving every argument's type, default, enum,
// description and whether it is required. `kaimon mcp` serves them on stdio
// against the daemon; the daemon's MCP door serves them over HTTP to the
// agents it owns, with their presets applied through Options.
package mcpserver

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/kaimon/kaimon/internal/agentbin"
	"github.com/kaimon/kaimon/internal/apitype"
	"github.com/kaimon/kaimon/internal/event"
	"github.com/kaimon/kaimon/internal/schema"
	"github.com/kaimon/kaimon/internal/verbs"
	"github.com/kaimon/kaimon/internal/version"
)

// DefaultProgress is how often agent_run reports progress while the turn
// runs, when the client asked for progress.
const DefaultProgress = verbs.DefaultProgressSeconds * time.Second

// Options adapt the server to where it runs.
type Options struct {
	// Progress is the interval of agent_run's progress notifications;
	// 0 means DefaultProgress.
	Progress time.Duration
	// Check, when set, may refuse a call before it runs: its error is
	// the tool error the caller sees.
	Check func(ctx context.Context, v *verbs.Verb, args any) error
	// Visible, when set, hides tools from tools/list; a hidden tool is
	// also unknown to tools/call.
	Visible func(ctx context.Context, v *verbs.Verb) bool
	// Instructions are the server's instructions to the client.
	Instructions string
	// Follow, when set, follows every agent's envelopes until ctx ends,
	// handing each to emit: it turns on what a client that orchestrates
	// gets (see orchestrator), for ServeStdio. The door leaves it unset.
	Follow func(ctx context.Context, emit func(Envelope)) error
	// Elicit says which agents' permission requests go to a client that
	// declared elicitation: verbs.ElicitOwn ("" too), verbs.ElicitNever or verbs.ElicitAll.
	Elicit string
	// StateKey is the file of the key that seals the requestState of an
	// MRTR round, made if missing, so that a retry reaches a server
	// started after the round's; StateUsed records the states used.
	// config.Paths.MCPStateKey and MCPStateUsed; "" keeps them in memory,
	// for this process only.
	StateKey, StateUsed string

	// or is the orchestrator of a server with Follow.
	or *orchestrator
}

// Instructions tell an MCP client what the tools are for.
var Instructions = "kaimon drives headless coding agents owned by the kaimon-agentd daemon: " + agentKinds() + ". " +
	"agent_open starts one in a directory and returns its agent_id. agent_run sends a turn and waits for the reply; " +
	"for long turns use agent_send, then poll agent_output (non-blocking) until done is true. " +
	"agent_status and agent_list report state and token usage; agent_close stops an agent. " +
	"An agent's permission requests (permission events) are answered with agent_permit."

// HostsInstructions are Instructions for a server whose tools reach the
// hosts named as well as this machine (kaimon mcp with hosts configured).
func HostsInstructions(hosts []string) string {
	return Instructions + " Agents run on this machine (" + verbs.HostLocal + ") and on the hosts " + strings.Join(hosts, ", ") +
		": agent_open's host picks one (" + verbs.HostAny + ": the least busy), and an agent_id of another host is qualified as HOST/ID, " +
		"which every tool takes as agent_open returned it. agent_list lists every host's agents with their host; " +
		"its hosts say what each host answered, and a host that could not be asked is reported there with its error."
}

// agentKinds names the agents agent_open's model chooses between, from
// backend's table of model prefixes.
func agentKinds() string {
	kinds := []string{"the claude CLI (model " + strings.Join(apitype.ModelAliases, ", ") + " or a claude model id; the default)"}
	for _, p := range apitype.ModelPrefixes {
		k := p.Doc
		if p.Prefix == apitype.PrefixACP {
			k += " (" + strings.Join(agentbin.ACPNames, ", ") + ")"
		}
		kinds = append(kinds, k)
	}
	return strings.Join(kinds, "; ")
}

// Description is the tool description of v: its doc, the table's MCP
// note, and what it returns.
func Description(v *verbs.Verb) string {
	d := v.Doc
	if n := v.MCPNote; n != "" {
		d += " " + n
	}
	return d + " Returns JSON: " + v.Returns
}

// Tool is the MCP tool of v; its input schema is the table's
// (schema.VerbArgs), as `kaimon schema verbs` prints it.
func Tool(v *verbs.Verb) mcp.Tool {
	return tool(v, false)
}

// tool is the MCP tool of v; with tasks, agent_run may be called as a
// task.
func tool(v *verbs.Verb, tasks bool) mcp.Tool {
	t := mcp.Tool{
		Name:           v.Name,
		Title:          v.Summary,
		Description:    Description(v),
		RawInputSchema: schema.VerbArgs(v),
		// What structuredContent holds: the verb's result, as `kaimon
		// schema verbs` prints it.
		RawOutputSchema: schema.VerbResult(v),
	}
	t.Annotations.Title = v.Summary
	t.Annotations.ReadOnlyHint = mcp.ToBoolPtr(v.ReadOnly)
	t.Annotations.DestructiveHint = mcp.ToBoolPtr(v.Destructive)
	t.Annotations.OpenWorldHint = mcp.ToBoolPtr(false)
	if tasks && v.Name == runVerb {
		t.Execution = &mcp.ToolExecution{TaskSupport: mcp.TaskSupportOptional}
	}
	return t
}

// runVerb is the verb whose turns a client may run as tasks.
var runVerb = verbs.ByName("run").Name

// New returns an MCP server with one tool per verb of the table, run
// against svc.
func New(svc verbs.Service, o Options) *server.MCPServer {
	s := server.NewMCPServer("kaimon", version.String(), ServerOptions(o)...)
	s.AddTools(Tools(svc, o)...)
	return s
}

// newOrchestrating returns the server of New with the orchestration of
// Options.Follow, and its orchestrator (see ServeStdio).
func newOrchestrating(ctx context.Context, svc verbs.Service, o Options, errOut io.Writer) (*server.MCPServer, *orchestrator) {
	or := newOrchestrator(ctx, svc, o, errOut)
	o.or = or
	s := server.NewMCPServer("kaimon", version.String(), append(ServerOptions(o), or.serverOptions()...)...)
	or.srv = s
	s.AddTools(Tools(svc, o)...)
	or.addResources()
	return s, or
}

// ServerOptions are the server's options for o (instructions, the
// Visible filter).
func ServerOptions(o Options) []server.ServerOption {
	instr := o.Instructions
	if instr == "" {
		instr = Instructions
	}
	opts := []server.ServerOption{
		server.WithToolCapabilities(false),
		server.WithInstructions(instr),
		server.WithRecovery(),
	}
	if o.Visible != nil {
		opts = append(opts, server.WithToolFilter(func(ctx context.Context, tools []mcp.Tool) []mcp.Tool {
			out := tools[:0:0]
			for _, t := range tools {
				if v := verbs.ByName(t.Name); v != nil && o.Visible(ctx, v) {
					out = append(out, t)
				}
			}
			return out
		}))
	}
	return opts
}

// Tools are the verbs' tools with their handlers, run against svc.
func Tools(svc verbs.Service, o Options) []server.ServerTool {
	if o.Progress <= 0 {
		o.Progress = DefaultProgress
	}
	out := make([]server.ServerTool, 0, len(verbs.All))
	for _, v := range verbs.All {
		out = append(out, server.ServerTool{Tool: tool(v, o.or != nil), Handler: handler(svc, v, o)})
	}
	return out
}

// handler runs v: the arguments are decoded strictly by the table, the
// result is the verb's JSON as text, and a failure is a tool error (isError)
// carrying the verb's message, which says what to do next.
func handler(svc verbs.Service, v *verbs.Verb, o Options) server.ToolHandlerFunc {
	return func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		raw := []byte("{}")
		if a := req.Params.Arguments; a != nil {
			b, err := json.Marshal(a)
			if err != nil {
				return mcp.NewToolResultError(fmt.Sprintf("%s: arguments: %v", v.Name, err)), nil
			}
			raw = numbersAsStrings(v, b)
		}
		args, err := v.Decode(raw)
		if err != nil {
			return toolError(err), nil
		}
		if o.Check != nil {
			if err := o.Check(ctx, v, args); err != nil {
				return toolError(err), nil
			}
		}
		if ra, ok := args.(*verbs.RunArgs); ok && req.Params.Meta != nil && req.Params.Meta.ProgressToken != nil {
			stop := reportProgress(ctx, svc, ra.AgentID, req.Params.Meta.ProgressToken, o.Progress)
			defer stop()
		}
		ra, asTask := args.(*verbs.RunArgs)
		asTask = asTask && req.Params.Task != nil && o.or != nil
		if asTask {
			// A turn run as a task: mcp-go (v1.2.1) derives the call's
			// context from the request's, which ends as soon as the task
			// is created. The turn ends when the daemon ends it;
			// tasks/cancel interrupts it there (afterCancelTask). The
			// call may outlive ServeStdio: the process exits then.
			ctx = context.WithoutCancel(ctx)
		}
		if o.or != nil && !asTask {
			// A 2026-07-28 client's agent_run asks for permissions in
			// MRTR rounds (mrtr.go).
			if res := o.or.rounds(ctx, v, args, req); res != nil {
				return res, nil
			}
		}
		if o.or != nil {
			o.or.starting(args)
		}
		res, err := v.Call(ctx, svc, args)
		if asTask {
			o.or.ended(ra, err)
		}
		if err != nil {
			return toolError(err), nil
		}
		if o.or != nil {
			o.or.called(res)
		}
		return okResult(res)
	}
}

// okResult is the result of a call that succeeded with res: its JSON as
// structured content, and as text too, for clients that read only content.
func okResult(res any) (*mcp.CallToolResult, error) {
	b, err := event.Marshal(res)
	if err != nil {
		return nil, err
	}
	return mcp.NewToolResultStructured(res, string(b)), nil
}

// numbersAsStrings turns a number given for a string argument into its
// decimal text. Clients and models guess types from text: the MCP
// Inspector's CLI sends --tool-arg agent_id=12345678 as a number, and an
// agent id of eight hex digits is all digits one time in forty.
func numbersAsStrings(v *verbs.Verb, raw []byte) []byte {
	var obj map[string]json.RawMessage
	if json.Unmarshal(raw, &obj) != nil {
		return raw
	}
	changed := false
	for _, a := range v.Args {
		r, ok := obj[a.Name]
		if !ok || a.Type != verbs.TString || len(r) == 0 || !(r[0] == '-' || r[0] >= '0' && r[0] <= '9') {
			continue
		}
		var n json.Number
		if json.Unmarshal(r, &n) == nil {
			obj[a.Name], _ = json.Marshal(n.String())
			changed = true
		}
	}
	if !changed {
		return raw
	}
	b, err := json.Marshal(obj)
	if err != nil {
		return raw
	}
	return b
}

// toolError is the tool error of a failed call: the verb's message, and
// for agent_run the text the turn produced before it failed.
func toolError(err error) *mcp.CallToolResult {
	// A foreign error (the daemon is down, say) keeps its own message,
	// which says what to do.
	e := verbs.AsError(err)
	msg := asTools(e.Message)
	if e.Text != "" {
		msg += "\n\nThe turn's text so far:\n" + e.Text
	}
	return mcp.NewToolResultError(msg)
}

// cliCommand is a kaimon command line as an error quotes it.
var cliCommand = regexp.MustCompile("`kaimon ([a-z-]+)([^`]*)`")

// asTools names the MCP tool where msg names the CLI command of a verb
// (`kaimon list` → the agent_list tool; `kaimon close ab12` → agent_close
// {"agent_id":"ab12"}): the daemon's errors say what to do next in the
// CLI's words, and an MCP client has the tools, not a shell. Commands that
// are no verb (`kaimon daemon start`) stay as they are.
func asTools(msg string) string {
	return cliCommand.ReplaceAllStringFunc(msg, func(cmd string) string {
		m := cliCommand.FindStringSubmatch(cmd)
		var v *verbs.Verb
		for _, w := range verbs.All {
			if w.CLI == m[1] {
				v = w
			}
		}
		if v == nil {
			return cmd
		}
		words := strings.Fields(m[2])
		if len(words) == 0 {
			return "the " + v.Name + " tool"
		}
		args, ok := toolArgs(v, words)
		if !ok {
			return "the " + v.Name + " tool (" + cmd + " in a shell)"
		}
		return v.Name + " " + args
	})
}

// toolArgs are the arguments of v that the CLI words give, as JSON in the
// table's order: a flag is its argument's name with - for _, and the
// positionals are v's required arguments in order. ok is false for a word
// that maps to no argument.
func toolArgs(v *verbs.Verb, words []string) (args string, ok bool) {
	given := map[string]any{}
	var pos []string
	for i := 0; i < len(words); i++ {
		name, isFlag := strings.CutPrefix(words[i], "--")
		if !isFlag {
			pos = append(pos, words[i])
			continue
		}
		var a *verbs.Arg
		for j := range v.Args {
			if v.Args[j].Name == strings.ReplaceAll(name, "-", "_") {
				a = &v.Args[j]
			}
		}
		switch {
		case a == nil:
			return "", false
		case a.Type == verbs.TBoolean:
			given[a.Name] = true
		case i+1 < len(words):
			i++
			given[a.Name] = words[i]
		default:
			return "", false
		}
	}
	fill := v.PositionalsFor(len(pos))
	if fill == nil {
		return "", false
	}
	for i, a := range fill {
		if a.Type == verbs.TArray {
			list, _ := given[a.Name].([]string)
			given[a.Name] = append(list, pos[i])
		} else {
			given[a.Name] = pos[i]
		}
	}
	var b strings.Builder
	for _, a := range v.Args {
		if val, set := given[a.Name]; set {
			if b.Len() > 0 {
				b.WriteString(",")
			}
			k, _ := json.Marshal(a.Name)
			j, _ := json.Marshal(val)
			b.Write(k)
			b.WriteString(":")
			b.Write(j)
		}
	}
	return "{" + b.String() + "}", true
}

// reportProgress sends notifications/progress for token every interval
// until the returned stop is called: the progress is the number of
// notifications, the message the running turn's state and the end of its
// text so far (read with agent_output). stop waits for the reporter, so no
// notification follows the call's result.
func reportProgress(ctx context.Context, svc verbs.Service, agentID string, token mcp.ProgressToken, every time.Duration) (stop func()) {
	srv := server.ServerFromContext(ctx)
	if srv == nil {
		return func() {}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(every)
		defer t.Stop()
		start := time.Now()
		for n := 1; ; n++ {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-t.C:
			}
			msg := fmt.Sprintf("agent %s working for %s", agentID, time.Since(start).Round(time.Second))
			if out, err := svc.Output(ctx, &verbs.OutputArgs{AgentID: agentID, Which: verbs.WhichFullTurn}); err == nil {
				msg = fmt.Sprintf("agent %s, turn %d, %s for %s: %d characters so far", agentID, out.Turn, out.Status,
					time.Since(start).Round(time.Second), utf8.RuneCountInString(out.Text))
				if tail := tail(out.Text, 200); tail != "" {
					msg += ": …" + tail
				}
			}
			_ = srv.SendNotificationToClient(ctx, "notifications/progress", map[string]any{
				"progressToken": token, "progress": n, "message": msg,
			})
		}
	}()
	return func() {
		close(done)
		wg.Wait()
	}
}

// tail is the last n runes of s, on one line.
func tail(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	r := []rune(s)
	if len(r) > n {
		r = r[len(r)-n:]
	}
	return string(r)
}
