package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/fatih/color"
	"golang.org/x/sys/unix"

	"github.com/kaimon/kaimon/internal/apitype"
	"github.com/kaimon/kaimon/internal/event"
	"github.com/kaimon/kaimon/internal/render"
	"github.com/kaimon/kaimon/internal/verbs"
)

// pretty renders envelopes for people, for `tail --pretty` and a live
// `kaimon run` alike: assistant text flows as its deltas arrive, thoughts
// dimmed, a tool call is one line and its result another, a permission
// request stands out with the command that answers it, and a turn ends with
// its stop reason and usage. Colour as its palette says (the run's
// IOStreams: a terminal; NO_COLOR, --no-color and TERM=dumb turn it off). With a spinner
// (see startSpinner), a turn whose agent is silent shows one on stderr.
//
// Its methods may be called from several goroutines: one lock orders the
// rendering, the spinner and notes, so that nothing is garbled.
type pretty struct {
	mu    sync.Mutex
	w     io.Writer
	multi bool // several agents: prefix lines with the agent id
	// run renders one turn of `kaimon run`: the person typed the text and
	// gets the usage on stderr at the end, so the echo, turn header,
	// status lines and result line are left out.
	run bool

	open     string            // agent/kind of the text streaming on the current line
	streamed map[string]string // agent/kind → text streamed so far in this block
	tools    map[string]string // toolCallId → tool name
	// shown is, per agent, the assistant text block last rendered (as
	// far as it streamed), so that run prints its final text only once.
	shown map[string]string

	pal  *palette // the run's colours
	spin *spinner // nil: no spinner
	col  int      // columns written on w's current line, for the spinner
	// prompting says a question waits for its answer at the end of the
	// current line (ask): the spinner keeps off it, and whatever is
	// rendered meanwhile starts a line of its own.
	prompting bool
}

func newPretty(w io.Writer, multi bool, pal *palette) *pretty {
	return &pretty{w: w, multi: multi, pal: pal, streamed: map[string]string{}, tools: map[string]string{}, shown: map[string]string{}}
}

// write puts s on the rendering's writer, the spinner erased first.
func (p *pretty) write(s string) {
	if p.spin != nil {
		p.spin.erase()
		p.spin.quiet = time.Now()
	}
	io.WriteString(p.w, s)
	p.col = advance(p.col, s)
}

// advance returns the column after writing s at column col: runes count
// one, colour escapes none (wide runes are taken as one: the spinner's
// room is judged with a margin).
func advance(col int, s string) int {
	const (
		text = iota
		escape
		csi
	)
	state := text
	for _, r := range s {
		switch {
		case state == escape && r == '[':
			state = csi
		case state == escape: // a two-byte escape (ESC 7)
			state = text
		case state == csi:
			if r >= '@' && r <= '~' { // the final byte
				state = text
			}
		case r == 0x1b:
			state = escape
		case r == '\n' || r == '\r':
			col = 0
		default:
			col++
		}
	}
	return col
}

// endLine ends a line of streamed text, if one is open.
func (p *pretty) endLine() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.endLineLocked()
}

func (p *pretty) endLineLocked() {
	if p.open != "" || p.prompting {
		p.write("\n")
		p.open, p.prompting = "", false
	}
}

// ask writes a question, its last line left open for the answer the
// person types; answered says the answer came (its newline, the
// terminal's echo, ended the line).
func (p *pretty) ask(s string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.endLineLocked()
	p.write(s)
	p.prompting = true
}

// say writes s as a line of its own.
func (p *pretty) say(s string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.endLineLocked()
	p.write(s + "\n")
}

// waiting tells the spinner of e, a permission event, without rendering
// it: the question is asked instead (asker).
func (p *pretty) waiting(e *event.Envelope) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.track(e)
}

func (p *pretty) answered() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.prompting {
		p.prompting, p.col = false, 0
	}
}

func (p *pretty) prefix(e *event.Envelope) string {
	if !p.multi {
		return ""
	}
	return p.pal.faint.Sprintf("[%s] ", e.AgentID)
}

// line prints one whole line for e.
func (p *pretty) line(e *event.Envelope, s string) {
	p.endLineLocked()
	p.write(p.prefix(e) + s + "\n")
}

