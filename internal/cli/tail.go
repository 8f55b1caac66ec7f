package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/kaimon/kaimon/internal/apitype"
	"github.com/kaimon/kaimon/internal/client"
	"github.com/kaimon/kaimon/internal/event"
	"github.com/kaimon/kaimon/internal/eventlog"
	"github.com/kaimon/kaimon/internal/fleet"
	"github.com/kaimon/kaimon/internal/follow"
	"github.com/kaimon/kaimon/internal/verbs"
)

// tailOptions are tail's command line, parsed; runTail works from them so
// tests can call it without flag parsing.
type tailOptions struct {
	Channels    []string
	Since       uint64
	Replay      bool // --since or --from-start given
	Kinds       map[event.Kind]bool
	NoDeltas    bool
	Turn        int
	UntilResult bool
	Wait        bool // an unknown agent:ID is waited for, not an error
	Pretty      bool
	// AllHosts merges this machine and every configured host into one
	// stream (tailhosts.go); else Host is the one host followed (its
	// channels' qualifier, else --host's), "" for this machine.
	AllHosts bool
	Host     string
	// qualified is the first channel as given with its host (NAME/agent:ID),
	// for route to check; "" when none named one.
	qualified string
	Out, Err  io.Writer
	// ios say how --pretty colours, and whether it shows a spinner; nil
	// (a test's options): neither.
	ios *IOStreams
}

func tailCmd() *cli.Command {
	return &cli.Command{
		Name:      "tail",
		Usage:     "Print agents' events live from the event bus, one JSON envelope a line",
		ArgsUsage: "[CHANNEL…]",
		Description: "Subscribes to the event bus (ipc://<sock_dir>/kaimon-events.sock) and prints every envelope " +
			"{kind, turn, data, agent_id, seq, ts} of the channels as one line of JSON, ready for jq. A CHANNEL is a " +
			"ZeroMQ prefix: agent: (the default) is every agent, agent:ID one agent.\n\n" +
			"--since SEQ (or --from-start) first replays the agent's event log after SEQ and then goes on live, " +
			"joined by seq with no gap and no duplicate; it needs a single agent:ID channel. When seq jumps (the " +
			"bus dropped envelopes for a slow reader), the missing authoritative events are read from the log, and " +
			"lost streamed chunks are reported on stderr.\n\n" +
			"--until-result exits after the first result printed (or the result of --turn N): 0 if the turn " +
			"succeeded, 3 if it failed or never will end: the agent is dead and the result is not in its log " +
			"(that includes a --turn N beyond the dead agent's last turn). It is what a script waits on:\n\n" +
			"   turn=$(kaimon send $id 'fix the test')\n" +
			"   kaimon tail agent:$id --from-start --turn $turn --until-result --no-deltas | jq -c .\n\n" +
			"With --since, --from-start or --until-result, agent:ID is that one agent, not a prefix, and tail asks " +
			"the daemon about it: an unknown ID exits 1 at once, unless --wait is given, which waits for the " +
			"agent to be opened.\n\n" +
			"Another host's agents (--host NAME, or a channel NAME/agent:ID) come through its daemon's event stream " +
			"over ssh, joined with their logs there: a connection that breaks is reconnected and each agent resumed " +
			"after its last seq printed, the streamed chunks lost meanwhile reported on stderr. --all-hosts merges " +
			"this machine and every host of `kaimon host ls` into one stream of CHANNEL, each envelope with a " +
			"\"host\" field (local for this machine) and its agent_id qualified (NAME/ID) so that it pastes back. A " +
			"host that cannot be reached at the start is reported on stderr and tried again in the background, its " +
			"agents then followed from when it answers; tail exits 1 at once only when no host answers.",
		Flags: []cli.Flag{
			&cli.Uint64Flag{Name: "since", Usage: "replay the agent's log after seq `SEQ` first, then go on live (one agent:ID channel)"},
			&cli.BoolFlag{Name: "from-start", Usage: "replay the agent's whole log first (--since 0)"},
			&cli.StringSliceFlag{Name: "kinds", Usage: "print only these kinds, comma-separated (e.g. assistant_text,result)"},
			&cli.BoolFlag{Name: "no-deltas", Usage: "print only authoritative events, as the log keeps them (no delta:true, no tool_input_delta)"},
			&cli.IntFlag{Name: "turn", Usage: "print only turn `N`"},
			&cli.BoolFlag{Name: "until-result", Usage: "exit after the first result printed (of --turn N if given): 0 if the turn succeeded, 3 if it failed or never will (the agent is dead, or N is beyond a dead agent's last turn)"},
			&cli.BoolFlag{Name: "wait", Usage: "with --since, --from-start or --until-result: wait for an agent:ID that is not open yet instead of exiting 1"},
			&cli.BoolFlag{Name: "pretty", Usage: "render for people: text flowing, one line per tool call, usage at the end of a turn"},
			&cli.BoolFlag{Name: "all-hosts", Usage: "merge this machine and every configured host into one stream, each envelope with its host"},
		},
		Action: func(c *cli.Context) error {
			o, err := tailOpts(c)
			if err != nil {
				return err
			}
			f, err := fleetOf(c)
			if err != nil {
				return err
			}
			if err := o.route(f); err != nil {
				return err
			}
			switch {
			case o.AllHosts:
				return runTailAll(c.Context, o, f)
			case !fleet.IsLocal(o.Host):
				return runTailRemote(c.Context, o, f)
			}
			cl, err := f.Client(c.Context, o.Host)
			if err != nil {
				return err
			}
			return runTail(c.Context, o, cl)
		},
	}
}

