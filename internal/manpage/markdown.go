package manpage

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// page is what a manual page is written to: roff for man(1), Markdown for
// docs/reference. Each page's text is written once, through this, so that
// the man page and the reference say the same thing.
type page interface {
	header(title, section string)
	sh(name string)
	ss(name string)
	line(s string)
	prose(text string)
	para()
	gap()
	literal(text string)
	item(tag, text string)
	itemLiteral(text string)
	synopsis(lines ...synopsisLine)
	seeAlso(refs ...manRef)
	String() string
}

// synopsisLine is one usage line: the command, in bold in a man page, then
// the rest, in which the words of italic are placeholders.
type synopsisLine struct {
	cmd, rest string
	italic    []string
}

// manRef names another page of the manual.
type manRef struct{ name, section string }

var (
	refKaimon = manRef{"kaimon", "1"}
	refAgentd = manRef{"kaimon-agentd", "8"}
	refEvents = manRef{"kaimon-events", "7"}
	refJq     = manRef{"jq", "1"}
)

// MarkdownFile is the file of docs/reference a page is written to, by its
// name: kaimon(1) is kaimon.md.
func MarkdownFile(name string) string { return name + ".md" }

// markdown builds one page of docs/reference. The contents (its sections,
// and the subsections under them) go after the title, so that a reader of
// a long page finds a command or a variable at once.
type markdown struct {
	title string
	toc   []string
	b     strings.Builder
	// inItem: the last block was an item, so that an item's literal block
	// is indented under it.
	inItem bool
}

func (m *markdown) header(title, section string) {
	m.title = fmt.Sprintf("%s(%s)", title, section)
}

// block ends what came before with a blank line.
func (m *markdown) block() {
	s := m.b.String()
	switch {
	case s == "", strings.HasSuffix(s, "\n\n"):
	case strings.HasSuffix(s, "\n"):
		m.b.WriteString("\n")
	default:
		m.b.WriteString("\n\n")
	}
}

func (m *markdown) sh(name string) {
	name = sentenceCase(name)
	m.block()
	m.inItem = false
	m.toc = append(m.toc, fmt.Sprintf("- [%s](#%s)", name, Anchor(name)))
	fmt.Fprintf(&m.b, "## %s\n\n", name)
}

func (m *markdown) ss(name string) {
	m.block()
	m.inItem = false
	m.toc = append(m.toc, fmt.Sprintf("  - [%s](#%s)", name, Anchor(name)))
	fmt.Fprintf(&m.b, "### %s\n\n", name)
}

func (m *markdown) line(s string) {
	m.inItem = false
	m.b.WriteString(mdLine(s) + "\n")
}

func (m *markdown) prose(text string) {
	m.block()
	m.inItem = false
	m.paras(text, "")
}

// paras writes text's paragraphs, each line after indent; runs of lines
// that start with white space are a code block.
func (m *markdown) paras(text, indent string) {
	for i, para := range strings.Split(strings.TrimSpace(text), "\n\n") {
		if i > 0 {
			m.b.WriteString("\n")
		}
		var lit []string
		flush := func() {
			if len(lit) > 0 {
				m.fence(strings.Join(lit, "\n"), indent)
				lit = nil
			}
		}
		first := true
		for _, l := range strings.Split(para, "\n") {
			if strings.HasPrefix(l, " ") || strings.HasPrefix(l, "\t") {
				lit = append(lit, l)
				continue
			}
			if len(lit) > 0 {
				flush()
				first = true
			}
			if strings.TrimSpace(l) != "" {
				if first && i == 0 && indent != "" {
					// The item's first line is written by item.
					m.b.WriteString(mdLine(l) + "\n")
				} else {
					m.b.WriteString(indent + mdLine(l) + "\n")
				}
				first = false
			}
		}
		flush()
	}
}

func (m *markdown) para() { m.block(); m.inItem = false }
func (m *markdown) gap()  {}

func (m *markdown) literal(text string) {
	indent := ""
	if m.inItem {
		indent = "  "
	}
	m.fence(text, indent)
}

// fence writes text as a code block, its common indent dropped, each line
// after indent (an item's code block is indented under it).
func (m *markdown) fence(text, indent string) {
	lines := strings.Split(strings.TrimRight(text, "\n"), "\n")
	common := -1
	for _, l := range lines {
		if strings.TrimSpace(l) == "" {
			continue
		}
		if n := len(l) - len(strings.TrimLeft(l, " \t")); common < 0 || n < common {
			common = n
		}
	}
	m.block()
	m.b.WriteString(indent + "```\n")
	for _, l := range lines {
		if len(l) >= common && common > 0 {
			l = l[common:]
		}
		m.b.WriteString(strings.TrimRight(indent+l, " ") + "\n")
	}
	m.b.WriteString(indent + "```\n\n")
}

