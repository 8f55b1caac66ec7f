package apitype

import "reflect"

// Route is one of the API's routes besides the verbs' (POST /v1/<verb>,
// and GET for a read-only verb, one per verb of the table). The daemon's
// server serves them (a handler each, by Pattern), and internal/schema
// describes them in the OpenAPI document (kaimon schema openapi), so a
// route is written once. They are here, not beside their handlers, so
// that the CLI (kaimon schema) does not link the server.
type Route struct {
	Method, Path string
	Summary      string // one line
	Doc          string
	Query        []Param
	// Result is the type of a JSON answer; NDJSON says the answer is a
	// stream of event envelopes (event.Envelope), one a line, instead;
	// Body is the content type of an answer that is neither, its bytes
	// as they are.
	Result reflect.Type
	NDJSON bool
	Body   string
	// Headers are response headers a client reads, by name, with what
	// they say; Trailers are those that come after the body.
	Headers, Trailers map[string]string
}

// The trailers of GET /v1/agents/{id}/diff. A diff streams, so how it
// ended is known only after it: they come after its body.
const (
	// DiffTrailer is agent_diff's result without the diff, as JSON,
	// once the diff is whole.
	DiffTrailer = "Kaimon-Diff"
	// DiffErrorTrailer is the error that ended the diff partway, as the
	// API's JSON error object.
	DiffErrorTrailer = "Kaimon-Error"
	// DiffContentType is the content type of its body.
	DiffContentType = "text/x-diff"
)

// Param is a query parameter of a route; every one is a string on the
// wire, parsed as Doc says.
type Param struct{ Name, Doc string }

// StopResult is POST /v1/daemon/stop's answer.
type StopResult struct {
	Stopping bool `json:"stopping"`
}

// Routes are the routes beside the verbs', in the order served.
var Routes = []Route{
	{Method: "GET", Path: "/v1/daemon", Summary: "The daemon's status",
		Doc:    "Its pid, version, API version, socket, cache dir, agent counts, event bus counters and faults: what kaimon daemon status shows.",
		Result: reflect.TypeFor[DaemonStatus]()},
	{Method: "GET", Path: "/v1/agents/{id}/events", Summary: "An agent's events",
		Doc: "The agent's envelopes after seq since, as NDJSON: its log (authoritative events only), then with follow its live envelopes, deltas included, " +
			"joined by seq with no gap and no duplicate, until the client goes away. A line of the log that is not a record is told by an error envelope of seq 0.",
		Query: []Param{
			{"since", "A seq (a number from 0; default 0, the whole log) or latest: the agent's last seq at the request, so that with follow only what happens from now on comes."},
			{"follow", "1: go on with the live envelopes after the log; 0 or absent: the log, then the stream ends."},
		},
		NDJSON: true},
	{Method: "GET", Path: "/v1/events", Summary: "Every agent's events",
		Doc: "The envelopes of every agent whose id starts with the channel's prefix, agents that appear later included, as NDJSON, each agent's in seq order " +
			"with no gap and no duplicate: the bus's stream for a client that reaches the daemon only through its socket (a daemon on another host, over ssh).",
		Query: []Param{
			{"channel", "agent: (every agent, the default) or agent:PREFIX (the agents whose id starts with PREFIX)."},
			{"since", "The agents to resume, in the form " + SinceForm + ": each from after its seq."},
			{"history", "1: the other agents the daemon has from the start of their logs; 0 or absent: from now."},
			{"follow", "1: go on live until the client goes away; 0 or absent: the logs since and history ask for, then the stream ends."},
		},
		Headers: map[string]string{StreamSinceHeader: "Where the stream starts each agent it knows of, in the since form: " +
			"a client that resumes sends those positions for the agents it has seen nothing of yet."},
		NDJSON: true},
	{Method: "GET", Path: "/v1/agents/{id}/diff", Summary: "An agent's diff, whole, as it is made",
		Doc: "What agent_diff describes, of any size: the bytes git writes, not JSON, streamed (what kaimon diff prints; agent_diff cuts its answer). " +
			"An error before the diff begins is agent_diff's JSON error with its status; how the diff ended comes in trailers, after the body: " +
			DiffTrailer + " once it is whole, " + DiffErrorTrailer + " when it failed partway. A client that reads no trailers (curl) cannot tell the two apart.",
		Query: []Param{{"stat", "1: a summary per file (git diff --stat) instead of the patch; 0 or absent: the patch."}},
		Body:  DiffContentType,
		Trailers: map[string]string{
			DiffTrailer:      "agent_diff's result without the diff (agent_id, worktree, branch, base_commit), as JSON: the diff is whole.",
			DiffErrorTrailer: "The error that ended the diff partway, as the API's JSON error object: what came before it is not the whole diff.",
		}},
	{Method: "POST", Path: "/v1/daemon/stop", Summary: "Stop the daemon",
		Doc:    "The daemon answers, then stops, as kaimon daemon stop asks it to.",
		Result: reflect.TypeFor[StopResult]()},
}

// Pattern is the route's net/http pattern.
func (r *Route) Pattern() string { return r.Method + " " + r.Path }
