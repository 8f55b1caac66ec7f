package gitwt

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/kaimon/kaimon/internal/proc"
)

// Diff writes to w what the worktree holds against commit base: its
// commits, its uncommitted changes and its untracked files (ignored ones
// aside), in git diff format, or with stat as git diff --stat. It
// streams: git's output goes to w as git writes it, and none of it is
// gathered here, whatever its size. A write to w that fails stops git,
// and is the error returned (errors.Is finds it).
//
// Untracked files are marked intent-to-add in a temporary index, a copy of
// the worktree's own, and the worktree is diffed against base through it:
// the real index is never touched, and nothing is written to the object
// store (a diff is a read; staging would store every untracked file at
// each one).
//
// An untracked file of more than fileMax bytes (when fileMax > 0) is kept
// out of that index, so that git never reads it, and is named with its
// size after git's output instead (leftOut), as git names a binary file
// without its content. Only untracked files: they are whatever an agent,
// or a build it ran, left in the worktree (a dataset, a core dump, a
// model's weights), which git would read whole to diff, and a tracked
// file's size was the repository's choice before the agent came.
func Diff(ctx context.Context, worktree, base string, stat bool, fileMax int64, w io.Writer) error {
	idx, err := Git(ctx, worktree, nil, "rev-parse", "--path-format=absolute", "--git-path", "index")
	if err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "kaimon-diff-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	tmpIdx := filepath.Join(tmp, "index")
	if err := copyFile(strings.TrimSpace(idx), tmpIdx); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	env := []string{"GIT_INDEX_FILE=" + tmpIdx}
	var big []bigFile
	if fileMax > 0 {
		if big, err = untrackedOver(ctx, worktree, env, fileMax); err != nil {
			return err
		}
	}
	if _, err := Git(ctx, worktree, env, "add", "--intent-to-add", "--all", "--", "."); err != nil {
		return err
	}
	if len(big) > 0 {
		// Out of the temporary index again, by name, literally (-z
		// --stdin takes paths, not pathspecs).
		var names bytes.Buffer
		for _, f := range big {
			names.WriteString(f.path)
			names.WriteByte(0)
		}
		if err := gitTo(ctx, worktree, env, &names, io.Discard, "update-index", "--force-remove", "-z", "--stdin"); err != nil {
			return err
		}
	}
	args := []string{"diff", "--no-color", "--no-ext-diff", "--no-textconv", "--ignore-submodules=dirty", "--binary"}
	if stat {
		args = []string{"diff", "--no-color", "--no-ext-diff", "--no-textconv", "--ignore-submodules=dirty", "--stat"}
	}
	if err := gitTo(ctx, worktree, env, nil, w, append(args, base, "--")...); err != nil {
		return err
	}
	for _, f := range big {
		if _, err := io.WriteString(w, leftOut(f, stat, fileMax)); err != nil {
			return err
		}
	}
	return nil
}

// bigFile is an untracked file Diff leaves out.
type bigFile struct {
	path string // relative to the worktree's top, as git names it
	size int64
	exec bool
}

// untrackedOver lists the untracked files (ignored ones aside, as git add
// --all takes them) of more than max bytes, reading git's list as it
// comes: a worktree may hold a great many untracked files.
func untrackedOver(ctx context.Context, worktree string, env []string, max int64) ([]bigFile, error) {
	var big []bigFile
	names := &nulSplitter{each: func(name string) {
		// Lstat: a symbolic link is diffed as its target's name, not
		// as the file it points to.
		st, err := os.Lstat(filepath.Join(worktree, name))
		if err == nil && st.Mode().IsRegular() && st.Size() > max {
			big = append(big, bigFile{path: name, size: st.Size(), exec: st.Mode()&0o100 != 0})
		}
	}}
	if err := gitTo(ctx, worktree, env, nil, names, "ls-files", "--others", "--exclude-standard", "-z"); err != nil {
		return nil, err
	}
	return big, nil
}

// leftOut is what Diff writes of a file it left out. In a patch it is the
// header git writes of a new file and the line it writes of a binary one
// without --binary, then a line of kaimon's with the size and why: git
// apply then refuses the patch at that file ("cannot apply binary patch
// to 'F' without full index line"; a header without that line would make
// it create the file empty), passes over kaimon's line as it does any
// text between two files' patches, and with --exclude=F applies the rest.
// With stat it is the line git writes of a binary file, with kaimon's
// reason after it.
func leftOut(f bigFile, stat bool, max int64) string {
	if stat {
		return fmt.Sprintf(" %s | Bin 0 -> %d bytes (untracked, over the %s kaimon diff shows of a file: left out)\n", quotePath(f.path), f.size, sizeText(max))
	}
	mode := "100644"
	if f.exec {
		mode = "100755"
	}
	return fmt.Sprintf("diff --git %s %s\nnew file mode %s\nBinary files /dev/null and %s differ\n"+
		"kaimon: %s is %d bytes, untracked: over the %s kaimon diff shows of a file, its content is left out (git apply stops at it; --exclude applies the rest)\n",
		quotePath("a/"+f.path), quotePath("b/"+f.path), mode, quotePath("b/"+f.path), quotePath(f.path), f.size, sizeText(max))
}

// sizeText is n bytes for a person: whole MiB or KiB when it is one.
func sizeText(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}

