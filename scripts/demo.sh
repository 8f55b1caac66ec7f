#!/usr/bin/env bash
# Set up on a fresh machine and run kaimon's main job end to end:
#   - installs the pinned claude CLI (npm ci, into node_modules/),
#   - builds bin/kaimon and bin/kaimon-agentd, and serves a fake model API on
#     127.0.0.1 (no account or network needed), in a throwaway KAIMON_HOME:
#     all that is scripts/playground.sh, which runs this script again inside,
#   - drives a real claude agent through kaimon: open, run, a tool turn,
#     output, status, list, close.
# To keep playing after it, run scripts/playground.sh: the same set-up, kept
# running, with a shell in it. With a logged-in claude of your own, skip the
# fake: install the programs and take README "A tour" (man kaimon has every
# command).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -z "${PLAYGROUND_DIR:-}" ]; then
	echo "== install the pinned claude CLI"
	npm ci --no-audit --no-fund --loglevel=error
	exec scripts/playground.sh "$PWD/scripts/demo.sh"
fi
# In the playground: kaimon on PATH, KAIMON_HOME and the fake API set.
k() { echo "\$ kaimon $*" >&2; kaimon "$@"; }
echo "== drive an agent (fake model API at $ANTHROPIC_BASE_URL)"
id=$(k open "$PLAYGROUND_DIR/project" --allow Bash)
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