func (m *markdown) item(tag, text string) {
	if !m.inItem {
		m.block()
	}
	fmt.Fprintf(&m.b, "- %s: ", code(tag))
	m.paras(text, "  ")
	m.inItem = true
}

func (m *markdown) itemLiteral(text string) {
	m.inItem = true
	m.literal(text)
}

func (m *markdown) synopsis(lines ...synopsisLine) {
	var text []string
	for _, l := range lines {
		text = append(text, strings.TrimSpace(l.cmd+" "+l.rest))
	}
	m.inItem = false
	m.fence(strings.Join(text, "\n"), "")
}

func (m *markdown) seeAlso(refs ...manRef) {
	m.block()
	var links []string
	for _, r := range refs {
		if r == refJq {
			links = append(links, "jq(1)")
			continue
		}
		links = append(links, fmt.Sprintf("[%s(%s)](%s)", r.name, r.section, MarkdownFile(r.name)))
	}
	m.b.WriteString(strings.Join(links, ", ") + "\n")
}

// GeneratedNote heads every generated page of docs/.
const GeneratedNote = "<!-- Generated by `go test ./internal/cli -run TestGeneratedDocsAreFresh -update` from the code: do not edit. -->"

func (m *markdown) String() string {
	var out strings.Builder
	fmt.Fprintf(&out, "%s\n\n# %s\n\n", GeneratedNote, m.title)
	if len(m.toc) > 2 {
		out.WriteString("Contents:\n\n" + strings.Join(m.toc, "\n") + "\n\n")
	}
	out.WriteString(strings.TrimRight(m.b.String(), "\n") + "\n")
	return out.String()
}

// sentenceCase writes a man page's section name (EXIT STATUS) as a
// Markdown heading is (Exit status).
func sentenceCase(s string) string {
	if strings.ToUpper(s) != s {
		return s
	}
	r, n := utf8.DecodeRuneInString(s)
	return string(r) + strings.ToLower(s[n:])
}

// Anchor is the fragment GitHub gives a heading: lower case, spaces as
// hyphens, other punctuation dropped.
func Anchor(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ' || r == '-':
			b.WriteRune('-')
		case r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// code is s as inline code, with enough backquotes around it.
func code(s string) string {
	fence := "`"
	for strings.Contains(s, fence) {
		fence += "`"
	}
	if strings.HasPrefix(s, "`") || strings.HasSuffix(s, "`") {
		return fence + " " + s + " " + fence
	}
	return fence + s + fence
}

// mdLine escapes a line of text for Markdown: the characters that would
// start markup (an <id> is no HTML tag, a * no emphasis, a ]( no link;
// brackets alone are text), an underscore
// only where it could (agent_id stays as it is), and a line's start that
// would make it a list item, a heading or a quote.
func mdLine(s string) string {
	var b strings.Builder
	rs := []rune(s)
	for i, r := range rs {
		switch r {
		case '\\', '`', '*', '<':
			b.WriteRune('\\')
		case ']':
			if i < len(rs)-1 && (rs[i+1] == '(' || rs[i+1] == '[' || rs[i+1] == ':') { // a link
				b.WriteRune('\\')
			}
		case '_':
			inWord := i > 0 && i < len(rs)-1 && isWord(rs[i-1]) && isWord(rs[i+1])
			if !inWord {
				b.WriteRune('\\')
			}
		}
		b.WriteRune(r)
	}
	out := b.String()
	if strings.HasPrefix(out, "#") || strings.HasPrefix(out, "- ") || strings.HasPrefix(out, "+ ") ||
		strings.HasPrefix(out, "=") || strings.HasPrefix(out, ">") {
		out = `\` + out
	}
	if i := numbered(out); i > 0 {
		out = out[:i] + `\` + out[i:]
	}
	return out
}

func isWord(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) }

// numbered is where the . or ) of a line that begins as an ordered list
// item does ("1. ") is, else 0.
func numbered(s string) int {
	i := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	if i > 0 && i < len(s)-1 && (s[i] == '.' || s[i] == ')') && s[i+1] == ' ' {
		return i
	}
	return 0
}

// Reference writes the pages of docs/reference, by file name: the man
// pages in Markdown, written by the same code as the man pages.
func Reference(app App) map[string]string {
	out := map[string]string{}
	for name, write := range map[string]func(page){
		refKaimon.name: func(p page) { writeKaimon(p, app) },
		refAgentd.name: writeAgentd,
		refEvents.name: writeEvents,
	} {
		var m markdown
		write(&m)
		out[MarkdownFile(name)] = m.String()
	}
	return out
}
