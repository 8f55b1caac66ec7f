package e2e

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/kaimon/kaimon/internal/event"
	"github.com/kaimon/kaimon/internal/procstat"
	"github.com/kaimon/kaimon/internal/testutil/fakeollama"
	"github.com/kaimon/kaimon/internal/testutil/fakeopenai"
	"github.com/kaimon/kaimon/internal/verbs"
)

// Local models end to end: ollama: and vmlx: agents through the real
// daemon and CLI, against fakeollama and fakeopenai on 127.0.0.1. There is
// no agent program: the daemon itself talks to the model server and runs
// the tools.

// localReq is what the tests read of a fake's recorded request.
type localReq struct {
	Model   string
	Tools   []string
	History []string
}

type localCase struct {
	family, model, other string // other: a second model of the same server
	reqs                 func() []localReq
}

func newLocalEnv(t *testing.T) (*acpEnv, []localCase) {
	ol, oa := fakeollama.New(t), fakeopenai.New(t)
	if testing.Verbose() {
		ol.SetLog(os.Stderr)
		oa.SetLog(os.Stderr)
	}
	k := newEnv(t, "KAIMON_OLLAMA_URL", ol.URL(), "KAIMON_VMLX_URL", oa.URL())
	cases := []localCase{
		{family: "ollama", model: "ollama:" + fakeollama.Models[0], other: "ollama:" + fakeollama.Models[1], reqs: func() []localReq {
			var out []localReq
			for _, r := range ol.Requests() {
				out = append(out, localReq{r.Model, r.Tools, r.History})
			}
			return out
		}},
		{family: "vmlx", model: "vmlx:" + fakeopenai.Models[0], other: "vmlx:" + fakeopenai.Models[1], reqs: func() []localReq {
			var out []localReq
			for _, r := range oa.Requests() {
				out = append(out, localReq{r.Model, r.Tools, r.History})
			}
			return out
		}},
	}
	// acpEnv's log helpers read any agent's log.
	return &acpEnv{kenv: k}, cases
}

func lastReq(t *testing.T, c localCase) localReq {
	t.Helper()
	r := c.reqs()
	if len(r) == 0 {
		t.Fatal("the fake model server got no request")
	}
	return r[len(r)-1]
}