// quotePath is a path as git writes it in a diff (core.quotePath, its
// default): as it is, or, when it holds a control character, a quote, a
// backslash or a byte over 0x7f, in double quotes with C escapes.
func quotePath(p string) string {
	plain := true
	for i := 0; i < len(p); i++ {
		if c := p[i]; c < 0x20 || c == '"' || c == '\\' || c >= 0x7f {
			plain = false
			break
		}
	}
	if plain {
		return p
	}
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(p); i++ {
		switch c := p[i]; c {
		case '\a':
			b.WriteString(`\a`)
		case '\b':
			b.WriteString(`\b`)
		case '\t':
			b.WriteString(`\t`)
		case '\n':
			b.WriteString(`\n`)
		case '\v':
			b.WriteString(`\v`)
		case '\f':
			b.WriteString(`\f`)
		case '\r':
			b.WriteString(`\r`)
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		default:
			if c < 0x20 || c >= 0x7f {
				fmt.Fprintf(&b, `\%03o`, c)
			} else {
				b.WriteByte(c)
			}
		}
	}
	b.WriteByte('"')
	return b.String()
}

// copyFile copies the file at from to a new file at to (mode 0600),
// through a buffer: an index may be large.
func copyFile(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// nulSplitter is a writer of NUL-terminated names (git's -z output) that
// calls each with every whole one.
type nulSplitter struct {
	each func(string)
	part []byte
}

// maxName bounds a name: no file system takes a path this long (Linux's
// PATH_MAX is 4096), so a longer one is not git's list.
const maxName = 64 << 10

func (s *nulSplitter) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, 0)
		if i < 0 {
			if len(s.part)+len(p) > maxName {
				return 0, fmt.Errorf("git ls-files wrote a name of more than %d bytes", maxName)
			}
			s.part = append(s.part, p...)
			break
		}
		s.each(string(append(s.part, p[:i]...)))
		s.part, p = s.part[:0], p[i+1:]
	}
	return n, nil
}

// gitTo runs git as Git does, with stdin from in (nil: none), but copies
// its stdout to out as it comes instead of gathering it: what a diff of
// any size streams through. A write to out that fails stops git, and is
// the error returned as it is: it is the reader's (a client gone, a bound
// reached), not git's.
//
// The copy is made here, in the caller's goroutine, from a pipe of our
// own: os/exec's copy of a writer that is not a file would go on in a
// goroutine of its own, which could still be writing to out (a client's
// connection) after a git stopped at the timeout was reaped.
func gitTo(ctx context.Context, dir string, env []string, in io.Reader, out io.Writer, args ...string) error {
	filters, err := repoFilters(ctx, dir)
	if err != nil {
		return err
	}
	env = append(filters, env...)
	ctx, cancel := context.WithTimeout(ctx, Timeout)
	defer cancel()
	pr, pw, err := os.Pipe()
	if err != nil {
		return &Error{Args: args, Err: err}
	}
	defer pr.Close()
	cmd := command(dir, env, args...)
	errb := &headBuffer{max: maxStderr}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = in, pw, errb
	// A hook that leaves a child holding the pipes must not hold the call.
	cmd.WaitDelay = stopGrace
	child, err := proc.Start(cmd)
	pw.Close() // git's, and its children's, from here
	if err != nil {
		return &Error{Args: args, Err: fmt.Errorf("starting git: %w", err)}
	}
	// A read that waits on git past the timeout (or ctx) ends then.
	unblock := context.AfterFunc(ctx, func() { _ = pr.SetReadDeadline(time.Now()) })
	defer unblock()
	var werr, rerr error
	buf := make([]byte, 32<<10)
	for {
		var n int
		n, rerr = pr.Read(buf)
		if n > 0 {
			if _, werr = out.Write(buf[:n]); werr != nil {
				break
			}
		}
		if rerr != nil {
			break // EOF: git and what it started are done writing; else ctx
		}
	}
	pr.Close() // a git still writing gets EPIPE
	if werr == nil && rerr == io.EOF {
		select {
		case <-child.Done():
		case <-ctx.Done():
		}
	}
	child.Stop(stopGrace) // the whole group, also after a clean exit
	switch {
	case werr != nil:
		return werr
	case rerr != io.EOF || ctx.Err() != nil && child.Err() != nil:
		// Not all of git's output was read (or git, having written it
		// all, was stopped before it exited): what out has is not whole.
		why := fmt.Errorf("reading git's output: %w", rerr)
		if ctx.Err() != nil {
			why = fmt.Errorf("git was stopped: %w", ctx.Err())
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				why = fmt.Errorf("git did not end within %s: %w", Timeout, ctx.Err())
			}
		}
		return &Error{Args: args, Stderr: errb.String(), Err: why}
	}
	if err := child.Err(); err != nil {
		return &Error{Args: args, Stderr: errb.String(), Err: err}
	}
	return nil
}

// maxStderr bounds what gitTo keeps of git's stderr: its message, not a
// warning per file of a worktree with a great many.
const maxStderr = 64 << 10

// headBuffer keeps the first max bytes written to it and takes the rest
// without keeping it, so that the writer never fails for it.
type headBuffer struct {
	max int
	b   bytes.Buffer
}

func (h *headBuffer) Write(p []byte) (int, error) {
	if room := h.max - h.b.Len(); room > 0 {
		h.b.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

func (h *headBuffer) String() string { return h.b.String() }
