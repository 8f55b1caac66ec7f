package schema

import (
	"encoding/json"
	"reflect"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/kaimon/kaimon/internal/event"
)

// RecordRef is where Events keeps the schema of a line of an agent's
// event log (event.Record), for a reader that validates log lines.
const RecordRef = "#/$defs/record"

// Events is the schema of the event envelope as the bus, kaimon tail and
// the daemon's event streams carry it: {kind, turn, data, agent_id, seq,
// ts}, its data by its kind. $defs holds each kind's data under the kind's
// name, and the log line {ts, seq, kind, turn, data} under record.
func Events() json.RawMessage { return marshal(events()) }

func events() *jsonschema.Schema {
	defs := map[string]*jsonschema.Schema{}
	var byKind []*jsonschema.Schema
	for _, k := range event.Kinds {
		defs[string(k)] = kindData(k)
		// if/then rather than oneOf: an event of a known kind whose data
		// is wrong is then told by its kind's schema, not by a dozen
		// failed alternatives.
		byKind = append(byKind, &jsonschema.Schema{
			If: &jsonschema.Schema{
				Properties: map[string]*jsonschema.Schema{"kind": {Const: jsonschema.Ptr[any](string(k))}},
				Required:   []string{"kind"},
			},
			Then: &jsonschema.Schema{Properties: map[string]*jsonschema.Schema{"data": {Ref: "#/$defs/" + string(k)}}},
		})
	}
	defs["data_by_kind"] = &jsonschema.Schema{
		Description: "The data of an event, by its kind.",
		AllOf:       byKind,
	}
	rec := forType(reflect.TypeFor[event.Record]())
	rec.Title = "kaimon event log line"
	rec.Description = "One line of an agent's event log (<cache>/<id>.events.jsonl): the envelope without agent_id, authoritative events only."
	rec.Ref = "#/$defs/data_by_kind"
	defs["record"] = rec

	env := forType(reflect.TypeFor[event.Envelope]())
	env.Schema = Draft
	env.Title = "kaimon event envelope"
	env.Description = "An event of an agent kaimon-agentd owns, as the event bus and the daemon's event streams carry it (kaimon-events(7)). " +
		"seq counts from 1 per agent; 0 is the daemon's note of a damaged log line, an error event no agent emitted."
	env.Ref = "#/$defs/data_by_kind"
	env.Defs = defs
	return env
}

// kindData is the schema of kind k's data: the schema of its Go type (of
// one of them, for a kind with several), described by event.Docs.
func kindData(k event.Kind) *jsonschema.Schema {
	var s *jsonschema.Schema
	if ts := event.DataTypes[k]; len(ts) == 1 {
		s = forType(ts[0])
	} else {
		s = &jsonschema.Schema{}
		for _, t := range ts {
			s.AnyOf = append(s.AnyOf, forType(t))
		}
	}
	// The data is the Agent Client Protocol's session update, whose
	// objects may carry _meta and the fields of later revisions (a plan
	// entry is forwarded as the ACP agent sent it): a consumer ignores
	// what it does not know, and so does the schema. The envelope's own
	// fields stay closed.
	openObjects(s)
	if k == event.Permission {
		permissionShapes(s)
	}
	s.Title = string(k)
	s.Description = event.Docs[k].Meaning
	return s
}

// openObjects lifts the library's additionalProperties:false from s and
// every schema within it.
func openObjects(s *jsonschema.Schema) {
	if s == nil {
		return
	}
	if a := s.AdditionalProperties; a != nil && a.Not != nil {
		s.AdditionalProperties = nil
	}
	openObjects(s.AdditionalProperties)
	openObjects(s.Items)
	for _, p := range s.Properties {
		openObjects(p)
	}
	for _, x := range s.AnyOf {
		openObjects(x)
	}
}

// permissionShapes says what one Go type cannot: a permission event is a
// pending request (expiresAt, no decision) or its outcome (decision and
// who decided, no expiresAt), never both nor neither.
func permissionShapes(s *jsonschema.Schema) {
	absent := func(name string) *jsonschema.Schema {
		return &jsonschema.Schema{Not: &jsonschema.Schema{Required: []string{name}}}
	}
	s.OneOf = []*jsonschema.Schema{
		{Title: "pending", Required: []string{"expiresAt"}, AllOf: []*jsonschema.Schema{absent("decision")}},
		{Title: "decided", Required: []string{"decision", "by"}, AllOf: []*jsonschema.Schema{absent("expiresAt")}},
	}
}
