package local

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/kaimon/kaimon/internal/apitype"
	"github.com/kaimon/kaimon/internal/backend"
	"github.com/kaimon/kaimon/internal/config"
	"github.com/kaimon/kaimon/internal/confine"
	"github.com/kaimon/kaimon/internal/event"
	"github.com/kaimon/kaimon/internal/procstat"
	"github.com/kaimon/kaimon/internal/testutil/backendtest"
	"github.com/kaimon/kaimon/internal/testutil/fakeollama"
	"github.com/kaimon/kaimon/internal/testutil/fakeopenai"
	"github.com/kaimon/kaimon/internal/testutil/fakescript"
	"github.com/kaimon/kaimon/internal/verbs"
)

// sink records a backend's events.
type sink struct {
	mu     sync.Mutex
	evs    []event.Event
	exited chan error
	ch     chan struct{}
}

func newSink() *sink { return &sink{exited: make(chan error, 1), ch: make(chan struct{}, 1000)} }

func (s *sink) Emit(ev event.Event) {
	s.mu.Lock()
	s.evs = append(s.evs, ev)
	s.mu.Unlock()
	select {
	case s.ch <- struct{}{}:
	default:
	}
}
func (s *sink) Exited(err error) { s.exited <- err }

func (s *sink) all() []event.Event {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]event.Event(nil), s.evs...)
}

// waitResult waits for turn's result and returns the turn's events.
func (s *sink) waitResult(t *testing.T, turn int) []event.Event {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		var out []event.Event
		done := false
		for _, ev := range s.all() {
			if ev.Turn == turn {
				out = append(out, ev)
				done = done || ev.Kind == event.Result
			}
		}
		if done {
			return out
		}
		select {
		case <-s.ch:
		case <-deadline:
			t.Fatalf("turn %d did not end; events: %s", turn, dump(s.all()))
		}
	}
}

func dump(evs []event.Event) string {
	var b strings.Builder
	for _, ev := range evs {
		b.WriteString(string(ev.Kind) + " " + string(ev.Data) + "\n")
	}
	return b.String()
}

// authKinds are the kinds of evs that the log keeps.
func authKinds(evs []event.Event) string {
	var k []string
	for _, ev := range evs {
		if event.Authoritative(ev.Kind, ev.Data) {
			k = append(k, string(ev.Kind))
		}
	}
	return strings.Join(k, " ")
}

func ofKind(evs []event.Event, k event.Kind) []gjson.Result {
	var out []gjson.Result
	for _, ev := range evs {
		if ev.Kind == k {
			out = append(out, gjson.ParseBytes(ev.Data))
		}
	}
	return out
}

// server is one fake model server behind a family.
type server struct {
	family string
	tag    string
	api    func() chatAPI
	reqs   func() []fakeReq
}

// fakeReq is what both fakes record that the tests look at.
type fakeReq struct {
	Model   string
	Tools   []string
	History []string
	System  string
}

func servers(t *testing.T) []server {
	ol := fakeollama.New(t)
	oa := fakeopenai.New(t)
	return []server{
		{family: Ollama, tag: "qwen3:fake",
			api: func() chatAPI {
				return &ollama{base: ol.URL(), think: json.RawMessage("true"), keepAlive: json.RawMessage(`"10m"`)}
			},
			reqs: func() []fakeReq {
				var out []fakeReq
				for _, r := range ol.Requests() {
					out = append(out, fakeReq{r.Model, r.Tools, r.History, r.System})
				}
				return out
			}},
		{family: VMLX, tag: "fake-model",
			api: func() chatAPI { return &openAI{base: oa.URL(), apiKey: "k"} },
			reqs: func() []fakeReq {
				var out []fakeReq
				for _, r := range oa.Requests() {
					out = append(out, fakeReq{r.Model, r.Tools, r.History, r.System})
				}
				return out
			}},
	}
}

type agent struct {
	b    *Backend
	s    *sink
	dir  string
	opts backend.Options
	asks chan backend.PermissionRequest
	ans  chan backend.PermissionDecision
}

