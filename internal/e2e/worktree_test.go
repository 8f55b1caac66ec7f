package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/kaimon/kaimon/internal/verbs"
)

// gitRepo makes e.work a git repository with one commit: README at the
// top and sub/a.txt, so that an agent opened in sub works in the same
// subdirectory of its worktree.
func (e *kenv) gitRepo(t testing.TB) {
	t.Helper()
	e.git(t, e.work, "init", "--quiet", "-b", "main")
	for name, text := range map[string]string{"README": "hello\n", "sub/a.txt": "a\n"} {
		p := filepath.Join(e.work, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	e.git(t, e.work, "add", ".")
	e.git(t, e.work, "commit", "--quiet", "-m", "first")
}

// git runs the real git in dir as the tests' user, apart from any config
// of the machine's.
func (e *kenv) git(t testing.TB, dir string, args ...string) string {
	t.Helper()
	out, err := e.gitErr(dir, args...)
	if err != nil {
		t.Fatalf("git %s in %s: %v\n%s", strings.Join(args, " "), dir, err, out)
	}
	return strings.TrimSpace(out)
}

func (e *kenv) gitErr(dir string, args ...string) (string, error) {
	cmd := exec.Command("git", append([]string{"-c", "user.name=kaimon test", "-c", "user.email=test@kaimon.invalid"}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(slices.Clone(e.env), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL="+os.DevNull)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// branches lists the repository's branches, sorted.
func (e *kenv) branches(t *testing.T) []string {
	t.Helper()
	out := e.git(t, e.work, "for-each-ref", "--format=%(refname:short)", "refs/heads/")
	b := strings.Fields(out)
	slices.Sort(b)
	return b
}

// worktrees lists the repository's worktrees as git knows them, the main
// checkout first.
func (e *kenv) worktrees(t *testing.T) []string {
	t.Helper()
	var out []string
	for _, l := range strings.Split(e.git(t, e.work, "worktree", "list", "--porcelain"), "\n") {
		if p, ok := strings.CutPrefix(l, "worktree "); ok {
			out = append(out, p)
		}
	}
	return out
}

func (e *kenv) status(t *testing.T, id string) verbs.AgentStatus {
	t.Helper()
	var st verbs.AgentStatus
	e.okJSON(&st, "status", id)
	return st
}

// TestWorktreeManyAtOnce: eight agents opened at once with --worktree on
// one repository, each writing a file in its cwd with a real tool call,
// each in its own worktree on its own branch; the main checkout is
// untouched, and kaimon diff shows each agent's change and nothing else.
func TestWorktreeManyAtOnce(t *testing.T) {
	e := newEnv(t)
	e.gitRepo(t)
	e.ok("daemon", "start")
	sub := filepath.Join(e.work, "sub")
	const n = 8
	ids := make([]string, n)
	results := make([]result, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = e.kaimon("open", sub, "--worktree")
		}()
	}
	wg.Wait()
	for i, r := range results {
		if r.code != 0 {
			t.Fatalf("open %d of %d at once: %s", i+1, n, r)
		}
		ids[i] = strings.TrimSpace(r.stdout)
	}
	wtDir := filepath.Join(e.home, "worktrees")
	sts := make([]verbs.AgentStatus, n)
	for i, id := range ids {
		st := e.status(t, id)
		wt := filepath.Join(wtDir, id)
		if st.Worktree != wt || st.Branch != "kaimon/"+id || st.Cwd != filepath.Join(wt, "sub") || st.Repository != e.work || st.Dirty || len(st.BaseCommit) != 40 {
			t.Fatalf("agent %s: %+v", id, st)
		}
		sts[i] = st
	}
	wantBranches := []string{"main"}
	for _, id := range ids {
		wantBranches = append(wantBranches, "kaimon/"+id)
	}
	slices.Sort(wantBranches)
	if got := e.branches(t); !slices.Equal(got, wantBranches) {
		t.Fatalf("branches %v; want %v", got, wantBranches)
	}
	if got := e.worktrees(t); len(got) != n+1 {
		t.Fatalf("git worktree list: %v; want the checkout and %d", got, n)
	}

	// Each agent writes a file in its cwd, all at once.
	for i, id := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = e.kaimon("run", id, "please write a file "+filepath.Join(sts[i].Cwd, "agent-"+id+".txt"))
		}()
	}
	wg.Wait()
	for i, r := range results {
		if r.code != 0 {
			t.Fatalf("agent %s's tool turn: %s", ids[i], r)
		}
	}
	for i, id := range ids {
		for j, other := range ids {
			_, err := os.Stat(filepath.Join(sts[j].Cwd, "agent-"+id+".txt"))
			if (i == j) != (err == nil) {
				t.Errorf("agent %s's file in agent %s's worktree: %v", id, other, err)
			}
		}
		if _, err := os.Stat(filepath.Join(sub, "agent-"+id+".txt")); err == nil {
			t.Errorf("agent %s's file is in the main checkout", id)
		}
	}
	if st := e.git(t, e.work, "status", "--porcelain", "--untracked-files=all"); st != "" {
		t.Fatalf("the main checkout is not clean: %q", st)
	}

	for _, id := range ids {
		if st := e.status(t, id); !st.Dirty {
			t.Errorf("agent %s wrote a file and its status is not dirty: %+v", id, st)
		}
		diff := e.ok("diff", id)
		var files []string
		for _, l := range strings.Split(diff, "\n") {
			if f, ok := strings.CutPrefix(l, "+++ "); ok {
				files = append(files, f)
			}
		}
		if want := []string{"b/sub/agent-" + id + ".txt"}; !slices.Equal(files, want) || !strings.Contains(diff, "+written by fakeapi") {
			t.Errorf("kaimon diff %s changes %v; want %v:\n%s", id, files, want, diff)
		}
		if stat := e.ok("diff", id, "--stat"); !strings.Contains(stat, "sub/agent-"+id+".txt") || !strings.Contains(stat, "1 file changed") {
			t.Errorf("kaimon diff %s --stat:\n%s", id, stat)
		}
	}
	// The list shows each branch, marked dirty.
	list := e.ok("list")
	if !strings.Contains(strings.SplitN(list, "\n", 2)[0], "BRANCH") {
		t.Fatalf("list has no BRANCH column:\n%s", list)
	}
	for _, id := range ids {
		if !strings.Contains(list, "kaimon/"+id+"*") {
			t.Errorf("list does not show kaimon/%s* (dirty):\n%s", id, list)
		}
	}
	// diff reads the real index of none: git status still sees the
	// files untracked.
	if st := e.git(t, sts[0].Worktree, "status", "--porcelain"); !strings.HasPrefix(st, "??") {
		t.Fatalf("after kaimon diff, the worktree's status is %q; want its file untracked", st)
	}
}

// TestWorktreeResumeAfterKill: the daemon SIGKILLed, its agent's worktree
// removed and pruned while the branch lives; --resume brings the agent back
// in its worktree, added again on its branch, with its conversation.
func TestWorktreeResumeAfterKill(t *testing.T) {
	e := newEnv(t)
	e.gitRepo(t)
	e.ok("daemon", "start")
	id := e.ok("open", filepath.Join(e.work, "sub"), "--worktree", "--branch", "feature/x")
	if out := e.ok("run", id, "hello there"); !strings.HasPrefix(out, "Hello from fakeapi") {
		t.Fatalf("turn 1 = %q", out)
	}
	before := e.status(t, id)
	if before.Branch != "feature/x" || before.SessionID == "" {
		t.Fatalf("before the kill: %+v", before)
	}
	// A commit on the agent's branch, which the worktree must come back with.
	if err := os.WriteFile(filepath.Join(before.Cwd, "kept.txt"), []byte("kept\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	e.git(t, before.Worktree, "add", ".")
	e.git(t, before.Worktree, "commit", "--quiet", "-m", "the agent's work")
	e.killDaemon(t)

	e.ok("daemon", "start")
	st := e.status(t, id)
	if st.Status != "dead" || st.Reason != "daemon crashed" || st.Worktree != before.Worktree || st.Branch != "feature/x" || st.BaseCommit != before.BaseCommit {
		t.Fatalf("after the kill: %+v", st)
	}
	if err := os.RemoveAll(before.Worktree); err != nil {
		t.Fatal(err)
	}
	e.git(t, e.work, "worktree", "prune")
	if st := e.status(t, id); st.WorktreeError == "" {
		t.Fatalf("status of an agent whose worktree is gone says nothing of it: %+v", st)
	}

	if got := e.ok("open", "--id", id, "--resume"); got != id {
		t.Fatalf("open --resume printed %q", got)
	}
	st = e.status(t, id)
	if st.Status != "idle" || st.Cwd != before.Cwd || st.SessionID != before.SessionID || st.Worktree != before.Worktree || st.Dirty {
		t.Fatalf("resumed: %+v", st)
	}
	if b := e.git(t, st.Worktree, "rev-parse", "--abbrev-ref", "HEAD"); b != "feature/x" {
		t.Fatalf("the worktree came back on %s", b)
	}
	if _, err := os.Stat(filepath.Join(st.Cwd, "kept.txt")); err != nil {
		t.Fatalf("the worktree came back without the branch's commit: %v", err)
	}
	e.ok("run", id, "what came before")
	req := requestFor(t, e.api, "what came before")
	if !hasLine(req.History, "user: hello there") || !hasLine(req.History, "assistant: Hello from fakeapi") {
		t.Fatalf("the resumed turn's conversation: %q", req.History)
	}
	if d := e.ok("diff", id, "--stat"); !strings.Contains(d, "sub/kept.txt") {
		t.Fatalf("diff after resume: %q", d)
	}
	// Resume cannot move an agent to another branch or base.
	e.ok("close", id)
	e.fails(1, "without branch and base", "open", "--id", id, "--resume", "--worktree", "--branch", "other")
}

// TestWorktreeForget: forget removes a clean worktree and its merged
// branch; keeps a dirty one, with its agent, naming it; --force removes
// it; a branch with commits of its own is kept unless --delete-branch.
func TestWorktreeForget(t *testing.T) {
	e := newEnv(t)
	e.gitRepo(t)
	e.ok("daemon", "start")
	open := func() verbs.AgentStatus {
		t.Helper()
		return e.status(t, e.ok("open", e.work, "--worktree", "--model", "replay:"+exampleLog()))
	}
	gone := func(st verbs.AgentStatus, id string, branchGone bool) {
		t.Helper()
		if _, err := os.Stat(st.Worktree); !os.IsNotExist(err) {
			t.Errorf("agent %s's worktree %s is still there: %v", id, st.Worktree, err)
		}
		if slices.Contains(e.worktrees(t), st.Worktree) {
			t.Errorf("git still lists agent %s's worktree", id)
		}
		if got := slices.Contains(e.branches(t), st.Branch); got == branchGone {
			t.Errorf("agent %s's branch %s there: %v; want %v", id, st.Branch, got, !branchGone)
		}
		if r := e.kaimon("status", id); r.code == 0 {
			t.Errorf("agent %s still known after forget: %s", id, r)
		}
	}
	idOf := func(st verbs.AgentStatus) string { return filepath.Base(st.Worktree) }

	// Clean: the worktree and its branch (merged: no commit of its own) go.
	clean := open()
	e.ok("close", idOf(clean))
	if out := e.ok("forget", idOf(clean)); out != idOf(clean) {
		t.Fatalf("forget of a clean worktree printed %q", out)
	}
	gone(clean, idOf(clean), true)

	// Dirty: kept, with its agent, named; --force removes it.
	dirty := open()
	id := idOf(dirty)
	if err := os.WriteFile(filepath.Join(dirty.Worktree, "new.txt"), []byte("x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	e.ok("close", id)
	r := e.fails(1, "agent "+id+" is kept", "forget", id)
	if !strings.Contains(r.stderr, dirty.Worktree) || !strings.Contains(r.stderr, "--force") || r.stdout != "" {
		t.Fatalf("forget of a dirty worktree: %s", r)
	}
	if st := e.status(t, id); st.Status != "dead" || !st.Dirty {
		t.Fatalf("the kept agent: %+v", st)
	}
	if _, err := os.Stat(filepath.Join(dirty.Worktree, "new.txt")); err != nil {
		t.Fatalf("the kept worktree lost its file: %v", err)
	}
	r = e.kaimon("forget", id, "--json")
	if r.code != 1 || !strings.Contains(r.stdout, `"kept"`) {
		t.Fatalf("forget --json of a dirty worktree: %s", r)
	}
	if out := e.ok("forget", id, "--force"); out != id {
		t.Fatalf("forget --force printed %q", out)
	}
	gone(dirty, id, true)

	// A commit of its own: the worktree goes, the branch stays, said so.
	committed := open()
	id = idOf(committed)
	if err := os.WriteFile(filepath.Join(committed.Worktree, "c.txt"), []byte("c\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	e.git(t, committed.Worktree, "add", ".")
	e.git(t, committed.Worktree, "commit", "--quiet", "-m", "work")
	e.ok("close", id)
	r = e.kaimon("forget", id)
	if r.code != 0 || strings.TrimSpace(r.stdout) != id || !strings.Contains(r.stderr, "branch "+committed.Branch+" is kept") {
		t.Fatalf("forget of a worktree whose branch has a commit: %s", r)
	}
	gone(committed, id, false)

	// The same with --delete-branch: the branch goes too.
	committed = open()
	id = idOf(committed)
	if err := os.WriteFile(filepath.Join(committed.Worktree, "d.txt"), []byte("d\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	e.git(t, committed.Worktree, "add", ".")
	e.git(t, committed.Worktree, "commit", "--quiet", "-m", "work")
	e.ok("close", id)
	if out := e.ok("forget", id, "--delete-branch"); out != id {
		t.Fatalf("forget --delete-branch printed %q", out)
	}
	gone(committed, id, true)

	// A live agent working in a dead one's worktree (a fork without a
	// worktree of its own does): not even --force takes it away.
	host := open()
	id = idOf(host)
	guest := e.ok("open", host.Cwd, "--model", "replay:"+exampleLog())
	e.ok("close", id)
	e.fails(1, "agent "+guest+" works in its worktree "+host.Worktree, "forget", "--force", id)
	if _, err := os.Stat(host.Worktree); err != nil {
		t.Fatalf("the worktree a live agent works in was removed: %v", err)
	}
	e.ok("close", guest)
	if out := e.ok("forget", "--force", id); out != id {
		t.Fatalf("forget --force once the guest closed printed %q", out)
	}
	gone(host, id, true)
}

// TestWorktreeBadInput: each bad --worktree open is a clear error that
// leaves nothing behind: no worktree, branch, record or log.
func TestWorktreeBadInput(t *testing.T) {
	e := newEnv(t, "KAIMON_GEMINI_BIN", "/nonexistent/gemini")
	e.gitRepo(t)
	e.ok("daemon", "start")
	plain := filepath.Join(e.home, "plain")
	bare := filepath.Join(e.home, "bare.git")
	if err := os.MkdirAll(plain, 0o755); err != nil {
		t.Fatal(err)
	}
	e.git(t, e.home, "init", "--quiet", "--bare", bare)
	// The checkout's .git dir: in a repository, not in its work tree.
	gitDir := filepath.Join(e.work, ".git")
	// A directory git tracks nothing in: the worktree would have none.
	empty := filepath.Join(e.work, "empty")
	if err := os.MkdirAll(empty, 0o755); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"outside a repository", []string{"open", plain, "--worktree"}, "not inside a git repository"},
		{"a bare repository", []string{"open", bare, "--worktree"}, "bare repository"},
		{"inside .git", []string{"open", gitDir, "--worktree"}, "not inside a git repository's work tree"},
		{"a branch that exists", []string{"open", e.work, "--worktree", "--branch", "main"}, "branch main already exists"},
		{"a bad branch name", []string{"open", e.work, "--worktree", "--branch", "a..b"}, "not a valid branch name"},
		{"a branch name git would expand", []string{"open", e.work, "--worktree", "--branch", "@{-1}"}, "not a valid branch name"},
		{"a branch name like an option", []string{"open", e.work, "--worktree", "--branch=-x"}, "not a valid branch name"},
		{"a directory git tracks nothing in", []string{"open", empty, "--worktree"}, "holds no file git tracks"},
		{"a base that does not resolve", []string{"open", e.work, "--worktree", "--base", "no-such-ref"}, `"no-such-ref" does not name a commit`},
		{"branch without worktree", []string{"open", e.work, "--branch", "x"}, "give them with worktree"},
		// Refused by the backend after the worktree was made: it goes
		// (with an id, and at Start too: session's TestFailedOpenLeaves).
		// Here the real program lookup's message.
		{"a missing agent program", []string{"open", e.work, "--worktree", "--model", "acp:gemini"}, "KAIMON_GEMINI_BIN"},
	}
	wtDir := filepath.Join(e.home, "worktrees")
	cache := filepath.Join(e.home, "cache", "agents")
	for _, c := range cases {
		r := e.kaimon(c.args...)
		if r.code != 1 || !strings.Contains(r.stderr, c.want) {
			t.Errorf("%s: want exit 1 and %q; got %s", c.name, c.want, r)
			continue
		}
		if b := e.branches(t); !slices.Equal(b, []string{"main"}) {
			t.Errorf("%s: left branches %v", c.name, b)
		}
		if w := e.worktrees(t); len(w) != 1 {
			t.Errorf("%s: left worktrees %v", c.name, w)
		}
		if ents, _ := os.ReadDir(wtDir); len(ents) > 0 {
			t.Errorf("%s: left %s/%s", c.name, wtDir, ents[0].Name())
		}
		ents, _ := os.ReadDir(cache)
		for _, ent := range ents {
			if n := ent.Name(); n != "pids.json" && n != "agentd.log" {
				t.Errorf("%s: left %s in the cache", c.name, n)
			}
		}
		var l verbs.ListResult
		e.okJSON(&l, "list")
		if len(l.Agents) != 0 {
			t.Errorf("%s: left agents %+v", c.name, l.Agents)
		}
	}
	if st := e.git(t, e.work, "status", "--porcelain", "--untracked-files=all"); st != "" {
		t.Fatalf("the main checkout is not clean: %q", st)
	}
	// diff of an agent without a worktree says what to do.
	id := e.ok("open", e.work, "--model", "replay:"+exampleLog())
	e.fails(1, "has no worktree", "diff", id)
}
