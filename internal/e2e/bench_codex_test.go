package e2e

import (
	"bufio"
	"context"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/kaimon/kaimon/internal/client"
	"github.com/kaimon/kaimon/internal/config"
	"github.com/kaimon/kaimon/internal/verbs"
)

// BenchmarkCodexTurn is kaimon's added time per warm turn of a codex:
// agent (issue 32), as BenchmarkACPAgentTurn measures an ACP agent's: the
// same `codex app-server`, with the argv and environment of kaimon's own
// agent process, against the same fake, driven three ways, one turn of
// each per op:
//
//	bare:  a bare app-server client on its stdio (turn/start to
//	       turn/completed), the thread started as kaimon starts it;
//	tools: the same, the thread offered an MCP server on 127.0.0.1 with
//	       the tools kaimon's door offers;
//	api:   agent_run through kaimon's control API.
//
// It reports the medians (bare-ms, tools-ms, api-ms), added-ms (api −
// bare, the target ≤ 5 ms) and plumbing-ms (api − tools).
func BenchmarkCodexTurn(b *testing.B) {
	e := newNativeCodexEnv(b)
	e.ok("daemon", "start")
	id := e.ok("open", "--model", "codex:", e.work)
	defer e.ok("close", id)
	argv, env := agentProcess(b, e.kenv, id)
	bare := startBareCodex(b, e.work, argv, env, nil)
	defer bare.stop()
	withTools := startBareCodex(b, e.work, argv, env, map[string]any{"kaimon": map[string]any{"url": toolsServer(b)}})
	defer withTools.stop()
	cl := &client.Client{Paths: config.Paths{SockDir: filepath.Join(e.home, "sock"), CacheDir: filepath.Join(e.home, "cache", "agents")}, NoAutostart: true}
	const prompt = "say exactly: ok"
	sides := []benchSide{
		{"bare", func() {
			if text := bare.turn(b, prompt); text != "ok" {
				b.Fatalf("bare turn: %q", text)
			}
		}},
		{"tools", func() {
			if text := withTools.turn(b, prompt); text != "ok" {
				b.Fatalf("bare turn with the door's tools: %q", text)
			}
		}},
		{"api", func() {
			res, err := cl.Run(context.Background(), &verbs.RunArgs{AgentID: id, Text: prompt})
			if err != nil || res.Text != "ok" {
				b.Fatalf("run = %+v, %v", res, err)
			}
		}},
	}
	reportAdded(b, interleave(b, sides, nil))
}

// bareCodex is `codex app-server` driven by a few lines of JSON.
type bareCodex struct {
	*bare
	thread string
	next   int64
}

// startBareCodex starts argv in dir with env, initializes it and starts a
// thread as kaimon's default preset does, offering servers (Codex's
// mcp_servers config) when not nil.
func startBareCodex(b *testing.B, dir string, argv, env []string, servers map[string]any) *bareCodex {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir, cmd.Env = dir, env
	in, out, child := startPiped(b, cmd)
	c := &bareCodex{bare: &bare{child: child, in: in, out: bufio.NewReaderSize(out, 1<<20)}}
	c.call(b, "initialize", map[string]any{"clientInfo": map[string]any{"name": "bench", "version": "0"}})
	c.write(b, map[string]any{"method": "initialized"})
	params := map[string]any{"cwd": dir, "approvalPolicy": "untrusted", "sandbox": "workspace-write"}
	if servers != nil {
		params["config"] = map[string]any{"mcp_servers": servers}
	}
	c.thread = gjson.GetBytes(c.call(b, "thread/start", params), "thread.id").String()
	return c
}

// call sends a request and reads up to its result.
func (c *bareCodex) call(b *testing.B, method string, params any) []byte {
	c.next++
	id := c.next
	c.write(b, map[string]any{"id": id, "method": method, "params": params})
	var res []byte
	c.until(b, func(line []byte) bool {
		m := gjson.ParseBytes(line)
		if m.Get("method").Exists() || m.Get("id").Int() != id {
			return false
		}
		if e := m.Get("error"); e.Exists() {
			b.Fatalf("bare %s: %s", method, e.Raw)
		}
		res = []byte(m.Get("result").Raw)
		return true
	})
	return res
}

// turn runs one turn and returns its last message.
func (c *bareCodex) turn(b *testing.B, text string) string {
	c.next++
	c.write(b, map[string]any{"id": c.next, "method": "turn/start", "params": map[string]any{"threadId": c.thread,
		"input": []any{map[string]any{"type": "text", "text": text}}}})
	var msg string
	c.until(b, func(line []byte) bool {
		m := gjson.ParseBytes(line)
		switch m.Get("method").String() {
		case "item/completed":
			if m.Get("params.item.type").String() == "agentMessage" {
				msg = m.Get("params.item.text").String()
			}
		case "turn/completed":
			return true
		}
		return false
	})
	return msg
}