// print renders e.
func (p *pretty) print(e *event.Envelope) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.track(e)
	if p.run {
		switch e.Kind {
		case event.UserText, event.TurnStarted, event.Status, event.Result:
			return
		}
	}
	switch e.Kind {
	case event.AssistantText, event.Thought:
		var d event.TextData
		_ = json.Unmarshal(e.Data, &d)
		paint := fmt.Sprint
		if e.Kind == event.Thought {
			paint = p.pal.italic.Sprint
		}
		key := e.AgentID + "/" + string(e.Kind)
		if d.Delta {
			if p.open != key {
				p.endLineLocked()
				head := p.prefix(e)
				if e.Kind == event.Thought {
					head += p.pal.italic.Sprint("thinking: ")
				}
				p.write(head)
				p.open = key
			}
			p.write(paint(d.Content.Text))
			p.streamed[key] += d.Content.Text
			if e.Kind == event.AssistantText {
				p.shown[e.AgentID] = p.streamed[key]
			}
			return
		}
		if e.Kind == event.AssistantText {
			p.shown[e.AgentID] = d.Content.Text
		}
		// The complete block: it closes what streamed, or stands alone.
		// If deltas were lost on the way, the complete text is printed.
		so, ok := p.streamed[key]
		delete(p.streamed, key)
		if ok && so == d.Content.Text {
			if p.open == key {
				p.endLineLocked()
			}
			return
		}
		head := ""
		if e.Kind == event.Thought {
			head = p.pal.italic.Sprint("thinking: ")
		}
		p.line(e, head+paint(d.Content.Text))
	case event.UserText:
		var d event.TextData
		_ = json.Unmarshal(e.Data, &d)
		p.line(e, p.pal.bold.Sprint("> "+d.Content.Text))
	case event.TurnStarted:
		p.line(e, p.pal.faint.Sprintf("── turn %d ──", e.Turn))
	case event.ToolUse:
		var d event.ToolUseData
		_ = json.Unmarshal(e.Data, &d)
		p.tools[d.Call.ToolCallID] = d.Call.Title
		if len(d.Call.RawInput) == 0 {
			return // the announce; the complete call follows
		}
		p.line(e, p.pal.cyan.Sprint("→ "+d.Call.Title)+" "+render.ToolInput(&d.Call, 160))
	case event.ToolInputDelta:
		// Liveness only; the complete tool_use follows.
	case event.ToolResult:
		var d event.ToolResultData
		_ = json.Unmarshal(e.Data, &d)
		name := p.tools[d.Update.ToolCallID]
		if name == "" {
			name = d.Update.ToolCallID
		}
		mark := p.pal.green.Sprint("← " + name)
		if d.Update.Status == apitype.ToolFailed {
			mark = p.pal.red.Sprint("✗ " + name)
		}
		p.line(e, mark+" "+string(d.Update.Status)+": "+render.Clip(render.ContentSummary(d.Update.Content), 160))
	case event.Result:
		r := render.ResultOf(e)
		u := r.Usage
		usage := p.pal.faint.Sprintf("tokens in %d, out %d, cache read %d, cache write %d", u.InputTokens, u.OutputTokens, u.CacheReadTokens, u.CacheCreationTokens)
		paint := p.pal.green.Sprint
		switch {
		case r.Cancelled:
			paint = p.pal.yellow.Sprint // stopped as asked, as run's usage line
		case r.Failed:
			paint = p.pal.red.Sprint
		}
		p.line(e, paint(r.Head)+"  "+usage)
	case event.Usage:
		// The turn's usage comes with its result.
	case event.Status:
		var d event.StatusData
		_ = json.Unmarshal(e.Data, &d)
		p.line(e, p.pal.faint.Sprint("· "+d.Status))
	case event.Error:
		var d event.ErrorData
		_ = json.Unmarshal(e.Data, &d)
		p.line(e, p.pal.red.Sprint("error: "+d.Message))
	case event.Plan:
		var b strings.Builder
		b.WriteString(p.pal.yellow.Sprint("plan:"))
		for _, l := range render.PlanLines(e) {
			b.WriteString("\n  " + l)
		}
		p.line(e, b.String())
	case event.Permission:
		var d event.PermissionData
		_ = json.Unmarshal(e.Data, &d)
		p.line(e, p.pal.permissionLines("? ", e.AgentID, &d))
	default:
		p.line(e, string(e.Kind)+" "+render.Clip(string(e.Data), 160))
	}
}

