package e2e

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/kaimon/kaimon/internal/config"
	"github.com/kaimon/kaimon/internal/verbs"
)

// TestForkClaude: a fork of a real claude CLI agent continues a copy of
// its conversation: the fake API's request for the fork's first turn
// carries the parent's earlier messages, and the parent's next turn does
// not carry the fork's. A dead agent forks too, and a fork may work in
// another directory than its parent.
func TestForkClaude(t *testing.T) {
	e := newEnv(t)
	e.ok("daemon", "start")
	parent := e.ok("open", e.work, "--system-prompt", "be brief")
	if out := e.ok("run", parent, "say exactly: parent one"); out != "parent one" {
		t.Fatalf("parent turn 1 = %q", out)
	}
	fork := e.ok("open", "--fork", parent)
	if fork == parent || fork == "" {
		t.Fatalf("open --fork printed %q", fork)
	}
	if out := e.ok("run", fork, "say exactly: fork one"); out != "fork one" {
		t.Fatalf("fork turn 1 = %q", out)
	}
	req := requestFor(t, e.api, "say exactly: fork one")
	if !hasLine(req.History, "user: say exactly: parent one") || !hasLine(req.History, "assistant: parent one") {
		t.Fatalf("the fork's first turn does not carry the parent's conversation: %q", req.History)
	}
	if !strings.Contains(req.System, "be brief") {
		t.Errorf("the fork did not inherit the parent's system prompt: %q", req.System)
	}
	e.ok("run", parent, "say exactly: parent two")
	req = requestFor(t, e.api, "say exactly: parent two")
	if !hasLine(req.History, "user: say exactly: parent one") || hasLine(req.History, "user: say exactly: fork one") || hasLine(req.History, "assistant: fork one") {
		t.Fatalf("the parent's next turn: %q", req.History)
	}
	ps, fs := e.status(t, parent), e.status(t, fork)
	if fs.SessionID == "" || fs.SessionID == ps.SessionID || fs.Cwd != ps.Cwd || fs.Model != ps.Model || fs.Turn != 1 {
		t.Fatalf("fork %+v\nof parent %+v", fs, ps)
	}

	// A dead agent forks, into another directory: the CLI finds the
	// conversation there too.
	e.ok("close", parent)
	other := filepath.Join(e.home, "other")
	if err := os.MkdirAll(other, 0o755); err != nil {
		t.Fatal(err)
	}
	second := e.ok("open", "--fork", parent, other)
	e.ok("run", second, "say exactly: second fork")
	req = requestFor(t, e.api, "say exactly: second fork")
	if !hasLine(req.History, "user: say exactly: parent two") || hasLine(req.History, "user: say exactly: fork one") {
		t.Fatalf("a fork of the dead parent in another cwd: %q", req.History)
	}
	if st := e.status(t, second); st.Cwd != other {
		t.Fatalf("fork given a DIR works in %s", st.Cwd)
	}
	if st := e.status(t, parent); st.Status != "dead" || st.Turn != 2 {
		t.Fatalf("the forked dead agent changed: %+v", st)
	}
	// A fork is an agent like any: it resumes with its own conversation.
	e.ok("close", fork)
	e.ok("open", "--id", fork, "--resume")
	e.ok("run", fork, "say exactly: fork two")
	req = requestFor(t, e.api, "say exactly: fork two")
	if !hasLine(req.History, "user: say exactly: fork one") || !hasLine(req.History, "user: say exactly: parent one") || hasLine(req.History, "user: say exactly: parent two") {
		t.Fatalf("the resumed fork's conversation: %q", req.History)
	}
}

