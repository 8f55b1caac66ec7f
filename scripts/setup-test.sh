#!/usr/bin/env bash
# Install what the tests need, when it is missing: Go modules, the pinned
# agent programs and MCP Inspector (package.json, npm ci), and a libzmq
# subscriber for the bus tests (Debian's python3-zmq), man (man-db,
# groff-base) for the man page tests, curl (scripts/bench.sh drives the
# socket with it), and OpenSSH's server and iproute2 for the fleet tests'
# hosts (an sshd in a network namespace each). Quick when all is there
# already.
set -euo pipefail
cd "$(dirname "$0")/.."
echo "== go modules"
go mod download
echo "== pinned agent programs (package.json / package-lock.json)"
if [ -L node_modules ]; then
	# A checkout that shares another's node_modules (a git worktree): npm
	# ci here would empty the directory the link points to, under every
	# checkout that shares it, and install a copy of its own. The checks
	# below still say whether what is there will do.
	echo "node_modules is a link to $(readlink node_modules): left as it is (install in the checkout it points to)"
elif [ ! -f node_modules/.package-lock.json ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
	# package-lock.json lists every platform's build of kilo (and of a
	# clipboard module it pulls in), as npm ci wants; the builds for other
	# platforms carry os/cpu/libc only, no download, so it skips them here.
	npm ci --no-audit --no-fund
else
	echo "node_modules is up to date with package-lock.json"
fi
node_modules/.bin/claude --version
test -x node_modules/.bin/mcp-inspector
node_modules/.bin/opencode --version
node_modules/.bin/gemini --version
test -x node_modules/.bin/claude-agent-acp
# The other ACP agents of agentbin's catalogue (codex-acp has no --version:
# its presence will do; @openai/codex beside it ships the bwrap its sandbox
# runs).
for b in codex-acp codex qwen copilot kilo auggie; do test -x node_modules/.bin/$b || { echo "node_modules/.bin/$b is missing: npm ci did not install it" >&2; exit 1; }; done
node_modules/.bin/kilo --version
node_modules/.bin/auggie --version
echo "== Debian packages: python3-zmq (a libzmq subscriber for the bus tests), man-db and groff-base"
echo "   (the man pages render clean), bash, zsh, fish and tmux (completion and monitor tests),"
echo "   curl (the benchmarks' bare client of the socket), openssh-server and iproute2 (the fleet"
echo "   tests' hosts: each an sshd the tests start in a network namespace of their own)"
missing=
/usr/bin/python3 -c 'import zmq' 2>/dev/null || missing="$missing python3-zmq"
command -v man >/dev/null || missing="$missing man-db"
command -v groff >/dev/null || missing="$missing groff-base"
for p in bash zsh fish tmux curl; do command -v $p >/dev/null || missing="$missing $p"; done
[ -x /usr/sbin/sshd ] && command -v ssh >/dev/null || missing="$missing openssh-server"
command -v ip >/dev/null || missing="$missing iproute2"
if [ -n "$missing" ]; then
	sudo=; [ "$(id -u)" -eq 0 ] || sudo=sudo
	# openssh-server's install starts the system's sshd, listening on
	# every address of this machine; the fleet tests need none (they
	# start their own, inside their namespaces). A policy-rc.d that says
	# no (Debian's switch for what maintainer scripts may start) keeps it
	# stopped while apt runs.
	norc=
	if [ ! -e /usr/sbin/policy-rc.d ]; then
		printf '#!/bin/sh\n# scripts/setup-test.sh: start no service while it installs\nexit 101\n' | $sudo tee /usr/sbin/policy-rc.d >/dev/null
		$sudo chmod 755 /usr/sbin/policy-rc.d
		norc=1
		trap '$sudo rm -f /usr/sbin/policy-rc.d' EXIT
	fi
	$sudo apt-get update
	$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends $missing
	if [ -n "$norc" ]; then
		$sudo rm -f /usr/sbin/policy-rc.d
		trap - EXIT
	fi
fi
/usr/bin/python3 -c 'import zmq; print("libzmq", zmq.zmq_version())'
man --version
bash --version | head -1; zsh --version; fish --version; tmux -V; curl --version | head -1
/usr/sbin/sshd -V 2>&1 | head -1; ip -V
