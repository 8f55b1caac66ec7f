#!/usr/bin/env bash
# Each npm-installed agent program at its newest published version, under
# that agent's end-to-end tests (issue 28): installs the newest version of
# every package `kaimon agents` lists into a temp dir, points the agent's
# KAIMON_*_BIN at it, runs its tests, and prints one row per agent:
# agent · package · pinned · newest · result. Not part of CI (it needs the
# registry's newest, which CI does not pin); its last output is the
# Compatibility table in docs/agents.md.
#
# Usage: scripts/compat.sh [AGENT…]
#   AGENT  a name of `kaimon agents` (claude is the claude CLI, acp-claude
#          claude-agent-acp); default: every agent with an npm package.
# The raw `go test` output of each agent is kept in $TMPDIR and named at
# the end.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup-test.sh >&2
tmp=$(mktemp -d "${TMPDIR:-/tmp}/kaimon-compat.XXXXXX")
logs=$(mktemp -d "${TMPDIR:-/tmp}/kaimon-compat-logs.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
go build -o "$tmp/kaimon" ./cmd/kaimon
PATH="$PWD/node_modules/.bin:$PATH" KAIMON_HOME="$tmp/home" "$tmp/kaimon" agents --json >"$tmp/agents.json"

# One line per agent: name package pinned variable bin tests. The claude
# CLI's tests are a cross-section of the suite (most of it drives the CLI);
# an ACP agent's are TestACP<Name>.
python3 - "$tmp/agents.json" "$@" >"$tmp/rows" <<'EOF'
import json, os, sys
rep, want = json.load(open(sys.argv[1])), sys.argv[2:]
claude_tests = ("TestLifecycle|TestLiveRun|TestPermit|TestForkClaude|TestInterruptNotAcknowledged"
                "|TestRunOneShotAndStdin|TestMCPClaudeOrchestrates|TestCrashAndResume|TestMonitorPermission")
for r in rep["agents"]:
    if not r.get("package") or r.get("configured"):
        continue
    acp = r["model"].startswith("acp:")
    name = ("acp-" if acp and r["name"] == "claude" else "") + r["name"]
    if want and name not in want:
        continue
    tests = "TestACP" + r["name"][:1].upper() + r["name"][1:] if acp else claude_tests
    print(name, r["package"], r["tested"], r["variable"], os.path.basename(r["command"][0]), tests)
EOF

printf '%-12s %-28s %-9s %-9s %s\n' AGENT PACKAGE PINNED NEWEST RESULT
while read -r name pkg pinned var bin tests; do
	newest=$(npm view "$pkg" version 2>/dev/null || true)
	log="$logs/$name.log"
	if [ -z "$newest" ]; then
		result="the registry has no version of $pkg"
	elif ! npm install --prefix "$tmp/$name" --no-audit --no-fund --no-save "$pkg@$newest" >"$log" 2>&1; then
		result="install failed (see $log)"
	else
		prog="$tmp/$name/node_modules/.bin/$bin"
		if env "$var=$prog" go test ./internal/e2e -count 1 -v -run "^($tests)\$" >>"$log" 2>&1; then
			n=$(grep -c '^--- PASS' "$log" || true)
			if [ "$n" = 0 ]; then result="no end-to-end test"; else result="pass ($n tests)"; fi
		else
			result="FAIL: $(grep -m1 -E '^--- FAIL' "$log" || echo "see $log")"
		fi
	fi
	printf '%-12s %-28s %-9s %-9s %s\n' "$name" "$pkg" "$pinned" "${newest:--}" "$result"
done <"$tmp/rows"
echo "logs: $logs" >&2