func tailOpts(c *cli.Context) (*tailOptions, error) {
	o := &tailOptions{Channels: c.Args().Slice(), NoDeltas: c.Bool("no-deltas"), Turn: c.Int("turn"),
		UntilResult: c.Bool("until-result"), Wait: c.Bool("wait"), Pretty: c.Bool("pretty"), AllHosts: c.Bool("all-hosts"),
		Out: c.App.Writer, Err: c.App.ErrWriter, ios: streamsOf(c)}
	if len(o.Channels) == 0 {
		o.Channels = []string{"agent:"}
	}
	host := ""
	for i, ch := range o.Channels {
		h, bare, ok := fleet.SplitID(ch)
		switch {
		case i > 0 && h != host:
			return nil, usagef("channels %s and %s are on different hosts: a tail follows one host, or every host with --all-hosts", o.Channels[0], ch)
		case ok && o.AllHosts:
			return nil, usagef("--all-hosts follows CHANNEL on every host: give it without a host (%s, not %s)", bare, ch)
		case ok && o.qualified == "":
			o.qualified = ch
		}
		host, ch = h, bare
		o.Channels[i] = ch
		if !strings.HasPrefix(ch, "agent:") {
			return nil, usagef("channel %q: agent channels are agent: (every agent) or agent:ID", ch)
		}
	}
	if c.IsSet("since") && c.Bool("from-start") {
		return nil, usagef("--since and --from-start contradict each other: pick one")
	}
	if c.IsSet("since") || c.Bool("from-start") {
		if len(o.Channels) != 1 || o.Channels[0] == "agent:" {
			return nil, usagef("--since and --from-start replay one agent's log: give exactly one channel agent:ID (got %s)", strings.Join(o.Channels, " "))
		}
		o.Replay, o.Since = true, c.Uint64("since")
	}
	if o.Wait && o.agent() == "" {
		return nil, usagef("--wait waits for one agent: give exactly one channel agent:ID (got %s)", strings.Join(o.Channels, " "))
	}
	if (o.AllHosts || host != "") && len(o.Channels) > 1 {
		return nil, usagef("a tail of other hosts follows one channel (got %s): agent: is every agent", strings.Join(o.Channels, " "))
	}
	if o.AllHosts && (o.Replay || o.UntilResult || o.Wait) {
		return nil, usagef("--since, --from-start, --until-result and --wait are about one agent, and --all-hosts about every host: " +
			"give the agent's host instead (tail NAME/agent:ID)")
	}
	if c.IsSet("turn") && o.Turn < 1 {
		return nil, usagef("--turn must be a turn number from 1")
	}
	for _, k := range c.StringSlice("kinds") {
		for _, k := range strings.Split(k, ",") {
			k = strings.TrimSpace(k)
			if k == "" {
				continue
			}
			known := false
			for _, kk := range event.Kinds {
				known = known || string(kk) == k
			}
			if !known {
				return nil, usagef("--kinds: unknown kind %q (kinds: %s)", k, kindNames())
			}
			if o.Kinds == nil {
				o.Kinds = map[event.Kind]bool{}
			}
			o.Kinds[event.Kind(k)] = true
		}
	}
	return o, nil
}

