package fleet

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/kaimon/kaimon/internal/client"
	"github.com/kaimon/kaimon/internal/mcpserver"
	"github.com/kaimon/kaimon/internal/verbs"
)

// hostArgs are the arguments of v that pick a host, as the verb table
// declares them: the one named host (agent_open's), and every argument
// naming agents, whose id may be qualified as HOST/ID.
func hostArgs(v *verbs.Verb) []*verbs.Arg {
	var out []*verbs.Arg
	for i := range v.Args {
		if a := &v.Args[i]; a.Name == "host" || a.Agents != verbs.AgentsNone {
			out = append(out, a)
		}
	}
	return out
}

// baseArgs are arguments v's Decode accepts: a value for each argument it
// requires (the first of an Enum), cwd too, so that agent_open needs no
// resume or fork.
func baseArgs(v *verbs.Verb) map[string]any {
	m := map[string]any{}
	for _, a := range v.Args {
		if !a.Required && len(a.RequiredUnless) == 0 {
			continue
		}
		switch a.Type {
		case verbs.TString:
			m[a.Name] = "x"
			if len(a.Enum) > 0 {
				m[a.Name] = a.Enum[0]
			}
		case verbs.TArray:
			m[a.Name] = []string{"x"}
		case verbs.TBoolean:
			m[a.Name] = false
		case verbs.TInteger, verbs.TNumber:
			m[a.Name] = 1
		}
	}
	return m
}

// FuzzMCPHostArg calls every MCP tool of the verb table, as `kaimon mcp`
// serves them over a fleet with hosts configured, with each of its
// host-picking arguments set from the input (the host itself, or the host
// of a qualified id). Whatever the input, a transport is only ever made
// for a configured host: a URL (or anything else) that a client gives
// never becomes an ssh or kubectl run, and nothing panics. A URL given as
// agent_open's host is refused with the error that says how to add it.
func FuzzMCPHostArg(f *testing.F) {
	for _, s := range []string{
		"", Local, Any, "h1", "k1", "h9", "H1", "h1.", "local/x", "any/x",
		"ssh://attacker@127.0.0.1:1", "kube://default/somepod?context=prod", "ssh://h1", "kube://pod1",
		"ssh://-oProxyCommand=x", "ssh:/x", "file:///etc/passwd", "h1://x",
		"..", "../..", "h1/..", "../h1", "h1\n", "ssh://a\nb", "h1\x00", "\xff\xfe",
		strings.Repeat("a", 64), strings.Repeat("a", 65), strings.Repeat("ssh://", 1000), strings.Repeat("h", 1<<20),
	} {
		f.Add(s)
	}
	hosts := map[string]Host{"h1": {URL: "ssh://u@h1.invalid"}, "k1": {URL: "kube://ns/pod1"}}
	fl, made := fleetOfNames(hosts)
	tools := map[string]func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error){}
	for _, st := range mcpserver.Tools(fl, mcpserver.Options{}) {
		tools[st.Tool.Name] = st.Handler
	}
	f.Fuzz(func(t *testing.T, host string) {
		for _, v := range verbs.All {
			handler := tools[v.Name]
			if handler == nil {
				t.Fatalf("kaimon mcp serves no tool %s", v.Name)
			}
			for _, a := range hostArgs(v) {
				args := baseArgs(v)
				given := host
				if a.Agents != verbs.AgentsNone {
					given = host + "/ab12"
				}
				if a.Type == verbs.TArray {
					args[a.Name] = []string{given}
				} else {
					args[a.Name] = given
				}
				res := call(t, handler, v, args)
				for _, h := range made() {
					if _, ok := hosts[h]; !ok {
						t.Fatalf("%s with %q: a transport was made for %q, which is no configured host", v.Name, brief(string(mustJSON(t, args))), brief(h))
					}
				}
				if a.Agents == verbs.AgentsNone && isURL(host) {
					if !res.IsError {
						t.Fatalf("%s with %s %q succeeded", v.Name, a.Name, brief(host))
					}
					if _, err := v.Decode(mustJSON(t, args)); err == nil && !strings.Contains(text(res), "`kaimon host add NAME URL`") {
						t.Errorf("%s with %s %q: the error does not say how to add a URL: %s", v.Name, a.Name, brief(host), brief(text(res)))
					}
				}
			}
		}
	})
}

// fleetOfNames is a fleet of hosts that takes no URL, as kaimon mcp's,
// and made, which says for which hosts a transport was asked since it
// was last called. No transport is made (each fails), and no daemon,
// this machine's too, can be reached: no ssh, kubectl or daemon is ever
// run. A failed exchange is not kept, so every call asks again.
func fleetOfNames(hosts map[string]Host) (fl *Fleet, made func() []string) {
	var mu sync.Mutex
	var asked []string
	refused := errors.New("fuzz: no daemon here")
	fl = &Fleet{
		Hosts:    hosts,
		AllHosts: true,
		Local: &client.Client{NoAutostart: true, Addr: "fuzz local",
			Dial: func(context.Context) (net.Conn, error) { return nil, refused }},
		transport: func(h string) (*SSH, error) {
			mu.Lock()
			asked = append(asked, h)
			mu.Unlock()
			return nil, refused
		},
	}
	return fl, func() []string {
		mu.Lock()
		defer mu.Unlock()
		out := asked
		asked = nil
		return out
	}
}

// call calls an MCP tool's handler, as kaimon mcp does for a client.
func call(t *testing.T, handler func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error), v *verbs.Verb, args map[string]any) *mcp.CallToolResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var req mcp.CallToolRequest
	req.Params.Name, req.Params.Arguments = v.Name, args
	res, err := handler(ctx, req)
	if err != nil {
		t.Fatalf("%s with %q: %v", v.Name, brief(string(mustJSON(t, args))), err)
	}
	return res
}

func text(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// brief is s cut for a failure message: a seed is a megabyte long.
func brief(s string) string {
	if len(s) > 200 {
		return s[:200] + "…"
	}
	return s
}
