package verbs

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"
)

// example is a full argument object for v: every argument with a value
// of its type (the first of its Enum for a string that has one).
func example(v *Verb) []byte {
	m := map[string]any{}
	for _, a := range v.Args {
		switch a.Type {
		case TString:
			m[a.Name] = "x"
			if len(a.Enum) > 0 {
				m[a.Name] = a.Enum[0]
			}
		case TInteger:
			m[a.Name] = 1
		case TNumber:
			m[a.Name] = 1.5
		case TBoolean:
			m[a.Name] = true
		case TArray:
			m[a.Name] = []string{"a"}
		}
	}
	b, _ := json.Marshal(m)
	return b
}

// emptyToNil sets the empty slices of the struct args points to to nil:
// omitempty drops an empty array from the encoding, so [] comes back as
// absent. Only agent_open with resume tells the two apart (Inherit copies
// into a nil slice, not into an empty one); that is a known limit of the
// wire format, not something this target checks.
func emptyToNil(args any) any {
	rv := reflect.ValueOf(args).Elem()
	for i := 0; i < rv.NumField(); i++ {
		if f := rv.Field(i); f.Kind() == reflect.Slice && f.Len() == 0 {
			f.SetZero()
		}
	}
	return args
}

// FuzzDecode decodes arbitrary JSON as the arguments of every verb (the
// first input picks the verb). A refusal must be a bad_argument *Error;
// what is accepted must survive a round trip: encoded and decoded again,
// it is accepted and decodes to the same struct, so a client that relays
// arguments (the CLI, the MCP door) cannot change what the daemon sees.
func FuzzDecode(f *testing.F) {
	for i, v := range All {
		f.Add(uint8(i), []byte(`{}`))
		f.Add(uint8(i), []byte(``))
		f.Add(uint8(i), example(v))
		f.Add(uint8(i), []byte(`{"cwd":"/","agent_ids":[],"allowed_tools":[]}`))
		f.Add(uint8(i), []byte(`{"agent_id":"a","text":"hi","cwd":"/","resume":true,"id":"x"}`))
	}
	f.Fuzz(func(t *testing.T, i uint8, raw []byte) {
		v := All[int(i)%len(All)]
		a, err := v.Decode(raw)
		if err != nil {
			var e *Error
			if !errors.As(err, &e) || e.Code != CodeBadArgument {
				t.Fatalf("%s: %q: error %#v is not a bad_argument *Error", v.Name, raw, err)
			}
			return
		}
		b, err := json.Marshal(a)
		if err != nil {
			t.Fatalf("%s: %q: accepted arguments do not encode: %v", v.Name, raw, err)
		}
		a2, err := v.Decode(b)
		if err != nil {
			t.Fatalf("%s: %q accepted, but its encoding %s is refused: %v", v.Name, raw, b, err)
		}
		if !reflect.DeepEqual(emptyToNil(a), emptyToNil(a2)) {
			t.Fatalf("%s: %q decodes to %+v, its encoding %s to %+v", v.Name, raw, a, b, a2)
		}
	})
}
