package main

import (
	"strings"
	"testing"
)

// A benchmark that skips (an end-to-end one without the claude CLI, say)
// is a row that says why, not a row quietly missing; the figures of those
// that ran are there as ever.
func TestSkippedBenchmarkIsARow(t *testing.T) {
	out := `goos: linux
--- SKIP: BenchmarkOverhead
    harness_test.go:85: the claude CLI is not installed: run ` + "`npm ci`" + ` in the repo root, or set KAIMON_CLAUDE_BIN
--- SKIP: BenchmarkOverhead
    harness_test.go:85: the claude CLI is not installed
BenchmarkTail-2   	       1	4542345946 ns/op	       111.6 %pipe	    200002 deltas/turn	      5068 pipe-ms	    200002 received/turn	      4542 tail-ms
    --- SKIP: BenchmarkRelay/burst
PASS
`
	r, skips := parse(strings.NewReader(out))
	if len(skips) != 2 || skips[0].name != "Overhead" || !strings.Contains(skips[0].why, "claude CLI is not installed: run") || skips[1].name != "Relay/burst" {
		t.Fatalf("skips = %+v", skips)
	}
	rows := table(r, skips)
	var text []string
	for _, row := range rows {
		text = append(text, strings.Join([]string{row.figure, row.measured, row.met}, " | "))
	}
	all := strings.Join(text, "\n")
	for _, want := range []string{"Overhead: SKIPPED | harness_test.go:85: the claude CLI is not installed: run", "NOT RUN", "Relay/burst: SKIPPED | (no reason given)", "received | 200002 | MET"} {
		if !strings.Contains(all, want) {
			t.Errorf("want %q in the rows:\n%s", want, all)
		}
	}
}

// The over-long line's target holds in every run: its figure is the
// worst run, not the median.
func TestLongLineRowIsTheWorstRun(t *testing.T) {
	out := `BenchmarkLongLine-2   	       1	100 ns/op	300.0 MB-line	20.1 MB-opened	80.5 MB-peak
BenchmarkLongLine-2   	       1	100 ns/op	300.0 MB-line	20.3 MB-opened	120.0 MB-peak
BenchmarkLongLine-2   	       1	100 ns/op	300.0 MB-line	20.2 MB-opened	81.0 MB-peak
`
	r, _ := parse(strings.NewReader(out))
	rows := table(r, nil)
	if len(rows) != 1 || rows[0].figure != "daemon peak RSS, an agent line of 300 MB (worst of 3)" || rows[0].measured != "120.0 MB" || rows[0].met != "NOT MET" {
		t.Fatalf("rows = %+v", rows)
	}
}

// The merged tail's row: its latency beside the bus tail's of the same
// run, met only when nothing authoritative was lost.
func TestTailAllHostsRow(t *testing.T) {
	out := `BenchmarkTailAllHosts/via=ssh-2     	       1	100 ns/op	         1 lost-auth	         0 lost-deltas/round	      2500 p50-µs	     41000 p99-µs
BenchmarkTailAllHosts/via=hosts-2   	       1	100 ns/op	         0 lost-auth	         0 lost-deltas/round	      2100 p50-µs	     31000 p99-µs
BenchmarkTailAllHosts/via=bus-2     	       1	100 ns/op	         0 lost-auth	         0 lost-deltas/round	       400 p50-µs	      9000 p99-µs
`
	r, _ := parse(strings.NewReader(out))
	rows := table(r, nil)
	if len(rows) != 2 || !strings.Contains(rows[0].figure, "real ssh") || !strings.Contains(rows[0].measured, "p99 41.0 ms") || rows[0].met != "NOT MET" {
		t.Fatalf("the ssh row (one authoritative event lost): %+v", rows)
	}
	if !strings.Contains(rows[1].measured, "p99 31.0 ms") || !strings.Contains(rows[1].floor, "p99 9.0 ms") || rows[1].met != "MET" {
		t.Fatalf("the stand-in row: %+v", rows)
	}
}

