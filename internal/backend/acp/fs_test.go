package acp

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kaimon/kaimon/internal/confine"
)

// TestJailMatrix checks fs/* confinement: inside and outside, by ..,
// absolute paths, symlinks in and out, missing files, size limit, preset.
func TestJailMatrix(t *testing.T) {
	base := t.TempDir()
	root := filepath.Join(base, "project")
	outside := filepath.Join(base, "outside")
	for _, d := range []string{filepath.Join(root, "sub"), outside} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write := func(p, s string) {
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(root, "in.txt"), "one\ntwo\nthree\n")
	write(filepath.Join(outside, "secret.txt"), "secret")
	link := func(target, name string) {
		if err := os.Symlink(target, filepath.Join(root, name)); err != nil {
			t.Fatal(err)
		}
	}
	link(filepath.Join(outside, "secret.txt"), "to-secret")      // file out
	link(outside, "to-outside")                                  // dir out
	link(filepath.Join(root, "in.txt"), "to-in")                 // file in
	link("sub", "to-sub")                                        // relative dir in
	link(filepath.Join(outside, "not-yet.txt"), "dangling-out")  // dangling, out
	link(filepath.Join(root, "sub", "later.txt"), "dangling-in") // dangling, in
	link("../outside/secret.txt", "rel-out")                     // relative, out
	big := filepath.Join(root, "big.txt")
	write(big, strings.Repeat("x", MaxReadBytes+1))

	j, err := NewJail(root)
	if err != nil {
		t.Fatal(err)
	}
	type tc struct {
		path string
		ok   bool
		want string // read content when ok
	}
	reads := []tc{
		{filepath.Join(root, "in.txt"), true, "one\ntwo\nthree\n"},
		{filepath.Join(root, "missing.txt"), true, ""}, // missing inside: empty
		{filepath.Join(root, "sub", "deep", "missing.txt"), true, ""},
		{filepath.Join(root, "to-in"), true, "one\ntwo\nthree\n"},
		{filepath.Join(root, "to-sub", "..", "in.txt"), true, "one\ntwo\nthree\n"},
		{filepath.Join(root, "..", "outside", "secret.txt"), false, ""},
		{root + "/../outside/secret.txt", false, ""},
		{filepath.Join(outside, "secret.txt"), false, ""},
		{"/etc/passwd", false, ""},
		{filepath.Join(root, "to-secret"), false, ""},
		{filepath.Join(root, "to-outside", "secret.txt"), false, ""},
		{filepath.Join(root, "rel-out"), false, ""},
		{filepath.Join(root, "dangling-out"), false, ""},
		{"relative.txt", false, ""},
		{big, false, ""},
	}
	for _, c := range reads {
		got, err := j.Read(c.path, nil, nil)
		if c.ok && (err != nil || got != c.want) {
			t.Errorf("read %s: %q, %v; want %q", c.path, got, err, c.want)
		}
		if !c.ok && err == nil {
			t.Errorf("read %s: allowed (%q), want refused", c.path, got)
		}
	}
	// Line windows.
	line, limit := 2, 1
	if got, err := j.Read(filepath.Join(root, "in.txt"), &line, &limit); err != nil || got != "two\n" {
		t.Errorf("read line 2 limit 1 = %q %v", got, err)
	}

	writes := []tc{
		{filepath.Join(root, "new.txt"), true, ""},
		{filepath.Join(root, "newdir", "x", "new.txt"), true, ""},
		{filepath.Join(root, "to-in"), true, ""},
		{filepath.Join(root, "dangling-in"), true, ""},
		{filepath.Join(root, "..", "outside", "x.txt"), false, ""},
		{filepath.Join(outside, "x.txt"), false, ""},
		{filepath.Join(root, "to-secret"), false, ""},
		{filepath.Join(root, "to-outside", "x.txt"), false, ""},
		{filepath.Join(root, "dangling-out"), false, ""},
		{filepath.Join(root, "rel-out"), false, ""},
	}
	for _, c := range writes {
		err := j.Write(c.path, "w\n")
		if c.ok != (err == nil) {
			t.Errorf("write %s: err %v, want ok=%v", c.path, err, c.ok)
		}
		if !c.ok && err != nil && !errors.Is(err, ErrOutside) && filepath.IsAbs(c.path) {
			t.Errorf("write %s: %v does not say outside", c.path, err)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(root, "in.txt")); string(b) != "w\n" {
		t.Errorf("write through an inside symlink did not reach its target: %q", b)
	}
	if b, _ := os.ReadFile(filepath.Join(root, "sub", "later.txt")); string(b) != "w\n" {
		t.Errorf("write through a dangling inside symlink: %q", b)
	}
	for _, p := range []string{filepath.Join(outside, "x.txt"), filepath.Join(outside, "not-yet.txt")} {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("%s was written", p)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(outside, "secret.txt")); string(b) != "secret" {
		t.Errorf("secret changed: %q", b)
	}

	// A preset without fs: everything refused, with the reason.
	j.Allowed, j.Why = false, "the notebook preset denies the agent's native file tools"
	if _, err := j.Read(filepath.Join(root, "in.txt"), nil, nil); err == nil || !strings.Contains(err.Error(), "notebook") {
		t.Errorf("read under notebook: %v", err)
	}
	if err := j.Write(filepath.Join(root, "n.txt"), "x"); err == nil {
		t.Error("write under notebook allowed")
	}
}

func TestStripJSONC(t *testing.T) {
	in := `{
  // a comment
  "provider": {"a": {"url": "http://x//y", /* inline */ "k": [1, 2,],},},
}`
	if got := string(StripJSONC([]byte(in))); !strings.Contains(got, `"http://x//y"`) || strings.Contains(got, "comment") || strings.Contains(got, ",]") {
		t.Fatalf("%s", got)
	}
}

// TestJailRefusesGitWrites: an agent's fs/write_text_file does not write
// a .git below its cwd, file or directory (a worktree's .git file pointed
// at a planted gitdir would have the daemon's next git status run that
// gitdir's config), nor reach one through a symlink; names that only look
// like it are written, and a .git can still be read.
func TestJailRefusesGitWrites(t *testing.T) {
	root := t.TempDir()
	// The agent's worktree: its .git is a file pointing at the gitdir;
	// sub holds a nested repository's .git directory.
	dotGit := filepath.Join(root, ".git")
	real := "gitdir: /repo/.git/worktrees/a1\n"
	if err := os.WriteFile(dotGit, []byte(real), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(root, "sub", ".git", "hooks"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(root, "sub", ".git"), filepath.Join(root, "to-gitdir")); err != nil {
		t.Fatal(err)
	}
	j, err := NewJail(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{
		dotGit,
		filepath.Join(root, "sub", ".git", "config"),
		filepath.Join(root, "sub", ".git", "hooks", "post-checkout"),
		filepath.Join(root, "new", ".git"),           // a .git file to be
		filepath.Join(root, "new", ".git", "config"), // a .git dir to be
		filepath.Join(root, ".GIT"),
		filepath.Join(root, "to-gitdir", "config"),
		filepath.Join(root, "sub", "..", ".git"),
	} {
		err := j.Write(p, "gitdir: /tmp/planted\n")
		if err == nil || !errors.Is(err, confine.ErrGitDir) {
			t.Errorf("write %s: %v; want refused as in a .git", p, err)
		}
	}
	if b, _ := os.ReadFile(dotGit); string(b) != real {
		t.Fatalf("the worktree's .git now holds %q", b)
	}
	for _, p := range []string{"sub/.git/config", "new", "to-gitdir/config"} {
		if _, err := os.Stat(filepath.Join(root, p)); err == nil {
			t.Errorf("%s was made", p)
		}
	}
	for _, name := range []string{".gitignore", ".gitattributes", "x.git", ".github/workflows/ci.yml", "a.git/b"} {
		if err := j.Write(filepath.Join(root, name), "ok\n"); err != nil {
			t.Errorf("write %s: %v", name, err)
		}
	}
	if got, err := j.Read(dotGit, nil, nil); err != nil || got != real {
		t.Fatalf("read %s = %q, %v", dotGit, got, err)
	}
}
