package claude

import (
	"strings"

	"github.com/tidwall/gjson"
)

// A small scanner over JSON already validated (gjson.ValidBytes in Map),
// for the hot path: it finds the keys a line's kind needs in one pass over
// an object, skipping the other values without building them (gjson's
// ForEach builds a Result for every value; a Get per key walks the object
// again each time). Issue 12's profile had the mapper at most of the
// relay's CPU.

// pickRaw sets out[i] to the raw text of the value of keys[i] in the JSON
// object obj ("" when absent), in one pass that stops once all are found.
// A key that appears twice keeps its first value, as with gjson.Get.
func pickRaw(obj string, keys []string, out []string) {
	if len(obj) == 0 || obj[0] != '{' {
		return
	}
	left := len(keys)
	i := 1
	for left > 0 {
		i = skipSpace(obj, i)
		if i >= len(obj) || obj[i] != '"' {
			return // '}' or the end
		}
		kEnd := skipString(obj, i)
		key := obj[i+1 : kEnd-1]
		if strings.IndexByte(key, '\\') >= 0 {
			key = gjson.Parse(obj[i:kEnd]).Str
		}
		i = skipSpace(obj, kEnd) + 1 // the colon
		i = skipSpace(obj, i)
		vEnd := skipValue(obj, i)
		for k, want := range keys {
			if key == want {
				if out[k] == "" {
					out[k] = obj[i:vEnd]
					left--
				}
				break
			}
		}
		i = skipSpace(obj, vEnd)
		if i < len(obj) && obj[i] == ',' {
			i++
		}
	}
}

func skipSpace(s string, i int) int {
	for i < len(s) && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r') {
		i++
	}
	return i
}

// skipString returns the index past the string that begins at s[i] ('"').
// A plain loop: the strings of a stream-json line are short, shorter than
// what strings.IndexByte's setup pays for.
func skipString(s string, i int) int {
	for i++; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return len(s)
}

// skipValue returns the index past the value that begins at s[i].
func skipValue(s string, i int) int {
	if i >= len(s) {
		return i
	}
	switch s[i] {
	case '"':
		return skipString(s, i)
	case '{', '[':
		depth := 0
		for i < len(s) {
			switch s[i] {
			case '"':
				i = skipString(s, i)
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
			i++
		}
		return i
	}
	for i < len(s) && s[i] != ',' && s[i] != '}' && s[i] != ']' && s[i] != ' ' && s[i] != '\t' && s[i] != '\n' && s[i] != '\r' {
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
