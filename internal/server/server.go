// Package server is kaimon-agentd's control API: HTTP/1.1 and JSON over a
// unix socket, one route per verb of the verb table (/v1/<verb>), JSON errors
// {"error","code"} with a fitting status. Only the socket's owner may
// connect: the directory is 0700, the socket 0600, and every connection's
// peer uid is checked (SO_PEERCRED).
package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"time"

	"github.com/kaimon/kaimon/internal/apitype"
	"github.com/kaimon/kaimon/internal/bus"
	"github.com/kaimon/kaimon/internal/event"
	"github.com/kaimon/kaimon/internal/unixsock"
	"github.com/kaimon/kaimon/internal/verbs"
	"github.com/kaimon/kaimon/internal/version"
)

// Counter reports agent counts for daemon status.
type Counter interface{ Counts() (live, dead int) }

// LogFaulter is a Counter that also reports failed event log writes.
type LogFaulter interface {
	LogFaults() (count int, lastAgent, lastError, at string)
}

// RecordFaulter is a Counter that also reports failed record writes.
type RecordFaulter interface {
	RecordFaults() (count int, lastAgent, lastError, at string)
}

// Server serves the verbs of svc.
type Server struct {
	Svc      verbs.Service
	Counts   Counter
	Socket   string
	CacheDir string
	// Door is the MCP door's URL, for daemon status.
	Door string
	// Bus reports the event bus in daemon status; Events feeds the event
	// streams of GET /v1/agents/{id}/events (events.go) and GET
	// /v1/events (stream.go).
	Bus    BusStats
	Events *bus.Local
	// Env is the daemon's environment fingerprints, for daemon status.
	Env map[string]string
	// Stop is called by POST /v1/daemon/stop.
	Stop    func()
	started time.Time
	mux     *http.ServeMux
}

// Handler returns the HTTP handler of the API.
func (s *Server) Handler() http.Handler {
	if s.mux != nil {
		return s.mux
	}
	s.started = time.Now()
	mux := http.NewServeMux()
	for _, v := range verbs.All {
		mux.HandleFunc(v.Route(), s.serveVerb(v))
	}
	for _, rt := range apitype.Routes {
		serve := routeHandlers[rt.Pattern()]
		if serve == nil {
			panic("server: no handler of route " + rt.Pattern())
		}
		mux.HandleFunc(rt.Pattern(), func(w http.ResponseWriter, r *http.Request) { serve(s, w, r) })
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeErr(w, verbs.NotFound("no route %s %s: the API is /v1/<verb> (%s)", r.Method, r.URL.Path, verbNames()))
	})
	s.mux = mux
	return mux
}

func verbNames() string {
	out := ""
	for i, v := range verbs.All {
		if i > 0 {
			out += ", "
		}
		out += v.Name
	}
	return out
}

// serveVerb decodes the arguments (a JSON body for POST; query parameters
// for GET of a read-only verb, so that `curl --unix-socket S
// http://x/v1/agent_list` works), calls the verb and writes its result. A
// verb that changes something takes only POST: a GET must not close an
// agent.
func (s *Server) serveVerb(v *verbs.Verb) http.HandlerFunc {
	allow, how := "POST", "use POST with a JSON body"
	if v.ReadOnly {
		allow, how = "GET, POST", "use POST with a JSON body, or GET with query parameters"
	}
	return func(w http.ResponseWriter, r *http.Request) {
		var raw []byte
		switch {
		case r.Method == http.MethodPost:
			b, err := verbs.ReadBody(w, r)
			if err != nil {
				writeErr(w, err)
				return
			}
			raw = b
		case r.Method == http.MethodGet && v.ReadOnly:
			b, err := queryArgs(v, r)
			if err != nil {
				writeErr(w, err)
				return
			}
			raw = b
		default:
			w.Header().Set("Allow", allow)
			writeErr(w, verbs.Errorf(verbs.CodeMethod, "%s does not take %s: %s", v.Name, r.Method, how))
			return
		}
		args, err := v.Decode(raw)
		if err != nil {
			writeErr(w, err)
			return
		}
		res, err := v.Call(r.Context(), s.Svc, args)
		if err != nil {
			writeErr(w, err)
			return
		}
		writeJSON(w, http.StatusOK, res)
	}
}

