package claude

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/kaimon/kaimon/internal/backend"
	"github.com/kaimon/kaimon/internal/config"
	"github.com/kaimon/kaimon/internal/event"
	"github.com/kaimon/kaimon/internal/testutil/backendtest"
	"github.com/kaimon/kaimon/internal/verbs"
)

func noAsk(ctx context.Context, r backend.PermissionRequest) backend.PermissionDecision {
	return backend.PermissionDecision{}
}

// With a door the agent gets kaimon's generated MCP config (first, before
// a caller's own), and with an asker the CLI's permission checks come to
// kaimon on stdio; only may then name MCP tools.
func TestArgsWithDoorAndAsk(t *testing.T) {
	cache := t.TempDir()
	user := filepath.Join(t.TempDir(), "user-mcp.json")
	os.WriteFile(user, []byte(`{"mcpServers":{"other":{"command":"x"}}}`), 0o600)
	clash := filepath.Join(t.TempDir(), "clash.json")
	os.WriteFile(clash, []byte(`{"mcpServers":{"kaimon":{"command":"kaimon","args":["mcp"]}}}`), 0o600)
	door := &backend.Door{URL: "http://127.0.0.1:4242/mcp", Token: "t0k"}
	gen := config.Paths{CacheDir: cache}.Agent("ag1").MCPConfig
	none := []string{}

	for _, tc := range []struct {
		name    string
		o       backend.Options
		want    []string
		wantErr string
	}{
		{name: "door and asker", o: backend.Options{OpenArgs: verbs.OpenArgs{ID: "ag1", DisallowedTools: &none}, CacheDir: cache, Door: door, Ask: noAsk},
			want: withBase("--model", "sonnet", "--permission-mode", "acceptEdits", "--permission-prompt-tool", "stdio",
				"--mcp-config", gen)},
		{name: "bypass asks nothing", o: backend.Options{OpenArgs: verbs.OpenArgs{ID: "ag1", Permission: "bypass", DisallowedTools: &none}, CacheDir: cache, Ask: noAsk},
			want: withBase("--model", "sonnet", "--permission-mode", "bypassPermissions", "--dangerously-skip-permissions")},
		{name: "door and a caller's config", o: backend.Options{OpenArgs: verbs.OpenArgs{ID: "ag1", MCPConfig: user, DisallowedTools: &none}, CacheDir: cache, Door: door},
			want: withBase("--model", "sonnet", "--permission-mode", "acceptEdits", "--mcp-config", gen, user)},
		{name: "a caller's config naming kaimon", o: backend.Options{OpenArgs: verbs.OpenArgs{ID: "ag1", MCPConfig: clash}, CacheDir: cache, Door: door},
			wantErr: `defines a server named "kaimon", which kaimon attaches to every agent itself`},
		{name: "only with kaimon tools once the door is known", o: backend.Options{OpenArgs: verbs.OpenArgs{ID: "ag1", Only: true, DisallowedTools: &none, AllowedTools: []string{"Read", "mcp__kaimon__agent_list"}}, CacheDir: cache, Door: door},
			want: withBase("--model", "sonnet", "--permission-mode", "acceptEdits", "--tools", "Read", "ToolSearch", "--strict-mcp-config",
				"--allowedTools", "Read", "mcp__kaimon__agent_list", "--mcp-config", gen)},
		{name: "only still refuses a caller's config", o: backend.Options{OpenArgs: verbs.OpenArgs{ID: "ag1", Only: true, MCPConfig: user}, CacheDir: cache, Door: door},
			wantErr: "only refuses a caller-supplied mcp_config"},
		{name: "a door needs a cache dir", o: backend.Options{OpenArgs: verbs.OpenArgs{ID: "ag1"}, Door: door}, wantErr: "needs a cache dir"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := backendtest.Resolved(t, tc.o)
			got, err := Args(&o)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Args = %q, %v; want error %q", got, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("Args =\n  %q\nwant\n  %q", got, tc.want)
			}
		})
	}
}

// The generated config names the door as server kaimon, over HTTP, with the
// agent's id and token in headers, readable by its owner only.
func TestWriteMCPConfig(t *testing.T) {
	o := backend.Options{OpenArgs: verbs.OpenArgs{ID: "ag1"}, CacheDir: filepath.Join(t.TempDir(), "cache"), Door: &backend.Door{URL: "http://127.0.0.1:4242/mcp", Token: "t0k"}}
	path, err := writeMCPConfig(&o)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(path)
	var cfg map[string]any
	if err := json.Unmarshal(b, &cfg); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"mcpServers": map[string]any{"kaimon": map[string]any{
		"type": "http", "url": "http://127.0.0.1:4242/mcp",
		"headers": map[string]any{"Authorization": "Bearer t0k", "X-Kaimon-Agent": "ag1"},
	}}}
	if !reflect.DeepEqual(cfg, want) {
		t.Fatalf("config %s", b)
	}
	if st, _ := os.Stat(path); st.Mode().Perm() != 0o600 || path != o.Files().MCPConfig {
		t.Errorf("%s mode %v", path, st.Mode())
	}
}

