// Package schema describes kaimon's wire in JSON Schema (draft 2020-12)
// and OpenAPI 3.1: each verb's arguments (from the verb table) and result
// (from its Go type), the event envelope with each kind's data, and the
// daemon's HTTP routes. `kaimon schema`, the MCP tools' input and output
// schemas and the tests that check real output against them all take them
// from here, so that a shape is written once, by the code that encodes it.
//
// The Go types are turned into schemas by github.com/google/jsonschema-go;
// what this package adds is what a type cannot say on its own (the words
// of a string type such as apitype.AgentState, the arguments' defaults and
// ranges from the table), each said where it is added.
package schema

import (
	"encoding/json"
	"fmt"
	"reflect"
	"time"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/kaimon/kaimon/internal/apitype"
	"github.com/kaimon/kaimon/internal/event"
	"github.com/kaimon/kaimon/internal/verbs"
)

// Draft is the JSON Schema dialect of every document here.
const Draft = "https://json-schema.org/draft/2020-12/schema"

// typeSchemas are the schemas of the types whose JSON the library cannot
// infer from their Go kind: a json.RawMessage is any JSON, not an array of
// bytes; the string types with a closed list of words take the list from
// the package that owns it.
func typeSchemas() map[reflect.Type]*jsonschema.Schema {
	return map[reflect.Type]*jsonschema.Schema{
		reflect.TypeFor[json.RawMessage]():    {},
		reflect.TypeFor[time.Time]():          {Type: "string", Format: "date-time"},
		reflect.TypeFor[apitype.AgentState](): {Type: "string", Enum: words(apitype.AgentStates)},
		reflect.TypeFor[apitype.Decision]():   {Type: "string", Enum: words(apitype.Decisions)},
		reflect.TypeFor[event.Kind]():         {Type: "string", Enum: words(event.Kinds)},
	}
}

func words[T ~string](xs []T) []any {
	out := make([]any, len(xs))
	for i, x := range xs {
		out[i] = string(x)
	}
	return out
}

// forType is the schema of the JSON encoding/json makes of a value of t:
// a field with omitempty is optional, a slice or pointer may be null, a
// struct admits no other property.
func forType(t reflect.Type) *jsonschema.Schema {
	s, err := jsonschema.ForType(t, &jsonschema.ForOptions{TypeSchemas: typeSchemas()})
	if err != nil {
		// Only a type JSON cannot carry (a channel, a func) fails, and
		// no wire type has one: a test covers every type described.
		panic(fmt.Sprintf("schema: %v", err))
	}
	return s
}

// marshal encodes s; a schema built here always encodes.
func marshal(s *jsonschema.Schema) json.RawMessage {
	b, err := json.Marshal(s)
	if err != nil {
		panic(fmt.Sprintf("schema: %v", err))
	}
	return b
}

// VerbResult is the schema of v's result object, from the Go type its
// Service method returns.
func VerbResult(v *verbs.Verb) json.RawMessage { return marshal(verbResult(v)) }

func verbResult(v *verbs.Verb) *jsonschema.Schema {
	s := forType(v.Result)
	s.Title = v.Name + " result"
	return s
}

// VerbArgs is the schema of v's arguments, from the verb table: each
// argument's type, doc, default, enum and range, in the table's order;
// the required ones; no other argument (Decode refuses one).
func VerbArgs(v *verbs.Verb) json.RawMessage { return marshal(verbArgs(v)) }

func verbArgs(v *verbs.Verb) *jsonschema.Schema {
	s := &jsonschema.Schema{
		Type:                 "object",
		Properties:           map[string]*jsonschema.Schema{},
		AdditionalProperties: &jsonschema.Schema{Not: &jsonschema.Schema{}}, // false
	}
	for _, a := range v.Args {
		p := &jsonschema.Schema{Type: a.Type, Description: a.Doc}
		if a.Type == verbs.TArray {
			p.Items = &jsonschema.Schema{Type: verbs.TString}
		}
		if a.Default != nil {
			b, err := json.Marshal(a.Default)
			if err != nil {
				panic(fmt.Sprintf("schema: %s.%s default: %v", v.Name, a.Name, err))
			}
			p.Default = b
		}
		for _, e := range a.Enum {
			p.Enum = append(p.Enum, e)
		}
		if r := a.Range; r != nil {
			if r.MinExclusive {
				p.ExclusiveMinimum = jsonschema.Ptr(r.Min)
			} else {
				p.Minimum = jsonschema.Ptr(r.Min)
			}
			p.Maximum = jsonschema.Ptr(r.Max)
		}
		s.Properties[a.Name] = p
		s.PropertyOrder = append(s.PropertyOrder, a.Name)
		// RequiredUnless is not required here: the schema cannot say
		// "unless resume or fork is given" without if/then, which MCP clients
		// building forms ignore; the Doc says it, and Decode enforces it.
		if a.Required {
			s.Required = append(s.Required, a.Name)
		}
	}
	return s
}

// Subjects are the documents `kaimon schema` prints, by the name it
// takes them by.
var Subjects = []string{"events", "verbs", "openapi"}

// Document is the document of subject, one of Subjects.
func Document(subject string) (json.RawMessage, bool) {
	switch subject {
	case "events":
		return Events(), true
	case "verbs":
		return Verbs(), true
	case "openapi":
		return OpenAPI(), true
	}
	return nil, false
}
