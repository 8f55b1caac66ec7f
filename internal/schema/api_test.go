package schema

import (
	"encoding/json"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/kaimon/kaimon/internal/apitype"
	"github.com/kaimon/kaimon/internal/event"
	"github.com/kaimon/kaimon/internal/verbs"
)

// Verbs holds every verb's arguments and result, as VerbArgs and
// VerbResult give them, and the error object with every code.
func TestVerbs(t *testing.T) {
	doc := Verbs()
	var d struct {
		Schema string                     `json:"$schema"`
		Defs   map[string]json.RawMessage `json:"$defs"`
	}
	if err := json.Unmarshal(doc, &d); err != nil || d.Schema != Draft {
		t.Fatalf("%v: %.200s", err, doc)
	}
	compile(t, doc, "")
	for _, v := range verbs.All {
		check(t, compile(t, doc, "#/$defs/"+v.Name+"_result"), v.Name+" result", filled[v.Name], true)
		args := compile(t, doc, "#/$defs/"+v.Name+"_args")
		check(t, args, v.Name+" args with another", map[string]any{"bogus": 1}, false)
	}
	if len(d.Defs) != 2*len(verbs.All)+1 {
		t.Errorf("$defs %d, want args and result of %d verbs and error", len(d.Defs), len(verbs.All))
	}
	errs := compile(t, doc, "#/$defs/error")
	for _, c := range verbs.Codes {
		check(t, errs, c, verbs.Errorf(c, "it failed"), true)
	}
	check(t, errs, "run's failure with its text", &verbs.Error{Code: verbs.CodeTurnFailed, Message: "x", Text: "partial"}, true)
	check(t, errs, "an unknown code", verbs.Errorf("oops", "it failed"), false)
	check(t, errs, "no message", map[string]any{"code": verbs.CodeInternal}, false)
}

// The OpenAPI document has every verb's route (GET too for a read-only
// one) and every route of apitype.Routes, with each error status; every
// $ref names a component, and every component is a schema that compiles.
func TestOpenAPI(t *testing.T) {
	doc := OpenAPI()
	var d struct {
		OpenAPI    string `json:"openapi"`
		Dialect    string `json:"jsonSchemaDialect"`
		Info       struct{ Title, Version string }
		Paths      map[string]map[string]operation
		Components struct {
			Schemas map[string]json.RawMessage
		}
	}
	if err := json.Unmarshal(doc, &d); err != nil {
		t.Fatal(err)
	}
	if d.OpenAPI != "3.1.0" || d.Dialect != Draft || d.Info.Title == "" || d.Info.Version != fmt.Sprint(apitype.APIVersion) {
		t.Errorf("openapi %q, dialect %q, info %+v", d.OpenAPI, d.Dialect, d.Info)
	}
	want := map[string][]string{}
	for _, v := range verbs.All {
		want[v.Route()] = []string{"post"}
		if v.ReadOnly {
			want[v.Route()] = []string{"get", "post"}
		}
	}
	for _, rt := range apitype.Routes {
		want[rt.Path] = append(want[rt.Path], strings.ToLower(rt.Method))
	}
	if len(d.Paths) != len(want) {
		t.Errorf("%d paths, want %d", len(d.Paths), len(want))
	}
	ids := map[string]bool{}
	for path, methods := range want {
		slices.Sort(methods)
		var got []string
		for m, op := range d.Paths[path] {
			got = append(got, m)
			if op.OperationID == "" || ids[op.OperationID] || op.Summary == "" || op.Responses["200"].Description == "" {
				t.Errorf("%s %s: operation %+v", m, path, op)
			}
			ids[op.OperationID] = true
			for _, c := range verbs.Codes {
				st := fmt.Sprint((&verbs.Error{Code: c}).HTTPStatus())
				if !strings.Contains(op.Responses[st].Description, c) {
					t.Errorf("%s %s: no %s response for %s", m, path, st, c)
				}
			}
			for _, p := range op.Parameters {
				if p.In == "path" && !strings.Contains(path, "{"+p.Name+"}") || p.In != "path" && p.In != "query" {
					t.Errorf("%s %s: parameter %+v", m, path, p)
				}
			}
		}
		slices.Sort(got)
		if !slices.Equal(got, methods) {
			t.Errorf("%s: methods %v, want %v", path, got, methods)
		}
	}
	for _, v := range verbs.All {
		if v.ReadOnly && len(d.Paths[v.Route()]["get"].Parameters) != len(v.Args) {
			t.Errorf("GET %s: parameters %+v, want its arguments", v.Route(), d.Paths[v.Route()]["get"].Parameters)
		}
	}
	for _, m := range regexp.MustCompile(`"\$ref":"#/components/schemas/([^"]+)"`).FindAllSubmatch(doc, -1) {
		if d.Components.Schemas[string(m[1])] == nil {
			t.Errorf("$ref to %s, which is no component", m[1])
		}
	}
	for name := range d.Components.Schemas {
		compile(t, doc, "#/components/schemas/"+name)
	}
	// The embedded events schema resolves its own $defs.
	env := compile(t, doc, "#/components/schemas/envelope")
	e := event.New(event.Status, 1, event.StatusData{Status: apitype.Dead}).Stamp("ab12", 3, ts)
	check(t, env, "an envelope", &e, true)
	e.Data = json.RawMessage(`{"status":"sleeping"}`)
	check(t, env, "status sleeping", &e, false)
	st := compile(t, doc, "#/components/schemas/daemon_status")
	check(t, st, "daemon status", apitype.DaemonStatus{PID: 1, Version: "v", Socket: "/s", Env: map[string]string{"k": "v"},
		Bus: &apitype.BusStats{Endpoints: []string{"ipc://x"}}}, true)
	check(t, st, "daemon status without pid", map[string]any{"version": "v"}, false)
	for _, rt := range apitype.Routes {
		if rt.Result != nil && d.Components.Schemas[snake(rt.Result.Name())] == nil {
			t.Errorf("%s %s: its result %v is no component", rt.Method, rt.Path, rt.Result)
		}
	}
	if reflect.TypeFor[apitype.StopResult]().Name() != "StopResult" || snake("DaemonStatus") != "daemon_status" {
		t.Error("snake")
	}
}

type operation struct {
	OperationID string `json:"operationId"`
	Summary     string
	Parameters  []struct {
		Name, In string
		Schema   json.RawMessage
	}
	Responses map[string]struct{ Description string }
}

// Every subject has its document, and nothing else does.
func TestDocument(t *testing.T) {
	for _, s := range Subjects {
		if doc, ok := Document(s); !ok || !json.Valid(doc) {
			t.Errorf("subject %s: %v", s, ok)
		}
	}
	if _, ok := Document("event"); ok {
		t.Error("an unknown subject has a document")
	}
}
