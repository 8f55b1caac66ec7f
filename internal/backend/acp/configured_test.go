package acp

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kaimon/kaimon/internal/agentbin"
	"github.com/kaimon/kaimon/internal/apitype"
	"github.com/kaimon/kaimon/internal/backend"
	"github.com/kaimon/kaimon/internal/event"
	"github.com/kaimon/kaimon/internal/testutil/backendtest"
	"github.com/kaimon/kaimon/internal/verbs"
)

// standinProgram is testdata/standin-acp.py configured as acp_agents.name,
// behaving as mode says (config.ACPAgents.Programs makes such rows).
func standinProgram(t *testing.T, name, mode string) agentbin.Program {
	t.Helper()
	bin, err := filepath.Abs(filepath.Join("testdata", "standin-acp.py"))
	if err != nil {
		t.Fatal(err)
	}
	p, builtin := agentbin.ACP[name]
	if !builtin {
		p = agentbin.Program{Name: name, Title: name}
	}
	p.Bin, p.Args, p.Env, p.Configured = bin, []string{}, "", true
	p.ProgEnv = []string{"KAIMON_STANDIN=" + mode}
	p.ConfigKey = "acp_agents." + name + ".cmd"
	return p
}

// startConfigured opens model with configured as the config's agents.
func startConfigured(t *testing.T, model string, configured ...agentbin.Program) (*Backend, *sink, error) {
	t.Helper()
	s := &sink{exited: make(chan struct{})}
	b, err := New(backendtest.Resolved(t, backend.Options{OpenArgs: verbs.OpenArgs{ID: "c1", Cwd: t.TempDir(), Model: model},
		ACPAgents: configured, CacheDir: t.TempDir(), Env: []string{"PATH=" + os.Getenv("PATH")}}), s)
	if err != nil {
		return nil, s, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err = b.Start(ctx)
	if err == nil {
		t.Cleanup(func() { b.Close() })
	}
	return b, s, err
}

// A configured agent kaimon has no row for is driven with standard ACP
// alone: it opens, answers a prompt, and its env reached it.
func TestConfiguredAgentRuns(t *testing.T) {
	b, s, err := startConfigured(t, "acp:standin", standinProgram(t, "standin", "oldflags"))
	if err != nil {
		t.Fatal(err)
	}
	if b.agent.Route != RoutePermissionOnly || b.agent.Name != "standin" {
		t.Fatalf("agent = %s route %v; want standin, permission only", b.agent.Name, b.agent.Route)
	}
	if err := b.Send(1, "hello"); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		for _, ev := range s.events() {
			if ev.Kind == event.Result && ev.Turn == 1 {
				var r event.ResultData
				_ = json.Unmarshal(ev.Data, &r)
				if r.StopReason != apitype.StopEndTurn {
					t.Fatalf("turn 1 ended %s: %s", r.StopReason, r.Error)
				}
				return
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("no result from the configured agent; events %v", s.events())
}

// An agent that answers session/new with -32000 gets an error in its own
// words with the catalogue's login command: a configured command for
// acp:codex keeps codex's Login.
func TestAuthRequiredNamesTheLogin(t *testing.T) {
	for _, tc := range []struct{ name, login string }{{"codex", "`codex login`"}, {"copilot", "`copilot login`"}, {"auggie", "`auggie login`"}, {"standin", "its own documentation"}} {
		_, _, err := startConfigured(t, "acp:"+tc.name, standinProgram(t, tc.name, "auth"))
		if err == nil {
			t.Fatalf("acp:%s: opened an agent that wants a login", tc.name)
		}
		for _, want := range []string{"acp:" + tc.name + " is not logged in", "Authentication required: run the standin's login first", tc.login} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("acp:%s: error %q; want it to say %q", tc.name, err, want)
			}
		}
	}
}

// A configured agent whose cmd is not there is refused at open naming the
// config key and the path.
func TestConfiguredAgentMissingCmd(t *testing.T) {
	p := standinProgram(t, "ghost", "")
	p.Bin = filepath.Join(t.TempDir(), "no-such-agent")
	_, _, err := startConfigured(t, "acp:ghost", p)
	if err == nil || !errors.Is(err, backend.ErrNotFound) {
		t.Fatalf("open = %v; want not found", err)
	}
	for _, want := range []string{"acp_agents.ghost.cmd", p.Bin} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q; want it to name %q", err, want)
		}
	}
}

// An unknown agent lists the known ones, configured too, and kaimon agents.
func TestUnknownAgentListsKnown(t *testing.T) {
	_, _, err := ParseModelIn("acp:nope", []agentbin.Program{standinProgram(t, "standin", "")})
	if err == nil {
		t.Fatal("acp:nope parsed")
	}
	for _, want := range append(append([]string{}, agentbin.ACPNames...), "standin", "kaimon agents") {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q; want it to name %q", err, want)
		}
	}
}

// A configured entry with a built-in name is that agent with another
// command: its route and facts stay; its args replace the fallback too.
func TestConfiguredOverridesBuiltin(t *testing.T) {
	p := standinProgram(t, "gemini", "")
	a, _, err := ParseModelIn("acp:gemini:some-model", []agentbin.Program{p})
	if err != nil {
		t.Fatal(err)
	}
	if a.Bin != p.Bin || a.Route != Agents["gemini"].Route || a.Login != "gemini" || a.FallbackArgs != nil {
		t.Fatalf("override = %+v", a)
	}
	if Agents["gemini"].Bin != "gemini" {
		t.Fatal("the override changed the built-in row")
	}
	// An alias of a built-in agent is overridden by its name's entry.
	p = standinProgram(t, "codex", "")
	if a, _, _ := ParseModelIn("acp:codex-acp", []agentbin.Program{p}); a == nil || a.Bin != p.Bin {
		t.Fatalf("acp:codex-acp with codex configured = %+v", a)
	}
}
