#!/usr/bin/env bash
# Install kaimon for real use: build kaimon and kaimon-agentd with the
# version and commit stamped in, and install them with their man pages and
# shell completions under PREFIX (default ~/.local):
#
#   PREFIX/bin/kaimon, PREFIX/bin/kaimon-agentd
#   PREFIX/share/man/man{1,7,8}/…          every man/*.1, *.7, *.8
#   PREFIX/share/bash-completion/completions/kaimon
#   PREFIX/share/zsh/site-functions/_kaimon
#   PREFIX/share/fish/vendor_completions.d/kaimon.fish
#   PREFIX/share/kaimon/manifest           what was installed, for uninstall.sh
#
# Usage: scripts/install.sh [PREFIX]. Running it again replaces the files
# (and removes those a previous install listed that this one no longer
# installs). scripts/build.sh stamps the version and commit.
set -euo pipefail

die() { echo "install.sh: $*" >&2; exit 1; }

[ $# -le 1 ] || die "usage: scripts/install.sh [PREFIX] (default ~/.local)"
root=$(cd "$(dirname "$0")/.." && pwd)
if [ $# -eq 1 ]; then
	prefix=$1
else
	[ -n "${HOME:-}" ] || die "HOME is unset: name a PREFIX, e.g. scripts/install.sh /usr/local"
	prefix=$HOME/.local
fi
[ -n "$prefix" ] || die "PREFIX is empty"
mkdir -p "$prefix" || die "cannot create $prefix"
prefix=$(cd "$prefix" && pwd)

"$root/scripts/build.sh" --check || exit 1
build=$(mktemp -d "${TMPDIR:-/tmp}/kaimon-install.XXXXXX")
trap 'rm -rf "$build"' EXIT
"$root/scripts/build.sh" "$build" || die "the build failed (see above)"

manifest=$prefix/share/kaimon/manifest
installed=()

# put SRC DEST MODE: install one file (atomically, so that a running
# kaimon-agentd keeps its old binary) and record it.
put() {
	mkdir -p "$(dirname "$2")"
	install -m "$3" "$1" "$2.kaimon-new"
	mv -f "$2.kaimon-new" "$2"
	installed+=("$2")
	echo "installed $2"
}

echo "== install under $prefix"
put "$build/kaimon" "$prefix/bin/kaimon" 0755
put "$build/kaimon-agentd" "$prefix/bin/kaimon-agentd" 0755
shopt -s nullglob
for page in "$root"/man/*.[178]; do
	section=${page##*.}
	put "$page" "$prefix/share/man/man$section/$(basename "$page")" 0644
done
shopt -u nullglob
put "$root/completions/kaimon.bash" "$prefix/share/bash-completion/completions/kaimon" 0644
put "$root/completions/kaimon.zsh" "$prefix/share/zsh/site-functions/_kaimon" 0644
put "$root/completions/kaimon.fish" "$prefix/share/fish/vendor_completions.d/kaimon.fish" 0644

# A file the previous install put there and this one does not is stale.
if [ -f "$manifest" ]; then
	while IFS= read -r old; do
		[ -n "$old" ] || continue
		keep=
		for f in "${installed[@]}"; do [ "$f" = "$old" ] && keep=1 && break; done
		if [ -z "$keep" ] && [ -e "$old" ]; then
			rm -f -- "$old"
			echo "removed $old (no longer part of kaimon)"
		fi
	done <"$manifest"
fi
mkdir -p "$(dirname "$manifest")"
printf '%s\n' "${installed[@]}" >"$manifest.kaimon-new"
mv -f "$manifest.kaimon-new" "$manifest"
echo "installed $manifest (the list scripts/uninstall.sh $prefix removes)"

echo "== done: $("$prefix/bin/kaimon" --version)"
case ":${PATH:-}:" in
*":$prefix/bin:"*) ;;
*)
	echo
	echo "$prefix/bin is not on your PATH. Add to your shell's profile (~/.bashrc, ~/.zshrc):"
	echo "  export PATH=\"$prefix/bin:\$PATH\""
	echo "  export MANPATH=\"$prefix/share/man:\${MANPATH:-}\"   # for man kaimon"
	;;
esac
echo "zsh finds _kaimon when $prefix/share/zsh/site-functions is on fpath (before compinit):"
echo "  fpath=($prefix/share/zsh/site-functions \$fpath)"
# The bash-completion package loads completions/kaimon from ~/.local/share
# (or a prefix in XDG_DATA_DIRS) on first TAB; plain bash loads none, and
# the script needs nothing of the package: it is sourced.
echo "bash loads it through the bash-completion package; without that package, add to ~/.bashrc:"
echo "  . \"$prefix/share/bash-completion/completions/kaimon\""
echo "Next: kaimon doctor   (checks agent programs, the daemon and the config)"
echo "      kaimon daemon install-unit   (optional: run kaimon-agentd as a systemd user service)"