// TestLocalAgents: for each of ollama: and vmlx:, a text turn, a tool call
// that edits a file in the cwd, a write outside it refused, bash asked and
// allowed with kaimon permit, notebook offering no tools, an unknown model
// refused at open, set-model, interrupt mid-stream and mid-tool with no
// process left.
func TestLocalAgents(t *testing.T) {
	e, cases := newLocalEnv(t)
	for _, c := range cases {
		t.Run(c.family, func(t *testing.T) {
			// A model the server does not have: refused at open, nothing left.
			r := e.fails(1, "model not found", "open", "--model", c.family+":nope", "--id", c.family+"-nope", e.work)
			if c.family == "ollama" && !strings.Contains(r.stderr, "ollama pull nope") {
				t.Fatalf("unknown ollama model: %s", r)
			}
			e.fails(1, "no agent", "status", c.family+"-nope")

			id := e.ok("open", "--model", c.model, e.work)
			e.dumpOnFail(t, id)
			var st verbs.AgentStatus
			e.okJSON(&st, "status", id)
			if st.Status != "idle" || st.Model != c.model || !st.QueuesPrompts || !strings.HasPrefix(st.SessionID, c.family+"-") ||
				st.Transcript != e.paths().Agent(id).History {
				t.Fatalf("status = %+v", st)
			}

			// A text turn.
			if out := e.ok("run", id, "hello there"); !strings.HasPrefix(out, "Hello from fake") {
				t.Fatalf("text turn = %q", out)
			}
			if k := kinds(e.events(t, id), 1); k != "user_text turn_started assistant_text usage result" {
				t.Fatalf("turn 1 kinds: %s", k)
			}
			e.okJSON(&st, "status", id)
			if st.Usage.InputTokens == 0 || st.Usage.OutputTokens == 0 {
				t.Fatalf("usage = %+v", st.Usage)
			}

			// A tool call that edits a file in the cwd.
			f := filepath.Join(e.work, c.family+".txt")
			os.WriteFile(f, []byte("alpha beta\n"), 0o644)
			out := e.ok("run", id, `call tool: edit_file {"path":"`+c.family+`.txt","old_string":"beta","new_string":"gamma"}`)
			if b, _ := os.ReadFile(f); string(b) != "alpha gamma\n" || out != "Tool said: edited "+c.family+".txt. Done." {
				t.Fatalf("edit turn = %q; file %q", out, b)
			}
			if k := kinds(e.events(t, id), 2); k != "user_text turn_started tool_use tool_use tool_result assistant_text usage result" {
				t.Fatalf("turn 2 kinds: %s", k)
			}

			// A write outside the cwd: refused, nothing written.
			outside := filepath.Join(e.home, c.family+"-outside.txt")
			out = e.ok("run", id, `call tool: write_file {"path":"`+outside+`","content":"no"}`)
			if _, err := os.Stat(outside); !os.IsNotExist(err) || !strings.Contains(out, "outside the agent's working directory") {
				t.Fatalf("outside write: %q (%v)", out, err)
			}

			// bash asks under default; kaimon permit allows it.
			turn := e.ok("send", id, `call tool: bash {"command":"echo hi > bashed-`+c.family+`.txt"}`)
			perm := e.waitEvent(t, id, event.Permission, func(d gjson.Result) bool { return !d.Get("decision").Exists() })
			if perm.Turn != atoiT(t, turn) || gjson.GetBytes(perm.Data, "toolCall.kind").String() != "execute" {
				t.Fatalf("permission event: %d %s", perm.Turn, perm.Data)
			}
			if _, err := os.Stat(filepath.Join(e.work, "bashed-"+c.family+".txt")); err == nil {
				t.Fatal("bash ran before it was permitted")
			}
			e.ok("permit", id, gjson.GetBytes(perm.Data, "requestId").String(), "allow")
			e.waitStatus(t, id, "idle")
			if b, _ := os.ReadFile(filepath.Join(e.work, "bashed-"+c.family+".txt")); string(b) != "hi\n" {
				t.Fatalf("permitted bash did not run: %q", b)
			}
			if k := kinds(e.events(t, id), atoiT(t, turn)); k != "user_text turn_started tool_use tool_use permission permission tool_result assistant_text usage result" {
				t.Fatalf("bash turn kinds: %s", k)
			}

			// set-model: another tag of the same server switches; the next
			// request uses it. Another family does not.
			if got := e.ok("set-model", id, c.other); got != "switched" {
				t.Fatalf("set-model = %q", got)
			}
			e.ok("run", id, "hello again")
			if m := lastReq(t, c).Model; "ollama:"+m != c.other && "vmlx:"+m != c.other {
				t.Fatalf("request after set-model: model %s", m)
			}
			e.okJSON(&st, "status", id)
			if st.Model != c.other {
				t.Fatalf("status after set-model: %+v", st)
			}
			if got := e.ok("set-model", id, "acp:opencode"); !strings.HasPrefix(got, "not switched") {
				t.Fatalf("set-model to another backend = %q", got)
			}

			// Interrupt mid-stream.
			turn = e.ok("send", id, "please be slow")
			waitFor(t, "text to stream", 30*time.Second, func() bool {
				var o verbs.OutputResult
				e.okJSON(&o, "output", id, "--turn", turn)
				return strings.Contains(o.Text, "chunk1")
			})
			e.ok("interrupt", id)
			res := e.waitEvent(t, id, event.Result, func(d gjson.Result) bool { return d.Get("stopReason").String() == "cancelled" })
			if res.Turn != atoiT(t, turn) {
				t.Fatalf("cancelled result of turn %d, want %s", res.Turn, turn)
			}

			// Interrupt mid-tool: the bash's process group is gone.
			pidFile := filepath.Join(e.work, c.family+".pid")
			turn = e.ok("send", id, `call tool: bash {"command":"echo $$ > `+pidFile+`; exec sleep 120"}`)
			perm = e.waitEvent(t, id, event.Permission, func(d gjson.Result) bool {
				return !d.Get("decision").Exists() && strings.Contains(d.Get("toolCall.rawInput.command").String(), "sleep 120")
			})
			e.ok("permit", id, gjson.GetBytes(perm.Data, "requestId").String(), "allow")
			var pid int
			waitFor(t, "the sleep to start", 30*time.Second, func() bool {
				b, _ := os.ReadFile(pidFile)
				p, err := strconv.Atoi(strings.TrimSpace(string(b)))
				pid = p
				return err == nil && p > 0 && procstat.Running(p)
			})
			e.ok("interrupt", id)
			e.waitStatus(t, id, "idle")
			if procstat.Running(pid) {
				t.Fatalf("the interrupted bash (pid %d) still runs", pid)
			}
			recs := e.events(t, id)
			if r := recs[len(recs)-2]; r.Kind != event.Result || gjson.GetBytes(r.Data, "stopReason").String() != "cancelled" {
				t.Fatalf("mid-tool interrupt ended with %s %s", r.Kind, r.Data)
			}
			var daemonOnly []int
			for _, p := range e.processes() {
				if b, _ := os.ReadFile("/proc/" + strconv.Itoa(p) + "/cmdline"); !strings.Contains(string(b), "kaimon-agentd") {
					daemonOnly = append(daemonOnly, p)
				}
			}
			if len(daemonOnly) > 0 {
				t.Fatalf("processes left besides the daemon: %s", describe(daemonOnly))
			}

			// notebook: the model is offered no tools.
			nb := e.ok("open", "--model", c.model, "--permission", "notebook", e.work)
			e.ok("run", nb, "hello notebook")
			if r := lastReq(t, c); len(r.Tools) != 0 {
				t.Fatalf("notebook offered %v", r.Tools)
			}
			e.ok("close", nb)
			e.ok("close", id)
		})
	}
}

