package claude

import (
	"strings"

	"github.com/tidwall/gjson"
)

// The hot path of the mapper reads each stdout line once: scanLine
// validates it and, in the same pass, picks the values the mapper needs
// (the line's type, its stream event's type, delta, …), as raw text into
// the line, without building anything. Issue 12's profile had validation
// (gjson.ValidBytes) and a second pass picking the keys at two thirds of
// the claude backend's CPU; one pass costs about what validation alone
// did.
//
// Why a hand scanner: no library validates and picks in one pass without
// building values (gjson validates in one pass and reads in others;
// encoding/json's decoders build what they read), and the grammar is
// small. It is a plain byte loop: the one place that pays per byte, the
// body of a string, skips runs of plain bytes through a table.
//
// What it accepts is exactly what json.Valid accepts (FuzzScanLine checks
// it against json.Valid, and against gjson.Valid and gjson.Get):
//   - bytes ≥ 0x80 are not checked: invalid UTF-8 in a string is valid,
//     as for json.Valid and gjson.Valid (the mapper copies the text it
//     takes, and the event encoders turn invalid UTF-8 into U+FFFD);
//   - control characters (< 0x20) in a string are invalid, as for both;
//   - nesting deeper than 10000 is invalid, as for json.Valid
//     (encoding/json's limit). gjson.Valid has no limit; it is the one
//     place the two differ, and the mapper now follows encoding/json, as
//     what it emits (a tool call's raw input) is re-encoded by it.

// maxDepth is encoding/json's nesting limit: json.Valid rejects a value
// nested deeper.
const maxDepth = 10000

// A field is a value scanLine picks: the value of key in the object it
// scans, into out[slot]; kids are picked inside that value when it is an
// object. A key that appears twice keeps its first value, and its kids
// are picked from that value only, as gjson.Get reads a path.
type field struct {
	key  string
	slot int
	kids []field
}

// scanLine reports whether s is one JSON text, exactly as json.Valid
// does, and when it is an object sets out[f.slot] to the raw text of each
// field's value (left as it is when absent). out must be zero and as long
// as the largest slot; what it holds when s is not valid is meaningless.
func scanLine(s string, fields []field, out []string) bool {
	i := skipSpace(s, 0)
	var ok bool
	if i < len(s) && s[i] == '{' {
		i, ok = scanObject(s, i, fields, out, 1)
	} else {
		i, ok = skipValue(s, i, 0)
	}
	return ok && skipSpace(s, i) == len(s)
}

// scanObject validates the object at s[i] ('{'), the depth-th level of
// nesting, picking fields from it; it returns the index past it.
func scanObject(s string, i int, fields []field, out []string, depth int) (int, bool) {
	i = skipSpace(s, i+1)
	if i < len(s) && s[i] == '}' {
		return i + 1, true
	}
	for {
		if i >= len(s) || s[i] != '"' {
			return i, false
		}
		end, esc, ok := scanString(s, i+1)
		if !ok {
			return end, false
		}
		f := lookup(fields, s[i+1:end-1], esc)
		i = skipSpace(s, end)
		if i >= len(s) || s[i] != ':' {
			return i, false
		}
		i = skipSpace(s, i+1)
		if v := i; f != nil && out[f.slot] == "" {
			if f.kids != nil && i < len(s) && s[i] == '{' && depth < maxDepth {
				i, ok = scanObject(s, i, f.kids, out, depth+1)
			} else {
				i, ok = skipValue(s, i, depth)
			}
			out[f.slot] = s[v:i]
		} else {
			i, ok = skipValue(s, i, depth)
		}
		if !ok {
			return i, false
		}
		i = skipSpace(s, i)
		if i >= len(s) {
			return i, false
		}
		switch s[i] {
		case '}':
			return i + 1, true
		case ',':
			i = skipSpace(s, i+1)
		default:
			return i, false
		}
	}
}

// lookup returns the field of key (its raw text, with escapes when esc),
// nil if none.
func lookup(fields []field, key string, esc bool) *field {
	for j := range fields {
		if f := &fields[j]; key == f.key || esc && unescapedIs(key, f.key) {
			return f
		}
	}
	return nil
}

// unescapedIs says whether the raw text of a valid string with escapes
// stands for want, which is ASCII (a key of the mapper's): a key spelt
// "ty\u0070e" is "type" to gjson.Get too. No allocation: the escapes are
// decoded as they are compared.
func unescapedIs(raw, want string) bool {
	j := 0
	for i := 0; i < len(raw); j++ {
		c := raw[i]
		if c != '\\' {
			i++
		} else {
			switch c = raw[i+1]; c {
			case 'u':
				r := hexValue(raw[i+2 : i+6])
				if r >= 0x80 {
					return false // not ASCII, not in want
				}
				c = byte(r)
				i += 6
			case 'b':
				c, i = '\b', i+2
			case 'f':
				c, i = '\f', i+2
			case 'n':
				c, i = '\n', i+2
			case 'r':
				c, i = '\r', i+2
			case 't':
				c, i = '\t', i+2
			default: // '"', '\\', '/'
				i += 2
			}
		}
		if j >= len(want) || want[j] != c {
			return false
		}
	}
	return j == len(want)
}

func hexValue(h string) rune {
	var r rune
	for i := 0; i < len(h); i++ {
		c := h[i]
		switch {
		case c <= '9':
			c -= '0'
		case c <= 'F':
			c -= 'A' - 10
		default:
			c -= 'a' - 10
		}
		r = r<<4 | rune(c)
	}
	return r
}

