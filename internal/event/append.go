package event

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"
	"unicode/utf8"
)

// The hot path of the relay (a streamed chunk: mapped, stamped, logged
// when authoritative, published) encodes by hand rather than through
// encoding/json's reflection, and appends Data as it is when it is known
// to be compact, valid JSON (built by this package), instead of
// re-compacting it: issue 12 measured json.Marshal of the envelope at a
// third of the relay's CPU. The output is byte for byte what Marshal
// writes (append_test.go checks it).

// AppendString appends s as a JSON string, escaped as Marshal escapes it
// (no HTML escaping; invalid UTF-8 becomes U+FFFD; U+2028 and U+2029 are
// escaped).
func AppendString(dst []byte, s string) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		if b := s[i]; b < utf8.RuneSelf {
			if b >= 0x20 && b != '"' && b != '\\' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch b {
			case '\\', '"':
				dst = append(dst, '\\', b)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hex[b>>4], hex[b&0xF])
			}
			i++
			start = i
			continue
		}
		c, size := utf8.DecodeRuneInString(s[i:])
		if c == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if c == '\u2028' || c == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hex[c&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// appendData appends data as Marshal does a json.RawMessage: null when
// empty, as it is when compact (known to be valid and compact), else
// validated and compacted.
func appendData(dst []byte, data []byte, compact bool) ([]byte, error) {
	if len(data) == 0 {
		return append(dst, "null"...), nil
	}
	if compact {
		return append(dst, data...), nil
	}
	buf := bytes.NewBuffer(dst)
	if err := json.Compact(buf, data); err != nil {
		return dst, fmt.Errorf("event data: %w", err)
	}
	return buf.Bytes(), nil
}

// stampSecond is a UTC time to the second, formatted as RFC 3339 writes
// it: the part of a timestamp that the envelopes stamped within one
// second share.
type stampSecond struct {
	unix int64
	text [len("2006-01-02T15:04:05")]byte
}

// lastSecond is the second of the latest UTC timestamp appendTime wrote.
// Formatting the date and clock was a tenth of the CPU of the claude
// mapper's hot path (issue 12, time.Time.AppendFormat); envelopes come
// many to a second, so appendTime formats them once a second and appends
// only the fraction. Immutable once stored: a new second stores a new one.
var lastSecond atomic.Pointer[stampSecond]

// appendTime appends t as Marshal does a time.Time.
func appendTime(dst []byte, t time.Time) ([]byte, error) {
	if t.Location() == time.UTC {
		unix := t.Unix()
		p := lastSecond.Load()
		if p == nil || p.unix != unix {
			if y := t.Year(); y < 0 || y >= 10000 {
				return dst, fmt.Errorf("event ts: year %d outside of range [0,9999]", y)
			}
			p = &stampSecond{unix: unix}
			t.AppendFormat(p.text[:0], "2006-01-02T15:04:05")
			lastSecond.Store(p)
		}
		dst = append(dst, '"')
		dst = append(dst, p.text[:]...)
		dst = appendFraction(dst, t.Nanosecond())
		return append(dst, 'Z', '"'), nil
	}
	if y := t.Year(); y < 0 || y >= 10000 {
		return dst, fmt.Errorf("event ts: year %d outside of range [0,9999]", y)
	}
	dst = append(dst, '"')
	dst = t.AppendFormat(dst, time.RFC3339Nano)
	return append(dst, '"'), nil
}

// appendFraction appends the fraction of a second RFC3339Nano writes for
// ns nanoseconds: none for 0, else a point and up to nine digits, without
// trailing zeros.
func appendFraction(dst []byte, ns int) []byte {
	if ns == 0 {
		return dst
	}
	var b [10]byte
	b[0] = '.'
	for i := 9; i > 0; i-- {
		b[i] = byte('0' + ns%10)
		ns /= 10
	}
	n := len(b)
	for b[n-1] == '0' {
		n--
	}
	return append(dst, b[:n]...)
}

// AppendEnvelope appends e as the bus sends it: what Marshal(e) gives.
func AppendEnvelope(dst []byte, e *Envelope) ([]byte, error) {
	start := len(dst)
	dst = append(dst, `{"kind":`...)
	dst = AppendString(dst, string(e.Kind))
	dst = append(dst, `,"turn":`...)
	dst = strconv.AppendInt(dst, int64(e.Turn), 10)
	dst = append(dst, `,"data":`...)
	dst, err := appendData(dst, e.Data, e.compact)
	if err != nil {
		return dst[:start], err
	}
	dst = append(dst, `,"agent_id":`...)
	dst = AppendString(dst, e.AgentID)
	dst = append(dst, `,"seq":`...)
	dst = strconv.AppendUint(dst, e.Seq, 10)
	dst = append(dst, `,"ts":`...)
	if dst, err = appendTime(dst, e.TS); err != nil {
		return dst[:start], err
	}
	return append(dst, '}'), nil
}

// AppendRecord appends e's log record ({ts, seq, kind, turn, data}): what
// Marshal(e.Record()) gives.
func AppendRecord(dst []byte, e *Envelope) ([]byte, error) {
	start := len(dst)
	dst = append(dst, `{"ts":`...)
	dst, err := appendTime(dst, e.TS)
	if err != nil {
		return dst[:start], err
	}
	dst = append(dst, `,"seq":`...)
	dst = strconv.AppendUint(dst, e.Seq, 10)
	dst = append(dst, `,"kind":`...)
	dst = AppendString(dst, string(e.Kind))
	dst = append(dst, `,"turn":`...)
	dst = strconv.AppendInt(dst, int64(e.Turn), 10)
	dst = append(dst, `,"data":`...)
	if dst, err = appendData(dst, e.Data, e.compact); err != nil {
		return dst[:start], err
	}
	return append(dst, '}'), nil
}
