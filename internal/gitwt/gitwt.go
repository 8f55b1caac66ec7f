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
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
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

// What a git run may run. kaimon runs git in repositories it did not
// make, and in worktrees an agent writes in: as git's own safe.directory
// thinking goes, reading a repository must not run it. A repository's
// config (its own, or a gitdir a `.git` file in a worktree points at)
// can name programs git runs: core.fsmonitor at every index read, hooks
// (post-checkout at a worktree add, reference-transaction at every ref
// change), filter.<driver>.clean/smudge/process for paths .gitattributes
// names, diff.<driver>.textconv and diff.<driver>.command, diff.external,
// core.pager. Every run here is given (guard, repoFilters):
//
//   - core.fsmonitor=false and core.hooksPath=/dev/null, on the command
//     line, so they win over every config file: no run here needs a
//     hook or a file monitor (one is a speed-up, the other the
//     repository's code). A worktree kaimon adds does not run the
//     repository's post-checkout: a person who wants it runs it.
//   - the filter drivers the repository's own config defines (scope
//     local or worktree, includes followed) are emptied, and not
//     required, for every run: a checkout gets the blobs as stored, and
//     status and diff compare them so. Drivers in the user's global and
//     system config (git-lfs's, as `git lfs install` writes them) are the
//     user's own programs and stay.
//   - git diff gets --no-ext-diff and --no-textconv; no run writes to a
//     terminal (stdout is a pipe, and --no-pager), prompts
//     (GIT_TERMINAL_PROMPT=0), contacts a remote (so no ssh command or
//     credential helper), signs, or opens an editor.
//
// Each run, and why it is safe so:
//
//	Find            rev-parse, one value a run    reads config
//	ResolveCommit   rev-parse --verify            reads refs and objects
//	CurrentBranch   symbolic-ref                  reads HEAD
//	CheckNewBranch  check-ref-format, show-ref    reads refs
//	Add, Readd      worktree add                  checkout: hooks off, repository filters off
//	Discard         update-ref -d                 ref change: hooks off
//	Remove          worktree remove, prune,       its status of the worktree (a child git, given
//	                branch -D                     the same config): as Dirty
//	Merged          merge-base --is-ancestor      reads objects
//	Dirty           status                        index refresh: fsmonitor off, repository filters off
//	Diff            add -N (temporary index),     as Dirty, and no textconv or external diff
//	                diff
//
// A submodule, or a repository nested in a worktree, has config of its
// own that repoFilters does not read (the guard's -c reaches a git
// started in one, by GIT_CONFIG_PARAMETERS). status and diff get
// --ignore-submodules=dirty, so that they start no git in one: a
// submodule's new commit still shows, changes inside one do not, and
// forget's git worktree remove refuses a worktree holding one. Diff's
// add -N --all does look into a nested repository with changes (git add
// takes no such option), and the filters of that repository's own config
// can run then. No worktree holds one unless an agent made it with a
// shell, which runs what it likes anyway: worktree add populates no
// submodule, and an agent's file tools refuse any path through a .git
// (confine.Root.ResolveWrite).

// guard is the config every git run is given on its command line (see
// above).
var guard = []string{"--no-pager", "-c", "core.fsmonitor=false", "-c", "core.hooksPath=" + os.DevNull}

// repoFilters is the environment that empties the filter drivers the
// config of the repository at dir defines itself (see above): by
// GIT_CONFIG_COUNT, not -c, since a driver's name may hold "=".
func repoFilters(ctx context.Context, dir string) ([]string, error) {
	out, err := run(ctx, dir, nil, "config", "--show-scope", "--includes", "-z", "--name-only", "--get-regexp", `^filter\.`)
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) && ee.ExitCode() == 1 {
			return nil, nil // no filter is configured
		}
		return nil, err
	}
	drivers := map[string]bool{}
	var names []string
	f := strings.Split(out, "\x00")
	for i := 0; i+1 < len(f); i += 2 {
		scope, key := f[i], f[i+1]
		if scope != "local" && scope != "worktree" {
			continue
		}
		// filter.<driver>.<variable>: the driver is what lies between.
		rest := strings.TrimPrefix(key, "filter.")
		j := strings.LastIndexByte(rest, '.')
		if j < 0 || drivers[rest[:j]] {
			continue
		}
		drivers[rest[:j]] = true
		names = append(names, rest[:j])
	}
	if len(names) == 0 {
		return nil, nil
	}
	var env []string
	n := 0
	set := func(k, v string) {
		env = append(env, fmt.Sprintf("GIT_CONFIG_KEY_%d=%s", n, k), fmt.Sprintf("GIT_CONFIG_VALUE_%d=%s", n, v))
		n++
	}
	for _, d := range names {
		for _, v := range []string{"clean", "smudge", "process"} {
			set("filter."+d+"."+v, "")
		}
		set("filter."+d+".required", "false")
	}
	return append(env, fmt.Sprintf("GIT_CONFIG_COUNT=%d", n)), nil
}

