#!/usr/bin/env bash
# keep-worktrees.sh DIR DEST: run before DIR, a playground's directory, is
# removed. Every git worktree under DIR whose repository is outside DIR
# (an agent's `kaimon open --worktree` on a repository of yours: kaimon
# puts the worktree under the playground's KAIMON_HOME) is moved to
# DEST/<its name>, and its repository's note of it repaired, so that
# neither its uncommitted work nor its branch's place goes with DIR, and
# the repository is not left with a prunable worktree. Each is named on
# stderr with how to remove it. It asks nothing (a playground may run
# with no terminal), and keeps clean worktrees too: kaimon's record,
# which says what is the agent's own, goes with DIR.
# Worktrees of repositories inside DIR go with DIR. Exits 1 when one could
# not be moved: DIR must then be kept.
set -euo pipefail
dir=$(cd "$1" && pwd -P)
dest=$2
# git as a reader of a repository must not run it (issue 27): no
# fsmonitor, no hooks.
g() { git -c core.fsmonitor=false -c core.hooksPath=/dev/null "$@"; }
gitfiles=() # parents before what is in them: a moved one takes its nested ones along
while IFS= read -r -d '' f; do gitfiles+=("$f"); done < <(find "$dir" -name .git -type f -print0 2>/dev/null | sort -z)
status=0
for f in ${gitfiles[@]+"${gitfiles[@]}"}; do # (bash 3.2's set -u: an empty array is unset)
	wt=${f%/.git}
	[ -e "$f" ] || continue # inside a worktree moved already
	common=$(g -C "$wt" rev-parse --path-format=absolute --git-common-dir 2>/dev/null) || continue
	gitdir=$(g -C "$wt" rev-parse --path-format=absolute --git-dir)
	common=$(cd "$common" && pwd -P) # as dir is: /tmp may be a symlink (macOS)
	# A linked worktree has a git dir of its own inside its repository's
	# (a submodule's checkout has not: it goes with its superproject).
	[ "$gitdir" != "$common" ] || continue
	case $common/ in "$dir"/*) continue ;; esac
	repo=$common
	[ "${common##*/}" != .git ] || repo=${common%/.git}
	branch=$(g -C "$wt" symbolic-ref --quiet --short HEAD 2>/dev/null) || branch=
	dirty=
	if [ -n "$(g -C "$wt" status --porcelain --untracked-files=all 2>/dev/null)" ]; then
		dirty=" with uncommitted changes or untracked files"
	fi
	to=$dest/${wt##*/}
	# git worktree move would rename(2), which fails from a tmpfs /tmp to
	# a HOME on disk: mv copies across, and repair tells the repository.
	if [ -e "$to" ] || ! (umask 077 && mkdir -p "$dest") || ! mv -- "$wt" "$to"; then
		echo "playground: could not move the worktree $wt (of your repository $repo) to $to" >&2
		status=1
		continue
	fi
	if ! g -C "$to" worktree repair >/dev/null 2>&1; then
		echo "playground: moved the worktree $wt to $to, but git worktree repair failed there: run it in $to, or $repo keeps a prunable worktree" >&2
	fi
	{
		echo "playground: kept the worktree${dirty} of your repository $repo${branch:+ (branch $branch)}: moved out of the playground to"
		echo "   $to"
		printf '   remove it with: git -C %q worktree remove%s %q' "$repo" "${dirty:+ --force}" "$to"
		[ -z "$branch" ] || printf ' && git -C %q branch -D %q' "$repo" "$branch"
		echo
	} >&2
done
exit $status
