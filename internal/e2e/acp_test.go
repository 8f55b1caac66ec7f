package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/kaimon/kaimon/internal/apitype"
	"github.com/kaimon/kaimon/internal/event"
	"github.com/kaimon/kaimon/internal/testutil/agents"
	"github.com/kaimon/kaimon/internal/testutil/fakegemini"
	"github.com/kaimon/kaimon/internal/testutil/fakeopenai"
	"github.com/kaimon/kaimon/internal/verbs"
)

// The ACP agents end to end: the real opencode, claude-agent-acp and
// gemini-cli (pinned in package.json), driven through kaimon, against the
// fake model servers on 127.0.0.1 (fakeopenai for opencode, fakeapi for
// claude-agent-acp, fakegemini for gemini-cli).

// acpAgent returns the agent program or skips; in CI its absence fails.
func acpAgent(t testing.TB, env, name string) string {
	t.Helper()
	if b := agents.Find(env, name); b != "" {
		return b
	}
	msg := name + " is not installed: run `npm ci` in the repo root, or set " + env
	if os.Getenv("CI") != "" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

// newOpenAIACPEnv is a kaimon installation whose acp agent is the real
// program name (variable names it, found by acpAgent) against one
// fakeopenai server, with the agent's offline environment over the
// installation's (setEnv): the codex, qwen, copilot and kilo tests' start.
func newOpenAIACPEnv(t testing.TB, variable, name string, offline func(e *acpEnv) ([]string, error)) *acpEnv {
	t.Helper()
	bin := acpAgent(t, variable, name)
	oa := fakeopenai.New(t)
	if testing.Verbose() {
		oa.SetLog(os.Stderr)
	}
	e := &acpEnv{kenv: newEnv(t, variable, bin), openai: oa}
	vars, err := offline(e)
	if err != nil {
		t.Fatal(err)
	}
	e.setEnv(vars...)
	return e
}

// setEnv sets each NAME=value of vars in the installation's environment,
// replacing what it had for NAME.
func (e *kenv) setEnv(vars ...string) {
	for _, kv := range vars {
		k, _, _ := strings.Cut(kv, "=")
		e.env = slices.DeleteFunc(e.env, func(old string) bool { return strings.HasPrefix(old, k+"=") })
		e.env = append(e.env, kv)
	}
}

// sharedTmp says whether p is an agent program's per-user runtime dir in
// /tmp, which the program makes once for every run of its user's and
// never removes, so no test owns it: codex 0.169.0 makes an empty
// /tmp/codex-daemon-<uid> (0700) the first time it runs a command
// outside its sandbox, whatever TMPDIR and XDG_RUNTIME_DIR say. Removing
// it under a codex of another test could break that codex.
func sharedTmp(p string) bool {
	return p == filepath.Join("/tmp", fmt.Sprintf("codex-daemon-%d", os.Getuid()))
}

// checkTmpLeft fails t, at its end, for each entry matching globs (in the
// system's temp dir, which some agents write to whatever TMPDIR says) that
// was not there at the start, and removes it.
func checkTmpLeft(t testing.TB, agent string, globs ...string) {
	snap := func() map[string]bool {
		s := map[string]bool{}
		for _, g := range globs {
			m, _ := filepath.Glob(g)
			for _, p := range m {
				if !sharedTmp(p) {
					s[p] = true
				}
			}
		}
		return s
	}
	before := snap()
	t.Cleanup(func() {
		for p := range snap() {
			if !before[p] {
				t.Errorf("%s left %s behind", agent, p)
				os.RemoveAll(p)
			}
		}
	})
}

// acpEnv is a kaimon installation whose agents find the three ACP agents
// and their fake model servers. The user's own opencode config (in the
// test's XDG_CONFIG_HOME) names the fakeopenai provider "fake", which
// kaimon carries into each agent's generated config.
type acpEnv struct {
	*kenv
	openai *fakeopenai.Server
	gemini *fakegemini.Server
}

func newACPEnv(t testing.TB, which ...string) *acpEnv {
	t.Helper()
	vars := []string{}
	for _, w := range which {
		switch w {
		case "opencode":
			vars = append(vars, "KAIMON_OPENCODE_BIN", acpAgent(t, "KAIMON_OPENCODE_BIN", "opencode"))
		case "claude":
			vars = append(vars, "KAIMON_CLAUDE_ACP_BIN", acpAgent(t, "KAIMON_CLAUDE_ACP_BIN", "claude-agent-acp"))
		case "gemini":
			vars = append(vars, "KAIMON_GEMINI_BIN", acpAgent(t, "KAIMON_GEMINI_BIN", "gemini"))
		}
	}
	oa, gm := fakeopenai.New(t), fakegemini.New(t)
	if testing.Verbose() {
		oa.SetLog(os.Stderr)
		gm.SetLog(os.Stderr)
	}
	e := &acpEnv{openai: oa, gemini: gm}
	vars = append(vars,
		// opencode: offline, no LSP downloads, no npm.
		"OPENCODE_DISABLE_LSP_DOWNLOAD", "1",
		"OPENCODE_DISABLE_CLAUDE_CODE", "1",
		"OPENCODE_DISABLE_SHARE", "1",
		"npm_config_registry", "http://127.0.0.1:9",
		// gemini-cli
		"GEMINI_API_KEY", "x",
		"GOOGLE_GEMINI_BASE_URL", gm.URL(),
		"GEMINI_CLI_TRUST_WORKSPACE", "true",
	)
	e.kenv = newEnv(t, vars...)
	// XDG dirs inside the installation, so nothing is left behind.
	for _, kv := range [][2]string{{"XDG_CONFIG_HOME", "xdg-config"}, {"XDG_DATA_HOME", "xdg-data"}, {"XDG_STATE_HOME", "xdg-state"}, {"XDG_CACHE_HOME", "xdg-cache"}} {
		dir := filepath.Join(e.home, kv[1])
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		e.env = append(e.env, kv[0]+"="+dir)
	}
	userCfg := map[string]any{
		"$schema": "https://opencode.ai/config.json",
		"provider": map[string]any{"fake": map[string]any{
			"npm": "@ai-sdk/openai-compatible", "name": "Fake",
			"options": map[string]any{"baseURL": oa.URL(), "apiKey": "x"},
			"models":  map[string]any{"fake-model": map[string]any{"name": "Fake Model"}, "fake-model-2": map[string]any{"name": "Fake Model 2"}},
		}},
		// The user's own permissive setting must not leak into a preset.
		"permission": "allow",
	}
	writeJSONFile(t, filepath.Join(e.home, "xdg-config", "opencode", "opencode.json"), userCfg)
	writeJSONFile(t, filepath.Join(e.home, "claude-home", ".gemini", "settings.json"), map[string]any{
		"privacy":   map[string]any{"usageStatisticsEnabled": false},
		"telemetry": map[string]any{"enabled": false},
		"general":   map[string]any{"disableAutoUpdate": true, "disableUpdateNag": true},
	})
	return e
}

func writeJSONFile(t testing.TB, path string, v any) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	b, _ := json.MarshalIndent(v, "", "  ")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// events reads an agent's event log.
func (e *kenv) events(t *testing.T, id string) []event.Record {
	t.Helper()
	f, err := os.Open(e.paths().Agent(id).Events)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []event.Record
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		var r event.Record
		if json.Unmarshal(sc.Bytes(), &r) == nil {
			out = append(out, r)
		}
	}
	return out
}

