package monitor

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"charm.land/bubbles/v2/help"
	"charm.land/bubbles/v2/key"
	"charm.land/bubbles/v2/textinput"
	"charm.land/bubbles/v2/viewport"
	tea "charm.land/bubbletea/v2"
	"charm.land/lipgloss/v2"
	"github.com/charmbracelet/x/ansi"

	"github.com/kaimon/kaimon/internal/apitype"
	"github.com/kaimon/kaimon/internal/event"
	"github.com/kaimon/kaimon/internal/fleet"
	"github.com/kaimon/kaimon/internal/verbs"
)

// Daemon is what the monitor asks of kaimon-agentd. The real one is a
// client of its socket; tests give a fake.
type Daemon interface {
	List(ctx context.Context) ([]verbs.ListEntry, error)
	Close(ctx context.Context, id string) error
	Forget(ctx context.Context, id string) error
	Permit(ctx context.Context, id, requestID string, decision apitype.Decision) error
	// Interrupt cancels the agent's turn in flight; false: none ran.
	Interrupt(ctx context.Context, id string) (bool, error)
	// Send queues a turn of text; its number.
	Send(ctx context.Context, id, text string) (int, error)
	// History is the agent's event log, every authoritative envelope.
	History(ctx context.Context, id string) ([]event.Envelope, error)
	// Output is agent_output's last_message of the agent's latest turn:
	// while the turn runs, the text streamed so far (done false), which
	// the log does not keep until its block is complete.
	Output(ctx context.Context, id string) (*verbs.OutputResult, error)
}

// Messages the model takes, besides keys and window sizes.
type (
	// EnvelopeMsg is one envelope read from the bus.
	EnvelopeMsg struct{ Env event.Envelope }
	// ConnectedMsg says the bus subscription (or a host's event stream)
	// is in force: the agent list is (re)read. Host is the host's name in
	// a monitor of several (Host), "" in a monitor of one daemon.
	ConnectedMsg struct{ Host string }
	// DisconnectedMsg says the daemon (of Host) cannot be reached; the
	// follower keeps trying.
	DisconnectedMsg struct {
		Host string
		Err  error
	}
	// listMsg is agent_list's answer to request gen.
	listMsg struct {
		gen    int
		agents []verbs.ListEntry
		err    error
	}
	// backfillMsg is an agent's log, read for its feed, and for a
	// working agent the text its turn has streamed so far.
	backfillMsg struct {
		id       string
		envs     []event.Envelope
		err      error
		streamed *verbs.OutputResult
	}
	// historyMsg is an agent's log, read for the history screen.
	historyMsg struct {
		id   string
		envs []event.Envelope
		err  error
	}
	// doneMsg is the outcome of an action (close, forget, permit).
	doneMsg struct {
		what   string
		forgot string // the id forgotten, on success
		err    error
	}
	tickMsg time.Time
)

// stPermission is the monitor's own row state beside apitype.AgentStates:
// a live agent waiting on a permission request, which will not move until
// someone answers.
const stPermission apitype.AgentState = "permission"

// feedCap bounds the envelopes kept per agent for its feed.
const feedCap = 2000

type agent struct {
	verbs.ListEntry
	last    time.Time // last activity
	envs    []event.Envelope
	open    *stream
	pending []pending // permission requests without a decision, oldest first
	// dirty is the list generation current when an envelope last changed
	// the row: a list asked for before that is older than the row.
	dirty      int
	backfilled bool
	filling    bool
	cache      feedCache
	// stale says the agent's daemon cannot be reached: its row shows what
	// was last known, which may be over (restale).
	stale bool
}

// feedCache keeps an agent's feed rendered: View runs after every
// message, and streamed chunks come by the hundred.
type feedCache struct {
	width       int
	n           int
	first, last uint64
	lines       []string
}

// feedWindow is how many of the latest envelopes the feed pane renders;
// the history screen shows them all.
const feedWindow = 400

// feed is the agent's feed at width: its latest envelopes, then the block
// streaming.
func (a *agent) feed(width int) []string {
	envs := a.envs[max(len(a.envs)-feedWindow, 0):]
	c := &a.cache
	if c.lines == nil || c.width != width || c.n != len(envs) || len(envs) > 0 && (c.first != envs[0].Seq || c.last != envs[len(envs)-1].Seq) {
		*c = feedCache{width: width, n: len(envs), lines: renderFeed(a.AgentID, envs, nil, width)}
		if len(envs) > 0 {
			c.first, c.last = envs[0].Seq, envs[len(envs)-1].Seq
		}
	}
	if a.open == nil {
		return c.lines
	}
	return append(c.lines[:len(c.lines):len(c.lines)], renderFeed(a.AgentID, nil, a.open, width)...)
}