func open(t *testing.T, srv server, o backend.Options, rounds int) *agent {
	t.Helper()
	a := &agent{s: newSink(), asks: make(chan backend.PermissionRequest, 4), ans: make(chan backend.PermissionDecision, 4)}
	if o.Cwd == "" {
		o.Cwd = t.TempDir()
	}
	if o.CacheDir == "" {
		o.CacheDir = t.TempDir()
	}
	if o.ID == "" {
		o.ID = "a1"
	}
	o.Ask = func(ctx context.Context, req backend.PermissionRequest) backend.PermissionDecision {
		a.asks <- req
		select {
		case d := <-a.ans:
			return d
		case <-ctx.Done():
			return backend.PermissionDecision{By: event.DecidedByCancelled, Message: "withdrawn"}
		}
	}
	o.Model = srv.family + ":" + srv.tag
	o.Env = os.Environ()
	o = backendtest.Resolved(t, o)
	a.dir, a.opts = o.Cwd, o
	b, err := newBackend(o, a.s, srv.family, srv.tag, srv.api(), rounds)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	a.b = b
	t.Cleanup(func() { b.Close() })
	return a
}

func (a *agent) turn(t *testing.T, n int, text string) []event.Event {
	t.Helper()
	if err := a.b.Send(n, text); err != nil {
		t.Fatal(err)
	}
	return a.s.waitResult(t, n)
}

func result(t *testing.T, evs []event.Event) event.ResultData {
	t.Helper()
	var r event.ResultData
	if err := json.Unmarshal(evs[len(evs)-1].Data, &r); err != nil || evs[len(evs)-1].Kind != event.Result {
		t.Fatalf("last event is not a result: %s", dump(evs))
	}
	return r
}

func TestTextAndThought(t *testing.T) {
	for _, srv := range servers(t) {
		t.Run(srv.family, func(t *testing.T) {
			a := open(t, srv, backend.Options{OpenArgs: verbs.OpenArgs{SystemPrompt: "be brief"}}, 0)
			evs := a.turn(t, 1, "hello")
			if k := authKinds(evs); k != "user_text turn_started assistant_text usage result" {
				t.Fatalf("kinds: %s\n%s", k, dump(evs))
			}
			texts := ofKind(evs, event.AssistantText)
			if len(texts) < 3 || !texts[0].Get("delta").Bool() || texts[len(texts)-1].Get("delta").Bool() ||
				!strings.HasPrefix(texts[len(texts)-1].Get("content.text").String(), "Hello from fake") {
				t.Fatalf("text events: %v", texts)
			}
			if r := result(t, evs); r.StopReason != apitype.StopEndTurn || r.Usage.InputTokens == 0 || r.Usage.OutputTokens == 0 {
				t.Fatalf("result: %+v", r)
			}
			evs = a.turn(t, 2, "please think")
			th := ofKind(evs, event.Thought)
			if len(th) < 2 || th[len(th)-1].Get("content.text").String() != fakescript.ThoughtText || th[len(th)-1].Get("delta").Bool() {
				t.Fatalf("thought events: %v", th)
			}
			if k := authKinds(evs); k != "user_text turn_started thought assistant_text usage result" {
				t.Fatalf("kinds: %s", k)
			}
			reqs := srv.reqs()
			last := reqs[len(reqs)-1]
			if last.System != "be brief" || len(last.Tools) != len(Tools) || strings.Join(last.History, "|") != "user: hello|assistant: "+
				texts[len(texts)-1].Get("content.text").String()+"|user: please think" {
				t.Fatalf("second request: %+v", last)
			}
		})
	}
}

func TestEditAndConfinement(t *testing.T) {
	for _, srv := range servers(t) {
		t.Run(srv.family, func(t *testing.T) {
			a := open(t, srv, backend.Options{}, 0)
			os.WriteFile(filepath.Join(a.dir, "f.txt"), []byte("one two three\n"), 0o644)
			evs := a.turn(t, 1, `call tool: edit_file {"path":"f.txt","old_string":"two","new_string":"2"}`)
			if b, _ := os.ReadFile(filepath.Join(a.dir, "f.txt")); string(b) != "one 2 three\n" {
				t.Fatalf("file after edit: %q\n%s", b, dump(evs))
			}
			if k := authKinds(evs); k != "user_text turn_started tool_use tool_use tool_result assistant_text usage result" {
				t.Fatalf("kinds: %s\n%s", k, dump(evs))
			}
			uses := ofKind(evs, event.ToolUse)
			id := uses[0].Get("call.toolCallId").String()
			if id == "" || uses[1].Get("call.toolCallId").String() != id || uses[0].Get("call.rawInput").Exists() ||
				uses[1].Get("call.rawInput.path").String() != "f.txt" || uses[1].Get("call.kind").String() != "edit" {
				t.Fatalf("tool_use: %v", uses)
			}
			res := ofKind(evs, event.ToolResult)[0]
			if res.Get("update.toolCallId").String() != id || res.Get("update.status").String() != "completed" {
				t.Fatalf("tool_result: %v", res)
			}
			// Not unique: failed, the file unchanged.
			os.WriteFile(filepath.Join(a.dir, "g.txt"), []byte("x x"), 0o644)
			evs = a.turn(t, 2, `call tool: edit_file {"path":"g.txt","old_string":"x","new_string":"y"}`)
			if r := ofKind(evs, event.ToolResult)[0]; r.Get("update.status").String() != "failed" || !strings.Contains(r.Raw, "occurs 2 times") {
				t.Fatalf("ambiguous edit: %v", r)
			}
			// Outside the cwd, also through a symlink: refused.
			outside := filepath.Join(t.TempDir(), "out.txt")
			os.Symlink(filepath.Dir(outside), filepath.Join(a.dir, "link"))
			for i, p := range []string{outside, "../out.txt", "link/out.txt"} {
				evs = a.turn(t, 3+i, `call tool: write_file {"path":"`+p+`","content":"no"}`)
				if r := ofKind(evs, event.ToolResult)[0]; r.Get("update.status").String() != "failed" || !strings.Contains(r.Raw, "outside") {
					t.Fatalf("write to %s: %v", p, r)
				}
				if _, err := os.Stat(outside); err == nil {
					t.Fatalf("write to %s happened", p)
				}
			}
			// The conversation file holds every message.
			b, _ := os.ReadFile(a.opts.Files().History)
			if n := strings.Count(string(b), "\n"); n != 1+5*4 {
				t.Fatalf("conversation file has %d lines:\n%s", n, b)
			}
		})
	}
}

