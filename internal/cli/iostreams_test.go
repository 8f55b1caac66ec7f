package cli

import (
	"context"
	"io"
	"os"
	"testing"

	"github.com/creack/pty"
)

// testStreams are streams for a test: out and errOut as given, out a
// terminal when tty (a live `run`), colour as given, stderr no terminal
// (so no spinner).
func testStreams(out, errOut io.Writer, tty, colour bool) *IOStreams {
	s := &IOStreams{In: eofReader{}, Out: out, ErrOut: errOut, outTTY: tty}
	s.setColor(colour)
	return s
}

type eofReader struct{}

func (eofReader) Read([]byte) (int, error) { return 0, io.EOF }

// A run's streams decide colour and the spinner as fatih/color and the
// terminal would: colour on a terminal unless NO_COLOR or TERM=dumb, the
// spinner on a terminal unless TERM=dumb, neither on a pipe; --no-color
// turns colour off for the run.
func TestStreamsDecide(t *testing.T) {
	ptmx, tty, err := pty.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer ptmx.Close()
	defer tty.Close()
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	defer pw.Close()
	for _, c := range []struct {
		term, noColor string
		out           *os.File
		colour, spin  bool
	}{
		{"xterm", "", tty, true, true},
		{"xterm", "1", tty, false, true},
		{"dumb", "", tty, false, false},
		{"xterm", "", pw, false, false},
	} {
		t.Setenv("TERM", c.term)
		t.Setenv("NO_COLOR", c.noColor)
		s := newIOStreams(tty, c.out, tty)
		if s.ColorEnabled() != c.colour || s.canSpin() != c.spin || s.IsStdoutTTY() != (c.out == tty) {
			t.Errorf("TERM=%s NO_COLOR=%q, out a terminal %v: colour %v, spinner %v; want %v, %v",
				c.term, c.noColor, c.out == tty, s.ColorEnabled(), s.canSpin(), c.colour, c.spin)
		}
		if got := s.pal.red.Sprint("x"); (got != "x") != c.colour {
			t.Errorf("TERM=%s NO_COLOR=%q: the palette paints %q", c.term, c.noColor, got)
		}
	}
	t.Setenv("TERM", "xterm")
	t.Setenv("NO_COLOR", "")
	s := newIOStreams(tty, tty, tty)
	s.Out, s.ErrOut = io.Discard, io.Discard // the terminal stays the deciding one
	if code := runWith(context.Background(), factory{ios: s}, []string{"kaimon", "--no-color", "completion", "bash"}, nil, nil, nil); code != ExitOK || s.ColorEnabled() {
		t.Errorf("kaimon --no-color: exit %d, colour %v", code, s.ColorEnabled())
	}
}