type pending struct {
	turn int
	req  event.PermissionData
}

// status is what the table shows: a waiting permission is its own state.
func (a *agent) status() apitype.AgentState {
	if len(a.pending) > 0 && a.AgentStatus.Status != apitype.Dead {
		return stPermission
	}
	return a.AgentStatus.Status
}

type mode int

const (
	modeMain mode = iota
	modeConfirm
	modePermit
	modeSend
	modeHistory
)

// Model is the monitor's state; Update is pure but for the commands it
// returns, so tests drive it with messages and read View.
type Model struct {
	d    Daemon
	home string
	now  func() time.Time

	width, height int

	agents []*agent
	byID   map[string]*agent
	selID  string

	connected bool
	downErr   string
	// down says, per host of a monitor of several, why it cannot be
	// reached; the others' rows go on.
	down    map[string]string
	listGen int
	listing bool
	relist  bool // an unknown agent was named while a list was in flight

	mode    mode
	confirm string // the agent x asks about
	forget  bool   // x asks to forget confirm (dead), not to close it
	flash   string

	keys     keyMap
	help     help.Model
	showHelp bool

	hist historyView
	// compose is the turn being typed for the selected agent (modeSend).
	compose textinput.Model
	sendTo  string
}

// historyView is the history screen: the agent's whole log, kept live by
// the bus while it is open.
type historyView struct {
	id      string
	loading bool
	err     error
	envs    []event.Envelope // authoritative, in seq order, none dropped
	base    []string         // envs rendered, at baseW
	baseW   int
	lines   []string // base, then the block streaming
	vp      viewport.Model
	search  textinput.Model
	typing  bool
	query   string
	matches []int // lines holding the query
	match   int   // the current one, in matches
}

// New returns a model that talks to d. home shortens paths (~).
func New(d Daemon, home string) *Model {
	m := &Model{d: d, home: home, now: time.Now, byID: map[string]*agent{}, keys: defaultKeys(), help: help.New(),
		width: 80, height: 24}
	m.hist.search = textinput.New()
	m.hist.search.Prompt = "/"
	m.compose = textinput.New()
	m.compose.Prompt = "> "
	return m
}

// Init starts the clock that ages the relative times.
func (m *Model) Init() tea.Cmd { return tick() }

func tick() tea.Cmd {
	return tea.Tick(time.Second, func(t time.Time) tea.Msg { return tickMsg(t) })
}

type keyMap struct {
	Up, Down, Close, History, Permit, Help, Quit key.Binding
	Interrupt, Send                              key.Binding
	PgUp, PgDn, Top, Bottom, Search, Next, Prev  key.Binding
	Back                                         key.Binding
	Yes, No, Allow, Deny                         key.Binding
}

func defaultKeys() keyMap {
	b := func(keys []string, h, desc string) key.Binding {
		return key.NewBinding(key.WithKeys(keys...), key.WithHelp(h, desc))
	}
	return keyMap{
		Up:        b([]string{"up", "k"}, "↑/k", "up"),
		Down:      b([]string{"down", "j"}, "↓/j", "down"),
		Close:     b([]string{"x"}, "x", "close/forget"),
		History:   b([]string{"enter"}, "enter", "history"),
		Permit:    b([]string{"p"}, "p", "permit"),
		Interrupt: b([]string{"i"}, "i", "interrupt"),
		Send:      b([]string{"s"}, "s", "send"),
		Help:      b([]string{"?"}, "?", "help"),
		Quit:      b([]string{"q", "ctrl+c"}, "q", "quit"),
		PgUp:      b([]string{"pgup", "b"}, "pgup", "page up"),
		PgDn:      b([]string{"pgdown", "space", "f"}, "pgdn", "page down"),
		Top:       b([]string{"g", "home"}, "g", "top"),
		Bottom:    b([]string{"G", "end"}, "G", "bottom"),
		Search:    b([]string{"/"}, "/", "search"),
		Next:      b([]string{"n"}, "n", "next match"),
		Prev:      b([]string{"N"}, "N", "previous match"),
		Back:      b([]string{"esc"}, "esc", "back"),
		Yes:       b([]string{"y"}, "y", "yes"),
		No:        b([]string{"n", "esc"}, "n", "no"),
		Allow:     b([]string{"a"}, "a", string(apitype.Allow)),
		Deny:      b([]string{"d"}, "d", string(apitype.Deny)),
	}
}