// lastRequest is the last request fakeopenai got whose user text is text.
func (e *acpEnv) lastRequest(t *testing.T, text string) fakeopenai.Request {
	t.Helper()
	reqs := e.openai.Requests()
	for i := len(reqs) - 1; i >= 0; i-- {
		if reqs[i].LastUserText == text {
			return reqs[i]
		}
	}
	t.Fatalf("fakeopenai got no request for %q", text)
	return fakeopenai.Request{}
}

// waitEvent waits for a logged event of kind whose data matches.
func (e *acpEnv) waitEvent(t *testing.T, id string, kind event.Kind, match func(gjson.Result) bool) event.Record {
	t.Helper()
	var found event.Record
	waitFor(t, string(kind)+" event of "+id, 60*time.Second, func() bool {
		for _, r := range e.events(t, id) {
			if r.Kind == kind && match(gjson.ParseBytes(r.Data)) {
				found = r
				return true
			}
		}
		return false
	})
	return found
}

// dumpOnFail logs an agent's events and stderr when the test fails.
func (e *kenv) dumpOnFail(t *testing.T, id string) {
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		for _, r := range e.events(t, id) {
			t.Logf("%s: %d %s %s", id, r.Turn, r.Kind, r.Data)
		}
		b, _ := os.ReadFile(e.paths().Agent(id).Log)
		if len(b) > 3000 {
			b = b[len(b)-3000:]
		}
		t.Logf("%s stderr: %s", id, b)
	})
}

