package monitor

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"
	"charm.land/lipgloss/v2"
	"github.com/charmbracelet/x/ansi"

	"github.com/kaimon/kaimon/internal/apitype"
	"github.com/kaimon/kaimon/internal/fleet"
	"github.com/kaimon/kaimon/internal/render"
)

var (
	stHeader = lipgloss.NewStyle().Bold(true)
	stTitle  = lipgloss.NewStyle().Bold(true).Foreground(lipgloss.Cyan)
	stSel    = lipgloss.NewStyle().Reverse(true)
	stWarn   = lipgloss.NewStyle().Foreground(lipgloss.Yellow).Bold(true)
	stPrompt = lipgloss.NewStyle().Foreground(lipgloss.Magenta).Bold(true)

	statusStyles = map[apitype.AgentState]lipgloss.Style{
		apitype.Starting: lipgloss.NewStyle().Foreground(lipgloss.Cyan),
		apitype.Idle:     lipgloss.NewStyle().Foreground(lipgloss.Green),
		apitype.Working:  lipgloss.NewStyle().Foreground(lipgloss.Yellow),
		apitype.Dead:     lipgloss.NewStyle().Faint(true),
		stPermission:     lipgloss.NewStyle().Foreground(lipgloss.Magenta).Bold(true),
	}
)

// column is one column of the agents table. The table is drawn here
// rather than with bubbles/table, which styles cells per column only: a
// row's status has its own colour and a dead row is greyed whole.
type column struct {
	title string
	width int  // fixed width; the flexible column takes the rest
	flex  bool // the cwd: it shrinks first
	right bool
	drop  int // columns drop in this order (1 first) when the screen is narrow
	cell  func(a *agent, now time.Time, width int, home string) string
}

var columns = []column{
	{title: "ID", width: 16, cell: func(a *agent, _ time.Time, w int, _ string) string { return bareID(a.AgentID) }},
	{title: "STATUS", width: 10, cell: func(a *agent, _ time.Time, w int, _ string) string { return string(a.status()) }},
	{title: "MODEL", width: 14, drop: 3, cell: func(a *agent, _ time.Time, w int, _ string) string { return a.Model }},
	{title: "CWD", flex: true, width: 12, drop: 4, cell: func(a *agent, _ time.Time, w int, home string) string { return place(a, home, w) }},
	{title: "TURN", width: 4, right: true, drop: 2, cell: func(a *agent, _ time.Time, w int, _ string) string { return fmt.Sprint(a.Turn) }},
	{title: "IN/OUT", width: 13, right: true, drop: 1, cell: func(a *agent, _ time.Time, w int, _ string) string {
		return tokens(a.Usage.InputTokens) + "/" + tokens(a.Usage.OutputTokens)
	}},
	{title: "LAST", width: 5, right: true, cell: func(a *agent, now time.Time, w int, _ string) string { return ago(now, a.last) }},
}

const gap = 2

// Indexes in columns of those sized to their content.
const (
	colID     = 0
	colModel  = 2
	colTokens = 5
)

// hostColumn is the agent's host, first, in a monitor of several hosts,
// whose agent ids are qualified (NAME/ID, local/ID for this machine's).
var hostColumn = column{title: "HOST", cell: func(a *agent, _ time.Time, w int, _ string) string { return hostOf(a.AgentID) }}

// hostOf is the host a qualified id names, "" for a bare one.
func hostOf(id string) string {
	h, _, _ := fleet.SplitID(id)
	return h
}

// bareID is id without its host.
func bareID(id string) string {
	_, bare, _ := fleet.SplitID(id)
	return bare
}

// contentWidths are the widths the agents' hosts, ids, models and token
// counts need: those columns take no more. host is 0 when no id names a
// host: then there is no HOST column.
type contentWidths struct{ host, id, model, tokens int }

func measure(agents []*agent) contentWidths {
	var c contentWidths
	for _, a := range agents {
		if h := hostOf(a.AgentID); h != "" {
			c.host = max(c.host, lipgloss.Width(h), len("HOST"))
		}
		c.id = max(c.id, lipgloss.Width(bareID(a.AgentID)))
		c.model = max(c.model, lipgloss.Width(a.Model))
		c.tokens = max(c.tokens, lipgloss.Width(columns[colTokens].cell(a, time.Time{}, 0, "")))
	}
	return c
}

// layout picks the columns that fit in width and their widths: the cwd
// takes what is left, down to its minimum, and then columns drop.
func layout(width int, fit contentWidths) ([]column, []int) {
	cols := append([]column(nil), columns...)
	cols[colID].width = min(max(fit.id, 2), 16)
	cols[colModel].width = min(max(fit.model, 5), 22)
	cols[colTokens].width = min(max(fit.tokens, 6), 13)
	if fit.host > 0 {
		h := hostColumn
		h.width = min(fit.host, 16)
		cols = append([]column{h}, cols...)
	}
	for {
		total, flex := 0, -1
		for i, c := range cols {
			total += c.width + gap
			if c.flex {
				flex = i
			}
		}
		total -= gap
		if total <= width || len(cols) <= 2 {
			ws := make([]int, len(cols))
			for i, c := range cols {
				ws[i] = c.width
			}
			if flex >= 0 {
				ws[flex] += max(width-total, 0)
			}
			return cols, ws
		}
		// Drop the column that goes first.
		drop := -1
		for i, c := range cols {
			if c.drop > 0 && (drop < 0 || c.drop < cols[drop].drop) {
				drop = i
			}
		}
		if drop < 0 {
			ws := make([]int, len(cols))
			for i, c := range cols {
				ws[i] = c.width
			}
			return cols, ws
		}
		cols = append(cols[:drop], cols[drop+1:]...)
	}
}

