package e2e

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/coder/acp-go-sdk"
	"github.com/mark3labs/mcp-go/server"

	"github.com/kaimon/kaimon/internal/backend/acp"
	"github.com/kaimon/kaimon/internal/client"
	"github.com/kaimon/kaimon/internal/config"
	"github.com/kaimon/kaimon/internal/mcpserver"
	"github.com/kaimon/kaimon/internal/policy"
	"github.com/kaimon/kaimon/internal/proc"
	"github.com/kaimon/kaimon/internal/testutil/agents"
	"github.com/kaimon/kaimon/internal/verbs"
)

// acpBenchAgent is one ACP agent BenchmarkACPAgentTurn drives: how to make
// an installation that runs it offline, the model string kaimon opens,
// and a prompt its fake answers with text alone.
type acpBenchAgent struct {
	name  string
	model string
	env   func(b *testing.B) *acpEnv
}

// acpBenchAgents are the ACP agents with a benchmark row, in the
// catalogue's order.
var acpBenchAgents = []acpBenchAgent{
	{"opencode", "acp:opencode:fake/fake-model", func(b *testing.B) *acpEnv { return newACPEnv(b, "opencode") }},
	{"gemini", "acp:gemini:gemini-2.5-pro", func(b *testing.B) *acpEnv { return newACPEnv(b, "gemini") }},
	{"codex", "acp:codex", func(b *testing.B) *acpEnv { return newCodexEnv(b) }},
	{"qwen", "acp:qwen", func(b *testing.B) *acpEnv { return newQwenEnv(b) }},
	{"copilot", "acp:copilot", func(b *testing.B) *acpEnv { return newCopilotEnv(b) }},
	{"kilo", "acp:kilo:" + agents.KiloModel, func(b *testing.B) *acpEnv { return newKiloEnv(b) }},
	{"auggie", "acp:auggie", func(b *testing.B) *acpEnv { return newAuggieEnv(b).acpEnv }},
}

// BenchmarkACPAgentTurn is kaimon's added time per warm turn of an ACP
// agent (issue 28): the same agent program, with the same argv and
// environment, against the same fake model server, driven three ways,
// interleaved one turn of each per op:
//
//	bare: a bare acp-go-sdk client on the agent's stdio (session/prompt
//	      to its answer), the least any ACP client does, in the mode
//	      kaimon sets (acp.ApplyMode);
//	api:  agent_run through kaimon's control API in-process (the daemon,
//	      the backend, the mapper, the log and the bus on the way);
//	tools: a second bare client that offers the agent, over HTTP on
//	      127.0.0.1, an MCP server with the tools kaimon's door offers
//	      (mcpserver's, as the door builds them): what an agent costs with
//	      those tool schemas to send the model each turn, kaimon aside.
//
// The bare sides copy the argv and environment of kaimon's own agent
// process (from /proc), so they differ from kaimon in its plumbing only.
// Medians are reported (bare-ms, tools-ms, api-ms) and the differences:
// added-ms (api − bare: all kaimon adds, the target ≤ 5 ms) and
// plumbing-ms (api − tools: kaimon's part apart from the door's tools).
func BenchmarkACPAgentTurn(b *testing.B) {
	for _, ag := range acpBenchAgents {
		b.Run(ag.name, func(b *testing.B) {
			e := ag.env(b)
			e.ok("daemon", "start")
			id := e.ok("open", "--model", ag.model, e.work)
			defer e.ok("close", id)
			argv, env := agentProcess(b, e.kenv, id)
			bare := startBareACP(b, e.work, argv, env, ag.model, nil)
			defer bare.stop()
			withTools := startBareACP(b, e.work, argv, env, ag.model, []sdk.McpServer{{Http: &sdk.McpServerHttpInline{
				Type: "http", Name: "kaimon", Url: toolsServer(b), Headers: []sdk.HttpHeader{}}}})
			defer withTools.stop()
			cl := &client.Client{Paths: config.Paths{SockDir: filepath.Join(e.home, "sock"), CacheDir: filepath.Join(e.home, "cache", "agents")}, NoAutostart: true}
			const prompt = "say exactly: ok"
			sides := []benchSide{
				{"bare", func() {
					if text := bare.turn(b, prompt); text == "" {
						b.Fatal("bare turn: no text")
					}
				}},
				{"tools", func() {
					if text := withTools.turn(b, prompt); text == "" {
						b.Fatal("bare turn with the door's tools: no text")
					}
				}},
				{"api", func() {
					res, err := cl.Run(context.Background(), &verbs.RunArgs{AgentID: id, Text: prompt})
					if err != nil || res.Text == "" {
						b.Fatalf("run = %+v, %v", res, err)
					}
				}},
			}
			reportAdded(b, interleave(b, sides, nil))
		})
	}
}