func (e *acpEnv) waitStatus(t *testing.T, id string, status apitype.AgentState) {
	t.Helper()
	waitFor(t, id+" "+string(status), 60*time.Second, func() bool {
		var st verbs.AgentStatus
		e.okJSON(&st, "status", id)
		return st.Status == status
	})
}

// refusedOutside sends a turn whose tool writes path, outside the agent's
// cwd, denies with kaimon permit whatever the agent asks on the way, and
// checks that the file was not written: refused by the agent, by kaimon's
// fs/* confinement or by the denial, whichever route the agent takes.
func (e *acpEnv) refusedOutside(t *testing.T, id, text, path string) {
	t.Helper()
	turn := atoiT(t, e.ok("send", id, text))
	denied := map[string]bool{}
	waitFor(t, "the outside write's turn to end", 60*time.Second, func() bool {
		ended := false
		for _, r := range e.events(t, id) {
			d := gjson.ParseBytes(r.Data)
			switch {
			case r.Turn != turn:
			case r.Kind == event.Result:
				ended = true
			case r.Kind == event.Permission && !d.Get("decision").Exists() && !denied[d.Get("requestId").String()]:
				req := d.Get("requestId").String()
				denied[req] = true
				e.kaimon("permit", id, req, "deny") // may race the agent withdrawing it
			}
		}
		return ended
	})
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("a write outside the agent's cwd happened: %s (%v)", path, err)
	}
}

// kinds is the sequence of authoritative kinds of turn n, status and the
// agents' running usage_update (usage with context figures, sent or not
// depending on timing) left out.
func kinds(recs []event.Record, n int) string {
	var out []string
	for _, r := range recs {
		if r.Kind == event.Usage && gjson.GetBytes(r.Data, "context").Exists() {
			continue
		}
		if r.Turn == n && r.Kind != event.Status {
			out = append(out, string(r.Kind))
		}
	}
	return strings.Join(out, " ")
}

