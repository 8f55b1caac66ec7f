#!/usr/bin/env bash
# A kaimon playground: keep trying kaimon after scripts/demo.sh, with no
# account and no network.
#   - builds bin/kaimon, bin/kaimon-agentd and bin/fakeapi (into
#     $PLAYGROUND_BIN instead when set),
#   - installs the pinned claude CLI (npm ci) when node_modules has none,
#   - serves the fake model API on 127.0.0.1 and keeps it running,
#   - gives kaimon an installation of its own in a temporary directory
#     (KAIMON_HOME: its own daemon, agents and logs; yours are not touched),
#   - prints the variables that point kaimon and the claude CLI there, and
#   - opens a bash subshell with them set, in the playground's project
#     directory, with bin/ first on PATH. Leaving it (exit, Ctrl-D) stops
#     the daemon and the fake API and removes the directory, but for the
#     worktrees of repositories outside it (kaimon open --worktree ~/src/x
#     puts them under the playground's KAIMON_HOME): those are moved to
#     ${XDG_DATA_HOME:-~/.local/share}/kaimon-playground/ and named, with
#     how to remove them (scripts/keep-worktrees.sh).
# With arguments, runs that command in the playground instead of the
# subshell, then cleans up the same way:
#   scripts/playground.sh sh -c 'kaimon run -C . "please use a tool"'
# The fake API answers by trigger phrases ("please use a tool", "please
# think", "please be slow", "run command: CMD", ...): the banner lists
# them, as `fakeapi -phrases` prints them from internal/testutil/fakeapi.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
# Where the worktrees of your repositories go when the playground ends:
# under your HOME, not the playground's.
keep=${XDG_DATA_HOME:-${HOME:?}/.local/share}/kaimon-playground
bin=${PLAYGROUND_BIN:-$root/bin}
scripts/build.sh "$bin" >&2
go build -o "$bin/" ./internal/testutil/fakeapi/cmd/fakeapi
if [ ! -x node_modules/.bin/claude ]; then
	echo "== install the pinned claude CLI" >&2
	npm ci --no-audit --no-fund --loglevel=error >&2
fi
# The playground's installation is KAIMON_HOME alone: a KAIMON_SOCK_DIR,
# KAIMON_WORKTREE_DIR, KAIMON_HOST … of yours would point it (and its
# cleanup) at your own daemon, worktrees or hosts. After the build, which
# reads KAIMON_VERSION.
for v in $(compgen -e); do case $v in KAIMON_*) unset "$v" ;; esac; done
tmp=$(mktemp -d /tmp/kaimon-play.XXXXXX)
"$bin/fakeapi" >"$tmp/url" 2>"$tmp/fakeapi.log" &
api=$!
cleanup() {
	# The playground's daemon, never the user's: KAIMON_HOME is exported
	# only once the fake API is up, and cleanup may run before that.
	KAIMON_HOME="$tmp/kaimon" "$bin/kaimon" daemon stop --no-autostart >/dev/null 2>&1 || true
	kill "$api" 2>/dev/null || true
	wait "$api" 2>/dev/null || true
	if "$root/scripts/keep-worktrees.sh" "$tmp" "$keep/${tmp##*/}"; then
		rm -rf "$tmp"
	else
		echo "playground.sh: kept $tmp, for the worktrees above that could not be moved out of it" >&2
	fi
}
trap cleanup EXIT
for _ in $(seq 600); do [ -s "$tmp/url" ] && break; sleep 0.05; done
if ! read -r url <"$tmp/url"; then
	echo "playground.sh: the fake model API did not start within 30s; its log:" >&2
	cat "$tmp/fakeapi.log" >&2
	exit 1
fi

# What points kaimon, its daemon and the claude CLI at the playground; the
# list is printed below as it is set here.
vars=(KAIMON_HOME HOME KAIMON_CLAUDE_BIN ANTHROPIC_BASE_URL ANTHROPIC_API_KEY CLAUDE_CODE_MAX_RETRIES IS_SANDBOX
	CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC DISABLE_TELEMETRY DISABLE_AUTOUPDATER TMPDIR CLAUDE_CODE_TMPDIR PATH PLAYGROUND_DIR)
export KAIMON_HOME="$tmp/kaimon" HOME="$tmp/home" KAIMON_CLAUDE_BIN="$root/node_modules/.bin/claude"
export ANTHROPIC_BASE_URL="$url" ANTHROPIC_API_KEY=sk-fake CLAUDE_CODE_MAX_RETRIES=0 IS_SANDBOX=1 \
	CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 DISABLE_TELEMETRY=1 DISABLE_AUTOUPDATER=1
export TMPDIR="$tmp/tmp" CLAUDE_CODE_TMPDIR="$tmp/tmp" # the claude CLI leaves /tmp/claude-<uid>/ behind otherwise
export PATH="$bin:$PATH" PLAYGROUND_DIR="$tmp"
mkdir -p "$HOME" "$tmp/project" "$TMPDIR"

{
	echo "== kaimon playground in $tmp (fake model API at $url)"
	echo "   to use it from another terminal while this one runs, paste:"
	for v in "${vars[@]}"; do printf '   export %s=%q\n' "$v" "${!v}"; done
	echo "== the fake model API answers a turn by the first of these phrases in it:"
	"$bin/fakeapi" -phrases -indent '   '
} >&2
cd "$tmp/project"
if [ $# -gt 0 ]; then
	"$@"
	exit
fi
cat >&2 <<'EOF'
== try, for example:
   id=$(kaimon open .)
   kaimon run $id 'hello there'
   kaimon run $id 'please use a tool'       # the claude CLI runs `echo hi`
   kaimon tail agent:$id --from-start --pretty
   kaimon monitor
   exit                                     # stops the daemon and the fake API, removes the playground
                                            # (worktrees of your own repositories are kept, and named)
EOF
export PS1='(kaimon playground) \w \$ '
if [ -t 0 ]; then bash --norc -i; else bash --norc; fi # commands piped in: no prompts, no job control