// reportAdded reports the medians of a benchmark's three sides (a bare
// client, a bare client offered the door's tools, kaimon's control API)
// and what kaimon adds over each bare side.
func reportAdded(b *testing.B, took map[string][]time.Duration) {
	bm, tm, am := ms(median(took["bare"])), ms(median(took["tools"])), ms(median(took["api"]))
	b.ReportMetric(bm, "bare-ms")
	b.ReportMetric(tm, "tools-ms")
	b.ReportMetric(am, "api-ms")
	b.ReportMetric(am-bm, "added-ms")
	b.ReportMetric(am-tm, "plumbing-ms")
}

// agentProcess is the argv (program first) and environment of agent id's
// process, from /proc.
func agentProcess(b *testing.B, e *kenv, id string) ([]string, []string) {
	pid := agentPID(b, e, id)
	read := func(what string) []string {
		raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/%s", pid, what))
		if err != nil {
			b.Fatal(err)
		}
		return strings.Split(strings.TrimSuffix(string(raw), "\x00"), "\x00")
	}
	return read("cmdline"), read("environ")
}

// bareACP is an ACP agent driven by acp-go-sdk alone.
type bareACP struct {
	child *proc.Child
	conn  *sdk.ClientSideConnection
	sess  sdk.SessionId
	cl    *bareACPClient
}

// toolsServer serves, until b ends, an MCP server over HTTP on 127.0.0.1
// with the tools kaimon's door offers an agent (mcpserver's tools, no
// daemon behind them: listing them is all an agent does in a text turn),
// and returns its URL.
func toolsServer(b *testing.B) string {
	s := mcpserver.New(nil, mcpserver.Options{Instructions: "kaimon's tools, for a benchmark"})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	srv := &http.Server{Handler: server.NewStreamableHTTPServer(s, server.WithEndpointPath("/mcp"))}
	go srv.Serve(ln)
	b.Cleanup(func() { srv.Close() })
	return "http://" + ln.Addr().String() + "/mcp"
}

// startBareACP starts argv as a bare acp-go-sdk client's agent, with a
// session in dir offering servers (nil: none).
func startBareACP(b *testing.B, dir string, argv, env []string, model string, servers []sdk.McpServer) *bareACP {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir, cmd.Env = dir, env
	in, out, child := startPiped(b, cmd)
	c := &bareACP{child: child, cl: &bareACPClient{}}
	c.conn = sdk.NewClientSideConnection(c.cl, in, out)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := c.conn.Initialize(ctx, sdk.InitializeRequest{ProtocolVersion: sdk.ProtocolVersionNumber,
		ClientCapabilities: sdk.ClientCapabilities{Fs: sdk.FileSystemCapabilities{ReadTextFile: true, WriteTextFile: true}}}); err != nil {
		c.stop()
		b.Fatalf("bare initialize: %v", err)
	}
	if servers == nil {
		servers = []sdk.McpServer{}
	}
	sess, err := c.conn.NewSession(ctx, sdk.NewSessionRequest{Cwd: dir, McpServers: servers})
	if err != nil {
		c.stop()
		b.Fatalf("bare session/new: %v", err)
	}
	c.sess = sess.SessionId
	// The mode kaimon sets under the default preset (qwen: auto-edit,
	// which answers a text turn 25 ms slower than its own default).
	a, _, err := acp.ParseModel(model)
	if err != nil {
		b.Fatal(err)
	}
	pol, err := policy.Resolve(policy.Options{})
	if err != nil {
		b.Fatal(err)
	}
	if what, err := acp.ApplyMode(ctx, c.conn, c.sess, a, pol, sess.Modes, sess.ConfigOptions); err != nil {
		c.stop()
		b.Fatalf("bare %s: %v", what, err)
	}
	// The model kaimon opened, set the way kaimon sets it.
	_, want, _ := strings.Cut(strings.TrimPrefix(model, "acp:"), ":")
	switch {
	case want == "":
	case hasConfigOption(sess.ConfigOptions, "model"):
		_, err = c.conn.SetSessionConfigOption(ctx, sdk.SetSessionConfigOptionRequest{ValueId: &sdk.SetSessionConfigOptionValueId{
			SessionId: c.sess, ConfigId: "model", Value: sdk.SessionConfigValueId(want)}})
	case sess.Models != nil && string(sess.Models.CurrentModelId) != want:
		_, err = c.conn.UnstableSetSessionModel(ctx, sdk.UnstableSetSessionModelRequest{SessionId: c.sess, ModelId: sdk.UnstableModelId(want)})
	}
	if err != nil {
		c.stop()
		b.Fatalf("bare model %s: %v", want, err)
	}
	return c
}

