package session

import (
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kaimon/kaimon/internal/backend"
	"github.com/kaimon/kaimon/internal/config"
	"github.com/kaimon/kaimon/internal/event"
	"github.com/kaimon/kaimon/internal/policy"
	"github.com/kaimon/kaimon/internal/verbs"
)

// fakeDoor records what the manager admits and revokes.
type fakeDoor struct {
	mu      sync.Mutex
	n       int
	admits  []backend.Options
	revokes []string
}

func (d *fakeDoor) URL() string { return "http://127.0.0.1:1/mcp" }
func (d *fakeDoor) Admit(o backend.Options) string {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.n++
	d.admits = append(d.admits, o)
	return "tok" + string(rune('0'+d.n))
}
func (d *fakeDoor) Revoke(id, token string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.revokes = append(d.revokes, id+" "+token)
}

// permRec collects permission events.
type permRec struct {
	mu  sync.Mutex
	evs []event.PermissionData
}

func (p *permRec) Publish(envs ...*event.Envelope) {
	for _, env := range envs {
		if env.Kind != event.Permission {
			continue
		}
		var d event.PermissionData
		json.Unmarshal(env.Data, &d)
		p.mu.Lock()
		p.evs = append(p.evs, d)
		p.mu.Unlock()
	}
}

func (p *permRec) all() []event.PermissionData {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]event.PermissionData(nil), p.evs...)
}

