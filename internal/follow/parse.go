package follow

import (
	"bytes"

	"github.com/tidwall/gjson"

	"github.com/kaimon/kaimon/internal/event"
)

// The daemon encodes every envelope as event.AppendEnvelope writes it:
//
//	{"kind":K,"turn":N,"data":D,"agent_id":A,"seq":S,"ts":T}
//
// parse reads that shape by position: the head up to data from the
// front, and agent_id, seq and ts from the back (D, whatever it holds,
// is skipped, not scanned). Anything else (an escaped string, a field
// added or moved) is read by gjson instead, field by field.
var (
	headKind  = []byte(`{"kind":"`)
	headTurn  = []byte(`","turn":`)
	headData  = []byte(`,"data":`)
	tailAgent = []byte(`,"agent_id":"`)
	tailSeq   = []byte(`","seq":`)
	tailTS    = []byte(`,"ts":"`)
)

// parse fills e's Seq, Kind, Turn, Raw and Data from raw and returns its
// agent id; ok is false for what is not an envelope of an agent.
func parse(raw []byte, e *Envelope) (agent []byte, ok bool) {
	if agent, ok = parseFast(raw, e); ok {
		return agent, true
	}
	return parseSlow(raw, e)
}

func parseFast(raw []byte, e *Envelope) (agent []byte, ok bool) {
	rest, ok := bytes.CutPrefix(raw, headKind)
	if !ok {
		return nil, false
	}
	i := bytes.IndexByte(rest, '"')
	if i < 0 || bytes.IndexByte(rest[:i], '\\') >= 0 {
		return nil, false
	}
	kind := rest[:i]
	if rest, ok = bytes.CutPrefix(rest[i:], headTurn); !ok {
		return nil, false
	}
	turn, n := digits(rest)
	if n == 0 {
		return nil, false
	}
	data, ok := bytes.CutPrefix(rest[n:], headData)
	if !ok {
		return nil, false
	}
	a := bytes.LastIndex(data, tailAgent)
	if a <= 0 {
		return nil, false
	}
	tail := data[a+len(tailAgent):]
	at := len(raw) - len(tail) - 1 // the agent id's opening quote, tailAgent's last byte
	data = data[:a]
	i = bytes.IndexByte(tail, '"')
	if i <= 0 || bytes.IndexByte(tail[:i], '\\') >= 0 {
		return nil, false
	}
	agent = tail[:i]
	if tail, ok = bytes.CutPrefix(tail[i:], tailSeq); !ok {
		return nil, false
	}
	seq, n := digits(tail)
	if n == 0 {
		return nil, false
	}
	ts, ok := bytes.CutPrefix(tail[n:], tailTS)
	if !ok || len(ts) < 2 || !bytes.HasSuffix(ts, []byte(`"}`)) || bytes.IndexByte(ts[:len(ts)-2], '"') >= 0 {
		return nil, false
	}
	e.Seq, e.Kind, e.Turn, e.Raw, e.Data = seq, kindOf(kind), int(turn), raw, data
	e.agentAt, e.agentEnd = at, at+1+len(agent)+1
	return agent, true
}

// digits reads the unsigned decimal at the start of b: its value and its
// length (0 for none, or one that overflows).
func digits(b []byte) (uint64, int) {
	var v uint64
	n := 0
	for ; n < len(b) && b[n] >= '0' && b[n] <= '9'; n++ {
		d := uint64(b[n] - '0')
		if v > (1<<64-1-d)/10 {
			return 0, 0
		}
		v = v*10 + d
	}
	return v, n
}

// kindOf is the kind named by b, without allocating for a known one.
func kindOf(b []byte) event.Kind {
	for _, k := range event.Kinds {
		if string(k) == string(b) {
			return k
		}
	}
	return event.Kind(b)
}

func parseSlow(raw []byte, e *Envelope) (agent []byte, ok bool) {
	if !gjson.ValidBytes(raw) {
		return nil, false
	}
	r := gjson.ParseBytes(raw)
	if !r.IsObject() {
		return nil, false
	}
	a := r.Get("agent_id")
	if a.Type != gjson.String || a.Str == "" {
		return nil, false
	}
	d := r.Get("data")
	e.Seq, e.Kind, e.Turn, e.Raw = r.Get("seq").Uint(), event.Kind(r.Get("kind").Str), int(r.Get("turn").Int()), raw
	// Where the agent id's value stands, for Hosted: unknown (0) when
	// gjson does not say, or when a host field is there already.
	e.agentAt, e.agentEnd = 0, 0
	if a.Index > 0 && string(raw[a.Index:min(a.Index+len(a.Raw), len(raw))]) == a.Raw && !r.Get("host").Exists() {
		e.agentAt, e.agentEnd = a.Index, a.Index+len(a.Raw)
	}
	e.Data = nil
	if d.Exists() {
		e.Data = []byte(d.Raw)
	}
	return []byte(a.Str), true
}