func kindNames() string {
	var s []string
	for _, k := range event.Kinds {
		s = append(s, string(k))
	}
	return strings.Join(s, ", ")
}

// route settles the host followed, now that the fleet knows the hosts: a
// channel's qualifier (NAME/agent:ID), else --host or KAIMON_HOST.
func (o *tailOptions) route(f *fleet.Fleet) error {
	if o.AllHosts {
		if f.Pinned {
			return usagef("--all-hosts follows every host, and --host names one: drop one of them")
		}
		return nil
	}
	if o.qualified == "" {
		o.Host = f.Default
		return nil
	}
	h, _, err := f.Route(o.qualified)
	o.Host = h
	return err
}

// agent is the one agent ID of a single agent:ID channel, "" for agent:
// or several channels.
func (o *tailOptions) agent() string {
	if len(o.Channels) != 1 {
		return ""
	}
	return strings.TrimPrefix(o.Channels[0], "agent:")
}

// errTailDone ends a tail whose --until-result turn succeeded.
var errTailDone = errors.New("tail done")

// runTail subscribes first, then replays the log (with --since), then
// prints live envelopes: the follower puts each agent's envelopes in seq
// order with no gap and no duplicate. Plain output is each envelope's
// bytes as the daemon encoded them, written in batches: a tail that
// decodes and re-encodes falls behind an agent at full speed, and the
// bus drops what it cannot take.
func runTail(ctx context.Context, o *tailOptions, cl *client.Client) error {
	if _, err := cl.Up(ctx); err != nil {
		return err
	}
	// Only once the subscriptions are in force may the log be read: what
	// is published meanwhile is then held for us on the bus.
	f, err := follow.Dial(ctx, cl, o.Channels)
	if err != nil {
		return fmt.Errorf("%w (is kaimon-agentd running? try `kaimon daemon status`)", err)
	}
	defer f.Close()
	p := newTailPrinter(o)
	p.ctx = ctx
	if p.pretty != nil {
		defer p.pretty.stopSpinner()
	}
	// With a replay or --until-result, agent:ID is one agent, and the
	// daemon is asked about it: an unknown one ends tail now (unless
	// --wait), a dead one ends --until-result once its log is read.
	//
	// The question is asked after the subscriptions are in force, and
	// the log read after the answer, so whatever happens to the agent
	// after the answer reaches us: a record the daemon writes after it is
	// in the replay, or on the bus, or both (the follower prints it
	// once). A status dead in the replay outweighs an older answer
	// (settle), one on the bus ends the wait (watch). And an answer
	// "dead" comes only once the backend has reported its last result:
	// the log then holds every result of that life, so the replay finds
	// the awaited one if it exists.
	var agent *verbs.AgentStatus
	if id := o.agent(); id != "" && (o.Replay || o.UntilResult) {
		if agent, err = o.ask(ctx, cl, id); err != nil {
			return err
		}
		if agent != nil && agent.AgentID != "" {
			id = agent.AgentID // the whole id a unique prefix named
		}
		p.only = id
		f.Only = id // not the agents whose ids merely start with it
	}
	f.Lost = func(agent string, from, to uint64, n int) {
		p.flush()
		fmt.Fprintf(o.Err, "kaimon: tail: lost %d streamed chunk(s) of agent %s (seq %d-%d): the bus dropped them for this slow reader; the complete blocks follow\n",
			n, agent, from, to)
	}
	f.Bad = func(agent string, b eventlog.Bad) {
		p.flush()
		fmt.Fprintf(o.Err, "kaimon: tail: agent %s: event log %s %v; skipped\n",
			agent, cl.Paths.Agent(agent).Events, b)
	}
	f.Idle = p.flush
	if o.Replay {
		if err := f.Replay(p.only, o.Since, p.emit); err != nil {
			return p.end(err)
		}
		if agent != nil && agent.Status == apitype.Dead {
			f.Torn(p.only) // no one writes its log: a last line cut short is torn
		}
	}
	if agent != nil {
		if err := p.settle(agent); err != nil {
			return p.end(err)
		}
	}
	p.live = true
	err = f.Run(ctx, p.emit)
	var se *follow.SourceError
	switch {
	case ctx.Err() != nil:
		return p.end(nil) // interrupted: a normal end
	case errors.As(err, &se):
		p.end(nil)
		return fmt.Errorf("the event bus went away (%v): kaimon-agentd stopped", se.Err)
	}
	return p.end(err)
}

