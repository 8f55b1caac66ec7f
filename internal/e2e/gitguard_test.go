package e2e

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// gitTraps arms dir's repository with config that names programs git
// runs, each a trap that creates a file of its name in the returned
// markers dir when run: core.fsmonitor, a clean and a smudge filter and a
// textconv for *.txt (by a committed .gitattributes), and post-checkout
// and reference-transaction hooks; each NAME prefixed with prefix.
func (e *kenv) gitTraps(t *testing.T, dir, prefix string) (markers string) {
	t.Helper()
	markers = filepath.Join(e.home, "markers")
	trap := filepath.Join(e.home, "trap")
	if err := os.MkdirAll(markers, 0o755); err != nil {
		t.Fatal(err)
	}
	// trap NAME [FILE]: marks NAME, then passes FILE (a textconv's) or
	// stdin (a filter's) through; as a file monitor it fails, which
	// makes git look at every file itself.
	script := "#!/bin/sh\nname=$1; shift\ntouch \"" + markers + "/$name\"\n" +
		"case $name in *fsmonitor*) exit 1;; esac\n" +
		"if [ $# -gt 0 ]; then exec cat \"$1\"; fi\nexec cat\n"
	if err := os.WriteFile(trap, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, ".gitattributes"), []byte("*.txt filter=trap diff=trap\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	e.git(t, dir, "add", ".gitattributes")
	e.git(t, dir, "commit", "--quiet", "-m", "attributes")
	for k, v := range map[string]string{
		"core.fsmonitor":     trap + " " + prefix + "fsmonitor",
		"filter.trap.clean":  trap + " " + prefix + "clean",
		"filter.trap.smudge": trap + " " + prefix + "smudge",
		"diff.trap.textconv": trap + " " + prefix + "textconv",
	} {
		e.git(t, dir, "config", k, v)
	}
	hooks := e.git(t, dir, "rev-parse", "--path-format=absolute", "--git-path", "hooks")
	for _, hook := range []string{"post-checkout", "reference-transaction"} {
		body := "#!/bin/sh\ntouch \"" + markers + "/" + prefix + hook + "\"\ncat >/dev/null\n"
		if err := os.WriteFile(filepath.Join(hooks, hook), []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return markers
}

// sprung lists the traps that ran, and clears them.
func sprung(t *testing.T, markers string) []string {
	t.Helper()
	ents, err := os.ReadDir(markers)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, ent := range ents {
		names = append(names, ent.Name())
		_ = os.Remove(filepath.Join(markers, ent.Name()))
	}
	return names
}

// TestWorktreeRunsNoRepositoryCode: the daemon's git runs for open
// --worktree, list, status, diff and forget run none of the programs a
// repository's config names (gitTraps), nor those of a gitdir planted
// by a .git file written into an agent's worktree, as an agent's file
// write could before the file tools refused it; the same git runs made
// by hand run each (the traps are armed).
func TestWorktreeRunsNoRepositoryCode(t *testing.T) {
	e := newEnv(t)
	e.gitRepo(t)
	markers := e.gitTraps(t, e.work, "")
	e.ok("daemon", "start")
	replay := "replay:" + exampleLog()
	id := e.ok("open", filepath.Join(e.work, "sub"), "--worktree", "--model", replay)
	st := e.status(t, id)
	if got := sprung(t, markers); len(got) > 0 {
		t.Fatalf("open --worktree ran %v", got)
	}
	// Changes for status and diff to read: a tracked file and a new one.
	for name, text := range map[string]string{"sub/a.txt": "changed\n", "new.txt": "new\n"} {
		if err := os.WriteFile(filepath.Join(st.Worktree, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	reads := func(when string) {
		t.Helper()
		e.ok("list")
		e.ok("status", id)
		// With a planted gitdir the base may not resolve: only what
		// ran counts here.
		e.kaimon("diff", id)
		e.kaimon("diff", id, "--stat")
		if got := sprung(t, markers); len(got) > 0 {
			t.Fatalf("%s, list, status and diff ran %v", when, got)
		}
	}
	reads("in the agent's worktree")
	if d := e.ok("diff", id); !strings.Contains(d, "+changed") || !strings.Contains(d, "+new") {
		t.Fatalf("kaimon diff:\n%s", d)
	}

	// A gitdir planted where the worktree's .git points, with a file
	// monitor, a filter and hooks of its own.
	planted := filepath.Join(e.home, "planted")
	e.git(t, e.home, "init", "--quiet", "-b", "main", planted)
	if err := os.WriteFile(filepath.Join(planted, "new.txt"), []byte("planted\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	e.git(t, planted, "add", ".")
	e.git(t, planted, "commit", "--quiet", "-m", "planted")
	e.gitTraps(t, planted, "planted-")
	_ = sprung(t, markers)
	dotGit := filepath.Join(st.Worktree, ".git")
	real, err := os.ReadFile(dotGit)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dotGit, []byte("gitdir: "+filepath.Join(planted, ".git")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	reads("with a planted gitdir")
	// An agent opened with a worktree of the worktree: its repository
	// is the planted one.
	other := e.ok("open", st.Worktree, "--worktree", "--model", replay)
	if got := sprung(t, markers); len(got) > 0 {
		t.Fatalf("open --worktree in a worktree whose .git was planted ran %v", got)
	}
	// The traps are armed: plain git runs the planted gitdir's...
	e.git(t, st.Worktree, "diff", "HEAD")
	if got := sprung(t, markers); !slices.Contains(got, "planted-fsmonitor") || !slices.Contains(got, "planted-clean") {
		t.Fatalf("git diff by hand with the planted gitdir ran %v: the traps are not armed", got)
	}
	if err := os.WriteFile(dotGit, real, 0o644); err != nil {
		t.Fatal(err)
	}

	// forget looks at a dirty worktree and keeps it; --force removes it.
	e.ok("close", id)
	e.ok("close", other)
	e.fails(1, "agent "+id+" is kept", "forget", id)
	e.ok("forget", "--force", id, other)
	if got := sprung(t, markers); len(got) > 0 {
		t.Fatalf("forget ran %v", got)
	}
	if _, err := os.Stat(st.Worktree); !os.IsNotExist(err) {
		t.Fatalf("forget --force left %s: %v", st.Worktree, err)
	}

	// ... and the repository's own, for a worktree added and diffed by
	// hand.
	byHand := filepath.Join(e.home, "by-hand")
	e.git(t, e.work, "worktree", "add", "--quiet", "-b", "by-hand", byHand)
	if err := os.WriteFile(filepath.Join(byHand, "sub", "a.txt"), []byte("changed\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	e.git(t, byHand, "diff", "HEAD")
	got := sprung(t, markers)
	for _, want := range []string{"fsmonitor", "clean", "smudge", "textconv", "post-checkout", "reference-transaction"} {
		if !slices.Contains(got, want) {
			t.Errorf("git by hand did not run %s (ran %v): the trap is not armed", want, got)
		}
	}
}
