package cli

import "io"

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