// ShortHelp and FullHelp make keyMap a help.KeyMap.
func (k keyMap) ShortHelp() []key.Binding {
	// enter (history) is in the full help: the short one must fit 80
	// columns with its acts and the way to the rest.
	return []key.Binding{k.Permit, k.Send, k.Interrupt, k.Close, k.Help, k.Quit}
}

func (k keyMap) FullHelp() [][]key.Binding {
	return [][]key.Binding{
		{k.Up, k.Down, k.Permit, k.Send, k.Interrupt, k.Close},
		{k.History, k.PgUp, k.PgDn, k.Top, k.Bottom},
		{k.Search, k.Next, k.Prev, k.Back, k.Help, k.Quit},
	}
}

// Update applies one message.
func (m *Model) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	cmd := m.update(msg)
	return m, tea.Batch(cmd, m.backfill())
}

func (m *Model) update(msg tea.Msg) tea.Cmd {
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		m.width, m.height = msg.Width, msg.Height
		m.help.SetWidth(msg.Width)
		m.layoutHistory()
		if m.mode == modeHistory && !m.hist.loading {
			m.renderHistoryLines(true) // wrapped anew at the new width
		}
		return nil
	case tickMsg:
		return tick()
	case ConnectedMsg:
		m.connected, m.downErr = true, ""
		delete(m.down, msg.Host)
		m.restale()
		// What was published while away is in the logs: feeds are read
		// again (and joined by seq) when next shown.
		for _, a := range m.agents {
			a.backfilled = false
		}
		return m.list()
	case DisconnectedMsg:
		if msg.Host != "" {
			why := "host " + msg.Host + " unreachable — waiting"
			if fleet.IsLocal(msg.Host) {
				why = "this machine's daemon not running — waiting"
			}
			if msg.Err != nil {
				why += " (" + firstLine(msg.Err.Error()) + ")"
			}
			if m.down == nil {
				m.down = map[string]string{}
			}
			m.down[msg.Host] = why
			m.restale()
			return nil
		}
		m.connected = false
		m.downErr = "daemon not running — waiting"
		if msg.Err != nil {
			m.downErr += " (" + firstLine(msg.Err.Error()) + ")"
		}
		m.restale()
		return nil
	case listMsg:
		return m.applyList(msg)
	case EnvelopeMsg:
		return m.apply(&msg.Env)
	case backfillMsg:
		if a := m.byID[msg.id]; a != nil {
			// Done, or failed: it is not asked again before a reconnect
			// (every message would ask again).
			a.filling, a.backfilled = false, true
			if msg.err != nil {
				m.flash = "reading the log of " + msg.id + ": " + firstLine(msg.err.Error())
				return nil
			}
			m.merge(a, msg.envs)
			a.fillStream(msg.streamed)
		}
		return nil
	case historyMsg:
		if h := &m.hist; m.mode == modeHistory && h.id == msg.id {
			// What the bus brought while the log was read is joined to
			// it by seq.
			live := h.envs
			h.loading, h.err, h.envs = false, msg.err, nil
			for _, e := range msg.envs {
				h.envs = insertSeq(h.envs, e)
			}
			for _, e := range live {
				h.envs = insertSeq(h.envs, e)
			}
			h.base = nil
			m.renderHistoryLines(false)
			h.vp.GotoBottom()
		}
		return nil
	case doneMsg:
		if msg.err != nil {
			m.flash = msg.what + ": " + firstLine(msg.err.Error())
			return nil
		}
		m.flash = msg.what
		if msg.forgot != "" {
			m.remove(msg.forgot)
		}
		return nil
	case tea.KeyPressMsg:
		return m.key(msg)
	}
	return nil
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return s
}

// list asks for agent_list, unless a request is in flight already.
func (m *Model) list() tea.Cmd {
	if m.listing {
		m.relist = true
		return nil
	}
	m.listing, m.relist = true, false
	m.listGen++
	gen, d := m.listGen, m.d
	return func() tea.Msg {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		agents, err := d.List(ctx)
		return listMsg{gen: gen, agents: agents, err: err}
	}
}

// restale marks the live rows whose daemon cannot be reached: every one
// when the monitor's one daemon is gone, a host's when that host is.
func (m *Model) restale() {
	for _, a := range m.agents {
		host, _, qualified := fleet.SplitID(a.AgentID)
		gone := qualified && m.down[host] != "" || !qualified && !m.connected && m.downErr != ""
		a.stale = gone && a.AgentStatus.Status != apitype.Dead // a dead agent stays dead
	}
}

