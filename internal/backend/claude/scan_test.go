package claude

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

// fieldPaths are lineFields' values as gjson.Get paths, by slot.
var fieldPaths = [nFields]string{
	fType: "type", fEvent: "event", fParent: "parent_tool_use_id",
	fEventType: "event.type", fIndex: "event.index", fDelta: "event.delta", fContentBlock: "event.content_block",
	fDeltaType: "event.delta.type", fText: "event.delta.text", fThinking: "event.delta.thinking", fPartialJSON: "event.delta.partial_json",
}

// checkScan checks scanLine on s against json.Valid and gjson.Valid, and
// what it picks against gjson.Get and against the scanner it replaced
// (refPickRaw, level by level, as the mapper called it).
func checkScan(t testing.TB, s string) {
	t.Helper()
	var f picked
	ok := scanLine(s, lineFields, f[:])
	if want := json.Valid([]byte(s)); ok != want {
		t.Fatalf("scanLine(%q) = %v, json.Valid says %v", s, ok, want)
	}
	// gjson.Valid has no depth limit: the two differ only on a line
	// nested deeper than maxDepth, which takes more bytes than that.
	if want := gjson.Valid(s); ok != want && len(s) <= maxDepth {
		t.Fatalf("scanLine(%q) = %v, gjson.Valid says %v", s, ok, want)
	}
	obj := strings.TrimLeft(s, " \t\r\n")
	if !ok || obj[0] != '{' {
		return
	}
	// gjson.Get level by level, as the mapper read lines: gjson.Get(s,
	// "event.type") would look into a second "event" when the first has
	// no "type"; the mapper never did.
	for slot, path := range fieldPaths {
		want := gjson.Parse(s)
		for _, key := range strings.Split(path, ".") {
			if !want.IsObject() {
				want = gjson.Result{}
				break
			}
			want = want.Get(key)
		}
		if f[slot] != want.Raw || str(f[slot]) != want.String() {
			t.Fatalf("%q: %s = %q (%q), gjson.Get gives %q (%q)", s, path, f[slot], str(f[slot]), want.Raw, want.String())
		}
	}
	var top, ev, d [4]string
	refPickRaw(obj, []string{"type", "event", "parent_tool_use_id"}, top[:])
	refPickRaw(top[1], []string{"type", "index", "delta", "content_block"}, ev[:])
	refPickRaw(ev[2], []string{"type", "text", "thinking", "partial_json"}, d[:])
	ref := picked{
		fType: top[0], fEvent: top[1], fParent: top[2],
		fEventType: ev[0], fIndex: ev[1], fDelta: ev[2], fContentBlock: ev[3],
		fDeltaType: d[0], fText: d[1], fThinking: d[2], fPartialJSON: d[3],
	}
	if f != ref {
		t.Fatalf("%q: scanLine picked %q, the old scanner %q", s, f, ref)
	}
}