// TestACPOpencode drives opencode: text turn, tool turn asked by opencode
// and answered with kaimon permit, an fs write through fs/write_text_file
// inside cwd, a read outside cwd refused, set-model, interrupt, close.
func TestACPOpencode(t *testing.T) {
	e := newACPEnv(t, "opencode")
	id := e.ok("open", "--model", "acp:opencode:fake/fake-model", e.work)
	var st verbs.AgentStatus
	e.okJSON(&st, "status", id)
	if st.Status != "idle" || st.Model != "acp:opencode:fake/fake-model" || st.QueuesPrompts || st.SessionID == "" {
		t.Fatalf("status = %+v", st)
	}
	// The generated config replaced the user's: their "permission": "allow"
	// is gone, their provider block carried.
	cfg, err := os.ReadFile(filepath.Join(e.paths().Agent(id).Opencode, "opencode", "opencode.json"))
	if err != nil || !strings.Contains(string(cfg), e.openai.URL()) || gjson.GetBytes(cfg, "permission.bash").String() != "ask" {
		t.Fatalf("generated config: %s %v", cfg, err)
	}

	// A text turn.
	if out := e.ok("run", id, "hello there"); !strings.HasPrefix(out, "Hello from fakeopenai (request #") {
		t.Fatalf("text turn = %q", out)
	}
	recs := e.events(t, id)
	if k := kinds(recs, 1); k != "user_text turn_started assistant_text usage result" {
		t.Fatalf("turn 1 kinds: %s", k)
	}
	e.okJSON(&st, "status", id)
	if st.Usage.InputTokens != fakeopenai.InputTokens || st.Usage.OutputTokens != fakeopenai.OutputTokens {
		t.Fatalf("usage after one turn = %+v (per-turn figures from the prompt response)", st.Usage)
	}

	// A tool turn: the default preset lets opencode ask about bash; the
	// question waits for kaimon permit.
	turn := e.ok("send", id, `call tool: bash {"command":"echo hi-from-bash","description":"echo"}`)
	perm := e.waitEvent(t, id, event.Permission, func(d gjson.Result) bool { return !d.Get("decision").Exists() })
	reqID := gjson.GetBytes(perm.Data, "requestId").String()
	if k := gjson.GetBytes(perm.Data, "toolCall.kind").String(); k != "execute" {
		t.Fatalf("permission event: %s", perm.Data)
	}
	e.ok("permit", id, reqID, "allow")
	e.waitStatus(t, id, "idle")
	if out := e.ok("output", id, "--turn", turn); out != "Tool said: hi-from-bash\n. Done." {
		t.Fatalf("tool turn output = %q", out)
	}
	recs = e.events(t, id)
	if k := kinds(recs, 2); k != "user_text turn_started tool_use tool_use permission permission tool_result assistant_text usage result" {
		t.Fatalf("turn 2 kinds: %s", k)
	}

	// An edit: opencode asks (acceptEdits: allowed by the preset at once),
	// then writes through fs/write_text_file, inside cwd.
	target := filepath.Join(e.work, "oc.txt")
	if out := e.ok("run", id, `call tool: write {"filePath":"`+target+`","content":"written by opencode\n"}`); out != "Tool said: Wrote file successfully.. Done." {
		t.Fatalf("write turn = %q", out)
	}
	if b, err := os.ReadFile(target); err != nil || string(b) != "written by opencode\n" {
		t.Fatalf("file written: %q %v", b, err)
	}
	// A read outside cwd: opencode asks (external_directory); denied.
	outside := filepath.Join(e.home, "outside.txt")
	os.WriteFile(outside, []byte("secret"), 0o644)
	turn = e.ok("send", id, `call tool: read {"filePath":"`+outside+`"}`)
	perm = e.waitEvent(t, id, event.Permission, func(d gjson.Result) bool {
		return !d.Get("decision").Exists() && d.Get("requestId").String() != reqID
	})
	e.ok("permit", id, gjson.GetBytes(perm.Data, "requestId").String(), "deny")
	e.waitStatus(t, id, "idle")
	// opencode ends the turn at the rejection: the call failed, nothing read.
	res := e.waitEvent(t, id, event.ToolResult, func(d gjson.Result) bool { return d.Get("update.status").String() == "failed" })
	if res.Turn != atoiT(t, turn) || strings.Contains(string(res.Data), "secret") {
		t.Fatalf("denied read: %s", res.Data)
	}

	// A write outside cwd is refused.
	outsideW := filepath.Join(e.home, "oc-outside.txt")
	e.refusedOutside(t, id, `call tool: write {"filePath":"`+outsideW+`","content":"x"}`, outsideW)
	// set-model keeps the conversation; an unknown model is refused.
	var sm verbs.SetModelResult
	e.okJSON(&sm, "set-model", id, "acp:opencode:fake/fake-model-2")
	if !sm.Switched {
		t.Fatal("set-model fake-model-2 not switched")
	}
	e.ok("run", id, "which model now")
	reqs := e.openai.Requests()
	if last := reqs[len(reqs)-1]; last.Model != "fake-model-2" {
		t.Fatalf("model after set-model = %q", last.Model)
	}
	e.okJSON(&sm, "set-model", id, "nope/none")
	if sm.Switched {
		t.Fatal("unknown model switched")
	}
	e.waitEvent(t, id, event.Error, func(d gjson.Result) bool { return strings.Contains(d.Get("message").String(), "nope/none") })

	// interrupt a slow turn.
	turn = e.ok("send", id, "please be slow")
	e.waitEvent(t, id, event.TurnStarted, func(gjson.Result) bool { return true })
	time.Sleep(1500 * time.Millisecond)
	var ir verbs.InterruptResult
	e.okJSON(&ir, "interrupt", id)
	if !ir.Interrupted {
		t.Fatal("interrupt: false")
	}
	res = e.waitEvent(t, id, event.Result, func(d gjson.Result) bool { return d.Get("stopReason").String() == "cancelled" })
	if want := atoiT(t, turn); res.Turn != want {
		t.Fatalf("cancelled result of turn %d, want %d", res.Turn, want)
	}
	e.waitStatus(t, id, "idle")

	// close: the process group and the generated config are gone.
	e.ok("close", id)
	if _, err := os.Stat(e.paths().Agent(id).Opencode); !os.IsNotExist(err) {
		t.Fatalf("generated config left after close: %v", err)
	}
}

