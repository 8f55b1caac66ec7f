#!/bin/sh
# A stand-in for the claude CLI that misbehaves on purpose, for the faults
# the real one will not show. It speaks just enough stream-json: it answers
# the initialize control request kaimon sends at spawn, then on the first
# user message does what KAIMON_STANDIN says:
#   hangup  close its stdout and live on (until stopped)
#   mute    start the turn, then read on and answer nothing: no result, no
#           acknowledgement of an interrupt; it exits when stdin closes
#   longline print one 65 MiB line (over kaimon's 64 MiB bound; its bytes
#           before the newline are KAIMON_STANDIN_LONGLINE if set), then
#           answer the turn properly, and read on until stdin closes
#   garbage print lines that are not stream-json (text, a NUL, invalid
#           UTF-8, a JSON array, an unknown type), then answer the turn
#           properly, and read on until stdin closes
#   printenv print its environment on stderr and exit 1 at once, before
#           it is ready (a program that says what it was run with)
if [ "$KAIMON_STANDIN" = printenv ]; then
	echo "standin: cannot go on; my environment:" >&2
	env >&2
	exit 1
fi
read -r line || exit 1
case $line in
*'"subtype":"initialize"'*) ;;
*) echo "standin: expected initialize, got: $line" >&2; exit 1 ;;
esac
echo '{"type":"control_response","response":{"subtype":"success","request_id":"init-1","response":{}}}'
read -r line || exit 0
echo '{"type":"system","subtype":"init","cwd":"/","session_id":"standin-1","model":"standin","tools":[]}'
case $KAIMON_STANDIN in
hangup)
	exec >&-
	echo "standin: stdout closed, sleeping" >&2
	exec sleep 600
	;;
longline)
	head -c "${KAIMON_STANDIN_LONGLINE:-68157440}" /dev/zero | tr '\000' 'x'
	echo
	echo '{"type":"assistant","message":{"id":"m1","type":"message","role":"assistant","model":"standin","content":[{"type":"text","text":"after the long line"}]},"session_id":"standin-1"}'
	echo '{"type":"result","subtype":"success","is_error":false,"result":"after the long line","session_id":"standin-1","usage":{"input_tokens":3,"output_tokens":4}}'
	while read -r line; do :; done
	;;
garbage)
	echo 'not json at all'
	printf 'nul\000byte\n'
	printf '\377\376 invalid utf-8\n'
	echo '[1,2,3]'
	echo '{"type":"mystery","session_id":"standin-1"}'
	echo '{"type":"assistant","message":{"id":"m1","type":"message","role":"assistant","model":"standin","content":[{"type":"text","text":"after the garbage"}]},"session_id":"standin-1"}'
	echo '{"type":"result","subtype":"success","is_error":false,"result":"after the garbage","session_id":"standin-1","usage":{"input_tokens":3,"output_tokens":4}}'
	while read -r line; do :; done
	;;
mute)
	while read -r line; do
		echo "standin: ignoring $line" >&2
	done
	;;
*)
	echo "standin: KAIMON_STANDIN=$KAIMON_STANDIN: want hangup, mute, longline, garbage or printenv" >&2
	exit 2
	;;
esac