func TestPresets(t *testing.T) {
	srv := servers(t)[0]
	t.Run("notebook offers nothing", func(t *testing.T) {
		a := open(t, srv, backend.Options{OpenArgs: verbs.OpenArgs{Permission: "notebook"}}, 0)
		a.turn(t, 1, "hello")
		reqs := srv.reqs()
		if tools := reqs[len(reqs)-1].Tools; len(tools) != 0 {
			t.Fatalf("notebook offered %v", tools)
		}
	})
	t.Run("specialist offers what allowed_tools names", func(t *testing.T) {
		a := open(t, srv, backend.Options{OpenArgs: verbs.OpenArgs{Permission: "specialist", AllowedTools: []string{"Read", "list_dir"}}}, 0)
		a.turn(t, 1, "hello")
		reqs := srv.reqs()
		if tools := strings.Join(reqs[len(reqs)-1].Tools, ","); tools != "read_file,list_dir" {
			t.Fatalf("specialist offered %v", tools)
		}
		// A call of a tool not offered fails.
		evs := a.turn(t, 2, `call tool: bash {"command":"touch x"}`)
		if r := ofKind(evs, event.ToolResult)[0]; r.Get("update.status").String() != "failed" || !strings.Contains(r.Raw, "not available") {
			t.Fatalf("unoffered call: %v", r)
		}
		if _, err := os.Stat(filepath.Join(a.dir, "x")); err == nil {
			t.Fatal("unoffered bash ran")
		}
	})
	t.Run("default asks before bash", func(t *testing.T) {
		a := open(t, srv, backend.Options{}, 0)
		a.ans <- backend.PermissionDecision{Allow: false, Message: "the user denied this tool call"}
		evs := a.turn(t, 1, `call tool: bash {"command":"touch denied"}`)
		req := <-a.asks
		if req.Tool != "Bash" || req.Turn != 1 || req.Call.Kind != "execute" || req.Call.Status != "pending" {
			t.Fatalf("asked %+v", req)
		}
		if r := ofKind(evs, event.ToolResult)[0]; r.Get("update.status").String() != "failed" || !strings.Contains(r.Raw, "denied") {
			t.Fatalf("denied bash: %v", r)
		}
		if _, err := os.Stat(filepath.Join(a.dir, "denied")); err == nil {
			t.Fatal("denied bash ran")
		}
		a.ans <- backend.PermissionDecision{Allow: true}
		evs = a.turn(t, 2, `call tool: bash {"command":"echo ran > allowed; echo out"}`)
		<-a.asks
		if r := ofKind(evs, event.ToolResult)[0]; r.Get("update.status").String() != "completed" || !strings.Contains(r.Raw, "out") {
			t.Fatalf("allowed bash: %v", r)
		}
		if b, _ := os.ReadFile(filepath.Join(a.dir, "allowed")); string(b) != "ran\n" {
			t.Fatalf("allowed bash did not run: %q", b)
		}
		// Edits are not asked (acceptEdits).
		a.turn(t, 3, `call tool: write_file {"path":"w.txt","content":"w"}`)
		select {
		case req := <-a.asks:
			t.Fatalf("a write was asked under default: %+v", req)
		default:
		}
	})
	t.Run("bypass asks nothing", func(t *testing.T) {
		a := open(t, srv, backend.Options{OpenArgs: verbs.OpenArgs{Permission: "bypass"}}, 0)
		evs := a.turn(t, 1, `call tool: bash {"command":"echo hi"}`)
		if r := ofKind(evs, event.ToolResult)[0]; r.Get("update.status").String() != "completed" {
			t.Fatalf("bypass bash: %v", r)
		}
		select {
		case req := <-a.asks:
			t.Fatalf("bypass asked %+v", req)
		default:
		}
	})
	t.Run("disallowed_tools removes a tool", func(t *testing.T) {
		a := open(t, srv, backend.Options{OpenArgs: verbs.OpenArgs{DisallowedTools: &[]string{"bash", "Write"}}}, 0)
		a.turn(t, 1, "hello")
		reqs := srv.reqs()
		if tools := strings.Join(reqs[len(reqs)-1].Tools, ","); tools != "read_file,edit_file,list_dir,grep" {
			t.Fatalf("offered %v", tools)
		}
	})
}