func (m *Model) applyList(msg listMsg) tea.Cmd {
	defer m.restale()
	m.listing = false
	if msg.err != nil {
		m.flash = "agent_list: " + firstLine(msg.err.Error())
	} else {
		seen := map[string]bool{}
		for _, e := range msg.agents {
			seen[e.AgentID] = true
			a := m.byID[e.AgentID]
			switch {
			case a == nil:
				a = &agent{ListEntry: e}
				m.byID[e.AgentID] = a
				m.agents = append(m.agents, a)
				a.pending = listPending(nil, e)
			case a.dirty >= msg.gen:
				// Envelopes since the request are newer than the answer:
				// keep what they said (pending permissions included),
				// take the rest.
				st, turn, u := a.AgentStatus.Status, a.Turn, a.Usage
				a.ListEntry = e
				a.AgentStatus.Status, a.Turn = st, max(turn, e.Turn)
				a.Usage.InputTokens = max(u.InputTokens, e.Usage.InputTokens)
				a.Usage.OutputTokens = max(u.OutputTokens, e.Usage.OutputTokens)
			default:
				a.ListEntry = e
				a.pending = listPending(a.pending, e)
			}
			if t, err := time.Parse(time.RFC3339Nano, e.LastActivity); err == nil && t.After(a.last) {
				a.last = t
			}
		}
		for id, a := range m.byID {
			if !seen[id] && a.dirty < msg.gen {
				m.remove(id) // forgotten meanwhile
			}
		}
		m.sort()
	}
	if m.relist {
		return m.list()
	}
	return nil
}

// listPending is the agent's pending permissions as the list says: the
// list is the source (bus events update them between lists), and a request
// already known from its event keeps the event's fuller data.
func listPending(known []pending, e verbs.ListEntry) []pending {
	var out []pending
	for _, pp := range e.PendingPermissions {
		p := pending{turn: e.Turn, req: event.PermissionData{
			RequestID: pp.RequestID,
			ToolCall:  event.ToolCall{Title: cmp.Or(pp.Title, pp.Tool)},
			ExpiresAt: pp.ExpiresAt,
		}}
		for _, k := range known {
			if k.req.RequestID == pp.RequestID {
				p = k
				break
			}
		}
		out = append(out, p)
	}
	return out
}

// sort puts live agents first, then dead ones, each by creation.
func (m *Model) sort() {
	sort.SliceStable(m.agents, func(i, j int) bool {
		a, b := m.agents[i], m.agents[j]
		if (a.AgentStatus.Status == apitype.Dead) != (b.AgentStatus.Status == apitype.Dead) {
			return b.AgentStatus.Status == apitype.Dead
		}
		if a.CreatedAt != b.CreatedAt {
			return a.CreatedAt < b.CreatedAt
		}
		return a.AgentID < b.AgentID
	})
	if m.selID == "" && len(m.agents) > 0 {
		m.selID = m.agents[0].AgentID
	}
}

func (m *Model) remove(id string) {
	if m.byID[id] == nil {
		return
	}
	delete(m.byID, id)
	i := m.index(id)
	m.agents = append(m.agents[:i], m.agents[i+1:]...)
	if m.selID == id {
		m.selID = ""
		if len(m.agents) > 0 {
			m.selID = m.agents[min(i, len(m.agents)-1)].AgentID
		}
	}
}

func (m *Model) index(id string) int {
	for i, a := range m.agents {
		if a.AgentID == id {
			return i
		}
	}
	return -1
}

func (m *Model) selected() *agent { return m.byID[m.selID] }