func pad(s string, w int, right bool) string {
	s = ansi.Truncate(s, w, "…")
	n := w - lipgloss.Width(s)
	if n <= 0 {
		return s
	}
	if right {
		return strings.Repeat(" ", n) + s
	}
	return s + strings.Repeat(" ", n)
}

// tableLines renders the header and a line per agent, each at most width
// cells; sel is the selected agent's index (-1 for none, as in --once).
func tableLines(agents []*agent, sel, width int, now time.Time, home string) (header string, rows []string) {
	cols, ws := layout(width, measure(agents))
	var h []string
	for i, c := range cols {
		h = append(h, pad(c.title, ws[i], c.right))
	}
	header = stHeader.Render(ansi.Truncate(strings.Join(h, strings.Repeat(" ", gap)), width, ""))
	for r, a := range agents {
		var cells []string
		dead := a.AgentStatus.Status == apitype.Dead
		for i, c := range cols {
			s := pad(c.cell(a, now, ws[i], home), ws[i], c.right)
			switch {
			case c.title == "STATUS" && a.stale:
				// What was last known, and may be over: the daemon
				// that would say is gone.
				s = stFaint.Render(pad(string(a.status())+"?", ws[i], c.right))
			case c.title == "STATUS" && !dead:
				s = statusStyles[a.status()].Render(s)
			}
			cells = append(cells, s)
		}
		line := ansi.Truncate(strings.Join(cells, strings.Repeat(" ", gap)), width, "")
		switch {
		case r == sel:
			line = stSel.Render(ansi.Strip(line))
		case dead:
			line = statusStyles[apitype.Dead].Render(line)
		}
		rows = append(rows, line)
	}
	return header, rows
}

// naturalWidth is the width at which the table needs no elision.
func naturalWidth(agents []*agent, home string) int {
	cwdw := 3
	for _, a := range agents {
		cwdw = max(cwdw, lipgloss.Width(place(a, home, 1<<20)))
	}
	cols, ws := layout(1<<20, measure(agents))
	total := 0
	for i, c := range cols {
		if c.flex {
			ws[i] = cwdw
		}
		total += ws[i] + gap
	}
	return total - gap
}

// shortPath shows p with ~ for home and, when too long, its middle elided:
// the start says where, the end says which.
// place is where an agent works: its cwd, and for an agent with a
// worktree its branch first, with a * when the worktree has uncommitted
// changes or untracked files (kaimon diff shows them).
func place(a *agent, home string, w int) string {
	if a.Worktree == "" {
		return shortPath(a.Cwd, home, w)
	}
	b := "[" + a.Branch
	if a.Dirty {
		b += "*"
	}
	b += "] "
	return b + shortPath(a.Cwd, home, max(w-lipgloss.Width(b), 0))
}

func shortPath(p, home string, w int) string {
	if home != "" && home != "/" && (p == home || strings.HasPrefix(p, home+"/")) {
		p = "~" + p[len(home):]
	}
	if lipgloss.Width(p) <= w || w < 5 {
		return p
	}
	r := []rune(p)
	tail := (w - 1) * 2 / 3
	head := w - 1 - tail
	return string(r[:head]) + "…" + string(r[len(r)-tail:])
}

// ago is the time since t for people: 3s, 5m, 2h, 4d.
func ago(now, t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	d := now.Sub(t)
	switch {
	case d < time.Second:
		return "now"
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d.Hours()))
	}
	return fmt.Sprintf("%dd", int(d.Hours()/24))
}

// tokens is a token count, short: 950, 12.3k, 4.1M.
func tokens(n int64) string {
	switch {
	case n < 10_000:
		return fmt.Sprint(n)
	case n < 1_000_000:
		return fmt.Sprintf("%.1fk", float64(n)/1e3)
	}
	return fmt.Sprintf("%.1fM", float64(n)/1e6)
}

// View draws the screen: the header, the agents table at the top, the
// selected agent's feed below, and a line of keys or a prompt at the
// bottom. Every line fits the width.
func (m *Model) View() tea.View {
	var v tea.View
	v.AltScreen = true
	v.SetContent(m.Render())
	return v
}

