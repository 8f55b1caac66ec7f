#!/usr/bin/env bash
# Re-record examples/hello.events.jsonl, the session `replay:` plays in the
# README's first step: a real claude CLI (node_modules/.bin/claude, from
# `npm ci`) driven by kaimon against the fake model API on 127.0.0.1, two
# turns (a text turn, then a tool turn that really runs `echo hi`), with
# the throwaway paths made generic (/home/you, /home/you/project).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
go build -o bin/ ./cmd/kaimon ./cmd/kaimon-agentd ./internal/testutil/fakeapi/cmd/fakeapi
[ -x node_modules/.bin/claude ] || npm ci --no-audit --no-fund --loglevel=error
tmp=$(mktemp -d /tmp/kaimon-rec.XXXXXX)
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
export TMPDIR="$tmp/tmp" CLAUDE_CODE_TMPDIR="$tmp/tmp"
mkdir -p "$HOME" "$tmp/project" "$TMPDIR"
id=$(bin/kaimon open "$tmp/project" --allow Bash)
bin/kaimon run "$id" "hello there" >/dev/null
bin/kaimon run "$id" "please use a tool" >/dev/null
bin/kaimon close "$id" >/dev/null
# Generic paths, longest first; nothing of this machine stays.
sed -e "s#$tmp/project#/home/you/project#g" -e "s#$tmp/home#/home/you#g" -e "s#$tmp#/home/you/tmp#g" \
	"$KAIMON_HOME/cache/agents/$id.events.jsonl" >examples/hello.events.jsonl
echo "recorded examples/hello.events.jsonl: $(wc -l <examples/hello.events.jsonl) events"
