#!/usr/bin/env bash
# Every benchmark of issues 12, 18, 19, 21, 27, 28, 29 and 32, run once, printed as ONE table: each figure
# (the median of COUNT runs) beside its floor or bare run measured in the
# same run, their ratio, the issue's target and whether it is met.
# BENCHMARKS.md says what each figure means.
#
# Usage: scripts/bench.sh [COUNT] [big]
#   COUNT  runs of each benchmark, medians taken (default 3)
#   big    bigger counts: 100000-delta relay turns, 5000 deltas per agent
#          for latency, more turns (minutes longer)
# Any KAIMON_BENCH_* already set wins (see internal/e2e/bench_relay_test.go).
# The raw `go test` output is kept in $TMPDIR and named at the end.
#
# It first installs what the end-to-end benchmarks need, when it is missing,
# as scripts/test.sh does (scripts/setup-test.sh: the claude CLI for the
# warm turn and the stalled-subscriber turn, curl, …). A benchmark that
# skips all the same is a row of the table that says why, and the script
# then exits 1: a table without its end-to-end rows is not a measurement.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup-test.sh >&2
count=${1:-3}
size=${2:-small}
if [ "$size" = big ]; then
	: "${KAIMON_BENCH_RELAY_CHUNKS:=100000}" "${KAIMON_BENCH_CHUNKS:=5000}" "${KAIMON_BENCH_TURNS:=3000}"
	turns=30x cli=60x mapn=500000x
else
	turns=10x cli=20x mapn=100000x
fi
: "${KAIMON_BENCH_RELAY_CHUNKS:=20000}" "${KAIMON_BENCH_CHUNKS:=2000}" "${KAIMON_BENCH_AGENTS:=1,10,50}"
: "${KAIMON_BENCH_RATES:=0,500}" "${KAIMON_BENCH_IDLE:=1,100,1000}" "${KAIMON_BENCH_TURNS:=1000}"
export KAIMON_BENCH_RELAY_CHUNKS KAIMON_BENCH_CHUNKS KAIMON_BENCH_AGENTS KAIMON_BENCH_RATES KAIMON_BENCH_IDLE KAIMON_BENCH_TURNS
# KAIMON_BENCH_TAIL_CHUNKS (tail's turn, default 200000) is the issue's
# own figure at every size.

raw=$(mktemp "${TMPDIR:-/tmp}/kaimon-bench.XXXXXX")
load0=$(cut -d' ' -f1-3 /proc/loadavg)
start=$(date -u +%FT%TZ)
bench() { # PKG PATTERN BENCHTIME COUNT [go test flags…]
	local pkg=$1 pat=$2 bt=$3 n=$4
	shift 4
	echo "== $pat ($pkg, $bt × $n)" >&2
	if ! go test -run '^$' -bench "$pat" -benchtime "$bt" -count "$n" "$@" "$pkg" >>"$raw" 2>&1; then
		grep -E '^(---|\s+\S+_test.go|FAIL|panic)' "$raw" >&2 || tail -20 "$raw" >&2
		echo "bench.sh: $pat failed; raw output in $raw" >&2
		exit 1
	fi
}
bench ./internal/backend/claude/ 'MapEncode' "$mapn" "$count" -cpu 1 -benchmem
bench ./internal/eventlog/ 'Append' 2000x "$count" -benchmem
bench ./internal/bus/ 'BusThroughput|BusLatency' 20000x "$count"
bench ./internal/e2e/ 'Overhead' "$turns" "$count"
bench ./internal/e2e/ 'CLIStart' "$cli" "$count"
bench ./internal/e2e/ 'WorktreeOpen' 3x "$count"
bench ./internal/e2e/ 'Relay$' 3x "$count"
bench ./internal/e2e/ 'Latency' 1x "$count"
bench ./internal/e2e/ 'BusStalledSubscriber' 2x 1
bench ./internal/e2e/ 'Tail$' 1x "$count"
bench ./internal/e2e/ 'Memory' 1x 1
bench ./internal/e2e/ 'LongLine' 1x "$count"
bench ./internal/e2e/ 'DiffLargeFile' 1x 1
bench ./internal/e2e/ 'FleetWarmCall' "$cli" "$count"
bench ./internal/e2e/ 'TailAllHosts' 1x "$count"
# Issue 28: per ACP agent, 20 warm turns (medians inside the benchmark).
bench ./internal/e2e/ 'ACPAgentTurn' 20x 1
# Issue 32: a codex: agent's warm turn beside a bare app-server client.
bench ./internal/e2e/ 'CodexTurn' 20x "$count"
# Issue 29: a permission answered as an MRTR round beside agent_permit.
bench ./internal/e2e/ 'MRTRRound' "$turns" "$count"
grep '^Benchmark' "$raw" >&2

echo
echo "kaimon benchmarks, $start: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'),"
echo "$(awk '/MemTotal/ {printf "%.0f GB RAM", $2/1048576}' /proc/meminfo); load average $load0 at the start, $(cut -d' ' -f1-3 /proc/loadavg) at the end;"
echo "medians of $count runs ($size counts: relay turn $KAIMON_BENCH_RELAY_CHUNKS deltas; latency $KAIMON_BENCH_CHUNKS deltas per agent;"
echo "idle agents $KAIMON_BENCH_IDLE; $KAIMON_BENCH_TURNS turns; memory and the stalled subscriber run once)"
echo
status=0
go run ./internal/testutil/benchtable <"$raw" || status=$?
echo
echo "raw go test output: $raw"
exit $status
