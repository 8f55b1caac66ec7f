#!/usr/bin/env bash
# What the kaimon CLI costs over curl on the same socket, side by side:
# `kaimon list --json` beside `curl` of /v1/agent_list, and a warm turn by
# `kaimon run` (piped) beside the same turn POSTed to /v1/agent_run by
# curl, on one agent of a throwaway daemon whose claude CLI talks to the
# fake model API. Runs are interleaved (one of each per round) so that the
# machine's load falls on every column alike; it prints medians and p90s in
# ms, and each kaimon median over its curl's.
# Usage: scripts/bench-cli.sh [ROUNDS]   (default 50; needs curl and the
# claude CLI: node_modules/.bin/claude, or KAIMON_CLAUDE_BIN)
set -euo pipefail
rounds=${1:-50}
root=$(cd "$(dirname "$0")/.." && pwd)
command -v curl >/dev/null || { echo "bench-cli.sh: needs curl" >&2; exit 1; }
claude=${KAIMON_CLAUDE_BIN:-$root/node_modules/.bin/claude}
[ -x "$claude" ] || { echo "bench-cli.sh: no claude CLI at $claude (npm ci, or set KAIMON_CLAUDE_BIN)" >&2; exit 1; }

# A short root: a unix socket path holds 107 bytes.
tmp=$(mktemp -d /tmp/kbcli.XXXXXX)
bin=$tmp/bin
api_pid=
cleanup() {
	"$bin/kaimon" daemon stop >/dev/null 2>&1 || true
	[ -z "$api_pid" ] || kill "$api_pid" 2>/dev/null || true
	[ -z "$api_pid" ] || wait "$api_pid" 2>/dev/null || true
	rm -rf "$tmp"
}
trap cleanup EXIT
(cd "$root" && go build -o "$bin/" ./cmd/kaimon ./cmd/kaimon-agentd ./internal/testutil/fakeapi/cmd/fakeapi)
mkdir -p "$tmp/home" "$tmp/tmp" "$tmp/project"
"$bin/fakeapi" >"$tmp/api.url" &
api_pid=$!
for _ in $(seq 100); do [ -s "$tmp/api.url" ] && break; sleep 0.05; done

# The environment of the end-to-end tests (internal/e2e newEnv).
export KAIMON_HOME=$tmp KAIMON_AGENTD_BIN=$bin/kaimon-agentd KAIMON_CLAUDE_BIN=$claude HOME=$tmp/home \
	ANTHROPIC_BASE_URL=$(head -1 "$tmp/api.url") ANTHROPIC_API_KEY=sk-fake \
	CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 DISABLE_TELEMETRY=1 DISABLE_AUTOUPDATER=1 \
	CLAUDE_CODE_MAX_RETRIES=0 IS_SANDBOX=1 NO_COLOR=1 TMPDIR=$tmp/tmp CLAUDE_CODE_TMPDIR=$tmp/tmp
unset XDG_RUNTIME_DIR KAIMON_NO_AUTOSTART KAIMON_SOCK_DIR KAIMON_CACHE_DIR KAIMON_CONFIG
"$bin/kaimon" daemon start >/dev/null
sock=$tmp/sock/agentd.sock
id=$("$bin/kaimon" open "$tmp/project")
text='say exactly: ok'
body="{\"agent_id\":\"$id\",\"text\":\"$text\"}"
for _ in 1 2 3; do "$bin/kaimon" run "$id" "$text" >/dev/null; done # warm

names=("curl list" "kaimon list --json" "curl run" "kaimon run")
run_case() {
	case $1 in
	0) curl -sf --unix-socket "$sock" http://x/v1/agent_list ;;
	1) "$bin/kaimon" list --json ;;
	2) curl -sf --unix-socket "$sock" -d "$body" http://x/v1/agent_run ;;
	3) "$bin/kaimon" run "$id" "$text" ;;
	esac
}
declare -a samples
for ((r = 0; r < rounds; r++)); do
	for c in 0 1 2 3; do
		s=$EPOCHREALTIME
		run_case "$c" >/dev/null
		e=$EPOCHREALTIME
		samples[c]+="$((10#${e/./} - 10#${s/./})) "
	done
done
# pct P of case c, in ms.
pct() { tr ' ' '\n' <<<"${samples[$1]}" | grep . | sort -n | awk -v p="$2" '{a[NR]=$1} END {i=int((NR-1)*p/100)+1; printf "%.2f", a[i]/1000}'; }
printf "%-20s %10s %8s %8s   (%d rounds, interleaved)\n" "command" "median ms" "p90 ms" "/curl" "$rounds"
for c in 0 1 2 3; do
	m=$(pct "$c" 50)
	ratio=""
	if ((c % 2 == 1)); then ratio=$(awk -v a="$m" -v b="$(pct $((c - 1)) 50)" 'BEGIN {printf "%.2fx", a/b}'); fi
	printf "%-20s %10s %8s %8s\n" "${names[c]}" "$m" "$(pct "$c" 90)" "$ratio"
done
