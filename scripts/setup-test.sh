#!/usr/bin/env bash
# Install what the tests need, when it is missing: Go modules, the pinned
# agent programs and MCP Inspector (package.json, npm ci), and a libzmq
# subscriber for the bus tests (Debian's python3-zmq). Quick when all is
# there already.
set -euo pipefail
cd "$(dirname "$0")/.."
echo "== go modules"
go mod download
echo "== pinned agent programs (package.json / package-lock.json)"
if [ ! -f node_modules/.package-lock.json ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
	npm ci --no-audit --no-fund
else
	echo "node_modules is up to date with package-lock.json"
fi
node_modules/.bin/claude --version
test -x node_modules/.bin/mcp-inspector
node_modules/.bin/opencode --version
node_modules/.bin/gemini --version
test -x node_modules/.bin/claude-agent-acp
echo "== a libzmq subscriber for the event bus tests (python3-zmq)"
if ! /usr/bin/python3 -c 'import zmq' 2>/dev/null; then
	sudo=; [ "$(id -u)" -eq 0 ] || sudo=sudo
	$sudo apt-get update
	$sudo apt-get install -y --no-install-recommends python3-zmq
fi
/usr/bin/python3 -c 'import zmq; print("libzmq", zmq.zmq_version())'
echo "== tmux, which drives kaimon monitor in its end-to-end test"
if ! command -v tmux >/dev/null; then
	sudo=; [ "$(id -u)" -eq 0 ] || sudo=sudo
	$sudo apt-get update
	$sudo apt-get install -y --no-install-recommends tmux
fi
tmux -V
