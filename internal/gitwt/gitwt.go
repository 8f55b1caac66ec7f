// Package gitwt gives an agent a git worktree of its own: it finds the
// repository a directory is in, adds a worktree on a new branch, reports
// whether it has changes and what they are against the base, and removes
// it again. It runs the real git binary, each run in a process group of its
// own (internal/proc) under a timeout, and serializes the runs that change
// a repository per repository (Lock): git does not wait for a lock another
// git holds (index.lock, packed-refs.lock, config.lock) but fails at once
// ("Unable to create '….lock': File exists"), and eight bare `git worktree
// add` at once on one repository race in git itself: one failed with
// "fatal: failed to read .git/worktrees/1-6/commondir" (git 2.39, in
// BenchmarkWorktreeOpen). A branch deleted or the worktrees pruned by a
// forget at the same moment as an add meet the shared locks too.
package gitwt

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/kaimon/kaimon/internal/proc"
)

// Timeout bounds one git run: a checkout of a large repository takes
// seconds, and a git waiting on a lock held by something else must not
// hold an agent_open forever.
var Timeout = 2 * time.Minute

// stopGrace is how long a git run past its timeout gets after SIGTERM.
const stopGrace = 2 * time.Second

// Info is what the daemon records of an agent's worktree: the repository
// it was made from, where it is, its branch, and the base it started from
// (the ref as given, and the commit it named then).
type Info struct {
	// Repository is the top of the checkout agent_open's directory was in.
	Repository string `json:"repository"`
	// CommonDir is the repository's git dir shared by its worktrees
	// (<repo>/.git): what Lock serializes on.
	CommonDir string `json:"common_dir"`
	Worktree  string `json:"worktree"`
	// Subdir is the agent's cwd relative to Worktree ("" for its top), as
	// the directory given was relative to Repository.
	Subdir     string `json:"subdir,omitempty"`
	Branch     string `json:"branch"`
	BaseRef    string `json:"base_ref"`
	BaseCommit string `json:"base_commit"`
}

// Cwd is the agent's working directory inside the worktree.
func (i *Info) Cwd() string { return filepath.Join(i.Worktree, i.Subdir) }

// Repo is a non-bare repository found from a directory inside it.
type Repo struct {
	Top       string // the checkout's top directory
	CommonDir string // absolute
	Prefix    string // the directory's path below Top, "" at the top
}

// locks holds a mutex per repository, by its common dir.
var locks sync.Map // string → *sync.Mutex

// Lock serializes the git runs that change the repository whose common
// dir is commonDir (adding and removing worktrees, deleting branches),
// and returns the unlock.
func Lock(commonDir string) func() {
	mu, _ := locks.LoadOrStore(commonDir, new(sync.Mutex))
	mu.(*sync.Mutex).Lock()
	return mu.(*sync.Mutex).Unlock
}

// Error is a git run that failed: the command and what git said.
type Error struct {
	Args   []string
	Stderr string
	Err    error
}

func (e *Error) Error() string {
	msg := strings.TrimSpace(e.Stderr)
	if msg == "" {
		msg = e.Err.Error()
	}
	return fmt.Sprintf("git %s: %s", strings.Join(e.Args, " "), msg)
}

func (e *Error) Unwrap() error { return e.Err }

// gitEnv is the daemon's environment without the variables that would
// point git at another repository, index or work tree than the one asked
// about (a daemon started from a git hook inherits GIT_DIR).
func gitEnv(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case "GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_COMMON_DIR", "GIT_OBJECT_DIRECTORY", "GIT_PREFIX":
			continue
		}
		env = append(env, kv)
	}
	// Never ask on a terminal the daemon does not have.
	env = append(env, "GIT_TERMINAL_PROMPT=0")
	return append(env, extra...)
}

// command is git with args in dir, in the environment gitEnv makes of
// env: every run of git here is made by it, Git's and gitTo's alike.
func command(dir string, env []string, args ...string) *exec.Cmd {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = gitEnv(env...)
	return cmd
}