// ask asks cl's daemon about the one agent id that a replay or
// --until-result is about: nil (and a note) when --wait waits for it to be
// opened, an error when it is unknown.
func (o *tailOptions) ask(ctx context.Context, cl *client.Client, id string) (*verbs.AgentStatus, error) {
	agent, err := cl.Status(ctx, &verbs.StatusArgs{AgentID: id})
	var ve *verbs.Error
	switch {
	case errors.As(err, &ve) && ve.Code == verbs.CodeNotFound && o.Wait:
		fmt.Fprintf(o.Err, "kaimon: tail: no agent %s yet; waiting for it to be opened\n", id)
		return nil, nil
	case errors.As(err, &ve) && ve.Code == verbs.CodeNotFound:
		return nil, &verbs.Error{Code: verbs.CodeNotFound,
			Message: fmt.Sprintf("no agent %s: see `kaimon list`, or give --wait to wait for it to be opened", id)}
	case err != nil:
		return nil, fleet.Cause(err)
	}
	return agent, nil
}

// tailPrinter filters and prints envelopes, and watches for the result
// that ends --until-result.
type tailPrinter struct {
	ctx    context.Context
	o      *tailOptions
	pretty *pretty
	// out batches plain output: it is flushed when the bus has nothing
	// more ready (Follower.Idle), before a note on stderr, and at the end.
	out *bufio.Writer
	// line is a merged stream's line being made (tailHost.write).
	line []byte
	// inTurn is the turn in flight per agent, as far as seen.
	inTurn map[string]int
	// only is the one agent tail is about ("" for a prefix); status is
	// its last status seen, and live says the replay is over: from then
	// on a status dead of only is its death now, not a past life's.
	only   string
	status apitype.AgentState
	live   bool
}

func newTailPrinter(o *tailOptions) *tailPrinter {
	p := &tailPrinter{o: o, inTurn: map[string]int{}}
	if !o.Pretty {
		p.out = bufio.NewWriterSize(o.Out, 64<<10)
	}
	if o.Pretty {
		single := len(o.Channels) == 1 && o.Channels[0] != "agent:"
		pal, spin := plain, false // a test's options: no colour, no spinner
		if o.ios != nil {
			pal, spin = o.ios.pal, o.ios.canSpin()
		}
		p.pretty = newPretty(o.Out, !single, pal)
		p.pretty.startSpinner(o.Err, spin) // only on a terminal
	}
	return p
}

func (p *tailPrinter) match(e *follow.Envelope) bool {
	o := p.o
	if o.Kinds != nil && !o.Kinds[e.Kind] {
		return false
	}
	if o.NoDeltas && !event.Authoritative(e.Kind, e.Data) {
		return false
	}
	return o.Turn == 0 || e.Turn == o.Turn
}