// TestForkWorktree: a fork with --worktree of an agent with a worktree
// starts from the agent's branch head: its commit comes along, its
// uncommitted change does not, and the open says so (stderr, and
// warnings in the JSON).
func TestForkWorktree(t *testing.T) {
	e := newEnv(t)
	e.gitRepo(t)
	e.ok("daemon", "start")
	parent := e.ok("open", filepath.Join(e.work, "sub"), "--worktree")
	e.ok("run", parent, "say exactly: on the branch")
	ps := e.status(t, parent)
	write := func(dir, name, text string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(ps.Cwd, "committed.txt", "committed\n")
	e.git(t, ps.Worktree, "add", ".")
	e.git(t, ps.Worktree, "commit", "--quiet", "-m", "the parent's work")
	head := e.git(t, ps.Worktree, "rev-parse", "HEAD")
	write(ps.Cwd, "a.txt", "changed, not committed\n")
	write(ps.Cwd, "untracked.txt", "new\n")

	r := e.kaimon("open", "--fork", parent, "--worktree")
	if r.code != 0 || !strings.Contains(r.stderr, "did not come along") || !strings.Contains(r.stderr, "starts from "+ps.Branch+" at ") {
		t.Fatalf("open --fork --worktree of a dirty worktree: %s", r)
	}
	fork := strings.TrimSpace(r.stdout)
	fs := e.status(t, fork)
	if fs.Worktree == ps.Worktree || fs.Branch != "kaimon/"+fork || fs.BaseCommit != head || fs.Cwd != filepath.Join(fs.Worktree, "sub") || fs.Dirty {
		t.Fatalf("fork %+v\nof %+v (head %s)", fs, ps, head)
	}
	if b, err := os.ReadFile(filepath.Join(fs.Cwd, "committed.txt")); err != nil || string(b) != "committed\n" {
		t.Fatalf("the fork's worktree lacks the parent's commit: %q %v", b, err)
	}
	if b, _ := os.ReadFile(filepath.Join(fs.Cwd, "a.txt")); string(b) != "a\n" {
		t.Fatalf("the parent's uncommitted change came along: %q", b)
	}
	if _, err := os.Stat(filepath.Join(fs.Cwd, "untracked.txt")); err == nil {
		t.Fatal("the parent's untracked file came along")
	}
	e.ok("run", fork, "say exactly: in the fork's worktree")
	req := requestFor(t, e.api, "say exactly: in the fork's worktree")
	if !hasLine(req.History, "user: say exactly: on the branch") {
		t.Fatalf("the fork's conversation: %q", req.History)
	}
	// MCP callers and scripts read the same in warnings.
	var res verbs.OpenResult
	e.okJSON(&res, "open", "--fork", parent, "--worktree", "--json")
	if len(res.Warnings) != 1 || !strings.Contains(res.Warnings[0], "did not come along") {
		t.Fatalf("open --json of a fork: %+v", res)
	}
	// A clean parent: nothing to say.
	e.git(t, ps.Worktree, "checkout", "--quiet", "--", ".")
	os.Remove(filepath.Join(ps.Cwd, "untracked.txt"))
	r = e.kaimon("open", "--fork", parent, "--worktree")
	if r.code != 0 || r.stderr != "" {
		t.Fatalf("open --fork --worktree of a clean worktree: %s", r)
	}
	if st := e.git(t, e.work, "status", "--porcelain", "--untracked-files=all"); st != "" {
		t.Fatalf("the main checkout is not clean: %q", st)
	}
}

// TestForkBadInput: each refused fork is a clear error that leaves
// nothing behind: no worktree, branch, record or log.
func TestForkBadInput(t *testing.T) {
	e := newEnv(t)
	e.gitRepo(t)
	e.ok("daemon", "start")
	talked := e.ok("open", filepath.Join(e.work, "sub"), "--worktree", "--id", "talked")
	e.ok("run", talked, "say exactly: hi")
	silent := e.ok("open", e.work, "--id", "silent")
	cases := []struct {
		name string
		code int
		args []string
		want string
	}{
		{"an unknown agent", 1, []string{"open", "--fork", "nosuch"}, `no agent "nosuch" to fork`},
		{"an unknown agent, with worktree", 1, []string{"open", "--fork", "nosuch", "--worktree"}, `no agent "nosuch" to fork`},
		{"an agent that never ran a turn", 1, []string{"open", "--fork", silent}, "has no conversation to fork"},
		{"an agent that never ran a turn, with worktree", 1, []string{"open", "--fork", silent, "--worktree"}, "has no conversation to fork"},
		{"fork and resume", 2, []string{"open", "--fork", talked, "--resume", "--id", "x"}, "--fork and --resume contradict each other"},
		{"its own id", 1, []string{"open", "--fork", talked, "--id", talked}, "a fork gets an id of its own"},
		{"a base that does not resolve", 1, []string{"open", "--fork", talked, "--worktree", "--base", "no-such-ref"}, `"no-such-ref" does not name a commit`},
	}
	e.checkForkLeftovers(t, "the agents alone", []string{"kaimon/talked", "main"}, 2)
	for _, c := range cases {
		r := e.kaimon(c.args...)
		if r.code != c.code || !strings.Contains(r.stderr, c.want) {
			t.Errorf("%s: want exit %d and %q; got %s", c.name, c.code, c.want, r)
			continue
		}
		e.checkForkLeftovers(t, c.name, []string{"kaimon/talked", "main"}, 2)
	}
}

// checkForkLeftovers fails unless the repository has exactly branches
// (sorted), one worktree per branch, kaimon's worktree dir and cache hold only the
// agents kaimon lists, and it lists n.
func (e *kenv) checkForkLeftovers(t *testing.T, name string, branches []string, n int) {
	t.Helper()
	if b := e.branches(t); !slices.Equal(b, branches) {
		t.Errorf("%s: branches %v, want %v", name, b, branches)
	}
	if w := e.worktrees(t); len(w) != len(branches) {
		t.Errorf("%s: worktrees %v", name, w)
	}
	var l verbs.ListResult
	e.okJSON(&l, "list")
	if len(l.Agents) != n {
		t.Errorf("%s: %d agents listed, want %d: %+v", name, len(l.Agents), n, l.Agents)
	}
	known := map[string]bool{}
	for _, a := range l.Agents {
		known[a.AgentID] = true
	}
	ents, _ := os.ReadDir(filepath.Join(e.home, "worktrees"))
	for _, ent := range ents {
		if !known[ent.Name()] {
			t.Errorf("%s: left the worktree %s", name, ent.Name())
		}
	}
	ents, _ = os.ReadDir(filepath.Join(e.home, "cache", "agents"))
	for _, ent := range ents {
		n := ent.Name()
		id, _, ok := config.AgentFileOf(n)
		if n != "pids.json" && n != "agentd.log" && (!ok || !known[id]) {
			t.Errorf("%s: left %s in the cache", name, n)
		}
	}
}

// TestForkACP: opencode declares session/fork: its fork's first request
// carries the forked conversation, and the forked agent's next one does
// not carry the fork's. gemini-cli declares none: the fork is refused,
// naming it, once its program answered initialize, and leaves nothing.
func TestForkACP(t *testing.T) {
	e := newACPEnv(t, "opencode", "gemini")
	parent := e.ok("open", "--model", "acp:opencode:fake/fake-model", e.work)
	e.ok("run", parent, "hello there")
	fork := e.ok("open", "--fork", parent)
	e.ok("run", fork, "in the fork")
	if req := e.lastRequest(t, "in the fork"); !hasLine(req.History, "user: hello there") || !hasLine(req.History, "assistant: Hello from fakeopenai") {
		t.Fatalf("the fork's first request: %q", req.History)
	}
	e.ok("run", parent, "in the parent")
	if req := e.lastRequest(t, "in the parent"); !hasLine(req.History, "user: hello there") || hasLine(req.History, "user: in the fork") {
		t.Fatalf("the parent's next request: %q", req.History)
	}
	if ps, fs := e.status(t, parent), e.status(t, fork); fs.SessionID == "" || fs.SessionID == ps.SessionID || fs.Model != ps.Model {
		t.Fatalf("fork %+v\nof %+v", fs, ps)
	}

	g := e.ok("open", "--model", "acp:gemini:gemini-2.5-pro", e.work)
	e.ok("run", g, "hello there")
	e.ok("close", g)
	e.fails(1, "acp:gemini does not declare session/fork; it cannot fork a conversation", "open", "--fork", g)
	var l verbs.ListResult
	e.okJSON(&l, "list")
	if len(l.Agents) != 3 {
		t.Fatalf("a refused fork left an agent: %+v", l.Agents)
	}
	ents, _ := os.ReadDir(filepath.Join(e.home, "cache", "agents"))
	for _, ent := range ents {
		id, _, ok := config.AgentFileOf(ent.Name())
		if n := ent.Name(); ok && id != parent && id != fork && id != g && n != "agentd.log" && n != "pids.json" {
			t.Errorf("a refused fork left %s in the cache", ent.Name())
		}
	}
}

// TestForkReplay: a fork of a replay agent replays on from the recorded
// turn the forked agent is at, each then on its own; the daemon refuses
// fork with resume (an MCP or API caller has no CLI to stop it first).
func TestForkReplay(t *testing.T) {
	e := newEnv(t)
	parent := e.ok("open", e.work, "--model", "replay:"+exampleLog()+"?speed=0")
	first := e.ok("run", parent, "hi")
	fork := e.ok("open", "--fork", parent)
	if st := e.status(t, fork); st.SessionID != "replay@1" {
		t.Fatalf("the fork of an agent one turn in: %+v", st)
	}
	forked := e.ok("run", fork, "please use a tool")
	if forked == first {
		t.Fatalf("the fork replayed recorded turn 1 again: %q", forked)
	}
	if got := e.ok("run", parent, "please use a tool"); got != forked {
		t.Fatalf("parent's turn 2 %q, the fork's %q", got, forked)
	}
	e.ok("close", parent)
	r := e.kaimon("open", "--fork", parent, "--id", fork+"x", "--json")
	if r.code != 0 {
		t.Fatalf("fork of the dead replay agent: %s", r)
	}
	// The daemon's own check, past the CLI's.
	hc := http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", filepath.Join(e.home, "sock", "agentd.sock"))
	}}}
	resp, err := hc.Post("http://k/v1/agent_open", "application/json", strings.NewReader(`{"id":"`+parent+`","resume":true,"fork":"`+fork+`"}`))
	if err != nil {
		t.Fatal(err)
	}
	out, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(out), "fork and resume contradict each other") {
		t.Fatalf("agent_open with fork and resume: %s %v", out, err)
	}
}

