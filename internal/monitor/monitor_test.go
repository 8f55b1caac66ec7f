package monitor

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"
	"charm.land/lipgloss/v2"
	"github.com/charmbracelet/colorprofile"
	"github.com/creack/pty"

	"github.com/kaimon/kaimon/internal/follow"
)

// crashModel panics in Update when it sees crash, and quits on tea.QuitMsg
// of its own making otherwise.
type crashModel struct{ panicOn bool }

type crash struct{}

func (m crashModel) Init() tea.Cmd {
	if m.panicOn {
		return func() tea.Msg { return crash{} }
	}
	return nil
}

func (m crashModel) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	if _, ok := msg.(crash); ok {
		panic("boom in Update")
	}
	return m, nil
}

func (m crashModel) View() tea.View { return tea.NewView("") }

// runWithin runs runProgram and fails the test, rather than hang it,
// when it does not return in time.
func runWithin(t *testing.T, ctx context.Context, m tea.Model, feed func(context.Context, func(tea.Msg))) error {
	t.Helper()
	in, inW := io.Pipe()
	defer inW.Close()
	errc := make(chan error, 1)
	go func() {
		errc <- runProgram(ctx, m, in, &bytes.Buffer{}, feed, tea.WithoutSignalHandler())
	}()
	select {
	case err := <-errc:
		return err
	case <-time.After(30 * time.Second):
		t.Fatal("runProgram did not return")
		return nil
	}
}

func idleFeed(ctx context.Context, _ func(tea.Msg)) { <-ctx.Done() }

func TestRunProgramPanicInModelIsAnError(t *testing.T) {
	err := runWithin(t, context.Background(), crashModel{panicOn: true}, idleFeed)
	if !errors.Is(err, tea.ErrProgramPanic) {
		t.Fatalf("a panic in Update gave %v, want an error wrapping ErrProgramPanic (exit 1, not 0)", err)
	}
}

func TestRunProgramPanicInFeedIsAnError(t *testing.T) {
	err := runWithin(t, context.Background(), crashModel{}, func(context.Context, func(tea.Msg)) {
		panic("boom in follow")
	})
	if err == nil || !strings.Contains(err.Error(), "boom in follow") {
		t.Fatalf("a panic while following gave %v, want an error naming it", err)
	}
}

// The merge hands envelopes on in goroutines of its own: a panic there
// is still the monitor's error, the terminal restored.
func TestRunProgramPanicInTheMergeIsAnError(t *testing.T) {
	host := follow.Host{Name: "", Dial: func(context.Context, follow.Attempt) (*follow.Follower, error) {
		return follow.New(&blockingSource{closed: make(chan struct{})}), nil
	}}
	err := runWithin(t, context.Background(), crashModel{}, func(ctx context.Context, _ func(tea.Msg)) {
		feed(ctx, []follow.Host{host}, false, func(tea.Msg) { panic("boom in the merge") })
	})
	if err == nil || !strings.Contains(err.Error(), "boom in the merge") {
		t.Fatalf("a panic in the merge's goroutine gave %v, want an error naming it", err)
	}
}

// blockingSource has nothing until it is closed.
type blockingSource struct {
	closed chan struct{}
	once   sync.Once
}

func (s *blockingSource) Next() ([]byte, error) { <-s.closed; return nil, io.EOF }
func (s *blockingSource) Ready() bool           { return false }
func (s *blockingSource) Close() error          { s.once.Do(func() { close(s.closed) }); return nil }

func TestRunProgramInterruptedIsNormal(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	feed := func(fctx context.Context, _ func(tea.Msg)) {
		cancel() // as Ctrl-C cancels the command's context
		<-fctx.Done()
	}
	if err := runWithin(t, ctx, crashModel{}, feed); err != nil {
		t.Fatalf("an interrupted monitor gave %v, want nil", err)
	}
}

// TestOnceNoColor: --no-color turns colour off for --once even on a
// terminal that takes true colour, where it would otherwise be on.
func TestOnceNoColor(t *testing.T) {
	ptmx, tty, err := pty.Open()
	if err != nil {
		t.Skipf("no pty: %v", err)
	}
	defer ptmx.Close()
	defer tty.Close()
	t.Setenv("NO_COLOR", "")
	os.Unsetenv("NO_COLOR")
	t.Setenv("TERM", "xterm-256color")
	t.Setenv("COLORTERM", "truecolor")

	if p := onceWriter(tty, false).Profile; p != colorprofile.TrueColor {
		t.Fatalf("on a true-colour terminal the profile is %v, want TrueColor", p)
	}
	w := onceWriter(tty, true)
	if w.Profile != colorprofile.Ascii {
		t.Fatalf("with --no-color the profile is %v, want Ascii", w.Profile)
	}
	var buf bytes.Buffer
	w.Forward = &buf
	styled := lipgloss.NewStyle().Foreground(lipgloss.Color("#ff0000")).Bold(true).Render("dead")
	if _, err := io.WriteString(w, styled); err != nil {
		t.Fatal(err)
	}
	// Ascii keeps bold and the like; colour (SGR 38;…) must go.
	if strings.Contains(buf.String(), "38;") || !strings.Contains(buf.String(), "dead") {
		t.Fatalf("--no-color wrote colour: %q", buf.String())
	}
	if len(programOptions(tty, true)) == 0 || len(programOptions(tty, false)) != 0 {
		t.Fatal("the full-screen program's colour profile is forced only with --no-color")
	}
	// Piped, --no-color does not raise the profile to Ascii's bold.
	if p := onceWriter(&buf, true).Profile; p != colorprofile.NoTTY {
		t.Fatalf("piped with --no-color the profile is %v, want NoTTY", p)
	}
}
