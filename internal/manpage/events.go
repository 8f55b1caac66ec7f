package manpage

import (
	"fmt"

	"github.com/kaimon/kaimon/internal/config"
	"github.com/kaimon/kaimon/internal/event"
)

// Events writes kaimon-events(7): what a consumer of the bus or the log
// writes code against. The kinds come from event.Kinds and event.Docs.
func Events() string {
	var r roff
	writeEvents(&r)
	return r.String()
}

func writeEvents(r page) {
	p := config.Paths{CacheDir: "<cache>", SockDir: "<sock_dir>"}
	bus := "ipc://" + p.EventsSocket()
	logPath := p.Agent("<id>").Events

	r.header("kaimon-events", "7")
	r.sh("NAME")
	r.line("kaimon-events - the events of kaimon's agent sessions: envelope, kinds, bus and log")

	r.sh("DESCRIPTION")
	r.prose("Every agent kaimon-agentd owns emits events, normalized from its vendor's output into one model " +
		"(the Agent Client Protocol's session updates). Each is published live on the event bus and, when " +
		"authoritative, appended to the agent's event log. kaimon tail prints them; kaimon output and kaimon run " +
		"read them for you. This page is what a program consuming them is written against.")

	r.sh("THE ENVELOPE")
	r.line("Each event is one JSON object:")
	r.gap()
	r.literal(`{"kind": "assistant_text", "turn": 3, "data": {...}, "agent_id": "9f3a1c20", "seq": 42, "ts": "2026-01-02T15:04:05.123456789Z"}`)
	r.item("kind", "One of the kinds below. The set is closed; a consumer may ignore kinds it does not handle.")
	r.item("turn", "The number of the turn the event belongs to, counted from 1 when the turn is sent; user_text carries the number of the turn it starts. 0 before the first turn.")
	r.item("data", "The kind's data object, below.")
	r.item("agent_id", "The agent's id.")
	r.item("seq", "The event's number within its agent: from 1, strictly increasing, never reused, also across reopening the agent and restarting the daemon.")
	r.item("ts", "When the daemon stamped the event, RFC 3339 with nanoseconds.")

	r.sh("KINDS")
	for _, k := range event.Kinds {
		d, ok := event.Docs[k]
		if !ok {
			panic(fmt.Sprintf("manpage: event kind %s has no event.Docs entry", k))
		}
		r.item(string(k), d.Meaning)
		r.itemLiteral(d.Data)
	}

	r.sh("THE ORDER OF A TURN")
	r.prose("A turn emits, in order: user_text, turn_started, streamed assistant_text and thought chunks, the " +
		"complete assistant_text block, any tool_use, tool_input_delta and tool_result events, usage, and last " +
		"result. status events mark the agent going working and back to idle. As the log keeps a tool turn:")
	r.gap()
	r.literal("user_text turn_started assistant_text tool_use tool_use tool_result assistant_text usage result")

	r.sh("DELTAS")
	r.prose("assistant_text and thought carry delta. delta:true is an incremental chunk: append it to the open block " +
		"(start a new block when the last one was of another kind or is done). delta:false (or absent) is the " +
		"complete, authoritative block, sent at the block's end: replace the open block's accumulated text with " +
		"it and mark it done, or let it stand alone. Both copies are sent on purpose; the complete one heals any " +
		"chunk that was dropped.\n\n" +
		"A tool call is announced by a tool_use without input when it begins; its input then streams as " +
		"tool_input_delta fragments; a second tool_use with the same toolCallId carries the parsed input. Replace " +
		"the call by toolCallId. Its output comes later as tool_result.\n\n" +
		"Chunks (delta:true) and tool_input_delta exist for liveness only: the log does not keep them, and a " +
		"consumer that buffers events for replay should not either. A consumer that ignores delta sees every " +
		"complete block.")

	r.sh("THE BUS")
	r.prose("The bus is a ZeroMQ PUB socket bound at " + bus + " (the socket dir is in kaimon(1), FILES), plus any " +
		"bus_endpoints of the config file (e.g. tcp://127.0.0.1:5556). Subscribe with a topic prefix: agent: for every " +
		"agent, agent:<id> for one (a prefix, so also ids that start with it; compare agent_id when that matters).\n\n" +
		"Each message has two frames: the topic agent:<id>, then the envelope as JSON (UTF-8). A libzmq subscriber " +
		"needs nothing but a JSON parser, e.g. in Python:")
	r.gap()
	r.literal(fmt.Sprintf("import json, zmq\ns = zmq.Context().socket(zmq.SUB)\ns.connect(%q)\ns.setsockopt(zmq.SUBSCRIBE, b\"agent:\")\nwhile True:\n    topic, body = s.recv_multipart()\n    env = json.loads(body)", bus))
	r.para()
	r.prose("A slow subscriber never slows an agent: the publisher drops envelopes for it and counts them " +
		"(kaimon daemon status). A subscriber notices the drop as a jump in seq.")

	r.sh("THE LOG")
	r.prose("Each agent's events are appended to " + logPath + ", one JSON object a line:")
	r.gap()
	r.literal(`{"ts": "…", "seq": 42, "kind": "result", "turn": 3, "data": {...}}`)
	r.prose("The log keeps the authoritative events only: no delta:true, no tool_input_delta. An event is written, " +
		"whole and in one write, before it is published, so the log never lacks what a subscriber saw as " +
		"authoritative. It is fsynced after each result. A line that is not a record (torn by a crash, or damaged) " +
		"is skipped, never fatal: a reader should do the same and may report it.")

	r.sh("SEQ AND THE JOIN OF LOG AND LIVE")
	r.prose("seq lets a consumer join the log and the live bus with no gap and no duplicate: subscribe first; then " +
		"read the log, remembering the last seq read; then take live envelopes, dropping those whose seq is not " +
		"above it. When seq jumps on the live side, the bus dropped envelopes: read the missing authoritative events " +
		"from the log (the chunks are lost, and the complete blocks that follow make up for them). A consumer that " +
		"restarts resumes after the last seq it handled.\n\n" +
		"One jump is not counted as a loss: after its daemon was lost, an agent's numbering goes on past every seq the " +
		"lost daemon may have issued, and the first envelope of it is the error saying so, whose data.data holds \"" +
		event.RenumberedKey + "\": true. What lies between the last seq a consumer has and that one cannot be told apart " +
		"(never issued, or streamed and missed); kaimon tail does not report it lost.\n\n" +
		"kaimon tail agent:<id> --since SEQ does exactly this and prints the envelopes, one a line:")
	r.gap()
	r.literal("kaimon tail agent:$id --since 41 --no-deltas | jq -c .")

	r.sh("SCHEMA")
	r.prose("kaimon schema events prints a JSON Schema (draft 2020-12) of the envelope, made from the code that encodes it: " +
		"each kind's data is in its $defs under the kind's name, selected by kind, and a line of the log is $defs/record. " +
		"A consumer of kaimon tail | jq, of the bus or of the log can check what it reads against it. The data objects admit " +
		"properties they do not name (the ACP's _meta, later revisions' fields); the envelope does not.")
	r.gap()
	r.literal("kaimon schema events > kaimon-events.schema.json")

	r.sh("SEE ALSO")
	r.seeAlso(refKaimon, refAgentd)
}
