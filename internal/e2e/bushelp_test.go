package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/kaimon/kaimon/internal/apitype"
	"github.com/kaimon/kaimon/internal/client"
	"github.com/kaimon/kaimon/internal/config"
	"github.com/kaimon/kaimon/internal/event"
)

// paths are this installation's paths, as the daemon resolves them.
func (e *kenv) paths() config.Paths {
	return config.Paths{SockDir: filepath.Join(e.home, "sock"), CacheDir: filepath.Join(e.home, "cache", "agents"),
		ConfigFile: filepath.Join(e.home, "config.json"), WorktreeDir: filepath.Join(e.home, "worktrees")}
}

// client is an in-process client of the daemon (it must be running).
func (e *kenv) client() *client.Client { return &client.Client{Paths: e.paths(), NoAutostart: true} }

func (e *kenv) busEndpoint() string { return "ipc://" + e.paths().EventsSocket() }

// busStats reads the bus counters from daemon status.
func (e *kenv) busStats() apitype.BusStats {
	e.t.Helper()
	st, err := e.client().Ping(context.Background())
	if err != nil {
		e.t.Fatalf("daemon status: %v", err)
	}
	if st.Bus == nil {
		e.t.Fatal("daemon status has no bus")
	}
	return *st.Bus
}

// waitTopic waits until n subscriber connections hold the subscription
// topic: from then on, what is published on it is queued for them.
func (e *kenv) waitTopic(topic string, n int) {
	e.t.Helper()
	waitFor(e.t, fmt.Sprintf("%d subscriber(s) of %q", n, topic), 30*time.Second, func() bool {
		st, err := e.client().Ping(context.Background())
		if err != nil || st.Bus == nil {
			return false
		}
		k := 0
		for _, c := range st.Bus.Connections {
			if slices.Contains(c.Topics, topic) {
				k++
			}
		}
		return k >= n
	})
}

// logOf reads an agent's event log.
func (e *kenv) logOf(id string) []event.Record {
	e.t.Helper()
	var out []event.Record
	b, err := os.ReadFile(e.paths().Agent(id).Events)
	if err != nil {
		e.t.Fatal(err)
	}
	for _, line := range bytes.Split(b, []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		var r event.Record
		if err := json.Unmarshal(line, &r); err != nil {
			e.t.Fatalf("log line %q: %v", line, err)
		}
		out = append(out, r)
	}
	return out
}

// bgProc is a background process of the test (kaimon tail, a python
// subscriber) in its own process group, its stdout read line by line.
type bgProc struct {
	t      testing.TB
	cmd    *exec.Cmd
	stderr syncBuffer // the exec copy goroutine writes it while the test reads it

	mu      sync.Mutex
	lines   []string
	changed chan struct{}
	done    chan struct{}
	code    int
}

func (e *kenv) start(name string, args ...string) *bgProc {
	e.t.Helper()
	p := &bgProc{t: e.t, changed: make(chan struct{}), done: make(chan struct{})}
	p.cmd = exec.Command(name, args...)
	p.cmd.Dir = e.work
	p.cmd.Env = e.env
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	p.cmd.Stderr = &p.stderr
	out, err := p.cmd.StdoutPipe()
	if err != nil {
		e.t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		e.t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(out)
		sc.Buffer(nil, 64<<20)
		for sc.Scan() {
			p.mu.Lock()
			p.lines = append(p.lines, sc.Text())
			close(p.changed)
			p.changed = make(chan struct{})
			p.mu.Unlock()
		}
		err := p.cmd.Wait()
		p.mu.Lock()
		p.code = 0
		if ee, ok := err.(*exec.ExitError); ok {
			p.code = ee.ExitCode()
			if ee.ExitCode() < 0 {
				p.code = -1
			}
		}
		p.mu.Unlock()
		close(p.done)
	}()
	// Before the installation's own cleanup, which fails on leftovers.
	e.t.Cleanup(func() {
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
	})
	return p
}

// tail starts `kaimon tail ARGS…`.
func (e *kenv) tail(args ...string) *bgProc {
	return e.start(filepath.Join(binDir, "kaimon"), append([]string{"tail"}, args...)...)
}

// envelopes parses the lines printed so far.
func (p *bgProc) envelopes() []event.Envelope {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []event.Envelope
	for _, l := range p.lines {
		var e event.Envelope
		if err := json.Unmarshal([]byte(l), &e); err != nil {
			p.t.Fatalf("tail printed %q: %v", l, err)
		}
		out = append(out, e)
	}
	return out
}

// waitEnvelopes waits until cond holds for the envelopes printed so far.
func (p *bgProc) waitEnvelopes(what string, cond func([]event.Envelope) bool) []event.Envelope {
	p.t.Helper()
	timeout := time.After(60 * time.Second)
	for {
		p.mu.Lock()
		ch := p.changed
		p.mu.Unlock()
		if envs := p.envelopes(); cond(envs) {
			return envs
		}
		select {
		case <-ch:
		case <-p.done:
			if envs := p.envelopes(); cond(envs) {
				return envs
			}
			p.t.Fatalf("waiting for %s: the process exited %d; stderr: %s", what, p.code, p.stderr.String())
		case <-timeout:
			p.t.Fatalf("timed out waiting for %s; stderr: %s", what, p.stderr.String())
		}
	}
}

