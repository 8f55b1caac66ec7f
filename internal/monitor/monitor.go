// Package monitor is `kaimon monitor`: a full-screen terminal UI (bubbletea)
// over every agent the daemon knows. It reads agent_list once, then
// follows the event bus (prefix agent:) to keep rows and the selected
// agent's feed current; it never starts the daemon, and waits for it to
// come back when it goes away. Over several hosts (hosts.go) it follows
// each host's daemon, another host's through its event stream over ssh,
// and shows their agents in one table with a HOST column.
package monitor

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/colorprofile"
	"github.com/charmbracelet/x/term"

	"github.com/kaimon/kaimon/internal/apitype"
	"github.com/kaimon/kaimon/internal/client"
	"github.com/kaimon/kaimon/internal/event"
	"github.com/kaimon/kaimon/internal/fleet"
	"github.com/kaimon/kaimon/internal/follow"
	"github.com/kaimon/kaimon/internal/verbs"
)

// clientDaemon is the Daemon of a real kaimon-agentd.
type clientDaemon struct{ cl *client.Client }

func (d clientDaemon) List(ctx context.Context) ([]verbs.ListEntry, error) {
	r, err := d.cl.List(ctx, &verbs.ListArgs{})
	if err != nil {
		return nil, err
	}
	return r.Agents, nil
}

func (d clientDaemon) Close(ctx context.Context, id string) error {
	_, err := d.cl.Close(ctx, &verbs.CloseArgs{AgentID: id})
	return err
}

func (d clientDaemon) Forget(ctx context.Context, id string) error {
	_, err := d.cl.Forget(ctx, &verbs.ForgetArgs{AgentIDs: []string{id}})
	return err
}

func (d clientDaemon) Permit(ctx context.Context, id, requestID string, decision apitype.Decision) error {
	_, err := d.cl.Permit(ctx, &verbs.PermitArgs{AgentID: id, RequestID: requestID, Decision: decision})
	return err
}

func (d clientDaemon) Interrupt(ctx context.Context, id string) (bool, error) {
	r, err := d.cl.Interrupt(ctx, &verbs.InterruptArgs{AgentID: id})
	if err != nil {
		return false, err
	}
	return r.Interrupted, nil
}

func (d clientDaemon) Send(ctx context.Context, id, text string) (int, error) {
	r, err := d.cl.Send(ctx, &verbs.SendArgs{AgentID: id, Text: text})
	if err != nil {
		return 0, err
	}
	return r.Turn, nil
}

func (d clientDaemon) History(ctx context.Context, id string) ([]event.Envelope, error) {
	w, err := d.cl.Events(ctx, id, 0, false)
	if err != nil {
		return nil, err
	}
	defer w.Close()
	var out []event.Envelope
	for {
		e, err := w.Next()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, *e)
	}
}

func (d clientDaemon) Output(ctx context.Context, id string) (*verbs.OutputResult, error) {
	return d.cl.Output(ctx, &verbs.OutputArgs{AgentID: id, Which: verbs.DefaultWhich})
}

// notRunning says the daemon is down, in the monitor's words: it never
// starts one.
func notRunning(cl *client.Client) error {
	return fmt.Errorf("kaimon-agentd is not running (socket %s); the monitor does not start it: run `kaimon daemon start`",
		cl.Paths.Socket())
}

// Once prints the agents table once, for scripts and screenshots: plain
// text unless out is a terminal (colour then, NO_COLOR honoured).
// noColor (the global --no-color) turns colour off even on a terminal.
func Once(ctx context.Context, cl *client.Client, out io.Writer, noColor bool) error {
	cl.NoAutostart = true
	agents, err := clientDaemon{cl}.List(ctx)
	if err != nil {
		var down *client.DaemonDownError
		if errors.As(err, &down) {
			return notRunning(cl)
		}
		return err
	}
	return printTable(agents, out, noColor)
}