func atoiT(t *testing.T, s string) int {
	t.Helper()
	var n int
	if err := json.Unmarshal([]byte(strings.TrimSpace(s)), &n); err != nil {
		t.Fatalf("not a number: %q", s)
	}
	return n
}

// TestACPClaude drives claude-agent-acp on the fake Anthropic API: text,
// a Bash call asked and permitted through kaimon, a Write its acceptEdits
// mode allows, set-model over session/set_model, interrupt, close.
func TestACPClaude(t *testing.T) {
	e := newACPEnv(t, "claude")
	id := e.ok("open", "--model", "acp:claude", e.work)
	e.dumpOnFail(t, id)
	var st verbs.AgentStatus
	e.okJSON(&st, "status", id)
	if st.Status != "idle" || !st.QueuesPrompts || !strings.HasPrefix(st.Model, "acp:claude") {
		t.Fatalf("status = %+v (claude-agent-acp declares promptQueueing)", st)
	}
	if out := e.ok("run", id, "hello there"); !strings.HasPrefix(out, "Hello from fakeapi (request #") {
		t.Fatalf("text turn = %q", out)
	}
	// A read-only command runs at once; one that changes things asks
	// (acceptEdits), and kaimon permit answers.
	if out := e.ok("run", id, "please use a tool"); out != "Tool said: hi. Done." {
		t.Fatalf("tool turn = %q", out)
	}
	touched := filepath.Join(e.work, "touched")
	turn := e.ok("send", id, `run command: python3 -c "open('`+touched+`','w').write('x')"`)
	perm := e.waitEvent(t, id, event.Permission, func(d gjson.Result) bool { return !d.Get("decision").Exists() })
	if gjson.GetBytes(perm.Data, "toolCall.kind").String() != "execute" {
		t.Fatalf("permission event: %s", perm.Data)
	}
	e.ok("permit", id, gjson.GetBytes(perm.Data, "requestId").String(), "allow")
	e.waitStatus(t, id, "idle")
	if _, err := os.Stat(touched); err != nil {
		t.Fatalf("permitted command did not run: %v (turn %s)", err, turn)
	}
	// A Write: acceptEdits lets it through without asking.
	target := filepath.Join(e.work, "cl.txt")
	if out := e.ok("run", id, "please write a file "+target); !strings.Contains(out, "File created successfully") {
		t.Fatalf("write turn = %q", out)
	}
	// A Write outside cwd is refused.
	outside := filepath.Join(e.home, "cl-outside.txt")
	e.refusedOutside(t, id, "please write a file "+outside, outside)
	// set-model: claude-agent-acp takes its own aliases over the wire.
	var sm verbs.SetModelResult
	e.okJSON(&sm, "set-model", id, "haiku")
	if !sm.Switched {
		t.Fatal("set-model haiku not switched")
	}
	e.ok("run", id, "which model now")
	if ms := e.api.Models(); !strings.Contains(ms[len(ms)-1], "haiku") {
		t.Fatalf("model after set-model = %v", ms[len(ms)-1])
	}
	// interrupt a slow turn.
	e.interruptSlow(t, id, 30*time.Second)
	e.ok("close", id)

	// notebook: the deny list goes in _meta.claudeCode.options, so the
	// agent is not offered Bash at all.
	before := len(e.api.Requests())
	nb := e.ok("open", "--model", "acp:claude", "--permission", "notebook", e.work)
	out := e.ok("run", nb, "please use a tool")
	if !strings.Contains(out, "No such tool available: Bash") {
		t.Fatalf("notebook Bash = %q", out)
	}
	for _, r := range e.api.Requests()[before:] {
		for _, tool := range r.Tools {
			if tool == "Bash" || tool == "Write" {
				t.Fatalf("notebook agent was offered %s", tool)
			}
		}
	}
	e.ok("close", nb)
}

