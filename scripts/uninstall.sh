#!/usr/bin/env bash
# Remove what scripts/install.sh installed under PREFIX (default ~/.local):
# exactly the files its manifest, PREFIX/share/kaimon/manifest, lists, then
# the manifest and its directory. Running it again, or with nothing installed, is not an error.
# It does not stop a running kaimon-agentd (`kaimon daemon stop` first) and
# leaves your agents' logs and config alone.
set -euo pipefail

die() { echo "uninstall.sh: $*" >&2; exit 1; }

[ $# -le 1 ] || die "usage: scripts/uninstall.sh [PREFIX] (default ~/.local)"
if [ $# -eq 1 ]; then
	prefix=$1
else
	[ -n "${HOME:-}" ] || die "HOME is unset: name the PREFIX kaimon was installed under"
	prefix=$HOME/.local
fi
if [ ! -d "$prefix" ]; then
	echo "nothing to remove: $prefix does not exist"
	exit 0
fi
prefix=$(cd "$prefix" && pwd)
manifest=$prefix/share/kaimon/manifest
if [ ! -f "$manifest" ]; then
	echo "nothing to remove: no kaimon installed under $prefix (no $manifest)"
	exit 0
fi

# Check every line before removing anything.
while IFS= read -r f; do
	case "$f" in
	"" | "$prefix"/*) ;;
	*) die "$manifest names $f, outside $prefix: refusing to remove anything; fix or delete the manifest" ;;
	esac
done <"$manifest"
while IFS= read -r f; do
	[ -n "$f" ] || continue
	if [ -e "$f" ] || [ -L "$f" ]; then
		rm -f -- "$f"
		echo "removed $f"
	fi
done <"$manifest"
rm -f -- "$manifest"
echo "removed $manifest"
# share/kaimon is kaimon's own; the shared directories (bin, share/man/…)
# stay, even when empty: other programs may expect them.
rmdir -- "$(dirname "$manifest")" 2>/dev/null || true