// agentID is the agent a route's path names ({id}): its whole id, when
// the service resolves a unique prefix (verbs.AgentResolver), so that the
// route reads that agent's files and follows its channel. An id the
// service does not know is kept as given: an agent of an earlier daemon,
// forgotten with its log kept, has its log read by its whole id.
func (s *Server) agentID(r *http.Request) (string, error) {
	id := r.PathValue("id")
	if !verbs.ValidAgentID(id) {
		return "", verbs.BadArg("agent id %q is not an agent id", id)
	}
	res, ok := s.Svc.(verbs.AgentResolver)
	if !ok {
		return id, nil
	}
	whole, err := res.ResolveAgentID(id)
	if err != nil {
		if verbs.AsError(err).Code == verbs.CodeNotFound {
			return id, nil
		}
		return "", err
	}
	return whole, nil
}

// queryArgs turns query parameters into a JSON object typed by the table.
func queryArgs(v *verbs.Verb, r *http.Request) ([]byte, error) {
	obj := map[string]any{}
	q := r.URL.Query()
	for name, vals := range q {
		var arg *verbs.Arg
		for i := range v.Args {
			if v.Args[i].Name == name {
				arg = &v.Args[i]
			}
		}
		if arg == nil {
			obj[name] = vals[0] // Decode reports the unknown argument
			continue
		}
		switch arg.Type {
		case verbs.TArray:
			obj[name] = vals
		case verbs.TString:
			obj[name] = vals[0]
		default:
			var x any
			if err := json.Unmarshal([]byte(vals[0]), &x); err != nil {
				return nil, verbs.BadArg("%s: argument %s must be a %s, not %q", v.Name, name, arg.Type, vals[0])
			}
			obj[name] = x
		}
	}
	return json.Marshal(obj)
}

func (s *Server) serveDaemon(w http.ResponseWriter, r *http.Request) {
	st := apitype.DaemonStatus{PID: os.Getpid(), Version: version.String(), API: apitype.APIVersion, Commit: version.CommitString(), Socket: s.Socket, CacheDir: s.CacheDir,
		StartedAt: s.started.UTC().Format(time.RFC3339Nano)}
	if s.Counts != nil {
		st.Live, st.Dead = s.Counts.Counts()
		if lf, ok := s.Counts.(LogFaulter); ok {
			f := &apitype.LogFaults{}
			f.Count, f.LastAgent, f.LastError, f.LastAt = lf.LogFaults()
			st.LogFaults = f
		}
		if rf, ok := s.Counts.(RecordFaulter); ok {
			f := &apitype.LogFaults{}
			f.Count, f.LastAgent, f.LastError, f.LastAt = rf.RecordFaults()
			st.RecordFaults = f
		}
	}
	st.Goroutines = runtime.NumGoroutine()
	st.Door = s.Door
	st.Env = s.Env
	if st.Env == nil {
		st.Env = map[string]string{}
	}
	if s.Bus != nil {
		bs := s.Bus.Stats()
		st.Bus = &bs
	}
	writeJSON(w, 200, st)
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	b, err := event.Marshal(v)
	if err != nil {
		b, _ = event.Marshal(verbs.AsError(err))
	}
	_, _ = w.Write(append(b, '\n'))
}

func writeErr(w http.ResponseWriter, err error) {
	e := verbs.AsError(err)
	writeJSON(w, e.HTTPStatus(), e)
}

// Listen binds the control socket: owner only (dir 0700, socket 0600, peer
// uid checked), a stale one replaced. One that answers means a daemon is
// already running, which is an error.
func Listen(sockDir, sock string) (net.Listener, error) {
	ln, err := unixsock.Listen(sock, "control socket")
	if errors.Is(err, unixsock.ErrInUse) {
		return nil, fmt.Errorf("kaimon-agentd is already running on %s (stop it with `kaimon daemon stop`)", sock)
	}
	return ln, err
}

// Serve runs the API on ln until ctx ends, then shuts down gracefully.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	hs := &http.Server{Handler: s.Handler(), ReadHeaderTimeout: verbs.ReadTimeout}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = hs.Shutdown(sctx)
	_ = os.Remove(filepath.Clean(s.Socket))
	return nil
}
