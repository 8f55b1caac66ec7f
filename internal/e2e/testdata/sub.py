"""A subscriber of kaimon's event bus built on libzmq (Debian's python3-zmq)
with nothing but a JSON parser, as a consumer outside kaimon would write it.

    sub.py ENDPOINT TOPIC [kind=KIND | count=N]

It subscribes to TOPIC (a prefix: "agent:" or "agent:<id>"), prints
{"ready": true} once it has subscribed, then one line per message,
{"topic": ..., "envelope": {...}}, until it has printed an envelope of kind
KIND or N messages. It gives up (exit 1) after 60 s without a message.
"""
import json
import sys

import zmq


def main():
    endpoint, topic = sys.argv[1], sys.argv[2]
    stop = sys.argv[3] if len(sys.argv) > 3 else ""
    until_kind = stop[len("kind="):] if stop.startswith("kind=") else None
    until_count = int(stop[len("count="):]) if stop.startswith("count=") else None
    ctx = zmq.Context()
    sub = ctx.socket(zmq.SUB)
    sub.setsockopt(zmq.RCVTIMEO, 60000)
    sub.setsockopt(zmq.LINGER, 0)
    sub.connect(endpoint)
    sub.setsockopt_string(zmq.SUBSCRIBE, topic)
    print(json.dumps({"ready": True}), flush=True)
    n = 0
    try:
        while True:
            frames = sub.recv_multipart()
            if len(frames) != 2:
                print(json.dumps({"error": "want 2 frames, got %d" % len(frames)}), flush=True)
                return 1
            env = json.loads(frames[1])
            print(json.dumps({"topic": frames[0].decode(), "envelope": env}), flush=True)
            n += 1
            if until_kind is not None and env["kind"] == until_kind:
                return 0
            if until_count is not None and n >= until_count:
                return 0
    except zmq.Again:
        print(json.dumps({"error": "no message for 60 s"}), flush=True)
        return 1
    finally:
        sub.close()
        ctx.term()


if __name__ == "__main__":
    sys.exit(main())