// TestACPGemini drives gemini-cli: text, a write_file through
// fs/read_text_file (missing: empty) and fs/write_text_file inside cwd, a
// shell command asked and permitted, set-model, interrupt, close; and the
// error event that says notebook cannot hold on gemini.
func TestACPGemini(t *testing.T) {
	e := newACPEnv(t, "gemini")
	id := e.ok("open", "--model", "acp:gemini:gemini-2.5-pro", e.work)
	e.dumpOnFail(t, id)
	var st verbs.AgentStatus
	e.okJSON(&st, "status", id)
	if st.Status != "idle" || st.QueuesPrompts || st.Model != "acp:gemini:gemini-2.5-pro" {
		t.Fatalf("status = %+v", st)
	}
	if out := e.ok("run", id, "hello there"); !strings.HasPrefix(out, "Hello from fakegemini (request #") {
		t.Fatalf("text turn = %q", out)
	}
	target := filepath.Join(e.work, "gem.txt")
	e.ok("run", id, `call tool: write_file {"file_path":"`+target+`","content":"written by gemini\n"}`)
	if b, err := os.ReadFile(target); err != nil || string(b) != "written by gemini\n" {
		t.Fatalf("file written: %q %v", b, err)
	}
	// A write outside cwd is refused.
	outside := filepath.Join(e.home, "gem-outside.txt")
	e.refusedOutside(t, id, `call tool: write_file {"file_path":"`+outside+`","content":"x"}`, outside)
	// A shell command that changes something asks; kaimon permit answers.
	turn := e.ok("send", id, `call tool: run_shell_command {"command":"touch `+filepath.Join(e.work, "touched")+`"}`)
	perm := e.waitEvent(t, id, event.Permission, func(d gjson.Result) bool { return !d.Get("decision").Exists() })
	e.ok("permit", id, gjson.GetBytes(perm.Data, "requestId").String(), "allow")
	e.waitStatus(t, id, "idle")
	if _, err := os.Stat(filepath.Join(e.work, "touched")); err != nil {
		t.Fatalf("shell command did not run: %v (turn %s)", err, turn)
	}
	recs := e.events(t, id)
	n := atoiT(t, turn)
	if k := kinds(recs, n); !strings.HasPrefix(k, "user_text turn_started tool_use permission permission tool_result") {
		t.Fatalf("turn %d kinds: %s", n, k)
	}
	var sm verbs.SetModelResult
	e.okJSON(&sm, "set-model", id, "gemini-3.8-flash")
	if !sm.Switched {
		t.Fatal("set-model not switched")
	}
	e.interruptSlow(t, id, 30*time.Second)
	if ms := e.gemini.Models(); ms[len(ms)-1] != "gemini-3.8-flash" {
		t.Fatalf("model after set-model: %v", ms)
	}
	e.ok("close", id)

	// notebook on gemini: said so at spawn.
	nb := e.ok("open", "--model", "acp:gemini", "--permission", "notebook", e.work)
	ev := e.waitEvent(t, nb, event.Error, func(gjson.Result) bool { return true })
	if msg := gjson.GetBytes(ev.Data, "message").String(); !strings.Contains(msg, "not fully enforced on acp:gemini") {
		t.Fatalf("spawn error event: %s", msg)
	}
	// What gemini does ask about, the preset answers without a person:
	// notebook denies the shell.
	nbTouched := filepath.Join(e.work, "nb-touched")
	e.ok("run", nb, `call tool: run_shell_command {"command":"touch `+nbTouched+`"}`)
	dec := e.waitEvent(t, nb, event.Permission, func(d gjson.Result) bool { return d.Get("decision").Exists() })
	if d := gjson.ParseBytes(dec.Data); d.Get("decision").String() != "deny" || d.Get("by").String() != "policy" {
		t.Fatalf("notebook shell decision: %s", dec.Data)
	}
	if _, err := os.Stat(nbTouched); !os.IsNotExist(err) {
		t.Fatalf("notebook's denied shell command ran: %v", err)
	}
	e.ok("close", nb)
}

