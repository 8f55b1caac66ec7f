// Package codex drives OpenAI's Codex CLI natively: codex:[<model>][/<effort>]
// runs `codex app-server`, JSON-RPC on stdio (without the "jsonrpc" field),
// one process per agent and one thread for its whole conversation, as the
// claude backend runs one claude CLI. Its protocol carries what Codex's
// ACP adapter (acp:codex) drops: the usage of each model request, the
// model and reasoning effort per turn, approvals as requests with their
// command and justification, turn/interrupt, thread/resume and
// thread/fork.
//
// mapper.go turns app-server notifications into kaimon's events; it is
// tested on traffic recorded from the real program (testdata).
package codex