// apply takes one envelope from the bus into its agent's row and feed.
func (m *Model) apply(e *event.Envelope) tea.Cmd {
	if e.AgentID == "" {
		return nil
	}
	var cmd tea.Cmd
	a := m.byID[e.AgentID]
	if a == nil {
		// An agent opened since the list: show it now, learn the rest.
		a = &agent{ListEntry: verbs.ListEntry{AgentID: e.AgentID, AgentStatus: verbs.AgentStatus{Status: apitype.Starting}}}
		a.CreatedAt = e.TS.Format(time.RFC3339Nano)
		m.byID[e.AgentID] = a
		m.agents = append(m.agents, a)
		cmd = m.list()
	}
	a.dirty = m.listGen
	if e.TS.After(a.last) {
		a.last = e.TS
	}
	if e.Turn > a.Turn {
		a.Turn = e.Turn
	}
	m.track(a, e, true)
	if e.Kind == event.Status {
		m.sort()
		if a.AgentStatus.Status == apitype.Idle && cmd == nil {
			// The row's model is agent_status's, as `kaimon list` shows
			// it: the backend's own name for it once the agent says
			// (claude's init: claude-sonnet-5 for sonnet), learnt during
			// a turn. Read the list again when one ends.
			cmd = m.list()
		}
	}
	if m.mode == modeHistory && m.hist.id == a.AgentID {
		// The history takes e once the feed has (the block streaming
		// is the feed's).
		defer m.historyLive(e)
	}
	if m.selID == "" {
		m.selID = a.AgentID
	}
	// The feed.
	if event.Authoritative(e.Kind, e.Data) {
		if e.Kind == event.AssistantText || e.Kind == event.Thought {
			if a.open != nil && a.open.kind == e.Kind {
				a.open = nil
			}
		}
		a.envs = insert(a.envs, *e)
		return cmd
	}
	if e.Kind == event.AssistantText || e.Kind == event.Thought {
		var d event.TextData
		_ = json.Unmarshal(e.Data, &d)
		if a.open == nil || a.open.kind != e.Kind || a.open.turn != e.Turn {
			a.open = &stream{kind: e.Kind, turn: e.Turn}
		}
		a.open.text += d.Content.Text
	}
	return cmd
}

// track updates an agent's pending permissions from e and, when e is new
// (not read back from the log), its status and usage.
func (m *Model) track(a *agent, e *event.Envelope, isNew bool) {
	switch e.Kind {
	case event.Status:
		var d event.StatusData
		if json.Unmarshal(e.Data, &d) != nil || d.Status == "" {
			return
		}
		if d.Status == apitype.Dead {
			a.pending = nil
		}
		if !isNew {
			return
		}
		a.AgentStatus.Status = d.Status
		if d.Status == apitype.Dead {
			a.open = nil
		} else {
			a.Reason = ""
		}
	case event.Result:
		var d event.ResultData
		if isNew && json.Unmarshal(e.Data, &d) == nil {
			a.Usage = a.Usage.Add(d.Usage)
		}
		// The turn is over: whatever it asked is moot.
		kept := a.pending[:0]
		for _, p := range a.pending {
			if p.turn > e.Turn {
				kept = append(kept, p)
			}
		}
		a.pending = kept
	case event.Permission:
		var d event.PermissionData
		if json.Unmarshal(e.Data, &d) != nil || d.RequestID == "" {
			return
		}
		for i, p := range a.pending {
			if p.req.RequestID == d.RequestID {
				a.pending = append(a.pending[:i], a.pending[i+1:]...)
				break
			}
		}
		if d.Decision == "" {
			a.pending = append(a.pending, pending{turn: e.Turn, req: d})
		}
	}
}

// insert adds e to envs in seq order, once; the oldest go past feedCap.
func insert(envs []event.Envelope, e event.Envelope) []event.Envelope {
	envs = insertSeq(envs, e)
	if len(envs) > feedCap {
		envs = envs[len(envs)-feedCap:]
	}
	return envs
}

// insertSeq adds e to envs in seq order, once.
func insertSeq(envs []event.Envelope, e event.Envelope) []event.Envelope {
	i := sort.Search(len(envs), func(i int) bool { return envs[i].Seq >= e.Seq })
	if i < len(envs) && envs[i].Seq == e.Seq {
		return envs
	}
	envs = append(envs, event.Envelope{})
	copy(envs[i+1:], envs[i:])
	envs[i] = e
	return envs
}

// fillStream starts the feed's streaming block with the text the turn
// streamed before the monitor saw it (res, agent_output's answer), joined
// with the chunks the bus brought since. Nothing is done when the turn is
// over, when its text is a block the feed has whole, or when something
// else streams now.
func (a *agent) fillStream(res *verbs.OutputResult) {
	if res == nil || res.Done || res.Text == "" || res.Turn < a.Turn {
		return
	}
	if o := a.open; o != nil && (o.turn > res.Turn || o.turn == res.Turn && o.kind != event.AssistantText) {
		return
	}
	for i := len(a.envs) - 1; i >= 0 && a.envs[i].Turn >= res.Turn; i-- {
		if e := &a.envs[i]; e.Kind == event.AssistantText && e.Turn == res.Turn {
			if event.TextOf(e.Data) == res.Text {
				return // no block streams: last_message is the last whole one
			}
			break
		}
	}
	seen := ""
	if a.open != nil && a.open.turn == res.Turn {
		seen = a.open.text
	}
	a.open = &stream{kind: event.AssistantText, turn: res.Turn, text: joinOverlap(res.Text, seen)}
}