// TestACPOpencodePresets runs two opencode agents at once under different
// presets, each with its own generated config: under notebook the bridge
// plugin refuses bash before it runs (kaimon asked at the door), under
// default the same call asks and runs once permitted.
func TestACPOpencodePresets(t *testing.T) {
	e := newACPEnv(t, "opencode")
	nb := e.ok("open", "--model", "acp:opencode:fake/fake-model", "--permission", "notebook", e.work)
	df := e.ok("open", "--model", "acp:opencode:fake/fake-model", e.work)
	e.dumpOnFail(t, nb)
	mark := filepath.Join(e.work, "mark")
	call := `call tool: bash {"command":"touch ` + mark + `","description":"touch"}`

	// The config route: opencode is not even offered bash.
	out := e.ok("run", nb, call)
	if !strings.Contains(out, "unavailable tool 'bash'") {
		t.Fatalf("notebook bash = %q", out)
	}
	if _, err := os.Stat(mark); err == nil {
		t.Fatal("the notebook agent's bash ran")
	}
	// The bridge route: the plugin asks the door with the agent's token,
	// and the door answers from the agent's own preset.
	for _, c := range []struct {
		id, tool string
		allow    bool
	}{{nb, "bash", false}, {nb, "write", false}, {nb, "kaimon_agent_list", false}, {df, "bash", true}, {df, "write", true}} {
		if got := e.bridgeCheck(t, c.id, c.tool); got != c.allow {
			t.Fatalf("bridge check of %s for %s = %v, want %v", c.tool, c.id, got, c.allow)
		}
	}
	if log := e.daemonLog(t); !strings.Contains(log, "door: agent "+nb+": bridge refuses bash") {
		t.Fatalf("the door did not refuse; daemon log:\n%s", log)
	}
	// Its config denies the native tools too.
	cfg, _ := os.ReadFile(filepath.Join(e.paths().Agent(nb).Opencode, "opencode", "opencode.json"))
	for _, k := range []string{"bash", "edit", "read", "grep", "glob"} {
		if v := gjson.GetBytes(cfg, "permission."+k).String(); v != "deny" {
			t.Fatalf("notebook config permission.%s = %q", k, v)
		}
	}

	turn := e.ok("send", df, call)
	perm := e.waitEvent(t, df, event.Permission, func(d gjson.Result) bool { return !d.Get("decision").Exists() })
	e.ok("permit", df, gjson.GetBytes(perm.Data, "requestId").String(), "allow")
	e.waitStatus(t, df, "idle")
	if _, err := os.Stat(mark); err != nil {
		t.Fatalf("the default agent's permitted bash did not run: %v (turn %s)", err, turn)
	}
	e.ok("close", nb)
	e.ok("close", df)
}