// printTable prints the table of agents, as --once does.
func printTable(agents []verbs.ListEntry, out io.Writer, noColor bool) error {
	m := New(nil, home())
	m.applyList(listMsg{gen: 1, agents: agents})
	// Piped, nothing is elided; on a terminal, the table fits it.
	width := naturalWidth(m.agents, m.home)
	if f, ok := out.(*os.File); ok && term.IsTerminal(f.Fd()) {
		if w, _, err := term.GetSize(f.Fd()); err == nil && w > 0 {
			width = w
		}
	}
	header, rows := tableLines(m.agents, -1, width, time.Now(), m.home)
	var b strings.Builder
	b.WriteString(strings.TrimRight(header, " ") + "\n")
	for _, r := range rows {
		b.WriteString(strings.TrimRight(r, " ") + "\n")
	}
	if len(rows) == 0 {
		b.WriteString("no agents (open one with `kaimon open DIR`)\n")
	}
	_, err := fmt.Fprint(onceWriter(out, noColor), b.String())
	return err
}

// onceWriter is where --once writes: colour downsampled to what out
// takes (NO_COLOR, TERM=dumb, not a terminal), and none with --no-color.
func onceWriter(out io.Writer, noColor bool) *colorprofile.Writer {
	w := colorprofile.NewWriter(out, os.Environ())
	w.Profile = profile(w.Profile, noColor)
	return w
}

// profile is the detected colour profile, lowered to Ascii (no colour;
// bold and the like stay) by --no-color; never raised: piped output
// stays plain text.
func profile(detected colorprofile.Profile, noColor bool) colorprofile.Profile {
	if noColor {
		return min(detected, colorprofile.Ascii)
	}
	return detected
}

// programOptions are the full-screen program's options: with --no-color
// its profile is lowered as --once's, since bubbletea would otherwise go
// by the environment alone.
func programOptions(out io.Writer, noColor bool) []tea.ProgramOption {
	if noColor {
		return []tea.ProgramOption{tea.WithColorProfile(profile(colorprofile.Detect(out, os.Environ()), true))}
	}
	return nil
}

func home() string {
	h, _ := os.UserHomeDir()
	return h
}

// Run runs the full-screen monitor until the user quits or ctx ends;
// noColor (the global --no-color) turns colour off.
func Run(ctx context.Context, cl *client.Client, in io.Reader, out io.Writer, noColor bool) error {
	if f, ok := out.(*os.File); ok && !term.IsTerminal(f.Fd()) {
		return errors.New("kaimon monitor needs a terminal; for a script, `kaimon monitor --once` prints the table")
	}
	cl.NoAutostart = true
	return runProgram(ctx, New(clientDaemon{cl}, home()), in, out,
		func(ctx context.Context, send func(tea.Msg)) {
			feed(ctx, []follow.Host{busHost("", func(context.Context) (*client.Client, error) { return cl, nil })}, false, send)
		},
		programOptions(out, noColor)...)
}

// runProgram runs m until the user quits or parent ends, with feed
// handing it messages from the side. A panic in the model or in a
// command (bubbletea recovers those and restores the terminal) or in
// feed is an error, never a quiet exit 0; only parent's end is a
// normal one.
func runProgram(parent context.Context, m tea.Model, in io.Reader, out io.Writer,
	feed func(context.Context, func(tea.Msg)), opts ...tea.ProgramOption) error {
	ctx, cancel := context.WithCancel(parent)
	defer cancel()
	opts = append([]tea.ProgramOption{tea.WithContext(ctx), tea.WithInput(in), tea.WithOutput(out)}, opts...)
	p := tea.NewProgram(quitOnFeedPanic{m}, opts...)
	done := make(chan struct{})
	var feedErr error // written before done is closed
	go func() {
		defer close(done)
		// feed runs outside bubbletea's own recovery: a panic here
		// would end the process with the terminal still raw. Tell the
		// program instead, which quits and so restores the terminal.
		// (Program.Kill from here races with the program's start.)
		defer func() {
			if r := recover(); r != nil {
				feedErr = fmt.Errorf("kaimon monitor: panic while following the bus: %v", r)
				p.Send(feedPanicMsg{})
			}
		}()
		feed(ctx, p.Send)
	}()
	_, err := p.Run()
	interrupted := parent.Err() != nil // read before cancel() below ends ctx
	cancel()
	<-done
	switch {
	case feedErr != nil:
		return feedErr
	case errors.Is(err, tea.ErrProgramPanic):
		return fmt.Errorf("kaimon monitor crashed: %w", err)
	case errors.Is(err, tea.ErrProgramKilled) && interrupted:
		return nil // interrupted: a normal end
	}
	return err
}

