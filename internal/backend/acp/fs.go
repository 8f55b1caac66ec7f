package acp

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/kaimon/kaimon/internal/confine"
)

// MaxReadBytes is the largest file fs/read_text_file returns.
const MaxReadBytes = 8 << 20

// Jail confines the agent's fs/* callbacks to its working directory
// (internal/confine).
type Jail struct {
	root confine.Root
	// Allowed false refuses every callback: the preset denies the agent's
	// native file tools (notebook, specialist); Why says so.
	Allowed bool
	Why     string
}

// NewJail confines to dir.
func NewJail(dir string) (*Jail, error) {
	root, err := confine.New(dir)
	if err != nil {
		return nil, err
	}
	return &Jail{root: root, Allowed: true}, nil
}

// ErrOutside is wrapped by Resolve's refusals.
var ErrOutside = confine.ErrOutside

// Resolve checks path for the agent and returns the real path to use. The
// path must be absolute (ACP's rule) and inside the cwd (confine.Root).
func (j *Jail) Resolve(path string) (string, error) {
	if !j.Allowed {
		return "", errors.New(j.Why)
	}
	if path == "" || !filepath.IsAbs(path) {
		return "", fmt.Errorf("path %q is not absolute: ACP file paths must be absolute", path)
	}
	real, err := j.root.Resolve(path)
	if err != nil {
		return "", fmt.Errorf("%w: kaimon confines fs/* to it", err)
	}
	return real, nil
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
	// Compared as a count, not as from+limit: an agent's limit near
	// MaxInt would overflow the sum and slice out of range.
	if limit != nil && *limit >= 0 && *limit < to-from {
		to = from + *limit
	}
	return strings.Join(lines[from:to], ""), nil
}

// Write writes content to path, creating missing directories below the
// root, keeping an existing file's mode. A path through a .git is refused
// (confine.Root.ResolveWrite).
func (j *Jail) Write(path, content string) error {
	if _, err := j.Resolve(path); err != nil {
		return err
	}
	real, err := j.root.ResolveWrite(path)
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