// wait waits for the process to exit and returns its exit code.
func (p *bgProc) wait() int {
	p.t.Helper()
	select {
	case <-p.done:
	case <-time.After(60 * time.Second):
		p.t.Fatalf("%s did not exit; stderr: %s", p.cmd.Path, p.stderr.String())
	}
	return p.code
}

func (p *bgProc) signal(sig syscall.Signal) { _ = syscall.Kill(-p.cmd.Process.Pid, sig) }

func hasKind(envs []event.Envelope, agent string, k event.Kind) bool {
	for _, e := range envs {
		if e.Kind == k && (agent == "" || e.AgentID == agent) {
			return true
		}
	}
	return false
}

func countDeltas(envs []event.Envelope) int {
	n := 0
	for _, e := range envs {
		if !event.Authoritative(e.Kind, e.Data) {
			n++
		}
	}
	return n
}

// shape checks one turn's envelopes, as published, against the spec's
// delta rules, and returns their kinds with every run of deltas folded
// into "kind(delta)…":
//   - seq is contiguous;
//   - the deltas of a text block concatenate to its authoritative copy,
//     which follows them;
//   - a tool call is announced by a tool_use without input, its input
//     streams as tool_input_delta fragments that concatenate to the
//     rawInput of the second, authoritative tool_use of the same
//     toolCallId, and its tool_result comes after that.
func shape(t *testing.T, envs []event.Envelope) string {
	t.Helper()
	var kinds []string
	streamed := map[event.Kind]string{}
	partial := map[string]string{}
	announced, complete := map[string]bool{}, map[string]bool{}
	for i, e := range envs {
		if i > 0 && e.Seq != envs[i-1].Seq+1 {
			t.Fatalf("seq jumps from %d to %d", envs[i-1].Seq, e.Seq)
		}
		k := string(e.Kind)
		switch e.Kind {
		case event.AssistantText, event.Thought:
			var d event.TextData
			mustJSON(t, e.Data, &d)
			if d.Delta {
				streamed[e.Kind] += d.Content.Text
				k += "(delta)…"
			} else {
				if s, ok := streamed[e.Kind]; ok && s != d.Content.Text {
					t.Fatalf("%s deltas %q do not add up to the block %q", e.Kind, s, d.Content.Text)
				}
				delete(streamed, e.Kind)
			}
		case event.ToolUse:
			var d event.ToolUseData
			mustJSON(t, e.Data, &d)
			id := d.Call.ToolCallID
			if len(d.Call.RawInput) == 0 {
				if announced[id] {
					t.Fatalf("tool call %s announced twice", id)
				}
				announced[id] = true
				break
			}
			if !announced[id] {
				t.Fatalf("tool call %s complete without its announce", id)
			}
			var whole, parts any
			mustJSON(t, d.Call.RawInput, &whole)
			mustJSON(t, []byte(partial[id]), &parts)
			if !reflect.DeepEqual(whole, parts) {
				t.Fatalf("tool_input_delta fragments %q do not add up to rawInput %s", partial[id], d.Call.RawInput)
			}
			complete[id] = true
			k = "tool_use(complete)"
		case event.ToolInputDelta:
			var d event.ToolInputDeltaData
			mustJSON(t, e.Data, &d)
			if !announced[d.ToolCallID] || complete[d.ToolCallID] {
				t.Fatalf("tool_input_delta for %s outside its call", d.ToolCallID)
			}
			partial[d.ToolCallID] += d.PartialJSON
			k += "…"
		case event.ToolResult:
			var d event.ToolResultData
			mustJSON(t, e.Data, &d)
			if !complete[d.Update.ToolCallID] {
				t.Fatalf("tool_result for %s before its complete tool_use", d.Update.ToolCallID)
			}
		case event.Status:
			var d event.StatusData
			mustJSON(t, e.Data, &d)
			k += ":" + string(d.Status)
		}
		if len(kinds) == 0 || kinds[len(kinds)-1] != k || !strings.HasSuffix(k, "…") {
			kinds = append(kinds, k)
		}
	}
	return strings.Join(kinds, " ")
}

func mustJSON(t *testing.T, b []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%q: %v", b, err)
	}
}

// theTurn is the shape of the tool turn "please use a tool", by the spec:
// turn_started → assistant_text{delta:true}… → assistant_text{delta:false}
// → tool_use/tool_input_delta/tool_use → tool_result → … → result.
const theTurn = "status:working user_text turn_started assistant_text(delta)… assistant_text " +
	"tool_use tool_input_delta… tool_use(complete) tool_result assistant_text(delta)… assistant_text usage result"
