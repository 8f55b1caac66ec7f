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
        # mute: no answer, ever
    elif id_ is not None:
        sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": id_, "error": {"code": -32601, "message": "standin: no " + str(method)}}) + "\n")
        sys.stdout.flush()
