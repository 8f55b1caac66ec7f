// Package redact keeps the credentials of an agent's environment out of
// what kaimon repeats of the agent's output to anyone but the agent: its
// events (and so the event log, the bus, `kaimon tail`, agent_output, the
// MCP resources and the fleet's clients, which all read them), its open
// and exit errors, and its pending permission requests. An agent program
// that prints its environment (on stderr, which kaimon quotes when it
// fails, or in a tool's output) must not put ANTHROPIC_API_KEY in the log.
//
// One Redactor is made per agent from the environment it was given and
// its door token, and applied once, where the agent's text becomes
// kaimon's (the session manager's publish, its start and exit); the
// consumers do not redact. What is sent to the agent (its prompts, its
// environment, its MCP config) is never redacted.
package redact

import (
	"bytes"
	"slices"
	"strings"

	"github.com/kaimon/kaimon/internal/event"
)

// MinLen is the shortest value that is redacted. A shorter one is no
// secret worth the name (it is guessed), and would be replaced wherever
// it occurs in ordinary text: FOO_TOKEN=1 or X_KEY=true would mangle
// every "1" and "true" an agent prints.
const MinLen = 8

// Credential reports whether the environment variable name says its value
// is a credential: a name ending in _KEY, _TOKEN or _SECRET, or holding
// PASSWORD, in any case. It is the one list of these patterns: the
// daemon's environment fingerprints (config.EnvFingerprints) use it too.
func Credential(name string) bool {
	u := strings.ToUpper(name)
	for _, suffix := range []string{"_KEY", "_TOKEN", "_SECRET"} {
		if strings.HasSuffix(u, suffix) {
			return true
		}
	}
	return strings.Contains(u, "PASSWORD")
}

// A Secret is a value to redact and the name its marker gives.
type Secret struct {
	Name, Value string
	// Whole: the secret is replaced where an event or a delta holds it
	// whole, but a delta's tail that may begin it is not held back
	// (Stream). For a random token the model is never given (the door
	// token is in a header the agent program sends and in its 0600
	// config, and reaches output in whole events: its stderr, a tool's
	// result): holding back every delta that ends in its first hex
	// digit would reshape one stream in sixteen for nothing.
	Whole bool
}

// DoorToken names the door token in its marker.
const DoorToken = "kaimon door token"

// Marker is what replaces a secret called name.
func Marker(name string) string { return "[redacted " + name + "]" }

type secret struct {
	value, mark string
	whole       bool // Secret.Whole
	// jvalue and jmark are value and mark as they are inside a JSON
	// string, the way kaimon's encoder writes it (event.AppendString).
	jvalue, jmark string
}

// A Redactor replaces the secrets it was made with. Its methods may be
// called on nil, which redacts nothing, and from any goroutine.
type Redactor struct {
	secrets []secret // longest first: a secret holding another goes whole
}

// New returns the Redactor of the credentials in env (name=value pairs
// whose names Credential takes) and of extra, or nil when there is none.
// Values shorter than MinLen are left alone (see MinLen). A value set
// under two names is replaced by the first one's marker.
func New(env []string, extra ...Secret) *Redactor {
	var all []Secret
	for _, kv := range env {
		if name, val, ok := strings.Cut(kv, "="); ok && Credential(name) {
			all = append(all, Secret{Name: name, Value: val})
		}
	}
	all = append(all, extra...)
	r := &Redactor{}
	seen := map[string]bool{}
	for _, s := range all {
		if len(s.Value) < MinLen || seen[s.Value] {
			continue
		}
		seen[s.Value] = true
		mark := Marker(s.Name)
		r.secrets = append(r.secrets, secret{value: s.Value, mark: mark, whole: s.Whole, jvalue: jsonInner(s.Value), jmark: jsonInner(mark)})
	}
	if len(r.secrets) == 0 {
		return nil
	}
	slices.SortStableFunc(r.secrets, func(a, b secret) int { return len(b.value) - len(a.value) })
	return r
}

// jsonInner is s encoded as a JSON string, without its quotes.
func jsonInner(s string) string {
	b := event.AppendString(nil, s)
	return string(b[1 : len(b)-1])
}

// String returns s with every secret replaced by its marker.
func (r *Redactor) String(s string) string {
	if r == nil {
		return s
	}
	for _, sc := range r.secrets {
		if strings.Contains(s, sc.value) {
			s = strings.ReplaceAll(s, sc.value, sc.mark)
		}
	}
	return s
}

// JSON returns JSON text b with every secret inside its strings replaced
// by its marker, and whether it replaced any; b itself is never written
// into (an event's data may be shared). A secret is found as JSON encodes
// it with no more escapes than JSON needs, which is how kaimon and the
// agent programs write it.
func (r *Redactor) JSON(b []byte) ([]byte, bool) {
	if r == nil {
		return b, false
	}
	changed := false
	for _, sc := range r.secrets {
		if bytes.Contains(b, []byte(sc.jvalue)) {
			b = bytes.ReplaceAll(b, []byte(sc.jvalue), []byte(sc.jmark)) // a copy
			changed = true
		}
	}
	return b, changed
}

// Event returns ev with the secrets in its data replaced. An event without
// one is returned as it is, with no copy.
func (r *Redactor) Event(ev event.Event) event.Event {
	if b, ok := r.JSON(ev.Data); ok {
		// A marker needs no more escaping than the value it replaces
		// (jmark), so the data stays compact, valid JSON, as ev says.
		ev.Data = b
	}
	return ev
}

// Error returns err with its message redacted; errors.Is and errors.As
// still see what it wraps (a backend.ErrNotFound, a verbs.Error's code).
// An error without a secret is returned as it is.
func (r *Redactor) Error(err error) error {
	if err == nil || r == nil {
		return err
	}
	msg := err.Error()
	if red := r.String(msg); red != msg {
		return &redacted{msg: red, err: err}
	}
	return err
}

type redacted struct {
	msg string
	err error
}

func (e *redacted) Error() string { return e.msg }
func (e *redacted) Unwrap() error { return e.err }

// holdFrom is where the tail of s begins that is the beginning of a
// secret (len(s) when none): a secret split across two deltas shows only
// once the second is read, so the first's tail is held back until then.
// The longest such tail is held. jsonForm matches the secrets as JSON
// text has them (a tool's partial input).
func (r *Redactor) holdFrom(s string, jsonForm bool) int {
	at := len(s)
	for _, sc := range r.secrets {
		if sc.whole {
			continue
		}
		v := sc.value
		if jsonForm {
			v = sc.jvalue
		}
		for i := max(0, len(s)-len(v)+1); i < at; i++ {
			j := strings.IndexByte(s[i:at], v[0])
			if j < 0 {
				break
			}
			if i += j; strings.HasPrefix(v, s[i:]) {
				at = i
				break
			}
		}
	}
	return at
}