// Render is the screen as text (View's content).
func (m *Model) Render() string {
	w, h := max(m.width, 20), max(m.height, 5)
	if m.mode == modeHistory {
		return m.renderHistory(w, h)
	}
	var out []string
	// Header.
	live, unknown := 0, 0
	for _, a := range m.agents {
		switch {
		case a.stale:
			unknown++
		case a.AgentStatus.Status != apitype.Dead:
			live++
		}
	}
	noun := "agents"
	if len(m.agents) == 1 {
		noun = "agent"
	}
	head := stTitle.Render("kaimon monitor") + fmt.Sprintf("  %d %s, %d live", len(m.agents), noun, live)
	if unknown > 0 {
		head += fmt.Sprintf(", %d unknown", unknown)
	}
	if !m.connected {
		state := m.downErr
		if state == "" {
			state = "connecting…"
		}
		head += "  " + stWarn.Render(state)
	}
	for _, h := range slices.Sorted(maps.Keys(m.down)) {
		head += "  " + stWarn.Render(m.down[h])
	}
	out = append(out, ansi.Truncate(head, w, "…"))

	// Table: up to 2/5 of the rows left, scrolled to the selection.
	sel := m.index(m.selID)
	header, rows := tableLines(m.agents, sel, w, m.now(), m.home)
	out = append(out, header)
	room := h - 4 // header, table header, feed rule, footer
	tableH := max(1, min(len(rows), room*2/5))
	if len(rows) == 0 {
		out = append(out, stFaint.Render("no agents (open one with `kaimon open DIR`)"))
	} else {
		top := 0
		if sel >= tableH {
			top = sel - tableH + 1
		}
		out = append(out, rows[top:min(top+tableH, len(rows))]...)
	}
	feedH := max(h-len(out)-2, 0)

	// Feed, or the help.
	a := m.selected()
	title := "── feed "
	if a != nil {
		title += a.AgentID + " "
	}
	if m.showHelp {
		title = "── keys "
	}
	out = append(out, stFaint.Render(title+strings.Repeat("─", max(w-lipgloss.Width(title), 0))))
	var body []string
	switch {
	case m.showHelp:
		m.help.ShowAll = true
		body = strings.Split(m.help.View(m.keys), "\n")
	case a != nil:
		body = a.feed(w)
		if len(body) == 0 && a.filling {
			body = []string{stFaint.Render("reading the log…")}
		}
	}
	if len(body) > feedH {
		body = body[len(body)-feedH:]
	}
	for len(body) < feedH {
		body = append(body, "")
	}
	out = append(out, body...)

	// Footer: a prompt, a notice, or the keys.
	var foot string
	switch {
	case m.mode == modeConfirm && m.forget:
		foot = stPrompt.Render(fmt.Sprintf("forget dead agent %s? it can't be resumed after: y/n", m.confirm))
	case m.mode == modeConfirm:
		foot = stPrompt.Render(fmt.Sprintf("close agent %s? y/n", m.confirm))
	case m.mode == modeSend:
		foot = stPrompt.Render("turn for "+m.sendTo+" (enter sends, esc cancels): ") + m.compose.View()
	case m.mode == modePermit && a != nil && len(a.pending) > 0:
		p := a.pending[0].req
		foot = stPrompt.Render(fmt.Sprintf("%s asks to run %s %s — %s %s esc=cancel", a.AgentID, p.ToolCall.Title, render.ToolInput(&p.ToolCall, 40),
			keyHint(m.keys.Allow), keyHint(m.keys.Deny)))
	case m.flash != "":
		foot = m.flash
	default:
		m.help.ShowAll = false
		foot = m.help.View(m.keys)
	}
	out = append(out, foot)
	for i, l := range out {
		out[i] = ansi.Truncate(l, w, "")
	}
	return strings.Join(out, "\n")
}

func (m *Model) renderHistory(w, h int) string {
	hv := &m.hist
	title := stTitle.Render("history "+hv.id) + stFaint.Render("  esc back · / search · n/N next/previous · g/G top/bottom · pgup/pgdn")
	var body string
	switch {
	case hv.loading:
		body = "reading the event log…"
	case hv.err != nil:
		body = stBad.Render("reading the event log: " + firstLine(hv.err.Error()))
	default:
		body = hv.vp.View()
	}
	lines := strings.Split(body, "\n")
	for len(lines) < h-2 {
		lines = append(lines, "")
	}
	lines = lines[:h-2]
	var foot string
	switch {
	case hv.typing:
		foot = hv.search.View()
	case hv.query != "" && len(hv.matches) == 0:
		foot = stWarn.Render(fmt.Sprintf("no match for %q", hv.query))
	case hv.query != "":
		foot = fmt.Sprintf("match %d/%d for %q", hv.match+1, len(hv.matches), hv.query)
	default:
		foot = stFaint.Render(fmt.Sprintf("%d lines, %d%%", len(hv.lines), int(hv.vp.ScrollPercent()*100)))
	}
	out := append([]string{title}, lines...)
	out = append(out, foot)
	for i, l := range out {
		out[i] = ansi.Truncate(l, w, "")
	}
	return strings.Join(out, "\n")
}

// keyHint is a binding as a prompt offers it: a=allow.
func keyHint(b key.Binding) string { return b.Help().Key + "=" + b.Help().Desc }