func TestFailures(t *testing.T) {
	for _, srv := range servers(t) {
		t.Run(srv.family, func(t *testing.T) {
			a := open(t, srv, backend.Options{}, 1)
			evs := a.turn(t, 1, "please fail midway")
			if r := result(t, evs); r.StopReason != apitype.StopError || !strings.Contains(r.Error, fakescript.MidwayMessage) {
				t.Fatalf("mid-stream failure: %+v\n%s", r, dump(evs))
			}
			if len(ofKind(evs, event.Error)) != 1 {
				t.Fatalf("no error event: %s", dump(evs))
			}
			// The text that came is still there as a block.
			if tx := ofKind(evs, event.AssistantText); tx[len(tx)-1].Get("content.text").String() != "partial answer " {
				t.Fatalf("partial text: %v", tx)
			}
			evs = a.turn(t, 2, "please fail")
			if r := result(t, evs); r.StopReason != apitype.StopError || !strings.Contains(r.Error, fakescript.FailMessage) {
				t.Fatalf("HTTP failure: %+v", r)
			}
			// One round allowed: a tool call needs two.
			evs = a.turn(t, 3, `call tool: list_dir {}`)
			if r := result(t, evs); r.StopReason != apitype.StopError || !strings.Contains(r.Error, "local_max_rounds") {
				t.Fatalf("rounds: %+v\n%s", r, dump(evs))
			}
			// The agent goes on.
			if r := result(t, a.turn(t, 4, "hello")); r.StopReason != apitype.StopEndTurn {
				t.Fatalf("after failures: %+v", r)
			}
		})
	}
}

