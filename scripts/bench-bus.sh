#!/usr/bin/env bash
# The event bus, measured, as a table of medians over COUNT runs:
#   - the bus alone (internal/bus): envelopes/s through the ipc socket to
#     1 and 4 subscribers, and publish→receive latency one at a time;
#   - a real claude turn streaming 5000 deltas through kaimon-agentd to a
#     fast subscriber (internal/e2e BenchmarkBusStalledSubscriber), with and
#     without a stalled subscriber, side by side: the turn times, their
#     ratio, the drops, and the fast subscriber's throughput and latency.
# Usage: scripts/bench-bus.sh [COUNT] [PAIRS]   (PAIRS of turns per run)
set -euo pipefail
cd "$(dirname "$0")/.."
count=${1:-3}
pairs=${2:-3}
out=$(
	go test -run '^$' -bench 'BusThroughput|BusLatency' -benchtime 100000x -count "$count" ./internal/bus/
	go test -run '^$' -bench 'BusStalledSubscriber' -benchtime "${pairs}x" -count "$count" ./internal/e2e/
)
echo "$out" | grep '^Benchmark' >&2 || { echo "$out" >&2; exit 1; }
echo "$out" | awk '
/^Benchmark/ {
	name = $1; sub(/-[0-9]+$/, "", name); sub(/^Benchmark/, "", name)
	if (!(name in seen)) { seen[name] = 1; order[++nn] = name }
	for (i = 3; i + 1 <= NF; i += 2) { k = name SUBSEP $(i+1); v[k, ++n[k]] = $i }
}
function median(name, unit,   k, m, i, j, t, a) {
	k = name SUBSEP unit; m = n[k]
	if (m == 0) return -1
	for (i = 1; i <= m; i++) a[i] = v[k, i]
	for (i = 1; i <= m; i++) for (j = i + 1; j <= m; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
	return (m % 2) ? a[(m + 1) / 2] : (a[m / 2] + a[m / 2 + 1]) / 2
}
function cell(x, f) { return x < 0 ? sprintf("%11s", "-") : sprintf(f, x) }
END {
	printf "%-28s %11s %11s %11s %11s\n", "the bus alone", "env/s", "p50 µs", "p99 µs", "µs/env"
	for (i = 1; i <= nn; i++) {
		b = order[i]; if (b ~ /^BusStalled/) continue
		printf "%-28s %s %s %s %s\n", b, cell(median(b, "env/s"), "%11.0f"), cell(median(b, "p50-µs"), "%11.0f"),
			cell(median(b, "p99-µs"), "%11.0f"), cell(median(b, "ns/op") / 1e3, "%11.1f")
	}
	b = "BusStalledSubscriber"
	if (!(b in seen)) exit
	printf "\na claude turn streaming 5000 deltas, fast subscriber (medians of %d runs)\n", n[b SUBSEP "ratio"]
	printf "%-28s %11s\n", "turn alone, ms", cell(median(b, "alone-ms"), "%11.0f")
	printf "%-28s %11s\n", "turn + stalled, ms", cell(median(b, "stalled-ms"), "%11.0f")
	printf "%-28s %11s\n", "ratio stalled/alone", cell(median(b, "ratio"), "%10.2fx")
	printf "%-28s %11s\n", "dropped for stalled / turn", cell(median(b, "dropped/turn"), "%11.0f")
	printf "%-28s %11s\n", "fast subscriber env/s", cell(median(b, "env/s"), "%11.0f")
	printf "%-28s %11s\n", "agent→subscriber p50 µs", cell(median(b, "p50-µs"), "%11.0f")
	printf "%-28s %11s\n", "agent→subscriber p99 µs", cell(median(b, "p99-µs"), "%11.0f")
}'