// permissionLines tells a person what a permission event means: for a
// question, what the agent asks and the exact command that answers it;
// for a decision, who decided what.
// A question's first line begins with head.
func (pal *palette) permissionLines(head, id string, d *event.PermissionData) string {
	switch d.Decision {
	case "":
		s := askedLine(pal, head, id, d)
		s += "\n  answer: " + pal.bold.Sprint(verbs.PermitCommand(id, d.RequestID, apitype.Allow)) + "   (or " + string(apitype.Deny)
		if d.ExpiresAt != "" {
			s += "; waits until " + d.ExpiresAt
		}
		return s + ")"
	case apitype.Allow:
		return pal.green.Sprintf("✓ permission for %s %s", d.ToolCall.Title, render.Decided(d)) + pal.faint.Sprintf(" (%s)", d.By)
	default:
		s := pal.red.Sprintf("✗ permission for %s %s", d.ToolCall.Title, render.Decided(d)) + pal.faint.Sprintf(" (%s)", d.By)
		if d.Message != "" {
			s += pal.faint.Sprint(": " + render.Clip(d.Message, 160))
		}
		return s
	}
}

// askedLine is a permission question's first line: which agent asks for
// what (the tool and its input), begun with head.
func askedLine(pal *palette, head, id string, d *event.PermissionData) string {
	s := pal.warn.Sprintf("%sagent %s asks permission for %s", head, id, d.ToolCall.Title)
	if input := render.ToolInput(&d.ToolCall, 200); input != "" {
		s += " " + input
	}
	return s
}

// track follows what the spinner says: an agent is busy from its turn's
// start to its result (or death), and waiting while a permission request
// of it is pending.
func (p *pretty) track(e *event.Envelope) {
	if p.spin == nil {
		return
	}
	switch e.Kind {
	case event.TurnStarted:
		p.spin.busy(e.AgentID, e.TS)
	case event.Result:
		p.spin.idle(e.AgentID)
	case event.Status:
		var d event.StatusData
		if json.Unmarshal(e.Data, &d) == nil && (d.Status == apitype.Dead || d.Status == apitype.Idle) {
			p.spin.idle(e.AgentID)
		}
	case event.Permission:
		var d event.PermissionData
		if json.Unmarshal(e.Data, &d) == nil {
			p.spin.asking(e.AgentID, d.RequestID, d.Decision == "")
		}
	}
}

// note writes a line to the spinner's writer (stderr) without garbling
// the rendering: a line of streamed text is ended first.
func (p *pretty) note(w io.Writer, s string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.endLineLocked()
	if p.spin != nil {
		p.spin.erase()
	}
	io.WriteString(w, s+"\n")
}

// interrupted says that what streamed so far was cut off (a run's note
// of its host's link, between two deltas): each block open is printed
// whole when it completes, not left in pieces around the note.
func (p *pretty) interrupted() {
	p.mu.Lock()
	defer p.mu.Unlock()
	clear(p.streamed)
}

// pastEcho moves to a line of its own after the terminal echoed a Ctrl-C
// ("^C") where the cursor was, so that what follows is not glued to it.
func (p *pretty) pastEcho() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.spin != nil {
		p.spin.erase()
	}
	if p.open != "" {
		p.endLineLocked()
		return
	}
	p.write("\n")
}

// lastShown is the assistant text block of agent id last rendered.
func (p *pretty) lastShown(id string) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.shown[id]
}

// termWidth returns a function that reports w's terminal width, as it is
// now (the terminal may be resized), or 0.
func termWidth(w io.Writer) func() int {
	f, ok := w.(*os.File)
	if !ok {
		return nil
	}
	return func() int {
		ws, err := unix.IoctlGetWinsize(int(f.Fd()), unix.TIOCGWINSZ)
		if err != nil {
			return 0
		}
		return int(ws.Col)
	}
}

