package monitor

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/term"

	"github.com/kaimon/kaimon/internal/apitype"
	"github.com/kaimon/kaimon/internal/client"
	"github.com/kaimon/kaimon/internal/event"
	"github.com/kaimon/kaimon/internal/fleet"
	"github.com/kaimon/kaimon/internal/follow"
	"github.com/kaimon/kaimon/internal/verbs"
)

// A monitor of several hosts is the monitor of one daemon with two seams
// widened: its Daemon is the fleet (every host's list, each row's action
// routed to its host by the row's qualified id), and its feed is one
// follower per host (this machine's bus; another host's GET /v1/events
// through ssh), each qualifying the ids of what it hands the model. Every
// id is NAME/ID, this machine's local/ID, which the fleet routes as any
// other: the model needs no notion of hosts beyond the HOST column it
// reads from the ids.

// fleetDaemon is the Daemon of the hosts names of f.
type fleetDaemon struct {
	f     *fleet.Fleet
	names []string

	mu     sync.Mutex
	last   map[string][]verbs.ListEntry // each host's last list
	failed []error                      // the hosts that did not answer the last List
}

// qualify is id of host as the monitor of several hosts shows it.
func qualify(host, id string) string { return host + "/" + id }

// List asks every host in parallel, each within ctx. A host that does not
// answer keeps the rows of its last answer (its follower says, in the
// header, that it is unreachable); only when none answers is it an error.
func (d *fleetDaemon) List(ctx context.Context) ([]verbs.ListEntry, error) {
	answers := d.f.ListEach(ctx, d.names, &verbs.ListArgs{})
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.last == nil {
		d.last = map[string][]verbs.ListEntry{}
	}
	var out []verbs.ListEntry
	d.failed = nil
	for _, a := range answers {
		if a.Err != nil {
			d.failed = append(d.failed, a.Err)
			out = append(out, d.last[a.Host]...)
			continue
		}
		for j := range a.Res.Agents {
			a.Res.Agents[j].AgentID = qualify(a.Host, a.Res.Agents[j].AgentID)
		}
		d.last[a.Host] = a.Res.Agents
		out = append(out, a.Res.Agents...)
	}
	if len(d.failed) == len(d.names) {
		return nil, errors.Join(d.failed...)
	}
	return out, nil
}

func (d *fleetDaemon) Close(ctx context.Context, id string) error {
	_, err := d.f.Close(ctx, &verbs.CloseArgs{AgentID: id})
	return err
}

func (d *fleetDaemon) Forget(ctx context.Context, id string) error {
	_, err := d.f.Forget(ctx, &verbs.ForgetArgs{AgentIDs: []string{id}})
	return err
}

func (d *fleetDaemon) Permit(ctx context.Context, id, requestID string, decision apitype.Decision) error {
	_, err := d.f.Permit(ctx, &verbs.PermitArgs{AgentID: id, RequestID: requestID, Decision: decision})
	return err
}

func (d *fleetDaemon) Interrupt(ctx context.Context, id string) (bool, error) {
	r, err := d.f.Interrupt(ctx, &verbs.InterruptArgs{AgentID: id})
	if err != nil {
		return false, err
	}
	return r.Interrupted, nil
}

func (d *fleetDaemon) Send(ctx context.Context, id, text string) (int, error) {
	r, err := d.f.Send(ctx, &verbs.SendArgs{AgentID: id, Text: text})
	if err != nil {
		return 0, err
	}
	return r.Turn, nil
}

func (d *fleetDaemon) History(ctx context.Context, id string) ([]event.Envelope, error) {
	host, bare, err := d.f.Route(id)
	if err != nil {
		return nil, err
	}
	cl, err := d.f.Client(ctx, host)
	if err != nil {
		return nil, err
	}
	envs, err := clientDaemon{cl}.History(ctx, bare)
	for i := range envs {
		envs[i].AgentID = id
	}
	return envs, fleet.Cause(err)
}

func (d *fleetDaemon) Output(ctx context.Context, id string) (*verbs.OutputResult, error) {
	return d.f.Output(ctx, &verbs.OutputArgs{AgentID: id, Which: verbs.DefaultWhich})
}

// OnceHosts prints the table of the agents of the hosts names, with their
// HOST column, as Once does for one daemon. A host that does not answer is
// told on errOut; the exit is an error when any did not.
func OnceHosts(ctx context.Context, f *fleet.Fleet, names []string, out, errOut io.Writer, noColor bool) error {
	d := &fleetDaemon{f: f, names: names}
	agents, err := d.List(ctx)
	if err != nil {
		return err
	}
	for _, err := range d.failed {
		fmt.Fprintf(errOut, "kaimon: monitor: %v\n", err)
	}
	if err := printTable(agents, out, noColor); err != nil {
		return err
	}
	if len(d.failed) > 0 {
		return fmt.Errorf("%d of %d hosts did not answer (see above)", len(d.failed), len(names))
	}
	return nil
}

// RunHosts runs the full-screen monitor over the hosts names of f (a
// configured name, or local for this machine), as Run does over one
// daemon.
func RunHosts(ctx context.Context, f *fleet.Fleet, names []string, in io.Reader, out io.Writer, noColor bool) error {
	if o, ok := out.(*os.File); ok && !term.IsTerminal(o.Fd()) {
		return errors.New("kaimon monitor needs a terminal; for a script, `kaimon monitor --once` prints the table")
	}
	return runProgram(ctx, New(&fleetDaemon{f: f, names: names}, home()), in, out,
		func(ctx context.Context, send func(tea.Msg)) { followHosts(ctx, f, names, send) },
		programOptions(out, noColor)...)
}

// followHosts follows every host of names until ctx ends: this
// machine's bus, and another host's event stream through ssh
// (follow.Remote, which reconnects a broken connection and resumes each
// agent by seq), each reached again whenever it cannot be.
func followHosts(ctx context.Context, f *fleet.Fleet, names []string, send func(tea.Msg)) {
	hosts := make([]follow.Host, len(names))
	for i, name := range names {
		if fleet.IsLocal(name) {
			hosts[i] = busHost(name, func(ctx context.Context) (*client.Client, error) { return f.Client(ctx, name) })
			continue
		}
		hosts[i] = follow.Host{Name: name, Unreachable: remoteRetry, Gone: remoteRetry,
			Dial: follow.RemoteDial(func(ctx context.Context) (*client.Client, error) { return f.Client(ctx, name) }, "agent:")}
	}
	feed(ctx, hosts, true, send)
}

var _ Daemon = (*fleetDaemon)(nil)
