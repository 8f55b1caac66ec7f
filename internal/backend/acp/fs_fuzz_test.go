package acp

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzJail reads arbitrary paths, with and without a line window, through
// a Jail on a tree with symlinks that point out. Whatever is read must be
// inside the root; no line or limit may panic.
func FuzzJail(f *testing.F) {
	base := f.TempDir()
	root := filepath.Join(base, "root")
	out := filepath.Join(base, "outside")
	for _, d := range []string{filepath.Join(root, "sub"), out} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			f.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(root, "sub", "file"), []byte("one\ntwo\nthree\n"), 0o644); err != nil {
		f.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(out, "secret"), []byte("SECRET\n"), 0o644); err != nil {
		f.Fatal(err)
	}
	for name, target := range map[string]string{
		"out-abs": out, "out-rel": "../outside", "in": "sub", "dangling-out": filepath.Join(out, "missing"),
	} {
		if err := os.Symlink(target, filepath.Join(root, name)); err != nil {
			f.Fatal(err)
		}
	}
	j, err := NewJail(root)
	if err != nil {
		f.Fatal(err)
	}
	for _, s := range []string{"sub/file", "in/file", "out-abs/secret", "out-rel/secret", "../outside/secret",
		"dangling-out", "sub/../../outside/secret", "/etc/hostname", "sub", ""} {
		f.Add(s, 2, 1, uint8(3))
		f.Add(s, 0, 0, uint8(0))
	}
	f.Add("sub/file", 2, int(^uint(0)>>1), uint8(3))
	f.Fuzz(func(t *testing.T, tail string, line, limit int, set uint8) {
		path := tail
		if !strings.HasPrefix(tail, "/") {
			path = root + "/" + tail
		}
		var lp, mp *int
		if set&1 != 0 {
			lp = &line
		}
		if set&2 != 0 {
			mp = &limit
		}
		text, err := j.Read(path, lp, mp)
		if err != nil {
			return
		}
		if strings.Contains(text, "SECRET") {
			t.Fatalf("%q read from outside the root: %q", path, text)
		}
		if real, err := j.Resolve(path); err == nil && !strings.HasPrefix(real+"/", j.root.Dir()+"/") {
			t.Fatalf("%q accepted as %q, outside %s", path, real, j.root.Dir())
		}
	})
}
