package apitype

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// SinceForm is the accepted form of the since parameter of GET /v1/events,
// spelled out in the error a bad one gets.
const SinceForm = "since=ID:SEQ,ID:SEQ,… (an agent id and the last seq the client has of it, for each agent it resumes)"

// StreamSinceHeader is the header of GET /v1/events that says, in the
// since form, where the stream starts each agent the daemon had at the
// request: what a client that resumes names for the agents it has seen
// nothing of.
const StreamSinceHeader = "Kaimon-Since"

// FormatSince writes the since parameter of GET /v1/events: for each
// agent, the last seq the client has, as ID:SEQ joined by commas, in id
// order (so that the same positions make the same request). A client that
// resumes a stream sends it; ParseSince reads it.
func FormatSince(last map[string]uint64) string {
	ids := make([]string, 0, len(last))
	for id := range last {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	var b strings.Builder
	for i, id := range ids {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(id)
		b.WriteByte(':')
		b.WriteString(strconv.FormatUint(last[id], 10))
	}
	return b.String()
}

// ParseSince reads what FormatSince writes; "" is no agent. It checks the
// form only: whether each id is an agent id is the caller's to say.
func ParseSince(s string) (map[string]uint64, error) {
	last := map[string]uint64{}
	if s == "" {
		return last, nil
	}
	for _, item := range strings.Split(s, ",") {
		id, seq, ok := strings.Cut(item, ":")
		if !ok || id == "" {
			return nil, fmt.Errorf("since item %q is not ID:SEQ; the form is %s", item, SinceForm)
		}
		n, err := strconv.ParseUint(seq, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("since item %q: %q is not a seq (a number from 0); the form is %s", item, seq, SinceForm)
		}
		if _, dup := last[id]; dup {
			return nil, fmt.Errorf("since names agent %s twice; the form is %s", id, SinceForm)
		}
		last[id] = n
	}
	return last, nil
}