// TestLocalResume: a local agent's conversation outlives the daemon: after
// a stop and a start, open --id --resume continues it, and the next request
// carries the earlier turns.
func TestLocalResume(t *testing.T) {
	e, cases := newLocalEnv(t)
	for _, c := range cases {
		t.Run(c.family, func(t *testing.T) {
			id := "res-" + c.family
			e.ok("open", "--model", c.model, "--id", id, "--system-prompt", "be brief", e.work)
			e.ok("run", id, "say exactly: the password is kumquat")
			e.ok("run", id, `call tool: list_dir {}`)
			var before verbs.AgentStatus
			e.okJSON(&before, "status", id)

			e.ok("daemon", "stop")
			e.ok("daemon", "start")
			var st verbs.AgentStatus
			e.okJSON(&st, "status", id)
			if st.Status != "dead" || st.SessionID != before.SessionID {
				t.Fatalf("after restart: %+v", st)
			}
			e.ok("open", "--id", id, "--resume")
			e.okJSON(&st, "status", id)
			if st.Status != "idle" || st.SessionID != before.SessionID || st.Model != c.model {
				t.Fatalf("resumed: %+v", st)
			}
			e.ok("run", id, "what was the password?")
			h := lastReq(t, c).History
			want := []string{"user: say exactly: the password is kumquat", "assistant: the password is kumquat", "user: call tool: list_dir {}"}
			if len(h) < 4 || !slices.Equal(h[:3], want) || h[len(h)-1] != "user: what was the password?" {
				t.Fatalf("history after resume: %q", h)
			}
			if st.Turn != 2 {
				t.Fatalf("turns after resume: %+v", st)
			}
			e.ok("close", id)
		})
	}
}

// TestLocalPresets: each preset's hold on the built-in tools, through the
// daemon: what runs at once, what asks, what the model is not offered.
func TestLocalPresets(t *testing.T) {
	e, cases := newLocalEnv(t)
	for _, c := range cases {
		t.Run(c.family, func(t *testing.T) {
			for _, p := range []struct {
				preset string
				flags  []string
				bash   string // runs | asks | refused
				tools  string
			}{
				{"default", nil, "asks", "read_file,write_file,edit_file,list_dir,grep,bash"},
				{"notebook", nil, "refused", ""},
				{"specialist", []string{"--allow", "bash"}, "runs", "bash"},
				{"specialist", nil, "refused", ""},
				{"lab", nil, "asks", "read_file,write_file,edit_file,list_dir,grep,bash"},
				{"auto", nil, "asks", "read_file,write_file,edit_file,list_dir,grep,bash"},
				{"bypass", nil, "runs", "read_file,write_file,edit_file,list_dir,grep,bash"},
				{"default", []string{"--only", "--allow", "Read"}, "refused", "read_file"},
			} {
				name := p.preset + strings.Join(p.flags, "")
				id := e.ok(append([]string{"open", "--model", c.model, "--permission", p.preset, e.work}, p.flags...)...)
				marker := filepath.Join(e.work, c.family+"-"+strings.NewReplacer("-", "", " ", "").Replace(name))
				turn := e.ok("send", id, `call tool: bash {"command":"touch `+marker+`"}`)
				if p.bash == "asks" {
					perm := e.waitEvent(t, id, event.Permission, func(d gjson.Result) bool { return !d.Get("decision").Exists() })
					e.ok("permit", id, gjson.GetBytes(perm.Data, "requestId").String(), "deny")
				}
				e.waitStatus(t, id, "idle")
				_, err := os.Stat(marker)
				if ran := err == nil; ran != (p.bash == "runs") {
					t.Errorf("%s: bash ran = %v, want %s", name, ran, p.bash)
				}
				if p.tools == "" {
					// Offered no tools, the model (the fake) calls none.
					if k := kinds(e.events(t, id), atoiT(t, turn)); k != "user_text turn_started assistant_text usage result" {
						t.Errorf("%s: kinds %s", name, k)
					}
				} else {
					res := e.waitEvent(t, id, event.ToolResult, func(d gjson.Result) bool { return true })
					if st := gjson.GetBytes(res.Data, "update.status").String(); res.Turn != atoiT(t, turn) || (st == "completed") != (p.bash == "runs") {
						t.Errorf("%s: tool_result %s", name, res.Data)
					}
				}
				if got := strings.Join(lastReq(t, c).Tools, ","); got != p.tools {
					t.Errorf("%s: offered %q, want %q", name, got, p.tools)
				}
				e.ok("close", id)
			}
		})
	}
}