func TestUnknownModel(t *testing.T) {
	for _, srv := range servers(t) {
		t.Run(srv.family, func(t *testing.T) {
			b, err := newBackend(backendtest.Resolved(t, backend.Options{OpenArgs: verbs.OpenArgs{ID: "x", Cwd: t.TempDir(), Model: srv.family + ":nope"}, CacheDir: t.TempDir()}), newSink(), srv.family, "nope", srv.api(), 0)
			if err != nil {
				t.Fatal(err)
			}
			err = b.checkModel(context.Background())
			if err == nil || !strings.Contains(err.Error(), "model not found") {
				t.Fatalf("Start: %v", err)
			}
			if srv.family == Ollama && !strings.Contains(err.Error(), "ollama pull nope") {
				t.Fatalf("Start: %v", err)
			}
		})
	}
	// A server without /models is believed.
	oa := fakeopenai.New(t)
	oa.SetNoModels(true)
	b, err := newBackend(backendtest.Resolved(t, backend.Options{OpenArgs: verbs.OpenArgs{ID: "x", Cwd: t.TempDir(), Model: "vmlx:anything"}, CacheDir: t.TempDir()}), newSink(), VMLX, "anything", &openAI{base: oa.URL()}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.checkModel(context.Background()); err != nil {
		t.Fatalf("check without /models: %v", err)
	}
}

func TestInterrupt(t *testing.T) {
	for _, srv := range servers(t) {
		t.Run(srv.family, func(t *testing.T) {
			a := open(t, srv, backend.Options{OpenArgs: verbs.OpenArgs{Permission: "bypass"}}, 0)
			if ok, err := a.b.Interrupt(context.Background()); ok || err != nil {
				t.Fatalf("interrupt with no turn: %v %v", ok, err)
			}
			// Mid-stream.
			if err := a.b.Send(1, "please be slow"); err != nil {
				t.Fatal(err)
			}
			waitFor(t, a.s, func(evs []event.Event) bool { return len(ofKind(evs, event.AssistantText)) > 0 })
			if ok, err := a.b.Interrupt(context.Background()); !ok || err != nil {
				t.Fatalf("interrupt: %v %v", ok, err)
			}
			if r := result(t, a.s.waitResult(t, 1)); r.StopReason != apitype.StopCancelled {
				t.Fatalf("interrupted stream: %+v", r)
			}
			// Mid-tool: the sleep's process group is gone at once.
			pidFile := filepath.Join(a.dir, "pid")
			if err := a.b.Send(2, `call tool: bash {"command":"echo $$ > `+pidFile+`; exec sleep 60"}`); err != nil {
				t.Fatal(err)
			}
			var pid int
			waitFor(t, a.s, func([]event.Event) bool {
				b, _ := os.ReadFile(pidFile)
				_, err := fmt.Sscan(strings.TrimSpace(string(b)), &pid)
				return err == nil && pid > 0
			})
			if ok, err := a.b.Interrupt(context.Background()); !ok || err != nil {
				t.Fatalf("interrupt: %v %v", ok, err)
			}
			evs := a.s.waitResult(t, 2)
			if r := result(t, evs); r.StopReason != apitype.StopCancelled {
				t.Fatalf("interrupted tool: %+v", r)
			}
			if r := ofKind(evs, event.ToolResult); len(r) != 1 || r[0].Get("update.status").String() != "failed" {
				t.Fatalf("interrupted tool's result: %v", r)
			}
			if procstat.Running(pid) {
				t.Fatalf("bash %d still runs after the interrupt", pid)
			}
			// The conversation stays well formed: the next turn works
			// and carries the interrupted call's result.
			if r := result(t, a.turn(t, 3, "hello")); r.StopReason != apitype.StopEndTurn {
				t.Fatalf("after interrupt: %+v", r)
			}
		})
	}
}

func TestResumeAndSetModel(t *testing.T) {
	for _, srv := range servers(t) {
		t.Run(srv.family, func(t *testing.T) {
			cache := t.TempDir()
			a := open(t, srv, backend.Options{OpenArgs: verbs.OpenArgs{ID: "r1"}, CacheDir: cache}, 0)
			a.turn(t, 1, "say exactly: remember the word kumquat")
			info := a.b.Info()
			if !strings.HasPrefix(info.SessionID, srv.family+"-") || info.Transcript != (config.Paths{CacheDir: cache}).Agent("r1").History || !info.QueuesPrompts {
				t.Fatalf("info: %+v", info)
			}
			// set-model: another family refused, an unknown tag refused,
			// a known one switched.
			other := "vmlx:x"
			if srv.family == VMLX {
				other = "ollama:x"
			}
			if ok, err := a.b.SetModel(context.Background(), other); ok || err == nil || !strings.Contains(err.Error(), "close it and open a new one") {
				t.Fatalf("set-model across families: %v %v", ok, err)
			}
			if ok, err := a.b.SetModel(context.Background(), "nope"); ok || err == nil || !strings.Contains(err.Error(), "model not found") {
				t.Fatalf("set-model to an unknown tag: %v %v", ok, err)
			}
			to := "llama3:fake"
			if srv.family == VMLX {
				to = fakeopenai.Models[1]
			}
			if ok, err := a.b.SetModel(context.Background(), srv.family+":"+to); !ok || err != nil {
				t.Fatalf("set-model: %v %v", ok, err)
			}
			a.turn(t, 2, "hello")
			reqs := srv.reqs()
			if m := reqs[len(reqs)-1].Model; m != to {
				t.Fatalf("request after set-model used %s", m)
			}
			if a.b.Info().Model != srv.family+":"+to {
				t.Fatalf("info after set-model: %+v", a.b.Info())
			}
			a.b.Close()
			if err := <-a.s.exited; err != nil {
				t.Fatalf("exited: %v", err)
			}
			// Resume: the next request carries the earlier turns.
			r := open(t, srv, backend.Options{OpenArgs: verbs.OpenArgs{ID: "r1"}, CacheDir: cache, ResumeSession: info.SessionID}, 0)
			if r.b.Info().SessionID != info.SessionID {
				t.Fatalf("resumed session %s", r.b.Info().SessionID)
			}
			r.turn(t, 3, "what was the word?")
			reqs = srv.reqs()
			h := strings.Join(reqs[len(reqs)-1].History, "|")
			if !strings.HasPrefix(h, "user: say exactly: remember the word kumquat|assistant: remember the word kumquat|user: hello|") ||
				!strings.HasSuffix(h, "|user: what was the word?") {
				t.Fatalf("resumed history: %s", h)
			}
			// Fork: a new agent and session whose first request
			// carries r1's conversation; r1's file is left as it was.
			r1File := (config.Paths{CacheDir: cache}).Agent("r1").History
			before, _ := os.ReadFile(r1File)
			f := open(t, srv, backend.Options{OpenArgs: verbs.OpenArgs{ID: "f1"}, CacheDir: cache,
				Fork: &backend.Fork{AgentID: "r1", Session: info.SessionID}}, 0)
			if fs := f.b.Info().SessionID; fs == info.SessionID || !strings.HasPrefix(fs, srv.family+"-") {
				t.Fatalf("the fork's session %s (forked %s)", fs, info.SessionID)
			}
			f.turn(t, 1, "and in the fork?")
			reqs = srv.reqs()
			h = strings.Join(reqs[len(reqs)-1].History, "|")
			if !strings.HasPrefix(h, "user: say exactly: remember the word kumquat|") || !strings.Contains(h, "|user: what was the word?|") || !strings.HasSuffix(h, "|user: and in the fork?") {
				t.Fatalf("the fork's history: %s", h)
			}
			if after, _ := os.ReadFile(r1File); string(after) != string(before) {
				t.Fatalf("forking changed r1's conversation file")
			}
			// A fork of a session that is not the agent's: refused.
			f2, _ := newBackend(backendtest.Resolved(t, backend.Options{OpenArgs: verbs.OpenArgs{ID: "f2", Cwd: t.TempDir()}, CacheDir: cache,
				Fork: &backend.Fork{AgentID: "r1", Session: srv.family + "-0000"}}), newSink(), srv.family, srv.tag, srv.api(), 0)
			if err := f2.Start(context.Background()); err == nil || !strings.Contains(err.Error(), "is gone") {
				t.Fatalf("fork of another session: %v", err)
			}
			// Another session id is not this conversation.
			b2, _ := newBackend(backendtest.Resolved(t, backend.Options{OpenArgs: verbs.OpenArgs{ID: "r1", Cwd: t.TempDir()}, CacheDir: cache, ResumeSession: srv.family + "-0000"}), newSink(), srv.family, srv.tag, srv.api(), 0)
			if err := b2.Start(context.Background()); err == nil || !strings.Contains(err.Error(), "is gone") {
				t.Fatalf("resume of another session: %v", err)
			}
		})
	}
}

func waitFor(t *testing.T, s *sink, cond func([]event.Event) bool) {
	t.Helper()
	deadline := time.After(30 * time.Second)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for !cond(s.all()) {
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatalf("timed out; events: %s", dump(s.all()))
		}
	}
}

