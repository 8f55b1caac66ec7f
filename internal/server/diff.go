package server

import (
	"net/http"

	"github.com/kaimon/kaimon/internal/apitype"
	"github.com/kaimon/kaimon/internal/event"
	"github.com/kaimon/kaimon/internal/verbs"
)

// serveDiff is GET /v1/agents/{id}/diff?stat=1: the agent's whole diff, of
// any size, as git writes it (verbs.DiffWriter), while agent_diff's JSON
// answer is cut at verbs.DiffMax. The daemon holds a buffer's worth of it
// at a time: what a diff costs it is the same for a line as for a
// gigabyte. The status comes with the first byte, so an error before
// that is agent_diff's, with its status; how the diff ended comes after
// it, in a trailer (apitype.DiffTrailer, or apitype.DiffErrorTrailer).
func (s *Server) serveDiff(w http.ResponseWriter, r *http.Request) {
	id, err := s.agentID(r)
	if err != nil {
		writeErr(w, err)
		return
	}
	stat, err := flag(r.URL.Query(), "stat")
	if err != nil {
		writeErr(w, err)
		return
	}
	dw, ok := s.Svc.(verbs.DiffWriter)
	if !ok {
		writeErr(w, verbs.Errorf(verbs.CodeUnavailable, "this daemon cannot stream a diff: ask POST /v1/agent_diff, whose answer is cut at %d KiB", verbs.DiffMax>>10))
		return
	}
	body := &diffBody{w: w}
	res, err := dw.WriteDiff(r.Context(), &verbs.DiffArgs{AgentID: id, Stat: stat}, body)
	if err != nil && !body.started {
		writeErr(w, err)
		return
	}
	body.start() // an empty diff has had no write
	if err != nil {
		b, _ := event.Marshal(verbs.AsError(err))
		w.Header().Set(apitype.DiffErrorTrailer, string(b))
		return
	}
	b, _ := event.Marshal(res)
	w.Header().Set(apitype.DiffTrailer, string(b))
}

// diffBody is the diff's response body: its headers go at the first
// write, declaring the trailers that say how the diff ended.
type diffBody struct {
	w       http.ResponseWriter
	started bool
}

func (d *diffBody) start() {
	if d.started {
		return
	}
	d.started = true
	h := d.w.Header()
	h.Set("Content-Type", apitype.DiffContentType)
	h.Set("Cache-Control", "no-store")
	h.Set("Trailer", apitype.DiffTrailer+", "+apitype.DiffErrorTrailer)
	d.w.WriteHeader(http.StatusOK)
}

func (d *diffBody) Write(p []byte) (int, error) {
	d.start()
	return d.w.Write(p)
}
