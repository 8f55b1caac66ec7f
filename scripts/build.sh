#!/usr/bin/env bash
# Build kaimon and kaimon-agentd into OUTDIR (default bin/) with the version
# and commit stamped in (internal/version), so that `kaimon version` can tell
# a stale daemon from this one. The version is $KAIMON_VERSION when set (an
# override, in a git checkout or not), else `git describe --tags --always
# --dirty`, else 0.0.0-unknown. The commit is `git rev-parse HEAD`, with
# "-dirty" when `git status` shows any change (untracked files too, as the go
# tool's vcs.modified counts them, so that this build and a plain go build of
# one tree carry the same commit), else "unknown".
# scripts/install.sh and scripts/demo.sh build with it.
# `build.sh --check` only checks that the build can run (Go is there).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-$root/bin}
command -v go >/dev/null 2>&1 || {
	echo "build.sh: Go is not installed (or not on PATH): kaimon builds from source with Go $(sed -n 's/^go //p' "$root/go.mod") or newer; install it, then run this again" >&2
	exit 1
}
[ "$out" != --check ] || exit 0
version=${KAIMON_VERSION:-}
commit=
if git -C "$root" rev-parse --git-dir >/dev/null 2>&1; then
	[ -n "$version" ] || version=$(git -C "$root" describe --tags --always --dirty)
	commit=$(git -C "$root" rev-parse HEAD)
	if [ -n "$(git -C "$root" status --porcelain 2>/dev/null)" ]; then
		commit=$commit-dirty
	fi
fi
[ -n "$version" ] || version=0.0.0-unknown
[ -n "$commit" ] || commit=unknown
pkg=github.com/kaimon/kaimon/internal/version
mkdir -p "$out"
echo "== build kaimon $version (commit $commit) into $out"
cd "$root"
go build -ldflags "-X $pkg.Version=$version -X $pkg.Commit=$commit" -o "$out/" ./cmd/kaimon ./cmd/kaimon-agentd