// joinOverlap joins the text streamed so far, read at one moment, with the
// chunks the bus brought from an earlier one: the end of sofar that they
// begin with is said once.
func joinOverlap(sofar, seen string) string {
	for k := min(len(sofar), len(seen)); k > 0; k-- {
		if strings.HasSuffix(sofar, seen[:k]) {
			return sofar + seen[k:]
		}
	}
	return sofar + seen
}

// merge joins an agent's log with what the bus brought meanwhile, and
// recomputes its pending permissions from the whole.
func (m *Model) merge(a *agent, log []event.Envelope) {
	live := a.envs
	a.envs = nil
	for _, e := range log {
		a.envs = insert(a.envs, e)
	}
	for _, e := range live {
		a.envs = insert(a.envs, e)
	}
	// Only the pending permissions: status and usage are the list's and
	// the bus's, which are newer and already count these.
	a.pending = nil
	for i := range a.envs {
		m.track(a, &a.envs[i], false)
	}
	if a.AgentStatus.Status == apitype.Dead {
		a.pending = nil
	}
}

// backfill reads an agent's log once, so its feed starts with what
// happened before the monitor did: the selected agent's, and that of every
// working agent, which may be waiting on a permission asked before.
func (m *Model) backfill() tea.Cmd {
	if !m.connected {
		return nil
	}
	var cmds []tea.Cmd
	for _, a := range m.agents {
		if a.backfilled || a.filling || a.AgentID != m.selID && a.AgentStatus.Status != apitype.Working {
			continue
		}
		a.filling = true
		id, d, working := a.AgentID, m.d, a.AgentStatus.Status == apitype.Working
		cmds = append(cmds, func() tea.Msg {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			envs, err := d.History(ctx, id)
			msg := backfillMsg{id: id, envs: envs, err: err}
			if working && err == nil {
				// The log has the turn's whole blocks; the block
				// streaming now is only in agent_output. Asked after
				// the log, so no block is missing from both.
				msg.streamed, _ = d.Output(ctx, id)
			}
			return msg
		})
	}
	return tea.Batch(cmds...)
}

func (m *Model) key(k tea.KeyPressMsg) tea.Cmd {
	if k.String() == "ctrl+c" {
		return tea.Quit
	}
	switch m.mode {
	case modeConfirm:
		id := m.confirm
		switch {
		case key.Matches(k, m.keys.Yes) && m.forget:
			m.mode = modeMain
			m.flash = "forgetting " + id + "…"
			d := m.d
			return func() tea.Msg {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				if err := d.Forget(ctx, id); err != nil {
					return doneMsg{what: "forget " + id, err: err}
				}
				return doneMsg{what: "forgot " + id, forgot: id}
			}
		case key.Matches(k, m.keys.Yes):
			m.mode = modeMain
			m.flash = "closing " + id + "…"
			d := m.d
			return func() tea.Msg {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				err := d.Close(ctx, id)
				return doneMsg{what: "closed " + id, err: err}
			}
		case key.Matches(k, m.keys.No):
			m.mode, m.flash = modeMain, ""
		}
		return nil
	case modePermit:
		a := m.selected()
		if a == nil || len(a.pending) == 0 {
			m.mode = modeMain
			return nil
		}
		var decision apitype.Decision
		switch {
		case key.Matches(k, m.keys.Allow):
			decision = apitype.Allow
		case key.Matches(k, m.keys.Deny):
			decision = apitype.Deny
		case key.Matches(k, m.keys.Back):
			m.mode = modeMain
			return nil
		default:
			return nil
		}
		m.mode = modeMain
		id, req, d := a.AgentID, a.pending[0].req.RequestID, m.d
		m.flash = "answering " + req + "…"
		return func() tea.Msg {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			err := d.Permit(ctx, id, req, decision)
			return doneMsg{what: fmt.Sprintf("%s: %s %s", id, decision, req), err: err}
		}
	case modeSend:
		return m.sendKey(k)
	case modeHistory:
		return m.historyKey(k)
	}
	switch {
	case key.Matches(k, m.keys.Quit):
		return tea.Quit
	case key.Matches(k, m.keys.Help):
		m.showHelp = !m.showHelp
	case key.Matches(k, m.keys.Back):
		m.showHelp, m.flash = false, ""
	case key.Matches(k, m.keys.Up):
		m.move(-1)
	case key.Matches(k, m.keys.Down):
		m.move(1)
	case key.Matches(k, m.keys.Close):
		a := m.selected()
		if a == nil {
			return nil
		}
		// A dead agent is forgotten, which cannot be undone (it can no
		// longer be resumed): asked as a close is.
		m.mode, m.confirm, m.forget = modeConfirm, a.AgentID, a.AgentStatus.Status == apitype.Dead
		return nil
	case key.Matches(k, m.keys.Permit):
		a := m.selected()
		if a == nil || len(a.pending) == 0 {
			m.flash = "no permission request is waiting"
			return nil
		}
		m.mode = modePermit
	case key.Matches(k, m.keys.Interrupt):
		a := m.selected()
		if a == nil || a.AgentStatus.Status == apitype.Dead {
			m.flash = "no live agent selected"
			return nil
		}
		id, d := a.AgentID, m.d
		m.flash = "interrupting " + id + "…"
		return func() tea.Msg {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			ran, err := d.Interrupt(ctx, id)
			if err == nil && !ran {
				return doneMsg{what: id + ": nothing to interrupt"}
			}
			return doneMsg{what: "interrupted " + id, err: err}
		}
	case key.Matches(k, m.keys.Send):
		a := m.selected()
		if a == nil || a.AgentStatus.Status == apitype.Dead {
			m.flash = "no live agent selected"
			return nil
		}
		m.mode, m.sendTo, m.flash = modeSend, a.AgentID, ""
		m.compose.Reset()
		m.compose.SetWidth(max(m.width-len(a.AgentID)-12, 10))
		return m.compose.Focus()
	case key.Matches(k, m.keys.History):
		a := m.selected()
		if a == nil {
			return nil
		}
		m.mode, m.showHelp = modeHistory, false
		m.hist = historyView{id: a.AgentID, loading: true, search: m.hist.search, vp: viewport.New()}
		m.hist.search.Reset()
		m.layoutHistory()
		id, d := a.AgentID, m.d
		return func() tea.Msg {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			envs, err := d.History(ctx, id)
			return historyMsg{id: id, envs: envs, err: err}
		}
	}
	return nil
}

