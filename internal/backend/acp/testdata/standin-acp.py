#!/usr/bin/env python3
"""A stand-in ACP agent that misbehaves on purpose, for faults the real
agents do not show. It answers initialize and session/new, then on
session/prompt does what KAIMON_STANDIN says:
  hangup  close its stdout and live on (until stopped)
  mute    never answer the prompt, and ignore session/cancel
  longline  print a line over the ACP SDK's 10 MiB limit, then answer
  auth    (at session/new already) answer -32000 "Authentication required",
          as an agent that is not logged in does
  oldflags  refuse --acp as an unknown argument (an older gemini-cli, which
            takes --experimental-acp), then answer prompts
  drain     after 0.5 s ask craft/drainMidTurnQueue (qwen-code's non-standard
            request), say its answer as the turn's text, and end the turn
"""
import json
import os
import sys
import time

mode = os.environ.get("KAIMON_STANDIN", "")

if mode == "oldflags" and "--acp" in sys.argv[1:]:
    print("Unknown argument: acp", file=sys.stderr, flush=True)
    sys.exit(1)


def reply(id_, result):
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": id_, "result": result}) + "\n")
    sys.stdout.flush()


for line in sys.stdin:
    msg = json.loads(line)
    method, id_ = msg.get("method"), msg.get("id")
    if method == "initialize":
        reply(id_, {"protocolVersion": 1, "agentCapabilities": {}})
    elif method == "session/new" and mode == "auth":
        sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": id_, "error": {"code": -32000, "message": "Authentication required: run the standin's login first"}}) + "\n")
        sys.stdout.flush()
    elif method == "session/new":
        reply(id_, {"sessionId": "standin-1"})
    elif method == "session/prompt":
        if mode == "hangup":
            os.close(1)
            print("standin: stdout closed, sleeping", file=sys.stderr, flush=True)
            time.sleep(600)
        if mode == "longline":
            sys.stdout.write("x" * (11 << 20) + "\n")
            reply(id_, {"stopReason": "end_turn"})
        if mode == "oldflags":
            reply(id_, {"stopReason": "end_turn"})
        if mode == "drain":
            time.sleep(0.5)
            sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": "drain-" + str(id_), "method": "craft/drainMidTurnQueue",
                                         "params": {"sessionId": "standin-1", "todoStopGuardWatchQueuedPrompt": True}}) + "\n")
            sys.stdout.flush()
            answer = None
            while answer is None:
                m = json.loads(sys.stdin.readline())
                if m.get("id") == "drain-" + str(id_):
                    answer = m
            text = json.dumps(answer.get("result", answer.get("error")), sort_keys=True)
            sys.stdout.write(json.dumps({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "standin-1",
                             "update": {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text}}}}) + "\n")
            reply(id_, {"stopReason": "end_turn"})
        # mute: no answer, ever
    elif id_ is not None:
        sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": id_, "error": {"code": -32601, "message": "standin: no " + str(method)}}) + "\n")
        sys.stdout.flush()
