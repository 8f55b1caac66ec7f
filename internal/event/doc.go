package event

import "reflect"

// KindDoc documents a kind for consumers: what it means, and its data.
type KindDoc struct {
	Meaning string
	Data    string // the data object, as JSON with … for content
}

// Docs documents every kind; kaimon-events(7) is written from it, and a
// test fails when a kind of Kinds has no entry.
var Docs = map[Kind]KindDoc{
	AssistantText: {
		Meaning: "Assistant message text. delta:true is a streamed chunk (live only, never logged); delta:false is the complete, authoritative block, which replaces the chunks streamed before it.",
		Data:    `{"delta": false, "content": {"type": "text", "text": "…"}}`,
	},
	Thought: {
		Meaning: "The model's reasoning; streamed as assistant_text is.",
		Data:    `{"delta": false, "content": {"type": "text", "text": "…"}}`,
	},
	UserText: {
		Meaning: "The user's turn, echoed with the number of the turn it starts.",
		Data:    `{"delta": false, "content": {"type": "text", "text": "…"}}`,
	},
	ToolUse: {
		Meaning: "A tool call. Under streaming it comes twice for one toolCallId: an announce without input when the call begins, then the authoritative copy with rawInput; replace the call by toolCallId. call.kind is one of read, edit, delete, move, search, execute, think, fetch, other.",
		Data:    `{"call": {"toolCallId": "…", "title": "…", "kind": "execute", "status": "in_progress", "content": [], "locations": [], "rawInput": {…}}}`,
	},
	ToolInputDelta: {
		Meaning: "A streamed fragment of a tool call's input JSON; fragments concatenate to the whole input. Live only, never logged.",
		Data:    `{"toolCallId": "…", "partialJson": "…"}`,
	},
	ToolResult: {
		Meaning: "A tool call's outcome: status completed or failed, and content blocks (text; images as base64).",
		Data:    `{"update": {"toolCallId": "…", "status": "completed", "content": [ … ]}}`,
	},
	Plan: {
		Meaning: "The agent's plan, whole each time: entries with priority (high, medium, low) and status (pending, in_progress, completed).",
		Data:    `{"entries": [{"content": "…", "priority": "high", "status": "pending"}]}`,
	},
	Usage: {
		Meaning: "A running token usage update of the turn. costUsd stays 0.0. thoughtTokens, present only where the agent reports them (the claude CLI since 2.1.328, ACP agents that send thoughtTokens), are the part of outputTokens spent thinking. An ACP agent's context window comes as usage too, with {\"context\": {\"used\": 0, \"size\": 0}} for data, a running figure apart from the turn's usage.",
		Data:    `{"usage": {"inputTokens": 0, "outputTokens": 0, "cacheReadTokens": 0, "cacheCreationTokens": 0, "costUsd": 0.0}}`,
	},
	TurnStarted: {
		Meaning: "The turn began: the agent took the user's text.",
		Data:    `{}`,
	},
	Result: {
		Meaning: "The turn ended, with its stopReason (end_turn, max_tokens, refusal, cancelled, or error for a turn that failed, with the reason in error) and the turn's summed usage. It is the last event of a turn.",
		Data:    `{"stopReason": "end_turn", "usage": {…}, "error": "…"}`,
	},
	Status: {
		Meaning: "The agent's status changed: starting, idle, working or dead (starting → idle ⇄ working → dead).",
		Data:    `{"status": "working"}`,
	},
	Error: {
		Meaning: "A backend or process error (an unparsable line, a crash, a non-zero exit, an event log that failed). The daemon's events stream also writes one with seq 0 for a damaged log line.",
		Data:    `{"message": "…", "data": null}`,
	},
	Permission: {
		Meaning: "The agent asks to run a tool call: first without a decision, with the options offered and expiresAt; kaimon permit answers by requestId (agent_permit's request_id, as agent_status lists it; left out, the agent's one pending request). A second event with the same requestId carries the decision (allow or deny), always, by (user, policy, timeout, cancelled) and a message. A call the preset decides has only the second event.",
		Data:    `{"requestId": "…", "toolCall": {…}, "options": [{"optionId": "…", "name": "…", "kind": "allow_once"}], "expiresAt": "…", "decision": "allow", "always": false, "by": "user", "message": "…"}`,
	},
}

// DataTypes are the Go types each kind's data is encoded from: its JSON
// is one of theirs. internal/schema describes the data from them (kaimon
// schema events), and a test fails when a kind of Kinds has none. usage
// has two: the turn's figures, and an ACP agent's context window.
var DataTypes = map[Kind][]reflect.Type{
	AssistantText:  {reflect.TypeFor[TextData]()},
	Thought:        {reflect.TypeFor[TextData]()},
	UserText:       {reflect.TypeFor[TextData]()},
	ToolUse:        {reflect.TypeFor[ToolUseData]()},
	ToolInputDelta: {reflect.TypeFor[ToolInputDeltaData]()},
	ToolResult:     {reflect.TypeFor[ToolResultData]()},
	Plan:           {reflect.TypeFor[PlanData]()},
	Usage:          {reflect.TypeFor[UsageData](), reflect.TypeFor[UsageContextData]()},
	TurnStarted:    {reflect.TypeFor[struct{}]()},
	Result:         {reflect.TypeFor[ResultData]()},
	Status:         {reflect.TypeFor[StatusData]()},
	Error:          {reflect.TypeFor[ErrorData]()},
	Permission:     {reflect.TypeFor[PermissionData]()},
}