// Git runs git with args in dir and returns its stdout. A run that fails
// is an *Error with git's stderr; one past Timeout (or ctx) is stopped,
// its whole group.
func Git(ctx context.Context, dir string, env []string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, Timeout)
	defer cancel()
	cmd := command(dir, env, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	// A hook that leaves a child holding the pipes must not hold the call.
	cmd.WaitDelay = stopGrace
	child, err := proc.Start(cmd)
	if err != nil {
		return "", &Error{Args: args, Err: fmt.Errorf("starting git: %w", err)}
	}
	timedOut := false
	select {
	case <-child.Done():
	case <-ctx.Done():
		timedOut = true
	}
	child.Stop(stopGrace) // the whole group, also after a clean exit
	if timedOut {
		return out.String(), &Error{Args: args, Stderr: errb.String(), Err: fmt.Errorf("git did not end within %s: %w", Timeout, ctx.Err())}
	}
	if err := child.Err(); err != nil {
		return out.String(), &Error{Args: args, Stderr: errb.String(), Err: err}
	}
	return out.String(), nil
}

// Find finds the non-bare repository dir is in. Outside any repository,
// in a bare one, or inside a .git dir it says so.
func Find(ctx context.Context, dir string) (*Repo, error) {
	out, err := Git(ctx, dir, nil, "rev-parse", "--is-bare-repository", "--is-inside-work-tree")
	if err != nil {
		var ge *Error
		if errors.As(err, &ge) && strings.Contains(ge.Stderr, "not a git repository") {
			return nil, fmt.Errorf("%s is not inside a git repository", dir)
		}
		return nil, err
	}
	f := strings.Fields(out)
	if len(f) >= 1 && f[0] == "true" {
		return nil, fmt.Errorf("%s is in a bare repository, which has no checkout to branch a worktree from", dir)
	}
	if len(f) < 2 || f[1] != "true" {
		return nil, fmt.Errorf("%s is not inside a git repository's work tree", dir)
	}
	out, err = Git(ctx, dir, nil, "rev-parse", "--show-toplevel", "--path-format=absolute", "--git-common-dir", "--show-prefix")
	if err != nil {
		return nil, err
	}
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if len(lines) < 2 {
		return nil, fmt.Errorf("git rev-parse in %s: unexpected answer %q", dir, out)
	}
	r := &Repo{Top: lines[0], CommonDir: lines[1]}
	if len(lines) > 2 {
		r.Prefix = strings.TrimSuffix(lines[2], "/")
	}
	return r, nil
}

// ResolveCommit is the commit ref names in r, or an error saying it does
// not resolve.
func (r *Repo) ResolveCommit(ctx context.Context, ref string) (string, error) {
	out, err := Git(ctx, r.Top, nil, "rev-parse", "--verify", "--quiet", "--end-of-options", ref+"^{commit}")
	if err != nil {
		return "", fmt.Errorf("%q does not name a commit in %s", ref, r.Top)
	}
	return strings.TrimSpace(out), nil
}

// CurrentBranch is the branch HEAD is on, or "" when HEAD is detached.
func (r *Repo) CurrentBranch(ctx context.Context) string {
	out, err := Git(ctx, r.Top, nil, "symbolic-ref", "--quiet", "--short", "HEAD")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(out)
}

// CheckNewBranch says whether name can be a new branch in r: a valid
// branch name that no branch has yet.
func (r *Repo) CheckNewBranch(ctx context.Context, name string) error {
	// refs/heads/NAME, not --branch NAME: --branch expands @{-1} to the
	// branch checked out before, whose name would then be deleted with
	// a failed add's.
	if _, err := Git(ctx, r.Top, nil, "check-ref-format", "refs/heads/"+name); err != nil || strings.HasPrefix(name, "-") {
		return fmt.Errorf("%q is not a valid branch name", name)
	}
	if branchExists(ctx, r.Top, name) {
		return fmt.Errorf("branch %s already exists in %s: name another with --branch, or delete it (git branch -D %s)", name, r.Top, name)
	}
	return nil
}

func branchExists(ctx context.Context, dir, name string) bool {
	_, err := Git(ctx, dir, nil, "show-ref", "--verify", "--quiet", "refs/heads/"+name)
	return err == nil
}