// waitPending waits for the n-th permission event to be a pending request.
func (p *permRec) waitPending(t *testing.T, n int) event.PermissionData {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if evs := p.all(); len(evs) >= n {
			if evs[n-1].Decision != "" {
				t.Fatalf("event %d is decided: %+v", n, evs[n-1])
			}
			return evs[n-1]
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("no pending permission event %d; events %+v", n, p.all())
	return event.PermissionData{}
}

type permRig struct {
	m    *Manager
	door *fakeDoor
	rec  *permRec
	mu   sync.Mutex
	opts map[string]backend.Options
}

func newPermRig(t *testing.T) *permRig {
	dir := t.TempDir()
	r := &permRig{door: &fakeDoor{}, rec: &permRec{}, opts: map[string]backend.Options{}}
	m, err := New(config.Paths{CacheDir: dir + "/cache", SockDir: dir + "/sock"}, config.Defaults(), nil,
		func(o backend.Options, sink backend.Sink) (backend.Backend, error) {
			r.mu.Lock()
			r.opts[o.ID] = o
			r.mu.Unlock()
			return &scripted{sink: sink}, nil
		})
	if err != nil {
		t.Fatal(err)
	}
	m.SetDoor(r.door)
	m.AddPublisher(r.rec)
	t.Cleanup(m.Shutdown)
	r.m = m
	return r
}

func (r *permRig) open(t *testing.T, a verbs.OpenArgs) backend.Options {
	t.Helper()
	a.Cwd = t.TempDir()
	res, err := r.m.Open(bg, &a)
	if err != nil {
		t.Fatal(err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.opts[res.AgentID]
}

func bash(turn int) backend.PermissionRequest {
	return backend.PermissionRequest{Turn: turn, Tool: "Bash",
		Call: event.ToolCall{ToolCallID: "tu1", Title: "Bash", Kind: "execute", RawInput: json.RawMessage(`{"command":"rm -rf x"}`)}}
}

func ask(o backend.Options, req backend.PermissionRequest) <-chan backend.PermissionDecision {
	ch := make(chan backend.PermissionDecision, 1)
	go func() { ch <- o.Ask(bg, req) }()
	return ch
}

func errCode(err error) string {
	var ve *verbs.Error
	if errors.As(err, &ve) {
		return ve.Code
	}
	return ""
}

// An open agent gets the asker and the door with its own token; closing it
// revokes that token.
func TestAttachDoor(t *testing.T) {
	r := newPermRig(t)
	o := r.open(t, verbs.OpenArgs{ID: "a1", Permission: "lab"})
	if o.Ask == nil || o.Door == nil || o.Door.URL != r.door.URL() || o.Door.Token != "tok1" {
		t.Fatalf("options %+v door %+v", o, o.Door)
	}
	if len(r.door.admits) != 1 || r.door.admits[0].ID != "a1" || r.door.admits[0].Permission != "lab" {
		t.Fatalf("admits %+v", r.door.admits)
	}
	r.m.Close(bg, &verbs.CloseArgs{AgentID: "a1"})
	if strings.Join(r.door.revokes, ",") != "a1 tok1" {
		t.Fatalf("revokes %v", r.door.revokes)
	}
	// Reopened: a new token.
	if o := r.open(t, verbs.OpenArgs{ID: "a1"}); o.Door.Token != "tok2" {
		t.Fatalf("reopened token %q", o.Door.Token)
	}
}

// A request the preset leaves open is published pending and waits for
// agent_permit; the decision follows as a second event.
func TestAskAndPermit(t *testing.T) {
	r := newPermRig(t)
	o := r.open(t, verbs.OpenArgs{ID: "a1"})
	got := ask(o, bash(1))
	p := r.rec.waitPending(t, 1)
	if p.RequestID == "" || p.ToolCall.ToolCallID != "tu1" || p.ToolCall.Status != "pending" || len(p.Options) != 4 || p.ExpiresAt == "" {
		t.Fatalf("pending event %+v", p)
	}
	select {
	case d := <-got:
		t.Fatalf("decided before an answer: %+v", d)
	case <-time.After(50 * time.Millisecond):
	}
	if _, err := r.m.Permit(bg, &verbs.PermitArgs{AgentID: "a1", RequestID: p.RequestID, Decision: "maybe"}); errCode(err) != verbs.CodeBadArgument {
		t.Fatalf("bad decision: %v", err)
	}
	if _, err := r.m.Permit(bg, &verbs.PermitArgs{AgentID: "zz", RequestID: p.RequestID, Decision: "allow"}); errCode(err) != verbs.CodeNotFound {
		t.Fatalf("unknown agent: %v", err)
	}
	res, err := r.m.Permit(bg, &verbs.PermitArgs{AgentID: "a1", RequestID: p.RequestID, Decision: "allow"})
	if err != nil || !res.Permitted {
		t.Fatalf("permit = %+v %v", res, err)
	}
	if d := <-got; !d.Allow || d.By != event.DecidedByUser {
		t.Fatalf("decision %+v", d)
	}
	evs := r.rec.all()
	if len(evs) != 2 || evs[1].RequestID != p.RequestID || evs[1].Decision != "allow" || evs[1].By != "user" || evs[1].Options != nil {
		t.Fatalf("events %+v", evs)
	}
	if _, err := r.m.Permit(bg, &verbs.PermitArgs{AgentID: "a1", RequestID: p.RequestID, Decision: "deny"}); errCode(err) != verbs.CodeWrongState {
		t.Fatalf("second answer: %v", err)
	}

	// always: the next Bash is decided by the rule, with no pending event.
	got = ask(o, bash(2))
	p = r.rec.waitPending(t, 3)
	if res, err := r.m.Permit(bg, &verbs.PermitArgs{AgentID: "a1", RequestID: p.RequestID, Decision: "deny", Always: true}); err != nil || res.Permitted {
		t.Fatalf("permit deny always = %+v %v", res, err)
	}
	if d := <-got; d.Allow || !strings.Contains(d.Message, "denied") {
		t.Fatalf("decision %+v", d)
	}
	if d := o.Ask(bg, bash(3)); d.Allow || d.By != event.DecidedByPolicy || !d.Always {
		t.Fatalf("by rule: %+v", d)
	}
	if evs := r.rec.all(); len(evs) != 5 || evs[4].Decision != "deny" || evs[4].By != "policy" {
		t.Fatalf("events %+v", evs)
	}
}

// The preset decides what it can at once: one decided event, no waiting.
func TestAskDecidedByPolicy(t *testing.T) {
	r := newPermRig(t)
	bypass := r.open(t, verbs.OpenArgs{ID: "b", Permission: "bypass"})
	if d := bypass.Ask(bg, bash(1)); !d.Allow || d.By != event.DecidedByPolicy {
		t.Fatalf("bypass: %+v", d)
	}
	lab := r.open(t, verbs.OpenArgs{ID: "l", Permission: "lab"})
	req := backend.PermissionRequest{Turn: 1, Tool: "mcp__kaimon__agent_open"}
	if d := lab.Ask(bg, req); d.Allow || !strings.Contains(d.Message, "recursion guard") {
		t.Fatalf("guarded kaimon tool: %+v", d)
	}
	// A question the backend refuses (auggie's workspace indexing) is
	// denied even under bypass, with the backend's reason.
	q := backend.PermissionRequest{Turn: 1, Tool: "Workspace Indexing Permission", Refused: "not a preset's to give",
		Call: event.ToolCall{ToolCallID: "workspace-indexing-permission", Title: "Workspace Indexing Permission"}}
	if d := bypass.Ask(bg, q); d.Allow || d.By != event.DecidedByPolicy || d.Message != "not a preset's to give" {
		t.Fatalf("refused question under bypass: %+v", d)
	}
	evs := r.rec.all()
	if len(evs) != 3 || evs[0].Decision != "allow" || evs[1].Decision != "deny" || evs[1].RequestID == "" ||
		evs[2].Decision != "deny" || evs[2].ToolCall.ToolCallID != "workspace-indexing-permission" {
		t.Fatalf("events %+v", evs)
	}
}

// Nobody answers: denied after PermitTimeout. The agent closes: denied as
// cancelled.
func TestAskTimeoutAndClose(t *testing.T) {
	r := newPermRig(t)
	r.m.PermitTimeout = 50 * time.Millisecond
	o := r.open(t, verbs.OpenArgs{ID: "a1"})
	d := o.Ask(bg, bash(1))
	if d.Allow || d.By != event.DecidedByTimeout || !strings.Contains(d.Message, "kaimon permit a1 ") {
		t.Fatalf("timeout: %+v", d)
	}
	r.m.PermitTimeout = time.Minute
	got := ask(o, bash(2))
	r.rec.waitPending(t, 3)
	r.m.Close(bg, &verbs.CloseArgs{AgentID: "a1"})
	select {
	case d := <-got:
		if d.Allow || d.By != event.DecidedByCancelled {
			t.Fatalf("closed: %+v", d)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a closed agent's request still waits")
	}
}

// The policy is resolved once, at open: the backend and the door get the
// same resolved value, and a bad preset is refused before either sees it.
func TestPolicyResolvedAtOpen(t *testing.T) {
	r := newPermRig(t)
	o := r.open(t, verbs.OpenArgs{ID: "n", Permission: "notebook", AllowedTools: []string{"WebFetch"}})
	if o.Policy == nil || o.Policy.Preset.Name != "notebook" || !policy.NamesTool(o.Policy.Allow, "WebFetch") {
		t.Fatalf("backend got policy %+v", o.Policy)
	}
	r.door.mu.Lock()
	admitted := r.door.admits[len(r.door.admits)-1].Policy
	r.door.mu.Unlock()
	if admitted != o.Policy {
		t.Errorf("the door got another policy than the backend: %p, %p", admitted, o.Policy)
	}
	a := verbs.OpenArgs{ID: "y", Permission: "yolo", Cwd: t.TempDir()}
	if _, err := r.m.Open(bg, &a); err == nil || !strings.Contains(err.Error(), "unknown permission preset") {
		t.Errorf("open with an unknown preset: %v", err)
	}
}

// agent_permit without a request id answers the agent's one pending
// request; with none it is refused, and with several it is refused
// listing each, with what it asks and the command that answers it.
func TestPermitTheOnePending(t *testing.T) {
	r := newPermRig(t)
	o := r.open(t, verbs.OpenArgs{ID: "a1b2"})
	if _, err := r.m.Permit(bg, &verbs.PermitArgs{AgentID: "a1", Decision: "allow"}); errCode(err) != verbs.CodeWrongState ||
		!strings.Contains(err.Error(), "no pending permission request") {
		t.Fatalf("permit with nothing pending: %v", err)
	}
	first := ask(o, bash(1))
	p1 := r.rec.waitPending(t, 1)
	ls := bash(1)
	ls.Call.Title = "Bash: ls"
	second := ask(o, ls)
	p2 := r.rec.waitPending(t, 2)
	_, err := r.m.Permit(bg, &verbs.PermitArgs{AgentID: "a1", Decision: "deny"})
	if errCode(err) != verbs.CodeBadArgument {
		t.Fatalf("permit with two pending: %v, want a bad_argument", err)
	}
	for _, s := range []string{"2 pending permission requests", "name the one",
		p1.RequestID + " asks for Bash: rm -rf x: kaimon permit a1b2 " + p1.RequestID + " deny",
		p2.RequestID + " asks for Bash: ls: kaimon permit a1b2 " + p2.RequestID + " deny"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("the refusal %q does not say %q", err, s)
		}
	}
	if res, err := r.m.Permit(bg, &verbs.PermitArgs{AgentID: "a1", RequestID: p1.RequestID, Decision: "deny"}); err != nil || res.Permitted {
		t.Fatalf("permit %s deny = %+v, %v", p1.RequestID, res, err)
	}
	if d := <-first; d.Allow {
		t.Fatalf("the first request: %+v", d)
	}
	// One left: no request id needed.
	if res, err := r.m.Permit(bg, &verbs.PermitArgs{AgentID: "a1", Decision: "allow"}); err != nil || !res.Permitted {
		t.Fatalf("permit a1 allow = %+v, %v", res, err)
	}
	if d := <-second; !d.Allow || d.By != event.DecidedByUser {
		t.Fatalf("the second request: %+v", d)
	}
	if evs := r.rec.all(); len(evs) != 4 || evs[3].RequestID != p2.RequestID || evs[3].Decision != "allow" {
		t.Fatalf("events %+v", evs)
	}
}

// What a pending request asks for reads as a person would say it: the
// title when it says more than the tool's name, else the tool and what
// its input does, else its input.
func TestAsks(t *testing.T) {
	for _, tc := range []struct {
		title, input, want string
	}{
		{"git push origin main", `{"command":"git push origin main"}`, "git push origin main"},
		{"Bash", `{"command":"git commit -m  \"x\"\n--amend","description":"Commit"}`, `Bash: git commit -m "x" --amend`},
		{"", `{"file_path":"/etc/hosts","content":"x"}`, "Write: /etc/hosts"},
		{"", `{"other":1}`, `Write {"other":1}`},
		{"", ``, "Write"},
	} {
		call := event.ToolCall{Title: tc.title, RawInput: json.RawMessage(tc.input)}
		if got := asks(&call, map[bool]string{true: "Bash", false: "Write"}[tc.title == "Bash"]); got != tc.want {
			t.Errorf("asks(%q, %s) = %q, want %q", tc.title, tc.input, got, tc.want)
		}
	}
}