// scanCases are lines valid and not, each kind of mistake near the
// places the scanner treats apart (keys, picked values, skipped values).
var scanCases = []struct {
	line  string
	valid bool
}{
	{`{"type":"stream_event","event":{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"a \"b\" \\"}},"parent_tool_use_id":null}`, true},
	{` { "type" : "x" , "event" : [1, {"a": "}"}], "parent_tool_use_id" : "toolu_1", "type": "second" } `, true},
	{`{"ty\u0070e":"escaped key","event":-1.5e3,"parent_tool_use_id":true}`, true},
	{`{"t\u0079pe":"x","\u0065vent":{"\u0074ype":"e","delta":{"te\u0078t":"t"}},"typ\u00e9":1,"type\u0000":2}`, true},
	{`{"event":"\\\\","type":"\\\"","x":{}}`, true},
	{`{"event":{"delta":"s","delta":{"text":"no"}},"event":{"type":"second"}}`, true},
	{`{"event":"first","event":{"type":"second"}}`, true},
	{`{"event":{"index":01}}`, false},
	{`{}`, true}, {`{"a":{"b":[[],{}]},"type":""}`, true}, {"{\t\r\n}", true},
	{`[]`, true}, {`[1,"a",{"b":null},[true,false]]`, true}, {`"s"`, true}, {`0`, true}, {`-0.5E+10`, true}, {`null`, true},
	{`1e-0`, true}, {`[1E5,0.0,-0,2e+2]`, true}, {`"\ud800"`, true}, {`"\u00e9\uD83D\uDE00"`, true},
	{"\"\x7f\xff\xfe invalid UTF-8 \xc3\"", true}, {"{\"type\":\"\xff\"}", true},
	{`"\/\b\f\n\r\t"`, true},
	// Not JSON.
	{``, false}, {` `, false}, {`{`, false}, {`}`, false}, {`{"a"}`, false}, {`{"a":}`, false}, {`{"a" 1}`, false},
	{`{"a":1,}`, false}, {`{,"a":1}`, false}, {`{"a":1 "b":2}`, false}, {`{a:1}`, false}, {`{'a':1}`, false},
	{`{"a":1}}`, false}, {`{"a":1} x`, false}, {`{"a":1}{}`, false}, {`[1,]`, false}, {`[,1]`, false}, {`[1 2]`, false},
	{`[}`, false}, {`{]`, false}, {`[1}`, false}, {`{"a":[1}`, false}, {`{"a":{"b":1]}`, false}, {`[[]`, false},
	{`{"type":"x"`, false}, {`{"event":{"type":"x"}`, false}, {`{"event":{"delta":{"text":"x"}}`, false},
	{`{"event":{"delta":{"text":"x}}}`, false}, {`{"event":{"delta":{"text":"\x"}}}`, false},
	{`"\u12"`, false}, {`"\u12g4"`, false}, {`"\U1234"`, false}, {`"\'"`, false}, {`"\`, false}, {`"\"`, false}, {`"abc`, false},
	{"\"a\x00b\"", false}, {"\"tab\tin string\"", false}, {"{\"type\":\"a\nb\"}", false}, {"{\"ty\x1fpe\":1}", false},
	{`01`, false}, {`-`, false}, {`-a`, false}, {`1.`, false}, {`1.e5`, false}, {`.5`, false}, {`+1`, false}, {`1e`, false},
	{`1e+`, false}, {`1E-a`, false}, {`0x10`, false}, {`--1`, false}, {`1.5.5`, false}, {`[01]`, false}, {`{"a":-}`, false},
	{`NaN`, false}, {`Infinity`, false}, {`tru`, false}, {`truee`, false}, {`True`, false}, {`nul`, false}, {`fals`, false},
	{`[true false]`, false}, {`{"a":nulll}`, false}, {"\v{}", false}, {"{}\f", false}, {"\xef\xbb\xbf{}", false},
	{"{\"a\":1}\x00", false}, {`{"a":1},`, false},
}

func TestScanLine(t *testing.T) {
	for _, tc := range scanCases {
		var f picked
		if got := scanLine(tc.line, lineFields, f[:]); got != tc.valid {
			t.Errorf("scanLine(%q) = %v, want %v", tc.line, got, tc.valid)
		}
		checkScan(t, tc.line)
	}
}

// A line may nest as deep as encoding/json allows, and no deeper, in a
// skipped value, in a picked one, and at the top level.
func TestScanLineDepth(t *testing.T) {
	nest := func(prefix string, n int, open, close, suffix string) string {
		return prefix + strings.Repeat(open, n) + "1" + strings.Repeat(close, n) + suffix
	}
	for _, tc := range []struct {
		prefix, suffix string
		outer          int // the containers prefix opens
	}{
		{"", "", 0},
		{`{"x":`, `}`, 1},
		{`{"event":{"delta":{"text":`, `}}}`, 3},
		{`{"event":{"index":[{"a":`, `}]}}`, 4},
	} {
		for _, n := range []int{maxDepth - tc.outer - 1, maxDepth - tc.outer, maxDepth - tc.outer + 1} {
			for _, oc := range [][2]string{{"[", "]"}, {`{"k":`, "}"}} {
				s := nest(tc.prefix, n, oc[0], oc[1], tc.suffix)
				want := tc.outer+n <= maxDepth
				var f picked
				if got := scanLine(s, lineFields, f[:]); got != want || got != json.Valid([]byte(s)) {
					t.Errorf("%s…: depth %d: scanLine = %v, want %v (json.Valid %v)", s[:40], tc.outer+n, got, want, json.Valid([]byte(s)))
				}
			}
		}
	}
}

// scanLine does not allocate, whatever it reads (short of nesting deeper
// than skipValue's stack on the goroutine's stack).
func TestScanLineAllocs(t *testing.T) {
	lines := []string{scanCases[3].line, `{"a":[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]}`}
	for _, l := range SyntheticTurn(4) {
		lines = append(lines, string(l))
	}
	allocs := testing.AllocsPerRun(100, func() {
		for _, l := range lines {
			var f picked
			scanLine(l, lineFields, f[:])
		}
	})
	if allocs != 0 {
		t.Errorf("%v allocations a pass", allocs)
	}
}

// FuzzScanLine: scanLine accepts what json.Valid accepts, and picks what
// gjson.Get and the scanner it replaced pick.
func FuzzScanLine(f *testing.F) {
	for _, tc := range scanCases {
		f.Add(tc.line)
	}
	for _, l := range SyntheticTurn(2) {
		f.Add(string(l))
	}
	f.Fuzz(func(t *testing.T, s string) {
		checkScan(t, s)
	})
}

// BenchmarkScanLine is scanLine over a turn's lines beside json.Valid
// over the same: the part of BenchmarkMapEncode that reads the line.
// One op is one line.
func BenchmarkScanLine(b *testing.B) {
	lines := make([]string, len(benchLines))
	for i, l := range benchLines {
		lines[i] = string(l)
	}
	b.Run("json.Valid", func(b *testing.B) {
		b.SetBytes(lineBytes(benchLines) / int64(len(lines)))
		for i := 0; i < b.N; i++ {
			json.Valid(benchLines[i%len(benchLines)])
		}
	})
	b.Run("scanLine", func(b *testing.B) {
		b.SetBytes(lineBytes(benchLines) / int64(len(lines)))
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			var f picked
			if !scanLine(lines[i%len(lines)], lineFields, f[:]) {
				b.Fatal("invalid line")
			}
		}
	})
}
