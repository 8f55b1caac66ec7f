package server

import (
	"net/http"

	"github.com/kaimon/kaimon/internal/apitype"
)

// routeHandlers serve apitype.Routes, by pattern: the routes are described
// there (internal/schema describes the API from them, and the CLI links
// that without the server), and served here.
var routeHandlers = map[string]func(*Server, http.ResponseWriter, *http.Request){
	"GET /v1/daemon":             (*Server).serveDaemon,
	"GET /v1/agents/{id}/events": (*Server).serveEvents,
	"GET /v1/events":             (*Server).serveStream,
	"GET /v1/agents/{id}/diff":   (*Server).serveDiff,
	"POST /v1/daemon/stop":       (*Server).serveStop,
}

func (s *Server) serveStop(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, 200, apitype.StopResult{Stopping: true})
	if s.Stop != nil {
		go s.Stop()
	}
}
