package session

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kaimon/kaimon/internal/apitype"
	"github.com/kaimon/kaimon/internal/backend"
	"github.com/kaimon/kaimon/internal/config"
	"github.com/kaimon/kaimon/internal/verbs"
)

// TestFailedOpenLeaves: for each kind of open (fresh, reopen, resume,
// fork), with and without a worktree, an open whose backend is refused
// at New or whose Start fails leaves exactly what the README promises:
// before start, nothing of its making; at start, a fresh or reopened
// agent's dead slot (with its record, log and worktree, so that `kaimon
// status` says why), a resumed agent as it was, and a fork nothing. The
// agent forked from is untouched either way. Real git.
func TestFailedOpenLeaves(t *testing.T) {
	t.Setenv("GIT_CONFIG_GLOBAL", os.DevNull)
	t.Setenv("GIT_CONFIG_NOSYSTEM", "1")
	dir := t.TempDir()
	repo := filepath.Join(dir, "repo")
	git := func(dir string, args ...string) (string, error) {
		cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@kaimon.invalid"}, args...)...)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		return strings.TrimSpace(string(out)), err
	}
	mustGit := func(args ...string) {
		t.Helper()
		if out, err := git(repo, args...); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	if err := os.MkdirAll(repo, 0o755); err != nil {
		t.Fatal(err)
	}
	mustGit("init", "--quiet", "-b", "main")
	if err := os.WriteFile(filepath.Join(repo, "README"), []byte("hi\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	mustGit("add", ".")
	mustGit("commit", "--quiet", "-m", "first")
	hasBranch := func(b string) bool {
		_, err := git(repo, "rev-parse", "--verify", "--quiet", "refs/heads/"+b)
		return err == nil
	}

	paths := config.Paths{CacheDir: dir + "/cache", SockDir: dir + "/sock", ConfigFile: dir + "/c.json", WorktreeDir: dir + "/worktrees"}
	m, err := New(paths, config.Defaults(), nil, func(o backend.Options, sink backend.Sink) (backend.Backend, error) {
		switch o.Model {
		case "refuse-new":
			return nil, verbs.Errorf(verbs.CodeUnavailable, "refused at new")
		case "refuse-start":
			return &scripted{sink: sink, startErr: errors.New("refused at start")}, nil
		}
		return &scripted{sink: sink}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Shutdown)

	// What a row expects of the id it opened, afterwards.
	type left int
	const (
		nothing left = iota // no slot, no record, no log
		newDead             // the attempt's own dead agent: reason "failed to start"
		oldDead             // the dead agent that was there, its record as it was
	)
	type want struct {
		slot     left
		worktree bool // the worktree directory and its branch
	}
	cases := []struct {
		kind     openKind
		worktree bool
		atNew    want // the backend refused at New
		atStart  want // its Start failed
	}{
		{openFresh, false, want{nothing, false}, want{newDead, false}},
		{openFresh, true, want{nothing, false}, want{newDead, true}},
		{openReopen, false, want{oldDead, false}, want{newDead, false}},
		{openReopen, true, want{oldDead, false}, want{newDead, true}},
		{openResume, false, want{oldDead, false}, want{oldDead, false}},
		// A resume's worktree is the dead agent's: it stays.
		{openResume, true, want{oldDead, true}, want{oldDead, true}},
		{openFork, false, want{nothing, false}, want{nothing, false}},
		{openFork, true, want{nothing, false}, want{nothing, false}},
	}
	n := 0
	for _, c := range cases {
		for _, stage := range []string{"new", "start"} {
			w := c.atNew
			if stage == "start" {
				w = c.atStart
			}
			n++
			id := fmt.Sprintf("a%d", n)
			name := fmt.Sprintf("%s/worktree=%v/%s", c.kind, c.worktree, stage)
			t.Run(name, func(t *testing.T) {
				cwd := t.TempDir()
				if c.worktree {
					cwd = repo
				}
				args := verbs.OpenArgs{ID: id, Cwd: cwd, Model: "refuse-" + stage}
				if c.worktree {
					args.Worktree, args.Branch = true, "b-"+id
				}
				var parent string
				var parentRec []byte
				switch c.kind {
				case openReopen, openResume:
					// The dead agent that holds the id (with the
					// worktree a resume continues in).
					o := verbs.OpenArgs{ID: id, Cwd: cwd}
					if c.kind == openResume && c.worktree {
						o.Worktree, o.Branch = true, "b-"+id
						args.Worktree, args.Branch, args.Cwd = false, "", ""
					}
					if _, err := m.Open(bg, decoded(&o)); err != nil {
						t.Fatal(err)
					}
					if _, err := m.Close(bg, &verbs.CloseArgs{AgentID: id}); err != nil {
						t.Fatal(err)
					}
					if c.kind == openResume {
						// Its cwd is the record's.
						args.Resume, args.Cwd = true, ""
					}
				case openFork:
					parent = "parent-" + id // not id + …: id would name it, as its prefix
					o := verbs.OpenArgs{ID: parent, Cwd: cwd}
					if c.worktree {
						o.Worktree, o.Branch = true, "b-"+parent
					}
					if _, err := m.Open(bg, decoded(&o)); err != nil {
						t.Fatal(err)
					}
					args.Fork, args.Cwd = parent, ""
					if parentRec, err = os.ReadFile(paths.Agent(parent).Record); err != nil {
						t.Fatal(err)
					}
				}
				files := paths.Agent(id)
				before, _ := os.ReadFile(files.Record)

				_, err := m.Open(bg, decoded(&args))
				wantErr := "refused at " + stage
				if err == nil || !strings.Contains(err.Error(), wantErr) {
					t.Fatalf("open: %v, want an error saying %q", err, wantErr)
				}

				st, serr := m.Status(bg, &verbs.StatusArgs{AgentID: id})
				rec, rerr := os.ReadFile(files.Record)
				switch w.slot {
				case nothing:
					if serr == nil {
						t.Errorf("slot: %s is %s (%s), want no such agent", id, st.Status, st.Reason)
					}
					for _, f := range []string{files.Record, files.Events, files.Log, files.Opening} {
						if exists(f) {
							t.Errorf("%s is left behind", f)
						}
					}
				case newDead:
					if serr != nil || st.Status != apitype.Dead || !strings.HasPrefix(st.Reason, ReasonStartFailed) {
						t.Errorf("slot: %+v, %v; want dead, %q", st, serr, ReasonStartFailed)
					}
					if rerr != nil || !bytes.Contains(rec, []byte(ReasonStartFailed)) {
						t.Errorf("record: %v, %s; want one saying %q", rerr, rec, ReasonStartFailed)
					}
					if !exists(files.Events) {
						t.Errorf("no event log %s: status cannot say why", files.Events)
					}
				case oldDead:
					if serr != nil || st.Status != apitype.Dead || st.Reason != ReasonClosed {
						t.Errorf("slot: %+v, %v; want the old agent, dead, %q", st, serr, ReasonClosed)
					}
					if rerr != nil || !bytes.Equal(rec, before) {
						t.Errorf("record changed:\n%s\nwas\n%s (%v)", rec, before, rerr)
					}
				}
				if got := exists(paths.Worktree(id)); got != w.worktree {
					t.Errorf("worktree %s exists: %v, want %v", paths.Worktree(id), got, w.worktree)
				}
				if c.worktree {
					if got := hasBranch("b-" + id); got != w.worktree {
						t.Errorf("branch b-%s exists: %v, want %v", id, got, w.worktree)
					}
				}
				if exists(files.Opening) {
					t.Errorf("the opening note %s is left", files.Opening)
				}
				if parent != "" {
					ps, err := m.Status(bg, &verbs.StatusArgs{AgentID: parent})
					if err != nil || ps.Status != apitype.Idle {
						t.Errorf("parent: %+v, %v; want idle", ps, err)
					}
					if rec, _ := os.ReadFile(paths.Agent(parent).Record); !bytes.Equal(rec, parentRec) {
						t.Errorf("parent's record changed:\n%s\nwas\n%s", rec, parentRec)
					}
					if c.worktree && (!exists(paths.Worktree(parent)) || !hasBranch("b-"+parent)) {
						t.Errorf("parent's worktree or branch is gone")
					}
				}
			})
		}
	}
	// Every kind the table knows has its rows here.
	for k := range onStartFailure {
		found := false
		for _, c := range cases {
			found = found || c.kind == k
		}
		if !found {
			t.Errorf("no row for kind %s", k)
		}
	}
}