// The config's think and keep_alive reach Ollama; the API key and
// include_usage reach the OpenAI-compatible server.
func TestRequestSettings(t *testing.T) {
	ol := fakeollama.New(t)
	srv := server{family: Ollama, tag: "qwen3:fake", api: func() chatAPI {
		return &ollama{base: ol.URL(), think: json.RawMessage(`"high"`), keepAlive: json.RawMessage(`-1`)}
	}, reqs: func() []fakeReq { return nil }}
	a := open(t, srv, backend.Options{}, 0)
	a.turn(t, 1, "hello")
	if r := ol.Requests()[0]; string(r.Think) != `"high"` || string(r.KeepAlive) != "-1" || !r.Stream {
		t.Fatalf("ollama request: %+v", r)
	}
	oa := fakeopenai.New(t)
	srv = server{family: VMLX, tag: "fake-model", api: func() chatAPI { return &openAI{base: oa.URL(), apiKey: "sekrit"} },
		reqs: func() []fakeReq { return nil }}
	a = open(t, srv, backend.Options{}, 0)
	a.turn(t, 1, "hello")
	if r := oa.Requests()[0]; r.Authorization != "Bearer sekrit" || !r.IncludeUsage || !r.Stream {
		t.Fatalf("openai request: %+v", r)
	}
}

