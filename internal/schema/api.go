package schema

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/kaimon/kaimon/internal/apitype"
	"github.com/kaimon/kaimon/internal/verbs"
)

// Verbs is one document of every verb: $defs holds <verb>_args and
// <verb>_result for each, and error, the object a failed verb answers.
func Verbs() json.RawMessage {
	s := &jsonschema.Schema{
		Schema: Draft,
		Title:  "kaimon verbs",
		Description: "The arguments and result of each verb of kaimon's verb table, as the control API (POST /v1/<verb>), " +
			"the MCP tools and the CLI's --json take and return them; a failed verb answers error.",
		Defs: verbDefs(),
	}
	return marshal(s)
}

// verbDefs are the schemas of Verbs' $defs, also OpenAPI's components.
func verbDefs() map[string]*jsonschema.Schema {
	defs := map[string]*jsonschema.Schema{"error": errorSchema()}
	for _, v := range verbs.All {
		a := verbArgs(v)
		a.Title, a.Description = v.Name+" arguments", v.Summary+". "+v.Doc
		defs[v.Name+"_args"] = a
		defs[v.Name+"_result"] = verbResult(v)
	}
	return defs
}

// errorSchema is verbs.Error's, its code one of verbs.Codes.
func errorSchema() *jsonschema.Schema {
	s := forType(reflect.TypeFor[verbs.Error]())
	s.Title = "error"
	s.Description = "A failed verb or request: code for a program to switch on, error for a person, and for agent_run the text the turn produced."
	for _, c := range verbs.Codes {
		s.Properties["code"].Enum = append(s.Properties["code"].Enum, c)
	}
	return s
}

// eventsID names the events schema where OpenAPI embeds it: its $refs
// (#/$defs/…) then resolve within it, not against the OpenAPI document.
const eventsID = "urn:kaimon:schema:events"

// OpenAPI is an OpenAPI 3.1 description of kaimon-agentd's control API:
// the verbs' routes from the verb table, the others from apitype.Routes.
func OpenAPI() json.RawMessage {
	schemas := verbDefs()
	ev := events()
	ev.ID, ev.Schema = eventsID, ""
	schemas["envelope"] = ev
	paths := map[string]map[string]any{}
	add := func(path, method string, op map[string]any) {
		if paths[path] == nil {
			paths[path] = map[string]any{}
		}
		paths[path][strings.ToLower(method)] = op
	}
	for _, v := range verbs.All {
		add(v.Route(), "POST", verbOp(v, false))
		if v.ReadOnly {
			add(v.Route(), "GET", verbOp(v, true))
		}
	}
	for _, rt := range apitype.Routes {
		op := map[string]any{"operationId": operationID(rt), "summary": rt.Summary, "description": rt.Doc}
		var params []any
		for _, name := range pathParams(rt.Path) {
			params = append(params, map[string]any{"name": name, "in": "path", "required": true,
				"description": "The agent's id.", "schema": map[string]any{"type": "string"}})
		}
		for _, q := range rt.Query {
			params = append(params, map[string]any{"name": q.Name, "in": "query", "description": q.Doc, "schema": map[string]any{"type": "string"}})
		}
		if params != nil {
			op["parameters"] = params
		}
		ok := map[string]any{"description": rt.Summary}
		switch {
		case rt.NDJSON:
			ok["description"] = rt.Summary + ": NDJSON, one event envelope a line"
			ok["content"] = map[string]any{"application/x-ndjson": map[string]any{"schema": ref("envelope")}}
		case rt.Body != "":
			ok["content"] = map[string]any{rt.Body: map[string]any{"schema": map[string]any{"type": "string"}}}
		case rt.Result != nil:
			name := snake(rt.Result.Name())
			schemas[name] = forType(rt.Result)
			ok["content"] = jsonContent(ref(name))
		}
		if len(rt.Headers)+len(rt.Trailers) > 0 {
			h := map[string]any{}
			for name, doc := range rt.Headers {
				h[name] = map[string]any{"description": doc, "schema": map[string]any{"type": "string"}}
			}
			// OpenAPI has no trailers: they are headers that say so.
			for name, doc := range rt.Trailers {
				h[name] = map[string]any{"description": "A trailer, after the body: " + doc, "schema": map[string]any{"type": "string"}}
			}
			ok["headers"] = h
		}
		op["responses"] = withErrors(map[string]any{"200": ok})
		add(rt.Path, rt.Method, op)
	}
	doc := map[string]any{
		"openapi":           "3.1.0",
		"jsonSchemaDialect": Draft,
		"info": map[string]any{
			"title":   "kaimon-agentd control API",
			"version": fmt.Sprint(apitype.APIVersion),
			"description": "HTTP/1.1 and JSON over the daemon's unix socket (its owner alone may connect; see kaimon-agentd(8)). " +
				"One route per verb of the verb table, plus the daemon's own. An error is the JSON object error, with the status its code travels with.",
		},
		"paths":      paths,
		"components": map[string]any{"schemas": schemas},
	}
	b, err := json.Marshal(doc)
	if err != nil {
		panic(fmt.Sprintf("schema: %v", err))
	}
	return b
}