// feedPanicMsg says the feed goroutine panicked (its error is kept
// aside): the program is to quit.
type feedPanicMsg struct{}

// quitOnFeedPanic is the model, quitting on feedPanicMsg.
type quitOnFeedPanic struct{ tea.Model }

func (q quitOnFeedPanic) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	if _, ok := msg.(feedPanicMsg); ok {
		return q, tea.Quit
	}
	m, cmd := q.Model.Update(msg)
	return quitOnFeedPanic{m}, cmd
}

// The monitor's feed is a follow.Merge of its hosts (one, this machine's,
// for a monitor of one daemon): each host's envelopes handed to the model
// as they come, and its connection's news as ConnectedMsg and
// DisconnectedMsg.

// How long the monitor waits for a host it lost: this machine's daemon
// is looked for every half second (a Ping on a local socket, which never
// starts one); another host, from half a second up to 10 s, each attempt
// an ssh connection that may start the daemon there, as any command's.
var (
	localRetry  = follow.Retry{Every: 500 * time.Millisecond}
	remoteRetry = follow.Retry{Every: 500 * time.Millisecond, Max: 10 * time.Second}
)

// busHost is host name (this machine's daemon) as the monitor follows it:
// its bus, subscribed to every agent's channel as `kaimon tail` does. The
// follower joins each agent's live stream with its log: when the bus
// drops envelopes for a slow reader, the authoritative ones are read back
// from the log, in order, so no status or result goes missing.
func busHost(name string, clientOf func(context.Context) (*client.Client, error)) follow.Host {
	return follow.Host{Name: name, Unreachable: localRetry, Gone: localRetry,
		Dial: func(ctx context.Context, _ follow.Attempt) (*follow.Follower, error) {
			cl, err := clientOf(ctx)
			if err != nil {
				return nil, err
			}
			if _, err := cl.Ping(ctx); err != nil {
				return nil, errors.New("no answer on " + cl.Paths.Socket())
			}
			return follow.Dial(ctx, cl, []string{"agent:"})
		}}
}

// feed follows hosts into the model until ctx ends. qualified says the
// model shows several hosts: each envelope's agent id is then qualified
// with its host (local/ID for this machine's). The merge hands envelopes
// on in goroutines of its own: a panic there is caught and raised again
// here, in feed's goroutine, which runProgram guards (the terminal is
// restored, and the panic is an error).
func feed(ctx context.Context, hosts []follow.Host, qualified bool, send func(tea.Msg)) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	panicked := make(chan any, 1)
	guard := func() {
		if r := recover(); r != nil {
			select {
			case panicked <- r:
			default:
			}
			cancel()
		}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		follow.Merge(ctx, hosts, follow.Sink{
			Emit: func(host string, e *follow.Envelope) error {
				defer guard()
				env, err := e.Decode()
				if err != nil {
					return nil // not for the monitor to stop on
				}
				if qualified {
					env.AgentID = qualify(host, env.AgentID)
				}
				send(EnvelopeMsg{Env: *env})
				return nil
			},
			Note: func(n follow.Note) {
				defer guard()
				switch n.Kind {
				case follow.Connected:
					send(ConnectedMsg{Host: n.Host})
				case follow.Gone, follow.Ended:
					// The source's own error is a bare EOF or reset.
					send(DisconnectedMsg{Host: n.Host, Err: fmt.Errorf("its event stream went away: %w", fleet.Cause(n.Err))})
				case follow.Unreachable:
					send(DisconnectedMsg{Host: n.Host, Err: fleet.Cause(n.Err)})
				case follow.Broke:
					if n.Attempt == 1 {
						send(DisconnectedMsg{Host: n.Host, Err: fleet.Cause(n.Err)})
					}
				}
			},
		})
	}()
	<-done
	select {
	case r := <-panicked:
		panic(r)
	default:
	}
}
