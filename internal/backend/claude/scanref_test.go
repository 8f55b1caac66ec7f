package claude

import (
	"strings"

	"github.com/tidwall/gjson"
)

// The key scanner the mapper used before scanLine (issue 12), over lines
// already validated by gjson.ValidBytes: kept as an oracle for the
// differential tests of scanLine, which must pick what it picked.

// refPickRaw sets out[i] to the raw text of the value of keys[i] in the JSON
// object obj ("" when absent), in one pass that stops once all are found.
// A key that appears twice keeps its first value, as with gjson.Get.
func refPickRaw(obj string, keys []string, out []string) {
	if len(obj) == 0 || obj[0] != '{' {
		return
	}
	left := len(keys)
	i := 1
	for left > 0 {
		i = refSkipSpace(obj, i)
		if i >= len(obj) || obj[i] != '"' {
			return // '}' or the end
		}
		kEnd := refSkipString(obj, i)
		key := obj[i+1 : kEnd-1]
		if strings.IndexByte(key, '\\') >= 0 {
			key = gjson.Parse(obj[i:kEnd]).Str
		}
		i = refSkipSpace(obj, kEnd) + 1 // the colon
		i = refSkipSpace(obj, i)
		vEnd := refSkipValue(obj, i)
		for k, want := range keys {
			if key == want {
				if out[k] == "" {
					out[k] = obj[i:vEnd]
					left--
				}
				break
			}
		}
		i = refSkipSpace(obj, vEnd)
		if i < len(obj) && obj[i] == ',' {
			i++
		}
	}
}

func refSkipSpace(s string, i int) int {
	for i < len(s) && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r') {
		i++
	}
	return i
}

// refSkipString returns the index past the string that begins at s[i] ('"').
// A plain loop: the strings of a stream-json line are short, shorter than
// what strings.IndexByte's setup pays for.
func refSkipString(s string, i int) int {
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

// refSkipValue returns the index past the value that begins at s[i].
func refSkipValue(s string, i int) int {
	if i >= len(s) {
		return i
	}
	switch s[i] {
	case '"':
		return refSkipString(s, i)
	case '{', '[':
		depth := 0
		for i < len(s) {
			switch s[i] {
			case '"':
				i = refSkipString(s, i)
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
