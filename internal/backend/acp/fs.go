package acp

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// MaxReadBytes is the largest file fs/read_text_file returns.
const MaxReadBytes = 8 << 20

// Jail confines the agent's fs/* callbacks to its working directory. It is
// a correctness boundary against a cooperative agent, not a sandbox (spec:
// "A boundary, not a sandbox"): symlinks are resolved before the check, but
// the check and the open are separate steps.
type Jail struct {
	root string // the cwd, symlinks resolved
	// Allowed false refuses every callback: the preset denies the agent's
	// native file tools (notebook, specialist); Why says so.
	Allowed bool
	Why     string
}

// NewJail confines to dir.
func NewJail(dir string) (*Jail, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return nil, err
	}
	return &Jail{root: real, Allowed: true}, nil
}

// ErrOutside is wrapped by Resolve's refusals.
var ErrOutside = errors.New("outside the agent's working directory")

// Resolve checks path for the agent and returns the real path to use. The
// path must be absolute (ACP's rule). Every symlink along it is resolved,
// also for a path whose last parts do not exist yet (a file to create): the
// deepest existing ancestor is resolved and the rest appended. The result
// must be the root or below it; ".." that climbs out, absolute paths
// elsewhere and symlinks that point out are refused.
func (j *Jail) Resolve(path string) (string, error) {
	if !j.Allowed {
		return "", errors.New(j.Why)
	}
	if path == "" || !filepath.IsAbs(path) {
		return "", fmt.Errorf("path %q is not absolute: ACP file paths must be absolute", path)
	}
	clean := filepath.Clean(path)
	real, err := resolveExisting(clean)
	if err != nil {
		return "", err
	}
	if !within(j.root, real) {
		return "", fmt.Errorf("%s is %w (%s): kaimon confines fs/* to it", path, ErrOutside, j.root)
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

func within(root, p string) bool {
	if p == root {
		return true
	}
	return strings.HasPrefix(p, strings.TrimSuffix(root, string(filepath.Separator))+string(filepath.Separator))
}

// Read returns the text of path (a missing file inside the root reads as
// empty: gemini-cli reads a file before creating it and fails on an
// error), from line (1-based) for limit lines when given.
func (j *Jail) Read(path string, line, limit *int) (string, error) {
	real, err := j.Resolve(path)
	if err != nil {
		return "", err
	}
	f, err := os.Open(real)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return "", err
	}
	if st.IsDir() {
		return "", fmt.Errorf("%s is a directory", path)
	}
	if st.Size() > MaxReadBytes {
		return "", fmt.Errorf("%s is %d bytes, over kaimon's limit of %d for fs/read_text_file", path, st.Size(), MaxReadBytes)
	}
	b, err := io.ReadAll(io.LimitReader(f, MaxReadBytes+1))
	if err != nil {
		return "", err
	}
	if len(b) > MaxReadBytes {
		return "", fmt.Errorf("%s is over kaimon's limit of %d bytes for fs/read_text_file", path, MaxReadBytes)
	}
	text := string(b)
	if line == nil && limit == nil {
		return text, nil
	}
	lines := strings.SplitAfter(text, "\n")
	from := 0
	if line != nil && *line > 1 {
		from = *line - 1
	}
	if from > len(lines) {
		from = len(lines)
	}
	to := len(lines)
	if limit != nil && *limit >= 0 && from+*limit < to {
		to = from + *limit
	}
	return strings.Join(lines[from:to], ""), nil
}

// Write writes content to path, creating missing directories below the
// root, keeping an existing file's mode.
func (j *Jail) Write(path, content string) error {
	real, err := j.Resolve(path)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(real), 0o755); err != nil {
		return err
	}
	// The directories just made must still be inside (a race with a
	// symlink swap is the boundary's known limit).
	if _, err := j.Resolve(filepath.Dir(real)); err != nil {
		return err
	}
	mode := fs.FileMode(0o644)
	if st, err := os.Stat(real); err == nil {
		if st.IsDir() {
			return fmt.Errorf("%s is a directory", path)
		}
		mode = st.Mode().Perm()
	}
	return os.WriteFile(real, []byte(content), mode)
}
