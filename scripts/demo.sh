#!/usr/bin/env bash
# Set up on a fresh machine and run kaimon's main job end to end:
#   - builds bin/kaimon and bin/kaimon-agentd,
#   - installs the pinned claude CLI (npm ci, into node_modules/),
#   - serves a fake model API on 127.0.0.1 (no account or network needed),
#   - drives a real claude agent through kaimon: open, run, a tool turn,
#     output, status, list, close — in a throwaway KAIMON_HOME.
# With a logged-in claude of your own, skip the fake: install the programs
# and take README "A tour" (man kaimon has every command).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
echo "== build"
scripts/build.sh bin
go build -o bin/ ./internal/testutil/fakeapi/cmd/fakeapi
echo "== install the pinned claude CLI"
npm ci --no-audit --no-fund --loglevel=error
tmp=$(mktemp -d /tmp/kaimon-demo.XXXXXX)
bin/fakeapi >"$tmp/url" 2>"$tmp/fakeapi.log" &
api=$!
cleanup() {
	bin/kaimon daemon stop >/dev/null 2>&1 || true
	kill "$api" 2>/dev/null || true
	wait "$api" 2>/dev/null || true
	rm -rf "$tmp"
}
trap cleanup EXIT
for _ in $(seq 100); do [ -s "$tmp/url" ] && break; sleep 0.05; done
read -r url <"$tmp/url"
export KAIMON_HOME="$tmp/kaimon" HOME="$tmp/home" KAIMON_CLAUDE_BIN="$root/node_modules/.bin/claude"
export ANTHROPIC_BASE_URL="$url" ANTHROPIC_API_KEY=sk-fake CLAUDE_CODE_MAX_RETRIES=0 IS_SANDBOX=1 \
	CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 DISABLE_TELEMETRY=1 DISABLE_AUTOUPDATER=1
export TMPDIR="$tmp/tmp" CLAUDE_CODE_TMPDIR="$tmp/tmp" # the claude CLI leaves /tmp/claude-<uid>/ behind otherwise
mkdir -p "$HOME" "$tmp/project" "$TMPDIR"
k() { echo "\$ kaimon $*" >&2; bin/kaimon "$@"; }
echo "== drive an agent (fake model API at $url)"
id=$(k open "$tmp/project" --allow Bash)
echo "$id"
k run "$id" "hello there"
k run "$id" "please use a tool"
k output "$id" --which full_turn --include-tools
k status "$id"
k list
k close "$id"
echo "== event log (the first lines, whole: one JSON event a line; see man/kaimon-events.7)"
log="$KAIMON_HOME/cache/agents/$id.events.jsonl"
head -n 4 "$log"
echo "... $(wc -l <"$log") events in all"
echo "demo ok"
