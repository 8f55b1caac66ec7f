// Package door is kaimon-agentd's MCP door: the MCP server, over
// streamable HTTP on 127.0.0.1, that the agents kaimon owns call back into.
// Each agent is admitted with a secret token that kaimon writes into the
// MCP config it generates for that agent; a request without a valid token
// gets nothing (401). The door applies the calling agent's permission
// preset at tools/call (and under only at tools/list), for every backend,
// and runs the verbs in-process against the session manager.
package door

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/server"

	"github.com/kaimon/kaimon/internal/backend"
	"github.com/kaimon/kaimon/internal/confine"
	"github.com/kaimon/kaimon/internal/mcpserver"
	"github.com/kaimon/kaimon/internal/policy"
	"github.com/kaimon/kaimon/internal/verbs"
)

// Path is the door's MCP endpoint.
const Path = "/mcp"

// Door serves kaimon's verbs to owned agents. Its zero value is not usable;
// use New.
type Door struct {
	handler http.Handler
	ln      net.Listener
	url     string

	mu     sync.Mutex
	agents map[string]*caller // by agent id
}

// caller is an admitted agent: its token and its policy.
type caller struct {
	id    string
	token string
	opts  backend.Options
	pol   *policy.Policy
}

type callerKey struct{}

// New makes a door that runs verbs against svc.
func New(svc verbs.Service) *Door {
	d := &Door{agents: map[string]*caller{}}
	s := mcpserver.New(svc, mcpserver.Options{
		Check:   d.check,
		Visible: d.visible,
		Instructions: mcpserver.Instructions + " You are an agent kaimon owns: your permission preset applies here, " +
			"and by default the recursion guard refuses every agent_* tool.",
	})
	d.handler = server.NewStreamableHTTPServer(s, server.WithEndpointPath(Path))
	return d
}

// Listen binds the door on addr, normally 127.0.0.1:0 (a free port).
func (d *Door) Listen(addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("kaimon MCP door: %w", err)
	}
	d.ln = ln
	d.url = "http://" + ln.Addr().String() + Path
	return nil
}

// URL is the door's endpoint, http://127.0.0.1:PORT/mcp; "" before Listen.
func (d *Door) URL() string { return d.url }

// Port is the door's TCP port; 0 before Listen.
func (d *Door) Port() int {
	if d.ln == nil {
		return 0
	}
	return d.ln.Addr().(*net.TCPAddr).Port
}

// Serve serves until ctx ends. Agents' open streams are cut then.
func (d *Door) Serve(ctx context.Context) error {
	if d.ln == nil {
		return errors.New("kaimon MCP door: Serve before Listen")
	}
	hs := &http.Server{Handler: d, ReadHeaderTimeout: verbs.ReadTimeout}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(d.ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if hs.Shutdown(sctx) != nil {
		hs.Close() // SSE streams do not end by themselves
	}
	<-errc
	return nil
}

// Admit lets agent o.ID in with o's policy (resolved at open) and returns
// its fresh token, replacing an earlier one of the same id. Options
// without a policy are a kaimon bug: Admit panics rather than guess one.
func (d *Door) Admit(o backend.Options) string {
	if err := o.Check(); err != nil {
		panic("kaimon MCP door: " + err.Error())
	}
	pol := o.Policy
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	c := &caller{id: o.ID, token: hex.EncodeToString(b), opts: o, pol: pol}
	c.opts.Ask, c.opts.Env = nil, nil
	d.mu.Lock()
	d.agents[o.ID] = c
	d.mu.Unlock()
	return c.token
}

// Revoke shuts the door to agent id, if token is still its token (a
// reopened agent has a new one).
func (d *Door) Revoke(id, token string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if c := d.agents[id]; c != nil && c.token == token {
		delete(d.agents, id)
	}
}

// ServeHTTP authenticates the caller by its id and token, then serves MCP.
func (d *Door) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c := d.authenticate(r)
	if c == nil {
		w.Header().Set("WWW-Authenticate", `Bearer realm="kaimon"`)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		json.NewEncoder(w).Encode(map[string]string{
			"error": "kaimon's MCP door admits only the agents kaimon owns, with the token of the MCP config kaimon generated for them",
			"code":  "unauthorized",
		})
		return
	}
	if r.Body != nil && r.Body != http.NoBody {
		// Bounded before anything reads it: mcp-go reads a body whole.
		b, err := verbs.ReadBody(w, r)
		if err != nil {
			e := verbs.AsError(err)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(e.HTTPStatus())
			json.NewEncoder(w).Encode(e)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(b))
	}
	if r.URL.Path == backend.ToolCheckPath {
		d.serveToolCheck(w, r, c) // an ACP agent's bridge (toolcheck.go)
		return
	}
	// The caller's policy goes with the request as the parent's, so that
	// an agent it opens is capped at it where its policy is resolved
	// (policy.ForOpen), after a resume or fork filled in its options.
	ctx := policy.WithCaller(context.WithValue(r.Context(), callerKey{}, c), c.pol)
	d.handler.ServeHTTP(w, r.WithContext(ctx))
}

