package manpage

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// The pages are written as roff by this small writer rather than through
// go-md2man: the text comes from help strings full of characters markdown
// gives meaning to (agent_id, *, <id>, `cmd`), so markdown would need its
// own escaping before roff's, and the few constructs a man page needs
// (.SH, .SS, .TP, literal blocks) are simpler to write than to coax out of
// a markdown renderer.

// roff builds one page.
type roff struct{ b strings.Builder }

// special maps the non-ASCII characters our texts use to roff's own
// glyphs, so that a page renders the same in a C locale as in UTF-8.
var special = map[rune]string{
	'…': "...", '—': `\(em`, '–': `\(en`, '→': `\(->`, '←': `\(<-`, '⇄': `<\->`,
	'≤': `\(<=`, '≥': `\(>=`, '×': `\(mu`, '‘': "'", '’': "'", '“': `\(lq`, '”': `\(rq`,
	'µ': "u", '·': `\(pc`,
}

// esc escapes s for use in a text line or a macro argument: backslashes,
// hyphens (so that options copy as ASCII minus signs), and characters
// outside ASCII. It does not guard a leading control character; line does.
func esc(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case r == '\\':
			b.WriteString(`\e`)
		case r == '-':
			b.WriteString(`\-`)
		case r < utf8.RuneSelf:
			b.WriteRune(r)
		case special[r] != "":
			b.WriteString(special[r])
		default:
			fmt.Fprintf(&b, `\[u%04X]`, r)
		}
	}
	return b.String()
}

// line writes one text line, escaped; a line starting with . or ' would be
// a request, so it gets a zero-width \& first.
func (r *roff) line(s string) {
	e := esc(s)
	if strings.HasPrefix(e, ".") || strings.HasPrefix(e, "'") {
		e = `\&` + e
	}
	r.b.WriteString(e + "\n")
}

// raw writes roff as is: requests and text built with escapes already.
func (r *roff) raw(format string, a ...any) { fmt.Fprintf(&r.b, format+"\n", a...) }

// macro writes a request with arguments, each escaped and quoted.
func (r *roff) macro(name string, args ...string) {
	r.b.WriteString("." + name)
	for _, a := range args {
		r.b.WriteString(` "` + strings.ReplaceAll(esc(a), `"`, `\(dq`) + `"`)
	}
	r.b.WriteString("\n")
}

// header starts a page.
func (r *roff) header(title, section string) {
	r.macro("TH", strings.ToUpper(title), section, "", source, "kaimon manual")
	r.raw(".ad l") // left-aligned: no stretched spaces in narrow terminals
	r.raw(".nh")   // no hyphenation: option names must copy whole
}

func (r *roff) sh(name string) { r.macro("SH", name) }
func (r *roff) ss(name string) { r.macro("SS", name) }

// prose writes text: paragraphs split by blank lines; runs of lines that
// start with white space are literal (examples), the rest is filled.
func (r *roff) prose(text string) { r.paras(text, ".PP") }

// paras is prose with paragraphs started by macro: .PP at the top level,
// .IP inside a tagged paragraph, so that they keep its indent.
func (r *roff) paras(text, macro string) {
	for i, para := range strings.Split(strings.TrimSpace(text), "\n\n") {
		if i > 0 {
			r.raw("%s", macro)
		}
		var lit []string
		text := false // text came before, in this paragraph
		flush := func() {
			if len(lit) > 0 {
				if text {
					r.raw(".sp")
				}
				r.literal(strings.Join(lit, "\n"))
				lit = nil
			}
		}
		for _, l := range strings.Split(para, "\n") {
			if strings.HasPrefix(l, " ") || strings.HasPrefix(l, "\t") {
				lit = append(lit, l)
				continue
			}
			flush()
			if strings.TrimSpace(l) != "" {
				r.line(l)
				text = true
			}
		}
		flush()
	}
}

// literal writes lines as they are (no filling), indented.
func (r *roff) literal(text string) {
	lines := strings.Split(strings.TrimRight(text, "\n"), "\n")
	// Drop the indent the lines share.
	common := -1
	for _, l := range lines {
		if strings.TrimSpace(l) == "" {
			continue
		}
		n := len(l) - len(strings.TrimLeft(l, " \t"))
		if common < 0 || n < common {
			common = n
		}
	}
	r.raw(".RS 4")
	r.raw(".nf")
	for _, l := range lines {
		if len(l) >= common && common > 0 {
			l = l[common:]
		}
		r.line(l)
	}
	r.raw(".fi")
	r.raw(".RE")
}

// item writes a tagged paragraph: tag in bold, then the text.
func (r *roff) item(tag, text string) {
	r.raw(".TP")
	r.raw(`\fB%s\fR`, esc(tag))
	r.paras(text, ".IP")
}

// itemRaw is item with a tag written in roff already.
func (r *roff) itemRaw(tag, text string) {
	r.raw(".TP")
	r.raw("%s", tag)
	r.paras(text, ".IP")
}

// para starts a paragraph.
func (r *roff) para() { r.raw(".PP") }

// gap is the space between text and the literal block that follows it.
func (r *roff) gap() { r.raw(".sp") }

// itemLiteral is a literal block inside the last item.
func (r *roff) itemLiteral(text string) {
	r.raw(".IP")
	r.literal(text)
}

// synopsis writes command lines, each command in bold and the rest as it
// is; several are kept unfilled, a line each.
func (r *roff) synopsis(lines ...synopsisLine) {
	if len(lines) > 1 {
		r.raw(".nf")
	}
	for _, l := range lines {
		rest := esc(l.rest)
		if l.rest != "" {
			rest = " " + rest
		}
		for _, w := range l.italic {
			rest = strings.ReplaceAll(rest, esc(w), `\fI`+esc(w)+`\fR`)
		}
		r.raw(`\fB%s\fR%s`, esc(l.cmd), rest)
	}
	if len(lines) > 1 {
		r.raw(".fi")
	}
}

// seeAlso names the other pages, name(section) each.
func (r *roff) seeAlso(refs ...manRef) {
	for i, ref := range refs {
		sep := ","
		if i == len(refs)-1 {
			sep = ""
		}
		r.raw(`.BR %s (%s)%s`, esc(ref.name), ref.section, sep)
	}
}

func (r *roff) String() string { return r.b.String() }