// gitEnv is the daemon's environment without the variables that would
// point git at another repository, index or work tree than the one asked
// about (a daemon started from a git hook inherits GIT_DIR), or give it
// config by environment (repoFilters sets its own).
func gitEnv(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch {
		case k == "GIT_DIR", k == "GIT_WORK_TREE", k == "GIT_INDEX_FILE", k == "GIT_COMMON_DIR", k == "GIT_OBJECT_DIRECTORY", k == "GIT_PREFIX",
			k == "GIT_CONFIG_COUNT", strings.HasPrefix(k, "GIT_CONFIG_KEY_"), strings.HasPrefix(k, "GIT_CONFIG_VALUE_"):
			continue
		}
		env = append(env, kv)
	}
	// Never ask on a terminal the daemon does not have.
	env = append(env, "GIT_TERMINAL_PROMPT=0")
	return append(env, extra...)
}

// command is git with args in dir, guarded as above (the guard's command
// line; the caller adds repoFilters to env), in the environment gitEnv
// makes of env: every run of git here is made by it, Git's and gitTo's
// alike.
func command(dir string, env []string, args ...string) *exec.Cmd {
	cmd := exec.Command("git", append(slices.Clip(guard), args...)...)
	cmd.Dir = dir
	cmd.Env = gitEnv(env...)
	return cmd
}

// Git runs git with args in dir, guarded as above, and returns its
// stdout. A run that fails is an *Error with git's stderr; one past
// Timeout (or ctx) is stopped, its whole group.
func Git(ctx context.Context, dir string, env []string, args ...string) (string, error) {
	filters, err := repoFilters(ctx, dir)
	if err != nil {
		return "", err
	}
	return run(ctx, dir, append(filters, env...), args...)
}

// run runs git with the guard's command line but without repoFilters:
// for repoFilters' own git config, which runs nothing.
func run(ctx context.Context, dir string, env []string, args ...string) (string, error) {
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
	// One value a run: a path may hold a newline, and lines split from
	// one answer would take the rest of one for the next (and the top
	// for a neighbouring repository's).
	var vals [3]string
	for i, arg := range []string{"--show-toplevel", "--git-common-dir", "--show-prefix"} {
		out, err := Git(ctx, dir, nil, "rev-parse", "--path-format=absolute", arg)
		if err != nil {
			return nil, err
		}
		v, ok := strings.CutSuffix(out, "\n")
		if !ok || (v == "" && i < 2) {
			return nil, fmt.Errorf("git rev-parse %s in %s: unexpected answer %q", arg, dir, out)
		}
		vals[i] = v
	}
	return &Repo{Top: vals[0], CommonDir: vals[1], Prefix: strings.TrimSuffix(vals[2], "/")}, nil
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
	if err := makeRoot(path); err != nil {
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
	if err := makeRoot(path); err != nil {
		return err
	}
	_, err := Git(ctx, r.Top, nil, "worktree", "add", "--quiet", "--end-of-options", path, branch)
	return err
}

// makeRoot makes the worktree's directory, empty, mode 0700 (and its
// parents, 0700 where made here), for git worktree add to check out
// into: git would make it with the umask's mode, 0755 as a rule, and a
// repository kept in a 0700 directory would be readable by every user in
// its worktree. Made before the add, not changed after it, so that no
// file of the checkout is ever in a directory others can enter.
func makeRoot(path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	if err := os.Mkdir(path, 0o700); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("%s already exists: a worktree of an earlier agent of this id? forget it first (kaimon forget), or pick another id", path)
		}
		return err
	}
	// Mkdir's mode is under the umask: 0700 unless the umask takes from
	// the owner, which would leave git no directory it can write.
	return os.Chmod(path, 0o700)
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
	out, err := Git(ctx, worktree, []string{"GIT_OPTIONAL_LOCKS=0"}, "status", "--porcelain", "--untracked-files=normal", "--ignore-submodules=dirty")
	if err != nil {
		return false, err
	}
	return strings.TrimSpace(out) != "", nil
}