// skipValue validates the value at s[i] (after blanks), nested in depth
// containers, and returns the index past it. One loop with an explicit
// stack rather than recursion: most values it skips are small, and a call
// per value costs more than the bytes. The stack starts on the goroutine's
// stack; only a value nested deeper than it needs the heap.
func skipValue(s string, i, depth int) (int, bool) {
	var small [32]byte
	stack := small[:0] // the open containers, '{' or '['
value:
	i = skipSpace(s, i)
	if i >= len(s) {
		return i, false
	}
	switch s[i] {
	case '"':
		var ok bool
		if i, _, ok = scanString(s, i+1); !ok {
			return i, false
		}
	case '{':
		if depth+len(stack) >= maxDepth {
			return i, false
		}
		i = skipSpace(s, i+1)
		if i < len(s) && s[i] == '}' {
			i++
			break
		}
		stack = append(stack, '{')
		goto key
	case '[':
		if depth+len(stack) >= maxDepth {
			return i, false
		}
		i = skipSpace(s, i+1)
		if i < len(s) && s[i] == ']' {
			i++
			break
		}
		stack = append(stack, '[')
		goto value
	case 't':
		if !strings.HasPrefix(s[i:], "true") {
			return i, false
		}
		i += 4
	case 'f':
		if !strings.HasPrefix(s[i:], "false") {
			return i, false
		}
		i += 5
	case 'n':
		if !strings.HasPrefix(s[i:], "null") {
			return i, false
		}
		i += 4
	default:
		var ok bool
		if i, ok = scanNumber(s, i); !ok {
			return i, false
		}
	}
next: // past a value: a comma, or the end of containers
	if len(stack) == 0 {
		return i, true
	}
	i = skipSpace(s, i)
	if i >= len(s) {
		return i, false
	}
	switch open := stack[len(stack)-1]; s[i] {
	case ',':
		i++
		if open == '{' {
			goto key
		}
		goto value
	case '}', ']':
		if s[i] != open+2 { // '{'+2 == '}', '['+2 == ']'
			return i, false
		}
		stack = stack[:len(stack)-1]
		i++
		goto next
	}
	return i, false
key: // a member's key and colon; its value follows
	i = skipSpace(s, i)
	if i >= len(s) || s[i] != '"' {
		return i, false
	}
	{
		var ok bool
		if i, _, ok = scanString(s, i+1); !ok {
			return i, false
		}
	}
	i = skipSpace(s, i)
	if i >= len(s) || s[i] != ':' {
		return i, false
	}
	i++
	goto value
}

// plain[c] is set for the bytes a string holds as they are: all but '"',
// '\\' and the control characters. Bytes ≥ 0x80 are plain (no UTF-8
// check, as json.Valid).
var plain = func() (t [256]bool) {
	for c := 0x20; c < 256; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

var isHex = func() (t [256]bool) {
	for _, c := range "0123456789abcdefABCDEF" {
		t[c] = true
	}
	return t
}()

// scanString validates the string whose body begins at s[i] (past the
// opening quote); it returns the index past the closing quote and whether
// the string has escapes.
func scanString(s string, i int) (end int, esc, ok bool) {
	for {
		// Runs of plain bytes, four at a time while there are four.
		for i+4 <= len(s) && plain[s[i]] && plain[s[i+1]] && plain[s[i+2]] && plain[s[i+3]] {
			i += 4
		}
		for i < len(s) && plain[s[i]] {
			i++
		}
		if i >= len(s) {
			return i, esc, false
		}
		switch s[i] {
		case '"':
			return i + 1, esc, true
		case '\\':
			esc = true
			if i+1 >= len(s) {
				return i + 1, esc, false
			}
			switch s[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if i+6 > len(s) || !isHex[s[i+2]] || !isHex[s[i+3]] || !isHex[s[i+4]] || !isHex[s[i+5]] {
					return i, esc, false
				}
				i += 6
			default:
				return i + 1, esc, false
			}
		default: // a control character
			return i, esc, false
		}
	}
}

// scanNumber validates the number at s[i]:
// -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func scanNumber(s string, i int) (int, bool) {
	if i < len(s) && s[i] == '-' {
		i++
	}
	switch {
	case i >= len(s):
		return i, false
	case s[i] == '0':
		i++
	case '1' <= s[i] && s[i] <= '9':
		i = skipDigits(s, i+1)
	default:
		return i, false
	}
	if i < len(s) && s[i] == '.' {
		i++
		if i >= len(s) || s[i] < '0' || s[i] > '9' {
			return i, false
		}
		i = skipDigits(s, i+1)
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		if i >= len(s) || s[i] < '0' || s[i] > '9' {
			return i, false
		}
		i = skipDigits(s, i+1)
	}
	return i, true
}

func skipDigits(s string, i int) int {
	for i < len(s) && '0' <= s[i] && s[i] <= '9' {
		i++
	}
	return i
}

func skipSpace(s string, i int) int {
	for i < len(s) && s[i] <= ' ' && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r') {
		i++
	}
	return i
}

// str is the string value of raw, as gjson's Result.String gives it: a
// JSON string unescaped (without a copy when it has no escapes), other
// values as gjson renders them, "" when absent.
func str(raw string) string {
	if len(raw) >= 2 && raw[0] == '"' {
		inner := raw[1 : len(raw)-1]
		if strings.IndexByte(inner, '\\') < 0 {
			return inner
		}
	}
	if raw == "" {
		return ""
	}
	return gjson.Parse(raw).String()
}