// sendKey takes a key while a turn is typed: enter sends it (agent_send:
// it queues behind a turn in flight), esc gives it up.
func (m *Model) sendKey(k tea.KeyPressMsg) tea.Cmd {
	switch k.String() {
	case "esc":
		m.mode = modeMain
		m.compose.Blur()
		return nil
	case "enter":
		text := m.compose.Value()
		m.mode = modeMain
		m.compose.Blur()
		if strings.TrimSpace(text) == "" {
			return nil
		}
		id, d := m.sendTo, m.d
		m.flash = "sending to " + id + "…"
		return func() tea.Msg {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			turn, err := d.Send(ctx, id, text)
			return doneMsg{what: fmt.Sprintf("sent turn %d to %s", turn, id), err: err}
		}
	}
	var cmd tea.Cmd
	m.compose, cmd = m.compose.Update(k)
	return cmd
}

func (m *Model) move(by int) {
	if len(m.agents) == 0 {
		return
	}
	i := m.index(m.selID) + by
	i = max(0, min(i, len(m.agents)-1))
	m.selID = m.agents[i].AgentID
}

func (m *Model) layoutHistory() {
	m.hist.vp.SetWidth(m.width)
	m.hist.vp.SetHeight(max(m.height-2, 1))
	m.hist.search.SetWidth(max(m.width-4, 4))
}

// historyLive takes an envelope of the agent whose history is open: a
// whole one joins the log read (or, while it is read, waits to be joined
// to it), a chunk redraws the block streaming at the end.
func (m *Model) historyLive(e *event.Envelope) {
	h := &m.hist
	if event.Authoritative(e.Kind, e.Data) {
		h.envs = insertSeq(h.envs, *e)
		h.base = nil
	}
	if !h.loading && h.err == nil {
		m.renderHistoryLines(false)
	}
}

// renderHistoryLines renders the history at the screen's width. The view
// stays where it was: at the bottom if it was there (new events scroll
// in), else on the same line, or after a resize (which wraps every line
// anew) at the same fraction.
func (m *Model) renderHistoryLines(resized bool) {
	h := &m.hist
	frac := 0.0
	if len(h.lines) > 0 {
		frac = float64(h.vp.YOffset()) / float64(len(h.lines))
	}
	top, atBottom := h.vp.YOffset(), h.vp.AtBottom()
	w := max(m.width-1, 10)
	if h.base == nil || h.baseW != w {
		h.base, h.baseW = renderFeed(h.id, h.envs, nil, w), w
	}
	h.lines = h.base
	if a := m.byID[h.id]; a != nil && a.open != nil {
		h.lines = append(h.base[:len(h.base):len(h.base)], renderFeed(h.id, nil, a.open, w)...)
	}
	m.findMatches()
	h.vp.SetContentLines(m.highlighted())
	switch {
	case atBottom:
		h.vp.GotoBottom()
	case resized:
		h.vp.SetYOffset(int(frac * float64(len(h.lines))))
	default:
		h.vp.SetYOffset(top)
	}
}