func hasConfigOption(opts []sdk.SessionConfigOption, id string) bool {
	for _, o := range opts {
		if o.Select != nil && string(o.Select.Id) == id {
			return true
		}
	}
	return false
}

// turn prompts and returns the text the agent streamed.
func (c *bareACP) turn(b *testing.B, text string) string {
	c.cl.reset()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := c.conn.Prompt(ctx, sdk.PromptRequest{SessionId: c.sess, Prompt: []sdk.ContentBlock{sdk.TextBlock(text)}}); err != nil {
		b.Fatalf("bare prompt: %v", err)
	}
	return c.cl.text()
}

func (c *bareACP) stop() { c.child.Stop(3 * time.Second) }

// bareACPClient is the client side a bare ACP client needs: it keeps the
// agent's text and allows what it asks.
type bareACPClient struct {
	mu  sync.Mutex
	buf strings.Builder
}

func (c *bareACPClient) reset() { c.mu.Lock(); c.buf.Reset(); c.mu.Unlock() }
func (c *bareACPClient) text() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.buf.String()
}

func (c *bareACPClient) SessionUpdate(_ context.Context, n sdk.SessionNotification) error {
	if m := n.Update.AgentMessageChunk; m != nil && m.Content.Text != nil {
		c.mu.Lock()
		c.buf.WriteString(m.Content.Text.Text)
		c.mu.Unlock()
	}
	return nil
}

func (c *bareACPClient) RequestPermission(_ context.Context, p sdk.RequestPermissionRequest) (sdk.RequestPermissionResponse, error) {
	for _, o := range p.Options {
		if o.Kind == sdk.PermissionOptionKindAllowOnce {
			return sdk.RequestPermissionResponse{Outcome: sdk.NewRequestPermissionOutcomeSelected(o.OptionId)}, nil
		}
	}
	return sdk.RequestPermissionResponse{Outcome: sdk.NewRequestPermissionOutcomeCancelled()}, nil
}

func (c *bareACPClient) ReadTextFile(_ context.Context, p sdk.ReadTextFileRequest) (sdk.ReadTextFileResponse, error) {
	b, err := os.ReadFile(p.Path)
	return sdk.ReadTextFileResponse{Content: string(b)}, err
}

func (c *bareACPClient) WriteTextFile(_ context.Context, p sdk.WriteTextFileRequest) (sdk.WriteTextFileResponse, error) {
	return sdk.WriteTextFileResponse{}, os.WriteFile(p.Path, []byte(p.Content), 0o644)
}

var errNoTerminal = fmt.Errorf("terminals are not offered")

func (c *bareACPClient) CreateTerminal(context.Context, sdk.CreateTerminalRequest) (sdk.CreateTerminalResponse, error) {
	return sdk.CreateTerminalResponse{}, errNoTerminal
}
func (c *bareACPClient) KillTerminal(context.Context, sdk.KillTerminalRequest) (sdk.KillTerminalResponse, error) {
	return sdk.KillTerminalResponse{}, errNoTerminal
}
func (c *bareACPClient) TerminalOutput(context.Context, sdk.TerminalOutputRequest) (sdk.TerminalOutputResponse, error) {
	return sdk.TerminalOutputResponse{}, errNoTerminal
}
func (c *bareACPClient) ReleaseTerminal(context.Context, sdk.ReleaseTerminalRequest) (sdk.ReleaseTerminalResponse, error) {
	return sdk.ReleaseTerminalResponse{}, errNoTerminal
}
func (c *bareACPClient) WaitForTerminalExit(context.Context, sdk.WaitForTerminalExitRequest) (sdk.WaitForTerminalExitResponse, error) {
	return sdk.WaitForTerminalExitResponse{}, errNoTerminal
}
