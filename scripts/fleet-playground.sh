#!/usr/bin/env bash
# A fleet to try kaimon's many-hosts commands on, on this one machine (as
# root): two hosts, h1 and h2, each a real sshd in a network namespace of
# its own with its own user, and a local installation that knows them.
# The hosts are the end-to-end tests' (internal/e2e/fleet_harness_test.go):
# this holds them up and opens a shell in that installation; leaving the
# shell tears everything down.
#
#   sudo scripts/fleet-playground.sh
#   kaimon host ls --check
#   kaimon open --host h1 --model "$PLAY_MODEL" "$PLAY_H1"
#   kaimon --host any open --model "$PLAY_MODEL" "$PLAY_ANY"   # the same path on every host
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "$(id -u)" != 0 ]; then
	echo "fleet-playground: network namespaces and user accounts need root" >&2
	exit 2
fi
scripts/setup-test.sh >/dev/null
dir=$(mktemp -d "${TMPDIR:-/tmp}/kaimon-fleet-playground.XXXXXX")
env_file=$dir/env
FLEET_PLAYGROUND_ENV="$env_file" go test ./internal/e2e -count=1 -run '^TestFleetPlayground$' -v -timeout 70m \
	> "$env_file.log" 2>&1 < /dev/null &
tester=$!
end() {
	rm -f "$env_file"
	wait "$tester" || { echo "fleet-playground: the tear-down failed:" >&2; tail -20 "$env_file.log" >&2; }
	rm -rf "$dir"
}
trap end EXIT
for _ in $(seq 600); do
	[ -s "$env_file" ] && break
	kill -0 "$tester" 2>/dev/null || { cat "$env_file.log" >&2; exit 1; }
	sleep 0.5
done
# The env file prints the banner (what the hosts are, the PLAY_ variables,
# the fake model API's phrases) as it is sourced.
if [ $# -gt 0 ]; then
	bash -c "source '$env_file'; $*"
else
	# set -e carries into the process substitution's subshell: a cat
	# of a missing ~/.bashrc would end it before the env file's.
	bash --rcfile <(if [ -r ~/.bashrc ]; then cat ~/.bashrc; fi; cat "$env_file"; echo 'PS1="fleet$ "') -i
fi