// startSpinner shows a spinner with the elapsed time on w while an agent is
// in a turn and nothing has been rendered for a moment; it does nothing
// unless can (IOStreams.canSpin: w and the rendering's writer are a
// terminal that takes cursor escapes). stopSpinner ends it.
func (p *pretty) startSpinner(w io.Writer, can bool) {
	if !can {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.spin != nil {
		return
	}
	p.spin = &spinner{w: w, faint: p.pal.faint, width: termWidth(w), quiet: time.Now(), since: map[string]time.Time{}, asks: map[string]map[string]bool{},
		stop: make(chan struct{}), done: make(chan struct{})}
	go p.spinLoop(p.spin)
}

// stopSpinner ends the spinner, erased, and ends a line of streamed text.
func (p *pretty) stopSpinner() {
	p.mu.Lock()
	s := p.spin
	p.mu.Unlock()
	if s == nil {
		p.endLine()
		return
	}
	close(s.stop)
	<-s.done
	p.mu.Lock()
	defer p.mu.Unlock()
	s.erase()
	p.endLineLocked()
	p.spin = nil
}

// busy marks agent id as in a turn since t (kaimon run marks its agent from
// the moment it sends, before the turn's first event).
func (p *pretty) busy(id string, t time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.spin != nil {
		p.spin.busy(id, t)
	}
}

func (p *pretty) spinLoop(s *spinner) {
	defer close(s.done)
	tick := time.NewTicker(spinTick)
	defer tick.Stop()
	for {
		select {
		case <-s.stop:
			return
		case now := <-tick.C:
			p.mu.Lock()
			if !p.prompting {
				s.draw(now, p.col)
			}
			p.mu.Unlock()
		}
	}
}

const (
	spinTick  = 100 * time.Millisecond
	spinQuiet = 300 * time.Millisecond // silence before the spinner shows
)

var spinFrames = []string{"⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"}

// spinner is the sign of life of a silent turn. It is drawn where the
// cursor is, after a line of text that has not ended too, and erased
// before anything else is written: the cursor is saved before it is drawn
// (ESC 7) and restored and the line cleared after it (ESC 8, CSI K).
//
// Written here rather than taken from a library (briandowns/spinner, say):
// such a spinner owns its writer and redraws with a carriage return, which
// would wipe a line of streamed text the model paused in, and it cannot
// take the renderer's lock to erase itself before each write. Its state is
// guarded by the renderer's lock.
type spinner struct {
	w     io.Writer
	faint *color.Color
	width func() int                 // the terminal's columns (0: unknown)
	quiet time.Time                  // when the rendering last wrote
	since map[string]time.Time       // agent → start of its turn in flight
	asks  map[string]map[string]bool // agent → its pending permission requests
	drawn bool
	frame int
	stop  chan struct{}
	done  chan struct{}
}

func (s *spinner) busy(id string, t time.Time) {
	if _, ok := s.since[id]; !ok {
		if t.IsZero() {
			t = time.Now()
		}
		s.since[id] = t
	}
}

func (s *spinner) idle(id string) {
	delete(s.since, id)
	delete(s.asks, id)
}

func (s *spinner) asking(id, req string, pending bool) {
	if pending {
		if s.asks[id] == nil {
			s.asks[id] = map[string]bool{}
		}
		s.asks[id][req] = true
		return
	}
	delete(s.asks[id], req)
}

func (s *spinner) erase() {
	if s.drawn {
		io.WriteString(s.w, "\x1b8\x1b[K")
		s.drawn = false
	}
}

// draw redraws the spinner at now, if an agent is busy and the rendering
// has been quiet; col is the cursor's column, after text when not 0. A
// spinner that would not fit on the line is not drawn: wrapping, it would
// scroll the screen and its erasing would miss.
func (s *spinner) draw(now time.Time, col int) {
	var first time.Time
	for _, t := range s.since {
		if first.IsZero() || t.Before(first) {
			first = t
		}
	}
	if first.IsZero() || now.Sub(s.quiet) < spinQuiet {
		s.erase()
		return
	}
	label := string(apitype.Working)
	for _, reqs := range s.asks {
		if len(reqs) > 0 {
			label = "waiting for permission"
		}
	}
	s.frame = (s.frame + 1) % len(spinFrames)
	text := fmt.Sprintf("%s %s %s", spinFrames[s.frame], label, now.Sub(first).Round(100*time.Millisecond))
	if col > 0 {
		text = " " + text
	}
	if s.width != nil {
		if w := s.width(); w > 0 {
			at := col % w
			if col > 0 && at == 0 {
				at = w // at the right margin, about to wrap
			}
			if at+utf8.RuneCountInString(text) >= w {
				s.erase()
				return
			}
		}
	}
	text = s.faint.Sprint(text)
	if s.drawn {
		io.WriteString(s.w, "\x1b8\x1b[K"+text)
		return
	}
	io.WriteString(s.w, "\x1b7"+text)
	s.drawn = true
}