// emit prints e if it passes the filters: plain, its bytes as they came;
// pretty, decoded and rendered.
func (p *tailPrinter) emit(e *follow.Envelope) error {
	if p.ctx != nil && p.ctx.Err() != nil {
		return p.ctx.Err()
	}
	if p.match(e) {
		if p.pretty != nil {
			env, err := e.Decode()
			if err != nil {
				return err
			}
			p.pretty.print(env)
		} else {
			p.out.Write(e.Raw)
			if err := p.out.WriteByte('\n'); err != nil {
				return err
			}
		}
	}
	return p.watch(e)
}

// flush writes out what plain output holds.
func (p *tailPrinter) flush() error {
	if p.out == nil {
		return nil
	}
	return p.out.Flush()
}

// watch ends --until-result at the result of the turn waited for, or when
// the agent dies in that turn.
func (p *tailPrinter) watch(e *follow.Envelope) error {
	if !p.o.UntilResult {
		return nil
	}
	mine := p.o.Turn == 0 || e.Turn == p.o.Turn
	switch e.Kind {
	case event.TurnStarted:
		p.inTurn[e.Agent] = e.Turn
	case event.Result:
		delete(p.inTurn, e.Agent)
		if !mine {
			return nil
		}
		var d event.ResultData
		_ = json.Unmarshal(e.Data, &d)
		if d.StopReason.Failed() {
			msg := "stop reason " + string(d.StopReason)
			if d.Error != "" {
				msg += ": " + d.Error
			}
			return &verbs.Error{Code: verbs.CodeTurnFailed, Message: fmt.Sprintf("agent %s turn %d failed: %s", e.Agent, e.Turn, msg)}
		}
		return errTailDone
	case event.Status:
		var d event.StatusData
		_ = json.Unmarshal(e.Data, &d)
		if e.Agent == p.only {
			p.status = d.Status
		}
		if d.Status != apitype.Dead {
			return nil
		}
		n, ok := p.inTurn[e.Agent]
		delete(p.inTurn, e.Agent)
		if ok && (p.o.Turn == 0 || n == p.o.Turn) {
			return &verbs.Error{Code: verbs.CodeTurnFailed, Message: fmt.Sprintf("agent %s died during turn %d", e.Agent, n)}
		}
		// A death in the replay may have been followed by a reopen;
		// settle judges the replay as a whole.
		if p.live && e.Agent == p.only {
			return p.dead(e.Turn)
		}
	}
	return nil
}

// settle decides, once the replay (if any) is over, whether --until-result
// can still end well: not if the agent is dead, as its last status in the
// replay says, or else the daemon's answer st. Its result would have been
// in the replay.
func (p *tailPrinter) settle(st *verbs.AgentStatus) error {
	if !p.o.UntilResult {
		return nil
	}
	status := p.status
	if status == "" {
		status = st.Status // nothing replayed, or no status among it
	}
	if status != apitype.Dead {
		return nil
	}
	return p.dead(st.Turn)
}

// dead is the end of --until-result on an agent that is dead and whose
// awaited result was not printed; last is its last turn.
func (p *tailPrinter) dead(last int) error {
	var msg string
	switch {
	case p.o.Turn == 0:
		msg = fmt.Sprintf("agent %s is dead: no result will come", p.only)
	case p.o.Turn > last:
		msg = fmt.Sprintf("agent %s is dead: its last turn was %d, turn %d will never come", p.only, last, p.o.Turn)
	default:
		msg = fmt.Sprintf("agent %s is dead and turn %d has no result", p.only, p.o.Turn)
	}
	switch {
	case !p.o.Replay:
		msg += " (for a result it already had, add --from-start)"
	case p.o.Since > 0:
		msg += fmt.Sprintf(" after seq %d", p.o.Since)
	}
	return &verbs.Error{Code: verbs.CodeTurnFailed, Message: msg}
}

// end turns the error that stopped the join into tail's outcome.
func (p *tailPrinter) end(err error) error {
	if p.pretty != nil {
		p.pretty.endLine()
	}
	if ferr := p.flush(); ferr != nil && err == nil {
		err = ferr
	}
	if errors.Is(err, errTailDone) || errors.Is(err, context.Canceled) {
		return nil // done, or interrupted (during a long replay, say)
	}
	return err
}
