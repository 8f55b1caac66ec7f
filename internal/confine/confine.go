// Package confine checks that a path stays inside a directory: the agent's
// cwd, for the ACP fs/* callbacks and for the path arguments of the kaimon
// tools an owned agent calls through the MCP door. It is a correctness
// boundary against a cooperative agent, not a sandbox (spec: "A boundary,
// not a sandbox"): symlinks are resolved before the check, but the check
// and the later open are separate steps.
package confine

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// Root is a directory, symlinks resolved, that paths must stay within.
type Root struct {
	dir string
}

// New confines to dir.
func New(dir string) (Root, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return Root{}, err
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return Root{}, err
	}
	return Root{dir: real}, nil
}

// Dir is the root, symlinks resolved.
func (r Root) Dir() string { return r.dir }

// ErrOutside is wrapped by Resolve's refusals.
var ErrOutside = errors.New("outside the agent's working directory")

// Resolve checks an absolute path and returns the real path to use. Every
// symlink along it is resolved, also for a path whose last parts do not
// exist yet (a file to create): the deepest existing ancestor is resolved
// and the rest appended. The result must be the root or below it; ".."
// that climbs out, absolute paths elsewhere and symlinks that point out are
// refused.
func (r Root) Resolve(path string) (string, error) {
	if path == "" || !filepath.IsAbs(path) {
		return "", fmt.Errorf("path %q is not absolute", path)
	}
	real, err := resolveExisting(filepath.Clean(path))
	if err != nil {
		return "", err
	}
	if !Within(r.dir, real) {
		return "", fmt.Errorf("%s is %w (%s)", path, ErrOutside, r.dir)
	}
	return real, nil
}

// ErrGitDir is wrapped by ResolveWrite's refusals of a path through a
// .git.
var ErrGitDir = errors.New("in a git dir (.git)")

// ResolveWrite is Resolve for a path an agent's file tool writes: it also
// refuses a path below the root through a part named .git (in any case,
// as a case-insensitive file system reads it), file or directory. A .git
// is what git follows to a repository's config, and that config names
// programs git runs (core.fsmonitor, hooks, filters): a `.git` file an
// agent writes in its worktree would point the daemon's next git status
// at a gitdir the agent planted (issue 27), and a write into a real git
// dir would plant the same config there. Reading stays allowed.
func (r Root) ResolveWrite(path string) (string, error) {
	real, err := r.Resolve(path)
	if err != nil {
		return "", err
	}
	rel, err := filepath.Rel(r.dir, real)
	if err != nil {
		return "", err
	}
	for _, part := range strings.Split(rel, string(filepath.Separator)) {
		if strings.EqualFold(part, ".git") {
			return "", fmt.Errorf("%s is %w, whose config names programs git runs: kaimon's file tools do not write there", path, ErrGitDir)
		}
	}
	return real, nil
}

// resolveExisting resolves the symlinks of the longest existing prefix of
// path and appends the rest.
func resolveExisting(path string) (string, error) {
	rest := []string{}
	p := path
	for {
		real, err := filepath.EvalSymlinks(p)
		if err == nil {
			for i := len(rest) - 1; i >= 0; i-- {
				real = filepath.Join(real, rest[i])
			}
			return real, nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			// A dangling symlink counts as missing only if it is the last
			// part; anything else (a loop, no permission) is refused.
			if fi, lerr := os.Lstat(p); lerr == nil && fi.Mode()&fs.ModeSymlink != 0 {
				return "", fmt.Errorf("%s: %w", p, err)
			}
			return "", err
		}
		if fi, lerr := os.Lstat(p); lerr == nil && fi.Mode()&fs.ModeSymlink != 0 {
			// A dangling symlink: follow its target's text, so that a
			// link pointing out is refused even though its target does not
			// exist.
			target, rerr := os.Readlink(p)
			if rerr != nil {
				return "", rerr
			}
			if !filepath.IsAbs(target) {
				target = filepath.Join(filepath.Dir(p), target)
			}
			res, err := resolveExisting(filepath.Clean(target))
			if err != nil {
				return "", err
			}
			for i := len(rest) - 1; i >= 0; i-- {
				res = filepath.Join(res, rest[i])
			}
			return res, nil
		}
		parent := filepath.Dir(p)
		if parent == p {
			return "", fmt.Errorf("%s: %w", path, fs.ErrNotExist)
		}
		rest = append(rest, filepath.Base(p))
		p = parent
	}
}

// Within says whether the clean absolute path p is root or below it.
func Within(root, p string) bool {
	if p == root {
		return true
	}
	return strings.HasPrefix(p, strings.TrimSuffix(root, string(filepath.Separator))+string(filepath.Separator))
}
