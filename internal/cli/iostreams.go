package cli

import (
	"bufio"
	"io"
	"os"
	"sync"
	"time"

	"github.com/fatih/color"
	"github.com/mattn/go-isatty"
	"golang.org/x/sys/unix"

	"github.com/kaimon/kaimon/internal/apitype"
)

// IOStreams are the streams one run of the command line reads and writes,
// and what they are: which is a terminal, whether the output is coloured,
// whether cursor escapes may be drawn. Run builds them from its arguments
// once, and every command takes them from there (streamsOf), as gh's
// iostreams does: none asks os.Stdout, the environment or fatih/color's
// global NoColor, so that a test gives each run its own, and runs side by
// side.
type IOStreams struct {
	In     io.Reader
	Out    io.Writer
	ErrOut io.Writer

	inTTY, outTTY, errTTY bool
	// dumb is TERM=dumb: no colour, and no cursor escapes (the spinner).
	dumb bool
	// color is whether output is coloured, stdout's and stderr's alike
	// (as fatih/color decides from stdout alone: `run`'s usage line on
	// stderr is coloured when the turn renders in colour on stdout).
	color bool
	pal   *palette

	// lines are In's lines, once a command asks for them (Lines).
	linesOnce sync.Once
	lines     chan inputLine
	inEnded   chan struct{} // closed at In's end, once Lines reads it
}

// inputLine is a line read from In, and when it was read: an answer to a
// question is a line read after the question was asked, not one typed
// ahead.
type inputLine struct {
	text string
	at   time.Time
}

// newIOStreams are the streams of a run with in, out and errOut, each a
// terminal when it is one, and colour as fatih/color would choose it: on
// when out is a terminal, TERM is not dumb and NO_COLOR
// (https://no-color.org) is empty. --no-color turns it off (setColor).
func newIOStreams(in io.Reader, out, errOut io.Writer) *IOStreams {
	s := &IOStreams{In: in, Out: out, ErrOut: errOut,
		inTTY: isTerminal(in), outTTY: isTerminal(out), errTTY: isTerminal(errOut), dumb: os.Getenv("TERM") == "dumb"}
	s.setColor(s.outTTY && !s.dumb && os.Getenv("NO_COLOR") == "")
	return s
}

func (s *IOStreams) setColor(on bool) {
	s.color = on
	s.pal = newPalette(on)
}

// IsStdinTTY says whether In is a terminal: a person who can answer a
// question there.
func (s *IOStreams) IsStdinTTY() bool { return s.inTTY }

// Lines reads In line by line from the first call on (one reader for the
// run, shared by whoever asks: a turn's questions, a chat's prompt) and
// hands each line on; the channel is closed at In's end (Ctrl-D on a
// terminal). In is not read before: a command that asks nothing leaves it
// alone (a run in the background of a shell is not stopped for reading
// the terminal).
func (s *IOStreams) Lines() <-chan inputLine {
	s.startLines()
	return s.lines
}

// inputEnded is closed once In has ended, after Lines has handed on every
// line before its end and been closed: Ctrl-D, for a chat that leaves then
// even while a turn runs.
func (s *IOStreams) inputEnded() <-chan struct{} {
	s.startLines()
	return s.inEnded
}

func (s *IOStreams) startLines() {
	s.linesOnce.Do(func() {
		s.lines, s.inEnded = make(chan inputLine), make(chan struct{})
		go func() {
			// lines is closed first: a question asked when In ends hears
			// of it (asker.answer) before a chat's leave does.
			defer close(s.inEnded)
			defer close(s.lines)
			sc := bufio.NewScanner(s.In)
			for sc.Scan() {
				s.lines <- inputLine{text: sc.Text(), at: time.Now()}
			}
		}()
	})
}

// inForeground says whether a question may be asked on In now: it is a
// terminal whose foreground process group is this process's. A run in
// the background of a shell (kaimon run … &) that read the terminal, or
// flushed it, would be stopped (SIGTTIN, SIGTTOU) instead.
func (s *IOStreams) inForeground() bool {
	f, ok := s.In.(*os.File)
	if !ok {
		return s.inTTY // a test's terminal
	}
	pgrp, err := unix.IoctlGetInt(int(f.Fd()), unix.TIOCGPGRP)
	return s.inTTY && err == nil && pgrp == unix.Getpgrp()
}

// dropTypedAhead discards what was typed on the terminal In and not read
// yet: a question's answer is typed after it is asked.
func (s *IOStreams) dropTypedAhead() {
	if f, ok := s.In.(*os.File); ok && s.inTTY {
		_ = unix.IoctlSetInt(int(f.Fd()), unix.TCFLSH, unix.TCIFLUSH)
	}
}

// IsStdoutTTY says whether Out is a terminal.
func (s *IOStreams) IsStdoutTTY() bool { return s.outTTY }

// ColorEnabled says whether the output is coloured.
func (s *IOStreams) ColorEnabled() bool { return s.color }

// canSpin says whether a spinner may be drawn on ErrOut beside a rendering
// on Out: both a terminal (taken to be the same one), and TERM not dumb,
// since the spinner draws and erases itself with cursor escapes.
func (s *IOStreams) canSpin() bool { return s.errTTY && s.outTTY && !s.dumb }

// areTheProcess says whether the streams are the process's own (Main's):
// then a command may hand them on by exec (kaimon mcp).
func (s *IOStreams) areTheProcess() bool {
	return s.In == io.Reader(os.Stdin) && s.Out == io.Writer(os.Stdout) && s.ErrOut == io.Writer(os.Stderr)
}

// isTerminal says whether w is a terminal.
func isTerminal(w any) bool {
	f, ok := w.(*os.File)
	return ok && (isatty.IsTerminal(f.Fd()) || isatty.IsCygwinTerminal(f.Fd()))
}

// palette is the colours of one run's output. Each is a color.Color of its
// own, turned on or off (EnableColor, DisableColor) as the run's streams
// say, so that no process-wide setting decides.
type palette struct {
	faint, bold, cyan, green, red, yellow, magenta, italic, warn *color.Color
	states                                                       map[apitype.AgentState]*color.Color
}

// statusColors colour each agent state for people; a test checks that
// every one of apitype.AgentStates has its colour.
var statusColors = map[apitype.AgentState][]color.Attribute{
	apitype.Starting: {color.FgCyan},
	apitype.Idle:     {color.FgGreen},
	apitype.Working:  {color.FgYellow},
	apitype.Dead:     {color.Faint},
}

// plain is the palette of no colour: what a rendering made without a
// run's streams (a test's) uses.
var plain = newPalette(false)

func newPalette(on bool) *palette {
	mk := func(a ...color.Attribute) *color.Color {
		c := color.New(a...)
		if on {
			c.EnableColor()
		} else {
			c.DisableColor()
		}
		return c
	}
	p := &palette{faint: mk(color.Faint), bold: mk(color.Bold), cyan: mk(color.FgCyan), green: mk(color.FgGreen),
		red: mk(color.FgRed), yellow: mk(color.FgYellow), magenta: mk(color.FgMagenta),
		italic: mk(color.Faint, color.Italic), warn: mk(color.FgYellow, color.Bold),
		states: map[apitype.AgentState]*color.Color{}}
	for s, a := range statusColors {
		p.states[s] = mk(a...)
	}
	return p
}
