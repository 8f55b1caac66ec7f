package confine

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// tree builds a root with a subdirectory, a file, and symlinks that stay in
// (sub-link, rel-in) and that point out (out-abs, out-rel, dangling-out,
// out-dir), beside a directory outside it. It returns the root.
func tree(t testing.TB) string {
	t.Helper()
	base := t.TempDir()
	root := filepath.Join(base, "root")
	out := filepath.Join(base, "outside")
	for _, d := range []string{filepath.Join(root, "sub", "deep"), filepath.Join(out, "odir")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range []string{filepath.Join(root, "sub", "file"), filepath.Join(out, "secret")} {
		if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	links := map[string]string{
		"sub-link":     filepath.Join(root, "sub"),
		"rel-in":       "sub/deep",
		"out-abs":      out,
		"out-rel":      "../outside/odir",
		"dangling-out": filepath.Join(out, "missing", "x"),
		"dangling-in":  "sub/missing",
		"sub/up":       "..",
		"sub/upup":     "../..",
		"loop":         "loop",
	}
	for name, target := range links {
		if err := os.Symlink(target, filepath.Join(root, name)); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// Seeds are path tails below the root; one that starts with / is used as
// it is.
var pathSeeds = []string{
	"", ".", "sub/file", "sub/new/file", "..", "../outside/secret", "sub/../../outside",
	"sub-link/file", "rel-in/x", "out-abs/secret", "out-rel/new", "dangling-out", "dangling-out/y",
	"dangling-in", "sub/up/sub/file", "sub/upup/outside/secret", "loop", "loop/x", "/etc/passwd",
	"/", "//", "sub//file/", "out-abs/../root/sub", ".git", "sub/.GIT/config", "x.git", ".gitignore",
}

// checkInside fails unless real is the root or below it, both as text and
// once the symlinks of its longest existing prefix are resolved.
func checkInside(t *testing.T, root, path, real string) {
	t.Helper()
	if !Within(root, real) {
		t.Fatalf("%q accepted as %q, outside %s", path, real, root)
	}
	p := real
	for {
		ev, err := filepath.EvalSymlinks(p)
		if err == nil {
			if !Within(root, ev) {
				t.Fatalf("%q accepted as %q, whose existing part %q is really %q, outside %s", path, real, p, ev, root)
			}
			return
		}
		if !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("%q accepted as %q, but %q does not resolve: %v", path, real, p, err)
		}
		if fi, lerr := os.Lstat(p); lerr == nil && fi.Mode()&fs.ModeSymlink != 0 {
			t.Fatalf("%q accepted as %q, which holds the dangling symlink %q", path, real, p)
		}
		parent := filepath.Dir(p)
		if parent == p {
			return
		}
		p = parent
	}
}

// FuzzResolve checks that whatever Resolve accepts is inside the root, in a
// tree whose symlinks point both in and out.
func FuzzResolve(f *testing.F) {
	for _, s := range pathSeeds {
		f.Add(s)
	}
	root := tree(f)
	r, err := New(root)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, tail string) {
		if strings.IndexByte(tail, 0) >= 0 {
			return // no such path can exist
		}
		path := tail
		if !strings.HasPrefix(tail, "/") {
			path = r.Dir() + "/" + tail
		}
		real, err := r.Resolve(path)
		wreal, werr := r.ResolveWrite(path)
		if err != nil {
			if werr == nil {
				t.Fatalf("%q refused by Resolve (%v) but not by ResolveWrite", path, err)
			}
			return
		}
		checkInside(t, r.Dir(), path, real)
		// A write goes where a read would, and never through a .git.
		if werr == nil && wreal != real {
			t.Fatalf("%q: ResolveWrite %q, Resolve %q", path, wreal, real)
		}
		rel, _ := filepath.Rel(r.Dir(), real)
		inGit := slices.ContainsFunc(strings.Split(rel, "/"), func(p string) bool { return strings.EqualFold(p, ".git") })
		if inGit != (werr != nil) {
			t.Fatalf("%q (%q): ResolveWrite says %v", path, real, werr)
		}
	})
}