// Add adds a worktree at path on a new branch from commit base. The
// caller holds Lock(r.CommonDir). A worktree that git half made is removed.
func (r *Repo) Add(ctx context.Context, path, branch, base string) error {
	if _, err := os.Lstat(path); err == nil {
		return fmt.Errorf("%s already exists: a worktree of an earlier agent of this id? forget it first (kaimon forget), or pick another id", path)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	if _, err := Git(ctx, r.Top, nil, "worktree", "add", "--quiet", "-b", branch, "--end-of-options", path, base); err != nil {
		_ = r.Discard(context.WithoutCancel(ctx), path, branch, base)
		return err
	}
	return nil
}

// Discard undoes an Add whose open then failed: the worktree at path goes
// (also with changes in it), and branch too if it is still at base, where
// the add made it: a branch of the same name that is anything else (made
// by someone else meanwhile, or with commits) is not the add's to delete.
// The caller holds Lock(r.CommonDir).
func (r *Repo) Discard(ctx context.Context, path, branch, base string) error {
	err := r.Remove(ctx, path, "", true)
	_, _ = Git(ctx, r.Top, nil, "update-ref", "-d", "refs/heads/"+branch, base)
	return err
}

// Readd brings back the worktree of branch at path, after the directory
// was removed (and git's note of it pruned) while the branch was kept.
// The caller holds Lock(r.CommonDir).
func (r *Repo) Readd(ctx context.Context, path, branch string) error {
	if !branchExists(ctx, r.Top, branch) {
		return fmt.Errorf("the worktree %s is gone, and so is its branch %s: there is nothing to resume in", path, branch)
	}
	_, _ = Git(ctx, r.Top, nil, "worktree", "prune")
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	_, err := Git(ctx, r.Top, nil, "worktree", "add", "--quiet", "--end-of-options", path, branch)
	return err
}

// Remove removes the worktree at path (with force, also with changes in
// it) and prunes git's note of it; with branch not "", deletes that branch
// too. A worktree already gone is pruned. The caller holds
// Lock(r.CommonDir).
func (r *Repo) Remove(ctx context.Context, path, branch string, force bool) error {
	var err error
	if _, serr := os.Stat(path); serr == nil {
		args := []string{"worktree", "remove"}
		if force {
			args = append(args, "--force", "--force") // twice: also a locked one
		}
		_, err = Git(ctx, r.Top, nil, append(args, "--end-of-options", path)...)
		if err != nil && force {
			// git refuses what it does not know as a worktree: a
			// directory it half made.
			if rerr := os.RemoveAll(path); rerr == nil {
				err = nil
			}
		}
	}
	_, _ = Git(ctx, r.Top, nil, "worktree", "prune")
	if err == nil && branch != "" {
		_, err = Git(ctx, r.Top, nil, "branch", "-D", "--end-of-options", branch)
		if err != nil && !branchExists(ctx, r.Top, branch) {
			err = nil
		}
	}
	return err
}

// Merged says whether branch's head is already in ref (ref contains it),
// so that deleting the branch loses no commit.
func (r *Repo) Merged(ctx context.Context, branch, ref string) bool {
	_, err := Git(ctx, r.Top, nil, "merge-base", "--is-ancestor", "--end-of-options", "refs/heads/"+branch, ref)
	return err == nil
}

// RepoOf is the repository of a recorded worktree, for the runs that
// change it.
func (i *Info) RepoOf() *Repo { return &Repo{Top: i.Repository, CommonDir: i.CommonDir} }

// Dirty says whether the worktree has uncommitted changes or untracked
// files (ignored ones aside). It takes no lock of the repository's
// (GIT_OPTIONAL_LOCKS=0: git status then does not refresh the index), so
// that listing agents does not wait behind an open.
func Dirty(ctx context.Context, worktree string) (bool, error) {
	out, err := Git(ctx, worktree, []string{"GIT_OPTIONAL_LOCKS=0"}, "status", "--porcelain", "--untracked-files=normal")
	if err != nil {
		return false, err
	}
	return strings.TrimSpace(out) != "", nil
}