// authenticate returns the admitted agent the request's headers name and
// prove, or nil.
func (d *Door) authenticate(r *http.Request) *caller {
	id := r.Header.Get(backend.HeaderAgent)
	token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if id == "" || !ok || token == "" {
		return nil
	}
	d.mu.Lock()
	c := d.agents[id]
	d.mu.Unlock()
	if c == nil || subtle.ConstantTimeCompare([]byte(token), []byte(c.token)) != 1 {
		return nil
	}
	return c
}

func callerOf(ctx context.Context) *caller {
	c, _ := ctx.Value(callerKey{}).(*caller)
	return c
}

// check applies the caller's policy to a tools/call.
func (d *Door) check(ctx context.Context, v *verbs.Verb, args any) error {
	c := callerOf(ctx)
	if c == nil {
		return errors.New("kaimon's MCP door does not know the calling agent")
	}
	err := c.pol.DoorCheck(v.Name)
	if err == nil {
		switch a := args.(type) {
		case *verbs.PermitArgs:
			if a.AgentID == c.id {
				err = errors.New("an agent cannot answer its own permission requests: the agent or person that drives it answers them")
			}
		case *verbs.OpenArgs:
			err = confineOpen(c.opts.Cwd, a)
		}
	}
	if err != nil {
		log.Printf("door: agent %s: %s refused: %v", c.id, v.Name, err)
		return err
	}
	log.Printf("door: agent %s calls %s", c.id, v.Name)
	return nil
}

// visible hides, under only, the kaimon tools the caller's allowlist does
// not name.
func (d *Door) visible(ctx context.Context, v *verbs.Verb) bool {
	c := callerOf(ctx)
	return c != nil && c.pol.DoorVisible(v.Name)
}

// Info is what <sock_dir>/door.json records.
type Info struct {
	URL  string `json:"url"`
	Port int    `json:"port"`
	PID  int    `json:"pid"`
}

// WriteInfo records the door's address in path (mode 0600).
func (d *Door) WriteInfo(path string) error {
	b, err := json.Marshal(Info{URL: d.URL(), Port: d.Port(), PID: os.Getpid()})
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// confineOpen holds the path arguments of an agent_open an owned agent makes
// (cwd, mcp_config) to the caller's own cwd, as the spec's door rule says:
// an agent may open agents in its directory, not elsewhere. A relative path
// is taken from the caller's cwd, as the agent sees it, and made absolute in
// a so that the daemon does not read it against its own directory.
func confineOpen(callerCwd string, a *verbs.OpenArgs) error {
	root, err := confine.New(callerCwd)
	if err != nil {
		return fmt.Errorf("the calling agent's cwd %s: %w", callerCwd, err)
	}
	for _, p := range []*string{&a.Cwd, &a.MCPConfig} {
		if *p == "" {
			continue
		}
		path := *p
		if !filepath.IsAbs(path) {
			path = filepath.Join(root.Dir(), path)
		}
		real, err := root.Resolve(path)
		if err != nil {
			return fmt.Errorf("agent_open from an agent kaimon owns: %w: an owned agent may only name paths inside its own directory", err)
		}
		*p = real
	}
	return nil
}