// The read and search tools, and bash's timeout, run directly.
func TestTools(t *testing.T) {
	dir := t.TempDir()
	root, err := confine.New(dir)
	if err != nil {
		t.Fatal(err)
	}
	w := &workdir{root: root, env: os.Environ()}
	os.MkdirAll(filepath.Join(dir, "sub", ".git"), 0o755)
	os.WriteFile(filepath.Join(dir, "sub", "a.go"), []byte("package a\nfunc Foo() {}\nfunc Bar() {}\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "sub", ".git", "x"), []byte("func Foo"), 0o644)
	os.WriteFile(filepath.Join(dir, "bin"), []byte("func Foo\x00"), 0o644)
	run := func(name string, a toolArgs) (string, error) {
		d, _ := toolByName(name)
		return w.run(context.Background(), d, a)
	}
	if out, err := run("read_file", toolArgs{Path: "sub/a.go", Offset: 2, Limit: 1}); err != nil || out != "func Foo() {}\n" {
		t.Fatalf("read_file offset/limit: %q %v", out, err)
	}
	if out, err := run("list_dir", toolArgs{}); err != nil || out != "bin\nsub/\n" {
		t.Fatalf("list_dir: %q %v", out, err)
	}
	if out, err := run("grep", toolArgs{Pattern: `func (Foo|Bar)`}); err != nil || out != "sub/a.go:2: func Foo() {}\nsub/a.go:3: func Bar() {}\n" {
		t.Fatalf("grep: %q %v", out, err)
	}
	if _, err := run("grep", toolArgs{Pattern: "("}); err == nil {
		t.Fatal("grep took a bad pattern")
	}
	if _, err := run("read_file", toolArgs{Path: "/etc/passwd"}); err == nil || !strings.Contains(err.Error(), "outside") {
		t.Fatalf("read outside: %v", err)
	}
	if _, err := run("list_dir", toolArgs{Path: ".."}); err == nil {
		t.Fatal("list_dir ..")
	}
	// No file tool writes a .git, which git would follow to a config
	// that names programs it runs; checkPaths refuses it before the
	// call is asked about.
	for _, c := range []struct {
		tool string
		a    toolArgs
	}{
		{"write_file", toolArgs{Path: ".git", Content: "gitdir: /tmp/planted\n"}},
		{"write_file", toolArgs{Path: "sub/.git/config", Content: "[core]\n\tfsmonitor = /tmp/x\n"}},
		{"edit_file", toolArgs{Path: "sub/.git/x", OldString: "Foo", NewString: "Bar"}},
	} {
		d, _ := toolByName(c.tool)
		if err := w.checkPaths(d, c.a); !errors.Is(err, confine.ErrGitDir) {
			t.Errorf("checkPaths %s %s: %v; want refused as in a .git", c.tool, c.a.Path, err)
		}
		if _, err := run(c.tool, c.a); !errors.Is(err, confine.ErrGitDir) {
			t.Errorf("%s %s: %v; want refused as in a .git", c.tool, c.a.Path, err)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "sub", ".git", "x")); string(b) != "func Foo" {
		t.Fatalf("edit_file changed sub/.git/x: %q", b)
	}
	if _, err := os.Stat(filepath.Join(dir, ".git")); err == nil {
		t.Fatal("write_file made .git")
	}
	if _, err := run("write_file", toolArgs{Path: ".gitignore", Content: "x\n"}); err != nil {
		t.Fatalf("write_file .gitignore: %v", err)
	}
	out, err := run("bash", toolArgs{Command: "echo $$ > pid; sleep 30", Timeout: 1})
	if err == nil || !strings.Contains(err.Error(), "did not end within 1s") {
		t.Fatalf("bash timeout: %q %v", out, err)
	}
	b, _ := os.ReadFile(filepath.Join(dir, "pid"))
	var pid int
	if _, err := fmt.Sscan(strings.TrimSpace(string(b)), &pid); err != nil || procstat.Running(pid) {
		t.Fatalf("timed-out bash %d still runs (%v)", pid, err)
	}
	if out, err := run("bash", toolArgs{Command: "echo oops >&2; exit 3"}); err == nil || err.Error() != "exit code 3" || out != "oops\n" {
		t.Fatalf("bash exit 3: %q %v", out, err)
	}
}

// permission_mode and only shape what the gate does.
func TestGateModes(t *testing.T) {
	ask := func(context.Context, backend.PermissionRequest) backend.PermissionDecision {
		return backend.PermissionDecision{Message: "asked"}
	}
	edit, _ := toolByName("write_file")
	read, _ := toolByName("read_file")
	for _, c := range []struct {
		name      string
		o         backend.Options
		tool      toolDef
		allow     bool
		why       string
		offerings string
	}{
		{"default mode asks before edits", backend.Options{OpenArgs: verbs.OpenArgs{PermissionMode: "default"}}, edit, false, "asked", "read_file,write_file,edit_file,list_dir,grep,bash"},
		{"plan refuses edits", backend.Options{OpenArgs: verbs.OpenArgs{PermissionMode: "plan"}}, edit, false, "plan mode", "read_file,write_file,edit_file,list_dir,grep,bash"},
		{"acceptEdits runs them", backend.Options{}, edit, true, "", "read_file,write_file,edit_file,list_dir,grep,bash"},
		{"only: allow is the whole set", backend.Options{OpenArgs: verbs.OpenArgs{Only: true, AllowedTools: []string{"read_file"}}}, read, true, "allowed tools", "read_file"},
		{"only: the rest is refused", backend.Options{OpenArgs: verbs.OpenArgs{Only: true, AllowedTools: []string{"read_file"}}}, edit, false, "whole tool set", "read_file"},
		{"disallowed wins over specialist's allow", backend.Options{OpenArgs: verbs.OpenArgs{Permission: "specialist", AllowedTools: []string{"Read"}, DisallowedTools: &[]string{"read_file"}}}, read, false, "disallowed", ""},
	} {
		c.o.Ask = ask
		o := backendtest.Resolved(t, c.o)
		g, err := newGate(&o)
		if err != nil {
			t.Fatal(err)
		}
		ok, why := g.allow(context.Background(), 1, c.tool, event.ToolCall{})
		var names []string
		for _, d := range g.offeredTools() {
			names = append(names, d.Name)
		}
		if ok != c.allow || !strings.Contains(why, c.why) || strings.Join(names, ",") != c.offerings {
			t.Errorf("%s: allow %v (%q), offered %v", c.name, ok, why, names)
		}
	}
	// notebook says at open that the model has no tools.
	srv := servers(t)[0]
	a := open(t, srv, backend.Options{OpenArgs: verbs.OpenArgs{Permission: "notebook"}}, 0)
	if errs := ofKind(a.s.all(), event.Error); len(errs) != 1 || !strings.Contains(errs[0].Raw, "offered no tools") {
		t.Fatalf("notebook at open: %v", errs)
	}
}

func TestRefusedOptions(t *testing.T) {
	for _, a := range []verbs.OpenArgs{{Effort: "low"}, {MCPConfig: "/x.json"}} {
		a.Cwd = t.TempDir()
		o := backendtest.Resolved(t, backend.Options{OpenArgs: a})
		if _, err := newBackend(o, newSink(), Ollama, "qwen3:fake", nil, 0); err == nil {
			t.Errorf("options %+v taken", a)
		}
	}
	// Options without a policy are a kaimon bug, refused, not run under
	// some default policy.
	_, err := newBackend(backend.Options{OpenArgs: verbs.OpenArgs{Cwd: t.TempDir()}}, newSink(), Ollama, "qwen3:fake", nil, 0)
	if err == nil || !strings.Contains(err.Error(), "without a resolved permission policy") {
		t.Errorf("options without a policy: %v", err)
	}
	for _, m := range []string{"ollama:", "vmlx: ", "ollamax:y", "acp:opencode"} {
		if _, _, err := ParseModel(m); err == nil {
			t.Errorf("ParseModel(%q) took it", m)
		}
	}
}

// brokenAPI announces a tool call and then fails, as a stream cut off
// in the middle of a call.
type brokenAPI struct{}

func (brokenAPI) URL() string                              { return "broken" }
func (brokenAPI) CheckModel(context.Context, string) error { return nil }
func (brokenAPI) Chat(_ context.Context, _ chatRequest, s streamSink) (roundResult, error) {
	s.text("I will")
	s.toolStart(3, "c9", "bash")
	s.toolArgs(3, `{"comm`)
	return roundResult{}, errors.New("connection reset")
}

func TestBrokenCallIsClosed(t *testing.T) {
	srv := server{family: VMLX, tag: "m", api: func() chatAPI { return brokenAPI{} }, reqs: func() []fakeReq { return nil }}
	a := open(t, srv, backend.Options{}, 0)
	evs := a.turn(t, 1, "hi")
	if k := authKinds(evs); k != "user_text turn_started assistant_text tool_use error tool_result usage result" {
		t.Fatalf("kinds: %s\n%s", k, dump(evs))
	}
	if r := ofKind(evs, event.ToolResult)[0]; r.Get("update.toolCallId").String() != "c9" || r.Get("update.status").String() != "failed" {
		t.Fatalf("tool_result: %v", r)
	}
	if d := ofKind(evs, event.ToolInputDelta); len(d) != 1 || d[0].Get("partialJson").String() != `{"comm` {
		t.Fatalf("tool_input_delta: %v", d)
	}
}