var (
	stMatch    = lipgloss.NewStyle().Reverse(true)
	stCurMatch = lipgloss.NewStyle().Background(lipgloss.Yellow).Foreground(lipgloss.Black).Bold(true)
)

// highlighted is the history's lines with the query's occurrences marked,
// the current match's line more brightly.
func (m *Model) highlighted() []string {
	h := &m.hist
	if len(h.matches) == 0 {
		return h.lines
	}
	out := slices.Clone(h.lines)
	q := strings.ToLower(h.query)
	for i, l := range h.matches {
		st := stMatch
		if i == h.match {
			st = stCurMatch
		}
		plain := ansi.Strip(out[l])
		lower := strings.ToLower(plain)
		var ranges []lipgloss.Range
		if len(lower) != len(plain) {
			// Lowering changed byte lengths (rare scripts): mark the line.
			ranges = append(ranges, lipgloss.NewRange(0, ansi.StringWidth(plain), st))
		} else {
			for from := 0; ; {
				j := strings.Index(lower[from:], q)
				if j < 0 {
					break
				}
				j += from
				ranges = append(ranges, lipgloss.NewRange(ansi.StringWidth(plain[:j]), ansi.StringWidth(plain[:j+len(q)]), st))
				from = j + len(q)
			}
		}
		out[l] = lipgloss.StyleRanges(out[l], ranges...)
	}
	return out
}

// showMatch moves the view to the current match, unless it is on screen,
// and marks it.
func (m *Model) showMatch() {
	h := &m.hist
	if len(h.matches) == 0 {
		return
	}
	h.vp.SetContentLines(m.highlighted())
	l := h.matches[h.match]
	if l < h.vp.YOffset() || l >= h.vp.YOffset()+h.vp.Height() {
		h.vp.SetYOffset(l)
	}
}

func (m *Model) historyKey(k tea.KeyPressMsg) tea.Cmd {
	h := &m.hist
	if h.typing {
		switch k.String() {
		case "enter":
			h.typing = false
			h.search.Blur()
			h.query = h.search.Value()
			h.matches = nil
			m.findMatches()
			// The first match at or below the top of the screen, else
			// the first of all (the search wraps, as less's does).
			for i, l := range h.matches {
				if l >= h.vp.YOffset() {
					h.match = i
					break
				}
			}
			m.showMatch()
			if len(h.matches) == 0 {
				h.vp.SetContentLines(h.lines) // no mark of an earlier query
			}
			return nil
		case "esc":
			h.typing = false
			h.search.Blur()
			return nil
		}
		var cmd tea.Cmd
		h.search, cmd = h.search.Update(k)
		return cmd
	}
	switch {
	case key.Matches(k, m.keys.Back):
		m.mode = modeMain
	case key.Matches(k, m.keys.Quit):
		return tea.Quit
	case key.Matches(k, m.keys.Top):
		h.vp.GotoTop()
	case key.Matches(k, m.keys.Bottom):
		h.vp.GotoBottom()
	case key.Matches(k, m.keys.Search):
		h.typing = true
		h.search.Reset()
		return h.search.Focus()
	case key.Matches(k, m.keys.Next):
		if len(h.matches) > 0 {
			h.match = (h.match + 1) % len(h.matches)
			m.showMatch()
		}
	case key.Matches(k, m.keys.Prev):
		if len(h.matches) > 0 {
			h.match = (h.match + len(h.matches) - 1) % len(h.matches)
			m.showMatch()
		}
	default:
		var cmd tea.Cmd
		h.vp, cmd = h.vp.Update(k)
		return cmd
	}
	return nil
}

// findMatches lists the history's lines holding the query, ignoring case
// and styling; the current match stays on its line while lines come.
func (m *Model) findMatches() {
	h := &m.hist
	cur := -1
	if h.match < len(h.matches) {
		cur = h.matches[h.match]
	}
	h.matches, h.match = nil, 0
	q := strings.ToLower(h.query)
	if q == "" {
		return
	}
	for i, l := range h.lines {
		if strings.Contains(strings.ToLower(ansi.Strip(l)), q) {
			if i == cur {
				h.match = len(h.matches)
			}
			h.matches = append(h.matches, i)
		}
	}
}
