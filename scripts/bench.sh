#!/usr/bin/env bash
# The overhead kaimon adds over the bare claude CLI, measured side by side in
# one run against the same fake model API (see BenchmarkOverhead), printed
# as a table of medians and ratios. Usage: scripts/bench.sh [COUNT] [BENCHTIME]
set -euo pipefail
cd "$(dirname "$0")/.."
count=${1:-3}
benchtime=${2:-10x}
out=$(go test -run '^$' -bench 'Overhead' -benchtime "$benchtime" -count "$count" ./internal/e2e/)
echo "$out" | grep '^Benchmark' >&2 || { echo "$out" >&2; exit 1; }
echo "$out" | awk '
/^BenchmarkOverhead\// {
	split($1, p, "/"); phase = p[2]; side = p[3]; sub(/-[0-9]+$/, "", side)
	v[phase, side, ++n[phase, side]] = $3 / 1e6
	if (!(phase in seen)) { seen[phase] = 1; order[++np] = phase }
	sides[phase, side] = 1
}
function median(phase, side,   k, m, i, j, t, a) {
	m = n[phase, side]
	for (i = 1; i <= m; i++) a[i] = v[phase, side, i]
	for (i = 1; i <= m; i++) for (j = i + 1; j <= m; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
	return (m % 2) ? a[(m + 1) / 2] : (a[m / 2] + a[m / 2 + 1]) / 2
}
END {
	printf "%-9s %-11s %12s %8s\n", "phase", "side", "median ms", "ratio"
	for (i = 1; i <= np; i++) {
		ph = order[i]; base = median(ph, "bare")
		split("bare kaimon-api kaimon", ss, " ")
		for (k = 1; k <= 3; k++) if ((ph, ss[k]) in sides) {
			m = median(ph, ss[k])
			printf "%-9s %-11s %12.1f %7.2fx\n", ph, ss[k], m, m / base
		}
	}
}'