// kaimon diff's rows: the daemon's peak beside its idle, met within 100
// MB of it.
func TestDiffLargeFileRows(t *testing.T) {
	out := `BenchmarkDiffLargeFile/one-file-2     	       1	86000995 ns/op	21.66 MB-cli	1074 MB-files	19.11 MB-idle	0.0003040 MB-out	19.16 MB-peak	0.08600 s
BenchmarkDiffLargeFile/under-limit-2  	       1	8325554872 ns/op	29.60 MB-cli	1074 MB-files	19.27 MB-idle	1091 MB-out	5821 MB-peak	8.326 s
`
	r, _ := parse(strings.NewReader(out))
	rows := table(r, nil)
	if len(rows) != 2 || rows[0].figure != "daemon peak RSS, kaimon diff of 1074 MB of untracked text in one file (named with its size)" ||
		rows[0].measured != "19.2 MB" || rows[0].floor != "idle 19.1 MB" || rows[0].met != "MET" || rows[1].met != "NOT MET" {
		t.Fatalf("rows = %+v", rows)
	}
}

// TestACPAgentTurnRows: a row per ACP agent benchmarked, in the
// catalogue's order, judged against issue 28's ≤ +5 ms.
func TestACPAgentTurnRows(t *testing.T) {
	in := `BenchmarkACPAgentTurn/qwen-2     20  1 ns/op  300.0 bare-ms  302.0 api-ms  2.0 added-ms
BenchmarkACPAgentTurn/codex-2    20  1 ns/op  280.0 bare-ms  313.5 api-ms  33.5 added-ms  311.0 tools-ms  2.5 plumbing-ms
`
	r, _ := parse(strings.NewReader(in))
	rows := table(r, nil)
	if len(rows) != 4 || rows[0].figure != "warm turn, acp:codex: control API" || rows[0].ratio != "+33.5 ms" || rows[0].met != "NOT MET" ||
		rows[1].ratio != "+31.0 ms" || rows[2].ratio != "+2.5 ms" || rows[2].floor != "with tools 311.0 ms" ||
		rows[3].figure != "warm turn, acp:qwen: control API" || rows[3].floor != "bare ACP client 300.0 ms" || rows[3].met != "MET" {
		t.Fatalf("rows = %+v", rows)
	}
}

// TestCodexTurnRows: the codex: agent's warm turn beside a bare
// app-server client, judged against issue 32's ≤ +5 ms.
func TestCodexTurnRows(t *testing.T) {
	in := `BenchmarkCodexTurn-2  20  1 ns/op  -2.5 added-ms  117.8 api-ms  120.3 bare-ms  -5.4 plumbing-ms  123.2 tools-ms
`
	r, _ := parse(strings.NewReader(in))
	rows := table(r, nil)
	if len(rows) != 3 || rows[0].figure != "warm turn, codex: control API" || rows[0].floor != "bare app-server client 120.3 ms" || rows[0].met != "MET" ||
		rows[2].floor != "with tools 123.2 ms" {
		t.Fatalf("rows = %+v", rows)
	}
}

// TestMRTRRoundRows: the MRTR round's row, the medians of its runs judged
// against issue 29's ≤ +5 ms over agent_permit.
func TestMRTRRoundRows(t *testing.T) {
	in := `BenchmarkMRTRRound-2  10  263331421 ns/op  1.3 added-ms  2.8 mrtr-ms  1.5 permit-ms
BenchmarkMRTRRound-2  10  263331421 ns/op  9.0 added-ms  10.5 mrtr-ms  1.5 permit-ms
BenchmarkMRTRRound-2  10  263331421 ns/op  1.5 added-ms  3.0 mrtr-ms  1.5 permit-ms
`
	r, _ := parse(strings.NewReader(in))
	rows := table(r, nil)
	if len(rows) != 1 || rows[0].figure != "permission answered: MRTR round (kaimon mcp)" || rows[0].measured != "3.0 ms" ||
		rows[0].floor != "agent_permit 1.5 ms" || rows[0].ratio != "+1.5 ms" || rows[0].met != "MET" {
		t.Fatalf("rows = %+v", rows)
	}
	r, _ = parse(strings.NewReader("BenchmarkMRTRRound-2  10  1 ns/op  9.0 added-ms  10.5 mrtr-ms  1.5 permit-ms\n"))
	if rows := table(r, nil); rows[0].met != "NOT MET" {
		t.Fatalf("rows = %+v", rows)
	}
}
