package verbs

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
)

// A disk that is full, over quota, read-only or failing is a storage error
// that says so, found in the error's chain or in what a program (git)
// said; any other error is not one.
func TestDiskFault(t *testing.T) {
	wrap := func(errno syscall.Errno) error {
		return fmt.Errorf("writing: %w", &os.PathError{Op: "write", Path: "/c/a.json", Err: errno})
	}
	for _, c := range []struct {
		err    error
		output string
		want   string // "" for no disk fault
	}{
		{wrap(syscall.ENOSPC), "", "agent_open: the disk is full: writing: write /c/a.json: no space left on device: free some space"},
		{wrap(syscall.EDQUOT), "", "agent_open: the disk quota is used up"},
		{wrap(syscall.EROFS), "", "agent_open: the file system is read-only"},
		{wrap(syscall.EIO), "", "agent_open: the disk failed"},
		{errors.New("git worktree add: exit status 128"), "fatal: could not write to '/w/a1/.git': No space left on device\n", "agent_open: the disk is full: git worktree add"},
		{wrap(syscall.ENOENT), "", ""},
		{errors.New("no space left on device"), "", ""}, // text only from a program's output
		{errors.New("git: exit status 128"), "fatal: not a git repository", ""},
	} {
		got := DiskFault("agent_open", c.err, c.output)
		switch {
		case c.want == "" && got != nil:
			t.Errorf("%v (%q): %v, want no disk fault", c.err, c.output, got)
		case c.want != "" && (got == nil || got.Code != CodeStorage || !strings.HasPrefix(got.Message, c.want)):
			t.Errorf("%v (%q): %+v, want storage saying %q", c.err, c.output, got, c.want)
		}
	}
	// A foreign error reaching the API as it is: storage, not internal.
	if e := AsError(wrap(syscall.ENOSPC)); e.Code != CodeStorage || e.HTTPStatus() != 507 || !strings.HasPrefix(e.Message, "the disk is full: ") {
		t.Errorf("AsError of a full disk: %+v", e)
	}
}