// bridgeCheck asks the door's tool check as agent id's bridge plugin does,
// with the URL and token kaimon wrote into the plugin.
func (e *acpEnv) bridgeCheck(t *testing.T, id, tool string) bool {
	t.Helper()
	src, err := os.ReadFile(filepath.Join(e.paths().Agent(id).Opencode, "opencode", "plugin", "kaimon-bridge.js"))
	if err != nil {
		t.Fatal(err)
	}
	constant := func(name string) string {
		m := regexp.MustCompile(`const ` + name + ` = (".*?");`).FindSubmatch(src)
		if m == nil {
			t.Fatalf("no %s in the bridge plugin:\n%s", name, src)
		}
		var v string
		json.Unmarshal(m[1], &v)
		return v
	}
	body := strings.NewReader(`{"tool":"` + tool + `","args":{}}`)
	req, _ := http.NewRequest(http.MethodPost, constant("URL"), body)
	req.Header.Set("Authorization", "Bearer "+constant("TOKEN"))
	req.Header.Set("X-Kaimon-Agent", constant("AGENT"))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var res struct {
		Allow  bool   `json:"allow"`
		Reason string `json:"reason"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&res); err != nil || resp.StatusCode != 200 {
		t.Fatalf("tool check: %d %v", resp.StatusCode, err)
	}
	return res.Allow
}

// interruptSlow sends "please be slow", waits (up to wait) until its
// streamed output has the fake's first chunk, interrupts it, and returns
// the turn and its result, failing unless the turn ended cancelled.
func (e *acpEnv) interruptSlow(t *testing.T, id string, wait time.Duration) (int, event.Record) {
	t.Helper()
	turn := atoiT(t, e.ok("send", id, "please be slow"))
	waitFor(t, "the slow stream", wait, func() bool {
		var o verbs.OutputResult
		e.okJSON(&o, "output", id)
		return strings.Contains(o.Text, "chunk1")
	})
	var ir verbs.InterruptResult
	e.okJSON(&ir, "interrupt", id)
	if !ir.Interrupted {
		t.Fatal("interrupt: false")
	}
	res := e.waitEvent(t, id, event.Result, func(d gjson.Result) bool { return d.Get("stopReason").String() == "cancelled" })
	if res.Turn != turn {
		t.Fatalf("a cancelled result of turn %d, want turn %d: %s", res.Turn, turn, res.Data)
	}
	return turn, res
}

// turnResult waits for the result event of turn and returns it.
func (e *acpEnv) turnResult(t *testing.T, id string, turn int) event.Record {
	t.Helper()
	var res event.Record
	waitFor(t, "the result of turn "+itoa(turn), 30*time.Second, func() bool {
		for _, r := range e.events(t, id) {
			if r.Turn == turn && r.Kind == event.Result {
				res = r
				return true
			}
		}
		return false
	})
	return res
}

// interruptAtPermission interrupts agent id while its permission request
// perm of turn waits, and fails unless the request is answered cancelled
// and the turn ends cancelled.
func (e *acpEnv) interruptAtPermission(t *testing.T, id string, turn int, perm event.Record) {
	t.Helper()
	var ir verbs.InterruptResult
	e.okJSON(&ir, "interrupt", id)
	if !ir.Interrupted {
		t.Fatal("interrupt with a pending permission: false")
	}
	req := gjson.GetBytes(perm.Data, "requestId").String()
	dec := e.waitEvent(t, id, event.Permission, func(d gjson.Result) bool {
		return d.Get("requestId").String() == req && d.Get("decision").Exists()
	})
	if gjson.GetBytes(dec.Data, "by").String() != "cancelled" {
		t.Fatalf("the pending request after interrupt: %s", dec.Data)
	}
	if res := e.turnResult(t, id, turn); gjson.GetBytes(res.Data, "stopReason").String() != "cancelled" {
		t.Fatalf("the turn interrupted at its question ended %s", res.Data)
	}
}