// verbOp is the operation of v's route: POST with the arguments as a JSON
// body, or (get) GET with them as query parameters.
func verbOp(v *verbs.Verb, get bool) map[string]any {
	op := map[string]any{"operationId": v.Name, "summary": v.Summary, "description": v.Doc}
	if get {
		op["operationId"] = v.Name + "_get"
		var params []any
		for _, a := range v.Args {
			// An array is the parameter repeated (agent_ids=a&agent_ids=b),
			// OpenAPI's default for a query.
			p := map[string]any{"name": a.Name, "in": "query", "description": a.Doc, "required": a.Required,
				"schema": verbArgs(v).Properties[a.Name]}
			params = append(params, p)
		}
		if params != nil {
			op["parameters"] = params
		}
	} else {
		op["requestBody"] = map[string]any{"required": false, "content": jsonContent(ref(v.Name + "_args")),
			"description": "The arguments; an empty body is {}."}
	}
	op["responses"] = withErrors(map[string]any{"200": map[string]any{"description": v.Summary, "content": jsonContent(ref(v.Name + "_result"))}})
	return op
}

// withErrors adds to responses one per error code, with the status the
// code travels with (verbs.Error.HTTPStatus).
func withErrors(responses map[string]any) map[string]any {
	for _, c := range verbs.Codes {
		st := fmt.Sprint((&verbs.Error{Code: c}).HTTPStatus())
		responses[st] = map[string]any{"description": "code " + c, "content": jsonContent(ref("error"))}
	}
	return responses
}

func jsonContent(schema any) map[string]any {
	return map[string]any{"application/json": map[string]any{"schema": schema}}
}

func ref(name string) map[string]any { return map[string]any{"$ref": "#/components/schemas/" + name} }

// operationID names a route's operation from its method and path:
// get_v1_agents_id_events.
func operationID(rt apitype.Route) string {
	return strings.ToLower(rt.Method) + strings.NewReplacer("/", "_", "{", "", "}", "").Replace(rt.Path)
}

// pathParams are the {names} of a path, in order.
func pathParams(path string) []string {
	var out []string
	for _, seg := range strings.Split(path, "/") {
		if name, ok := strings.CutPrefix(seg, "{"); ok {
			out = append(out, strings.TrimSuffix(name, "}"))
		}
	}
	return out
}

// snake is a Go type name as a component's name: DaemonStatus is
// daemon_status.
func snake(name string) string {
	var b strings.Builder
	for i, r := range name {
		if 'A' <= r && r <= 'Z' {
			if i > 0 {
				b.WriteByte('_')
			}
			r += 'a' - 'A'
		}
		b.WriteRune(r)
	}
	return b.String()
}