// TestForkRightAfterTurn: a fork opened at once after the forked agent's
// turn ended, before the claude CLI has written that turn to its
// transcript (it writes it a moment after its result line), waits for it
// and carries the whole conversation. Repeated with fresh agents, whose
// first turn's transcript does not exist yet when its result line comes:
// each try is a race the fork must win every time. Then a later turn,
// forked into another cwd (kaimon copies the transcript there); and a
// fork and a resume of an agent closed right after its turn, which need
// no wait (the CLI writes all it queued as it exits, before the agent is
// dead), and have the turn too.
func TestForkRightAfterTurn(t *testing.T) {
	e := newEnv(t)
	e.ok("daemon", "start")
	other := filepath.Join(e.home, "other")
	if err := os.MkdirAll(other, 0o755); err != nil {
		t.Fatal(err)
	}
	var parent, said string
	turn := func(text string) {
		t.Helper()
		said = text
		if out := e.ok("run", parent, "say exactly: "+said); out != said {
			t.Fatalf("%s's turn = %q, want %q", parent, out, said)
		}
	}
	// forked opens a fork of parent, with dir if given, and checks that
	// its first turn carries parent's last one.
	forked := func(what string, dir ...string) {
		t.Helper()
		r := e.kaimon(append([]string{"open", "--fork", parent}, dir...)...)
		if r.code != 0 {
			t.Fatalf("%s: open --fork %s right after its turn: %s", what, parent, r)
		}
		fork := strings.TrimSpace(r.stdout)
		mine := "say exactly: " + what
		e.ok("run", fork, mine)
		if req := requestFor(t, e.api, mine); !hasLine(req.History, "user: say exactly: "+said) || !hasLine(req.History, "assistant: "+said) {
			t.Fatalf("%s: the fork lacks %s's last turn %q: %q", what, parent, said, req.History)
		}
		e.ok("close", fork)
	}
	const tries = 6
	for i := range tries {
		if parent != "" {
			e.ok("close", parent)
		}
		parent = e.ok("open", e.work)
		turn(fmt.Sprintf("parent %d", i))
		forked(fmt.Sprintf("fork %d", i))
	}
	turn("parent again")
	forked("fork elsewhere", other)

	turn("parent last")
	e.ok("close", parent)
	forked("fork of the closed agent")
	e.ok("open", "--id", parent, "--resume")
	e.ok("run", parent, "say exactly: resumed")
	if req := requestFor(t, e.api, "say exactly: resumed"); !hasLine(req.History, "assistant: "+said) {
		t.Fatalf("the resume of an agent closed right after its turn: %q", req.History)
	}
}