// can_use_tool is no error; another control request still is; a
// control_cancel_request names the withdrawn request.
func TestMapControlRequests(t *testing.T) {
	m := NewMapper()
	o := m.Map([]byte(`{"type":"control_request","request_id":"r1","request":{"subtype":"can_use_tool","tool_name":"Bash","input":{"command":"ls"},"tool_use_id":"tu1"}}`))
	if o.Request == nil || o.Request.Subtype != "can_use_tool" || len(o.Events) != 0 {
		t.Errorf("can_use_tool: %+v", o)
	}
	o = m.Map([]byte(`{"type":"control_request","request_id":"r2","request":{"subtype":"hook_callback"}}`))
	if o.Request == nil || len(o.Events) != 1 || o.Events[0].Kind != event.Error {
		t.Errorf("hook_callback: %+v", o)
	}
	o = m.Map([]byte(`{"type":"control_cancel_request","request_id":"r1"}`))
	if o.Cancel != "r1" || len(o.Events) != 0 {
		t.Errorf("cancel: %+v", o)
	}
}

// asker is an Asker that records requests and answers as told.
type asker struct {
	mu    sync.Mutex
	reqs  []backend.PermissionRequest
	allow bool
}

func (a *asker) ask(ctx context.Context, r backend.PermissionRequest) backend.PermissionDecision {
	a.mu.Lock()
	a.reqs = append(a.reqs, r)
	allow := a.allow
	a.mu.Unlock()
	if allow {
		return backend.PermissionDecision{Allow: true}
	}
	return backend.PermissionDecision{Message: "denied by the test"}
}

// The real CLI's permission check comes to the asker as a pending Bash
// call; allow runs the tool, deny gives the agent the message as the
// tool's error.
func TestBackendPermission(t *testing.T) {
	for _, allow := range []bool{true, false} {
		a := &asker{allow: allow}
		ag := startAgent(t, backend.Options{Ask: a.ask})
		target := filepath.Join(t.TempDir(), "outside.txt") // outside cwd: acceptEdits asks
		if err := ag.b.Send(1, "run command: touch "+target); err != nil {
			t.Fatal(err)
		}
		ag.sink.waitResult(t, 1, turnTimeout)
		a.mu.Lock()
		reqs := a.reqs
		a.mu.Unlock()
		if len(reqs) != 1 || reqs[0].Tool != "Bash" || reqs[0].Turn != 1 || reqs[0].Call.Status != "pending" ||
			reqs[0].Call.Kind != "execute" || gjson.GetBytes(reqs[0].Call.RawInput, "command").String() != "touch "+target {
			t.Fatalf("allow=%v: requests %+v", allow, reqs)
		}
		text := authoritativeText(ag.sink.turn(1))
		_, statErr := os.Stat(target)
		if allow && (statErr != nil || !strings.Contains(text, "Tool said: (Bash completed with no output). Done.")) {
			t.Errorf("allowed: file %v, text %q", statErr, text)
		}
		if !allow && (statErr == nil || !strings.Contains(text, "denied by the test (is_error)")) {
			t.Errorf("denied: file %v, text %q", statErr, text)
		}
	}
}

// A CLI that goes away while kaimon decides cancels the wait.
func TestBackendPermissionCancelledOnClose(t *testing.T) {
	got := make(chan error, 1)
	ag := startAgent(t, backend.Options{Ask: func(ctx context.Context, r backend.PermissionRequest) backend.PermissionDecision {
		<-ctx.Done()
		got <- ctx.Err()
		return backend.PermissionDecision{}
	}})
	if err := ag.b.Send(1, "run command: touch "+filepath.Join(t.TempDir(), "x")); err != nil {
		t.Fatal(err)
	}
	ag.sink.waitFor(t, "the Bash call", turnTimeout, func(ev event.Event) bool {
		return ev.Kind == event.ToolUse && gjson.GetBytes(ev.Data, "call.rawInput").Exists()
	})
	time.Sleep(200 * time.Millisecond)
	ag.b.Close()
	select {
	case <-got:
	case <-time.After(10 * time.Second):
		t.Fatal("the asker's context did not end when the CLI was closed")
	}
}

// A caller's mcp_config that is not an MCP config is refused by kaimon,
// with a door or without (the claude CLI would otherwise read it), by its
// name and the place it fails, not its bytes: it may be a key file.
func TestArgsRefuseAnMCPConfigThatIsNotOne(t *testing.T) {
	cache := t.TempDir()
	secret := filepath.Join(t.TempDir(), "secret.env")
	os.WriteFile(secret, []byte("ANTHROPIC_API_KEY=sk-hunter2\n"), 0o600)
	door := &backend.Door{URL: "http://127.0.0.1:4242/mcp", Token: "t0k"}
	for name, d := range map[string]*backend.Door{"with the door": door, "without": nil} {
		o := backendtest.Resolved(t, backend.Options{OpenArgs: verbs.OpenArgs{ID: "ag1", MCPConfig: secret}, CacheDir: cache, Door: d})
		got, err := Args(&o)
		if err == nil || !strings.Contains(err.Error(), `mcp_config "`+secret+`" is not JSON (it fails at line 1, column 1)`) {
			t.Fatalf("%s: Args = %q, %v; want the file named as not JSON", name, got, err)
		}
		if strings.Contains(err.Error(), "'A'") || strings.Contains(err.Error(), "hunter2") {
			t.Errorf("%s: the error echoes the file: %v", name, err)
		}
	}
}
