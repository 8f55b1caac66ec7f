package fleet

import (
	"context"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/kaimon/kaimon/internal/apitype"
	"github.com/kaimon/kaimon/internal/client"
	"github.com/kaimon/kaimon/internal/config"
	"github.com/kaimon/kaimon/internal/verbs"
	"github.com/kaimon/kaimon/internal/version"
)

// SplitID reads a qualified id or channel, NAME/ID or NAME/agent:ID, at its
// first '/'. Neither an agent id (verbs.ValidAgentID) nor a host name holds
// one, so an id without '/' is never mistaken for a qualified one; and what
// stands before the '/' must be spelled as a host's name, so that a bad id
// such as ../x stays an id, for the daemon to refuse as one.
func SplitID(s string) (host, id string, qualified bool) {
	host, id, qualified = strings.Cut(s, "/")
	if !qualified || !nameSyntax(host) {
		return "", s, false
	}
	return host, id, true
}

// Qualify is how an id of host is shown so that it can be pasted back:
// NAME/ID for a configured host, the bare id on this machine (and on a
// host given as a URL, which only --host can name again).
func Qualify(host, id string) string {
	if host == "" || host == Local || isURL(host) || id == "" {
		return id
	}
	return host + "/" + id
}

// Requalify is the whole id whole of the agent that given named (a
// unique prefix of it, resolved by its host's daemon), qualified as
// given was: HOST/, local/ or bare.
func Requalify(given, whole string) string {
	if host, _, ok := SplitID(given); ok {
		return host + "/" + whole
	}
	return whole
}

func isURL(s string) bool { return strings.Contains(s, "://") }

// Fleet is the hosts one command may reach, and a verbs.Service that
// routes each call to the host its id names (NAME/ID), else to Default,
// with the qualifier stripped: a command need not know which host it
// drives. A host's client is made, and its first exchange done, once it
// succeeds.
type Fleet struct {
	Paths config.Paths
	// Hosts are the configured hosts; nil: read from Paths.ConfigFile
	// when a host's name is first used, so that a command on this
	// machine alone never reads the file.
	Hosts   map[string]Host
	loadErr error
	// Default is the host of an id that names none: --host, else
	// KAIMON_HOST, else local (""). A configured name, local, or a URL.
	Default string
	// Pinned says Default came from --host: an id qualified with another
	// host contradicts it.
	Pinned bool
	// Local is this machine's daemon's client; nil: client.New().
	Local *client.Client
	// Warn receives the warning of a host whose daemon runs another build,
	// and of a host that placement passed over; nil: none.
	Warn io.Writer
	// AllHosts makes List list every host's agents (ListAll): what
	// `kaimon mcp` serves when hosts are configured.
	AllHosts bool
	// URLs lets a host be given as a URL (ssh://…, kube://…) as well as
	// by name: the CLI's fleet (New), whose hosts come from the person's
	// own --host and KAIMON_HOST. Left false (kaimon mcp's fleet), a host
	// is a configured name, local or any, and nothing else: there hosts
	// come from an MCP client, which may be a model reading untrusted
	// text, and a URL would have kaimon run ssh or kubectl to wherever
	// it says with the person's keys and contexts. Adding a URL is the
	// person's, with `kaimon host add`. Check applies it, and every host
	// a call names passes through Check before a transport is made.
	URLs bool

	mu      sync.Mutex
	remotes map[string]*remote
	// dialRemote replaces RemoteClient in tests: a daemon served without
	// ssh.
	dialRemote func(host string) (*client.Client, error)
	// transport replaces Transport in tests: a fake ssh.
	transport func(host string) (*SSH, error)
}

// remote is one host's client, made by its first exchange. A failed
// exchange is not kept: a long-lived fleet (kaimon mcp's) tries a host
// that was down again at its next call.
type remote struct {
	mu sync.Mutex
	cl *client.Client
}

// New is the CLI's fleet: the hosts configured in paths.ConfigFile, with
// def (--host or KAIMON_HOST; "" is local) checked: a name not configured
// is a usage error. A URL is accepted (URLs), as the person gave it.
//
// def may be Any: open places its agent then (Open), while every command
// that reaches an existing agent by a bare id gets Check's error for it.
func New(paths config.Paths, def string, pinned bool) (*Fleet, error) {
	f := &Fleet{Paths: paths, Default: def, Pinned: pinned, URLs: true}
	if def != Any {
		if err := f.Check(def); err != nil {
			return nil, err
		}
	}
	return f, nil
}

// Check says whether name can pick a host: "" or local (this machine), a
// configured name, or, when the fleet takes URLs, a URL of an accepted
// form.
func (f *Fleet) Check(name string) error {
	switch {
	case name == "" || name == Local:
		return nil
	case name == Any:
		all, err := f.All()
		if err != nil {
			all = []string{Local} // the config file's error is said where a host's name is read
		}
		return usagef("host %q places a new agent on the least busy host, which this command cannot do: name a host (%s)", Any, strings.Join(all, ", "))
	case isURL(name) && f.URLs:
		_, err := ParseURL(name)
		return err
	}
	hosts, err := f.known()
	if err != nil {
		return err
	}
	if isURL(name) {
		return namesOnly(name, hosts)
	}
	if _, ok := hosts[name]; !ok {
		return f.unknownHost(name, hosts)
	}
	return nil
}

// unknownHost is the error for a name that is not configured; the URL
// forms are named only where a URL would be taken.
func (f *Fleet) unknownHost(name string, hosts map[string]Host) error {
	if f.URLs {
		return unknownHost(name, hosts)
	}
	return usagef("no host is named %q: %s; a host here is one of them or %s (this machine)", shorten(name), configured(hosts), Local)
}

// namesOnly is the error for a URL given to a fleet that takes names
// only (URLs): it says how the person makes the URL a name. (openHost
// adds any to the names it lists.)
func namesOnly(url string, hosts map[string]Host) error {
	return usagef("host %q is a URL, but here a host is named: a URL is the person's to add (in a shell, `kaimon host add NAME URL`), "+
		"and then to name; %s; a host here is one of them or %s (this machine)", shorten(url), configured(hosts), Local)
}

// shorten is s as an error quotes it: whole up to 100 bytes, else its
// start and how long it is, so that a huge argument is not echoed back.
func shorten(s string) string {
	const max = 100
	if len(s) <= max {
		return s
	}
	return fmt.Sprintf("%s… (%d bytes)", strings.ToValidUTF8(s[:max], ""), len(s))
}

// known are the configured hosts, read once.
func (f *Fleet) known() (map[string]Host, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.Hosts == nil && f.loadErr == nil {
		f.Hosts, f.loadErr = LoadHosts(f.Paths.ConfigFile)
	}
	return f.Hosts, f.loadErr
}

// IsLocal says whether name is this machine.
func IsLocal(name string) bool { return name == "" || name == Local }

// Route reads a possibly qualified id: the host it names (else Default)
// and the bare id. An unknown host, or one that contradicts --host, is a
// usage error.
func (f *Fleet) Route(id string) (host, bare string, err error) {
	h, bare, ok := SplitID(id)
	if !ok {
		return f.Default, id, nil
	}
	if bare == "" {
		return "", "", usagef("%q is not an id: a qualified id is HOST/ID", id)
	}
	if err := f.Check(h); err != nil {
		return "", "", fmt.Errorf("the id %s: %w", id, err)
	}
	// --host any picks no existing agent's host: an id it placed, which
	// names its host, goes there (run -C's turn, after its open).
	if f.Pinned && f.Default != Any && normal(h) != normal(f.Default) {
		return "", "", usagef("the id %s is on host %s, but --host names %s: drop one of them", id, h, normal(f.Default))
	}
	return h, bare, nil
}

func normal(host string) string {
	if host == "" {
		return Local
	}
	return host
}

// Client is host's client (Default's for ""), after its first exchange:
// a daemon whose API differs is refused, naming both versions, and one
// that runs another build is warned about once. A host that failed is
// tried again at the next call.
func (f *Fleet) Client(ctx context.Context, host string) (*client.Client, error) {
	if host == "" {
		host = f.Default
	}
	if err := f.Check(host); err != nil {
		return nil, err
	}
	if IsLocal(host) {
		f.mu.Lock()
		defer f.mu.Unlock()
		if f.Local == nil {
			cl, err := client.New()
			if err != nil {
				return nil, err
			}
			f.Local = cl
		}
		return f.Local, nil
	}
	f.mu.Lock()
	if f.remotes == nil {
		f.remotes = map[string]*remote{}
	}
	r := f.remotes[host]
	if r == nil {
		r = &remote{}
		f.remotes[host] = r
	}
	f.mu.Unlock()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cl == nil {
		cl, err := f.connect(ctx, host)
		if err != nil {
			return nil, err
		}
		r.cl = cl
	}
	return r.cl, nil
}

func (f *Fleet) transportOf(host string) (*SSH, error) {
	if f.transport != nil {
		return f.transport(host)
	}
	return f.Transport(host)
}

// Transport is the ssh that reaches host (a configured name, or a URL
// when the fleet takes URLs).
func (f *Fleet) Transport(host string) (*SSH, error) {
	if isURL(host) && f.URLs {
		return ForHost(host, Host{URL: host}, f.Paths.SockDir)
	}
	hosts, err := f.known()
	if err != nil {
		return nil, err
	}
	h, ok := hosts[host]
	if !ok {
		if isURL(host) {
			return nil, namesOnly(host, hosts)
		}
		return nil, f.unknownHost(host, hosts)
	}
	return ForHost(host, h, f.Paths.SockDir)
}

// RemoteClient is a client of host's daemon through its transport, before
// any exchange.
func (f *Fleet) RemoteClient(host string) (*client.Client, error) {
	tr, err := f.Transport(host)
	if err != nil {
		return nil, err
	}
	return tr.Client(f.Paths), nil
}

func (f *Fleet) connect(ctx context.Context, host string) (*client.Client, error) {
	var cl *client.Client
	var tr *SSH
	var err error
	if f.dialRemote != nil {
		cl, err = f.dialRemote(host)
	} else if tr, err = f.transportOf(host); err == nil {
		cl = tr.Client(f.Paths)
	}
	if err != nil {
		return nil, err
	}
	hctx, cancel := context.WithTimeout(ctx, handshakeWait)
	var st *apitype.DaemonStatus
	if probed, ok := tr.probeFirst(hctx); ok {
		// The forwarding's probe was the first exchange.
		st, err = probed, checkAPI(probed, host)
	} else {
		st, err = Handshake(hctx, cl, host)
	}
	cancel()
	if err != nil {
		cl.CloseIdleConnections()
		if ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
			return nil, fmt.Errorf("host %s: no answer within %s: its link or ssh server is down, or its daemon did not start "+
				"(`kaimon host ls --check` says which hosts answer)", host, handshakeWait)
		}
		return nil, err
	}
	if tr != nil {
		// The daemon's socket is known now: later calls are channels
		// of the master (forward.go).
		tr.Forward(ctx, st.Socket)
	}
	if f.Warn != nil && version.Differs(version.String(), version.CommitString(), st.Version, st.Commit) {
		fmt.Fprintf(f.Warn, "kaimon: warning: host %s's kaimon-agentd (pid %d) runs %s but this kaimon is %s: "+
			"install the same kaimon there, then `kaimon --host %s daemon restart` (it closes the live agents)\n",
			host, st.PID, version.Format(st.Version, st.Commit), version.Full(), host)
	}
	return cl, nil
}

// handshakeWait bounds the first exchange with a host, whatever ssh does
// meanwhile: a command on a host whose link is down fails within it,
// naming the host, even when a master connection of ssh's has not yet
// noticed the link is gone (its keep-alives take longer) and the request
// is retried on a fresh connection. It leaves room for dial-stdio to start
// the host's daemon.
var handshakeWait = 8 * time.Second // a variable for the test of it only

// Handshake is the first exchange with host's daemon: its status, refused
// when its API version is not this kaimon's.
func Handshake(ctx context.Context, cl *client.Client, host string) (*apitype.DaemonStatus, error) {
	st, err := cl.Ping(ctx)
	if err != nil {
		return nil, Cause(err)
	}
	if err := checkAPI(st, host); err != nil {
		return nil, err
	}
	return st, nil
}

// checkAPI refuses a daemon whose API version is not this kaimon's,
// naming both versions.
func checkAPI(st *apitype.DaemonStatus, host string) error {
	if st.API == apitype.APIVersion {
		return nil
	}
	api := fmt.Sprintf("API version %d", st.API)
	if st.API == 0 {
		api = "an API too old to carry a version"
	}
	return fmt.Errorf("host %s: its kaimon-agentd runs %s with %s, but this kaimon is %s with API version %d: install the same kaimon on both",
		host, version.Format(st.Version, st.Commit), api, version.Full(), apitype.APIVersion)
}

// Named is err of host as a view of several hosts reports it: with the
// host's name in front, unless it says it already (a failed ssh's does),
// and with a failed ssh's own words (Cause).
func Named(host string, err error) error {
	err = Cause(err)
	if strings.HasPrefix(err.Error(), "host "+host+":") {
		return err
	}
	return fmt.Errorf("host %s: %w", host, err)
}

// Cause is err with a failed ssh's own error (its words, the host's name)
// in place of what HTTP made of the connection it cut.
func Cause(err error) error {
	var se *Error
	if errors.As(err, &se) {
		return se
	}
	return err
}

// LinkError is the connection to a host's daemon failing while a command
// was at it, once the host had answered: ssh (or the master connection it
// rides on) went away, or the link did. The daemon there may be well, and
// its agents at work: what became of a request in flight (a turn agent_run
// waited on) is to be asked again once the host answers. It is no crash of
// that daemon, which a new connection would show (its agents dead, reason
// daemon crashed).
type LinkError struct {
	Host string
	Err  error // what broke it: ssh's own error, or what the connection ended with
}

func (e *LinkError) Error() string {
	return fmt.Sprintf("host %s: the connection broke (%s)", e.Host, e.Said())
}

// Said is what broke the connection, in words that do not name the host
// again.
func (e *LinkError) Said() string { return strings.TrimPrefix(e.Err.Error(), "host "+e.Host+": ") }

func (e *LinkError) Unwrap() error { return e.Err }

// linked is err of a call on host as the fleet returns it: with a failed
// ssh's own error (Cause), and, on another host, a connection that failed
// (no answer of the daemon's) as a LinkError.
func linked(host string, err error) error {
	if err == nil {
		return nil
	}
	cause := Cause(err)
	if IsLocal(host) {
		return cause
	}
	var se *Error
	var down *client.DaemonDownError
	switch {
	case errors.As(cause, &se):
		return &LinkError{Host: host, Err: se}
	case errors.As(cause, &down):
		return &LinkError{Host: host, Err: down.Err}
	}
	return cause
}

// on routes a call about id: the host's service and the bare id.
func (f *Fleet) on(ctx context.Context, id string) (verbs.Service, string, string, error) {
	host, bare, err := f.Route(id)
	if err != nil {
		return nil, "", "", err
	}
	cl, err := f.Client(ctx, host)
	if err != nil {
		return nil, "", "", err
	}
	return cl, host, bare, nil
}

// routed calls one verb about the agent that id(a) names, on that agent's
// host: the host's daemon gets a copy of a with the bare id, and an error
// carries what ssh said. The host comes back for a result to qualify.
func routed[A, R any](f *Fleet, ctx context.Context, a *A, id func(*A) *string, call func(verbs.Service, context.Context, *A) (*R, error)) (*R, string, error) {
	s, host, bare, err := f.on(ctx, *id(a))
	if err != nil {
		return nil, "", err
	}
	b := *a
	*id(&b) = bare
	r, err := call(s, ctx, &b)
	return r, host, qualifyErr(linked(host, err), bare, Qualify(host, bare))
}

// qualifyErr is a daemon's error about agent bare with the id shown as q
// (HOST/ID) wherever it names that agent, so that the command it suggests
// (`kaimon open --id ID --resume` for a dead agent) can be pasted back
// and reaches the agent's host. Only a whole id is replaced: never a
// part of a longer word.
func qualifyErr(err error, bare, q string) error {
	var ve *verbs.Error
	if err == nil || q == bare || !errors.As(err, &ve) {
		return err
	}
	// The id as given, and a drawn id it is the start of (hex digits
	// on): a prefix resolved there comes back as the whole id, in the
	// lines to paste. Another word that merely begins with it is not
	// an id of ours.
	re := regexp.MustCompile(`(^|[^0-9A-Za-z/_.-])(` + regexp.QuoteMeta(bare) + `[0-9a-f]*)($|[^0-9A-Za-z_-])`)
	host := strings.ReplaceAll(strings.TrimSuffix(q, bare), "$", "$$")
	out := *ve
	out.Message = re.ReplaceAllString(ve.Message, "${1}"+host+"${2}${3}")
	return &out
}

// The verbs, each routed by its id.

// Open opens an agent on the host openHost picks; the host's daemon gets
// the arguments without host, and the id comes back qualified.
func (f *Fleet) Open(ctx context.Context, a *verbs.OpenArgs) (*verbs.OpenResult, error) {
	b := *a
	if a.Fork != "" {
		// A fork opens where the conversation it copies is: its
		// parent's host, which no placement picks.
		fh, bare, err := f.Route(a.Fork)
		if err != nil {
			return nil, err
		}
		if fh == Any {
			return nil, usagef("host %s places a new agent, but a fork opens on the host of the agent it forks: qualify %s as HOST/ID", Any, a.Fork)
		}
		if a.Host != "" && a.Host != Any && normal(a.Host) != normal(fh) {
			return nil, usagef("a fork opens on the host of the agent it forks (%s), not on %s", normal(fh), a.Host)
		}
		b.Host, b.Fork = normal(fh), bare
	}
	host, id, placed, err := f.openHost(ctx, &b)
	if err != nil {
		return nil, err
	}
	s, err := f.Client(ctx, host)
	if err != nil {
		return nil, err
	}
	b.ID, b.Host = id, ""
	r, err := s.Open(ctx, &b)
	if err != nil {
		return nil, linked(host, err)
	}
	r.AgentID = Qualify(host, r.AgentID)
	if (placed || f.Default == Any) && IsLocal(host) {
		// Placed here by any, or opened here under --host any: local/ID,
		// since a bare id would go to the Default, any, which names no
		// agent's host (KAIMON_HOST=any).
		r.AgentID = Local + "/" + r.AgentID
	}
	return r, nil
}

func (f *Fleet) Send(ctx context.Context, a *verbs.SendArgs) (*verbs.SendResult, error) {
	r, _, err := routed(f, ctx, a, func(a *verbs.SendArgs) *string { return &a.AgentID }, verbs.Service.Send)
	return r, err
}

func (f *Fleet) Run(ctx context.Context, a *verbs.RunArgs) (*verbs.RunResult, error) {
	r, _, err := routed(f, ctx, a, func(a *verbs.RunArgs) *string { return &a.AgentID }, verbs.Service.Run)
	return r, err
}

func (f *Fleet) Output(ctx context.Context, a *verbs.OutputArgs) (*verbs.OutputResult, error) {
	r, host, err := routed(f, ctx, a, func(a *verbs.OutputArgs) *string { return &a.AgentID }, verbs.Service.Output)
	if err == nil {
		r.AgentID = Qualify(host, r.AgentID)
	}
	return r, err
}

func (f *Fleet) Status(ctx context.Context, a *verbs.StatusArgs) (*verbs.AgentStatus, error) {
	given := a.AgentID
	r, _, err := routed(f, ctx, a, func(a *verbs.StatusArgs) *string { return &a.AgentID }, verbs.Service.Status)
	if err == nil && r.AgentID != "" {
		r.AgentID = Requalify(given, r.AgentID)
	}
	return r, err
}

func (f *Fleet) SetModel(ctx context.Context, a *verbs.SetModelArgs) (*verbs.SetModelResult, error) {
	r, _, err := routed(f, ctx, a, func(a *verbs.SetModelArgs) *string { return &a.AgentID }, verbs.Service.SetModel)
	return r, err
}

// List lists Default's agents, their ids qualified; with AllHosts, every
// host's (ListAll), failing only when every host failed.
func (f *Fleet) List(ctx context.Context, a *verbs.ListArgs) (*verbs.ListResult, error) {
	if f.AllHosts {
		r, err := f.ListAll(ctx, a)
		if err != nil {
			return nil, err
		}
		if !slices.ContainsFunc(r.Hosts, func(h verbs.HostAnswer) bool { return h.Error == "" }) {
			return nil, Failed(r)
		}
		return r, nil
	}
	s, host, _, err := f.on(ctx, "")
	if err != nil {
		return nil, err
	}
	r, err := s.List(ctx, a)
	if err != nil {
		return nil, linked(host, err)
	}
	for i := range r.Agents {
		r.Agents[i].AgentID = Qualify(host, r.Agents[i].AgentID)
	}
	return r, nil
}

func (f *Fleet) Interrupt(ctx context.Context, a *verbs.InterruptArgs) (*verbs.InterruptResult, error) {
	r, _, err := routed(f, ctx, a, func(a *verbs.InterruptArgs) *string { return &a.AgentID }, verbs.Service.Interrupt)
	return r, err
}

func (f *Fleet) Close(ctx context.Context, a *verbs.CloseArgs) (*verbs.CloseResult, error) {
	r, _, err := routed(f, ctx, a, func(a *verbs.CloseArgs) *string { return &a.AgentID }, verbs.Service.Close)
	return r, err
}

// Diff asks the agent's host for what it changed; the (whole) id comes
// back qualified as it was given, and so does the one that the line ending a
// cut diff names (verbs.DiffCutNote), so that its command reaches the
// agent's host.
func (f *Fleet) Diff(ctx context.Context, a *verbs.DiffArgs) (*verbs.DiffResult, error) {
	r, host, err := routed(f, ctx, a, func(a *verbs.DiffArgs) *string { return &a.AgentID }, verbs.Service.Diff)
	if err == nil {
		if kept, ok := strings.CutSuffix(r.Diff, verbs.DiffCutNote(r.AgentID)); ok && r.Truncated {
			r.Diff = kept + verbs.DiffCutNote(Qualify(host, r.AgentID))
		}
		r.AgentID = Requalify(a.AgentID, r.AgentID)
	}
	return r, err
}

// WriteDiff streams the agent's whole diff from its host to w
// (verbs.DiffWriter): what `kaimon diff` prints.
func (f *Fleet) WriteDiff(ctx context.Context, a *verbs.DiffArgs, w io.Writer) (*verbs.DiffResult, error) {
	r, _, err := routed(f, ctx, a, func(a *verbs.DiffArgs) *string { return &a.AgentID },
		func(s verbs.Service, ctx context.Context, a *verbs.DiffArgs) (*verbs.DiffResult, error) {
			return s.(verbs.DiffWriter).WriteDiff(ctx, a, w) // a host's client
		})
	if err == nil {
		r.AgentID = Requalify(a.AgentID, r.AgentID)
	}
	return r, err
}

func (f *Fleet) Permit(ctx context.Context, a *verbs.PermitArgs) (*verbs.PermitResult, error) {
	r, _, err := routed(f, ctx, a, func(a *verbs.PermitArgs) *string { return &a.AgentID }, verbs.Service.Permit)
	return r, err
}

// Forget forgets agents of one host: ids qualified with different hosts
// are a usage error (forget them one host at a time).
func (f *Fleet) Forget(ctx context.Context, a *verbs.ForgetArgs) (*verbs.ForgetResult, error) {
	host, ids := f.Default, make([]string, 0, len(a.AgentIDs))
	for i, q := range a.AgentIDs {
		h, id, err := f.Route(q)
		if err != nil {
			return nil, err
		}
		if i > 0 && normal(h) != normal(host) {
			return nil, usagef("forget takes the agents of one host at a time: %s is on %s, %s on %s", a.AgentIDs[0], normal(host), q, normal(h))
		}
		host = h
		ids = append(ids, id)
	}
	cl, err := f.Client(ctx, host)
	if err != nil {
		return nil, err
	}
	b := *a
	if len(a.AgentIDs) > 0 {
		b.AgentIDs = ids
	}
	r, err := cl.Forget(ctx, &b)
	if err != nil {
		return nil, linked(host, err)
	}
	for i := range r.Forgotten {
		r.Forgotten[i] = Qualify(host, r.Forgotten[i])
	}
	for i := range r.Kept {
		r.Kept[i].AgentID = Qualify(host, r.Kept[i].AgentID)
	}
	for i := range r.BranchesKept {
		r.BranchesKept[i].AgentID = Qualify(host, r.BranchesKept[i].AgentID)
	}
	return r, nil
}

// EventsFromNow follows the events of agent id on its host from now, as
// client.EventsFromNow does on this machine: what `run` renders a turn
// from.
func (f *Fleet) EventsFromNow(ctx context.Context, id string) (*client.Watcher, error) {
	cl, host, bare, err := f.clientOf(ctx, id)
	if err != nil {
		return nil, err
	}
	w, err := cl.EventsFromNow(ctx, bare)
	return w, linked(host, err)
}

// Events reads the events of agent id on its host after seq since, and
// with follow goes on live, as client.Events does on this machine: what
// `run` follows a turn with again after a host's link broke under it.
func (f *Fleet) Events(ctx context.Context, id string, since uint64, follow bool) (*client.Watcher, error) {
	cl, host, bare, err := f.clientOf(ctx, id)
	if err != nil {
		return nil, err
	}
	w, err := cl.Events(ctx, bare, since, follow)
	return w, linked(host, err)
}

// EventLog reads the event log of agent id on its host, as
// client.EventLog does on this machine.
func (f *Fleet) EventLog(ctx context.Context, id string) (io.ReadCloser, error) {
	cl, host, bare, err := f.clientOf(ctx, id)
	if err != nil {
		return nil, err
	}
	rc, err := cl.EventLog(ctx, bare)
	return rc, linked(host, err)
}

// clientOf is the client of agent id's host, the host, and its bare id
// there.
func (f *Fleet) clientOf(ctx context.Context, id string) (*client.Client, string, string, error) {
	host, bare, err := f.Route(id)
	if err != nil {
		return nil, "", "", err
	}
	cl, err := f.Client(ctx, host)
	return cl, host, bare, err
}

// Shown is id as output shows it: qualified with its host when that is a
// configured one (so that it can be pasted back without --host), else as
// given.
func (f *Fleet) Shown(id string) string {
	host, bare, err := f.Route(id)
	if err != nil {
		return id
	}
	return Qualify(host, bare)
}

// CloseIdle closes every remote's kept connections: each is an ssh child,
// which would otherwise live until this process exits.
func (f *Fleet) CloseIdle() {
	// f.mu is let go first: a remote's lock is held across its first
	// exchange, which takes f.mu to read the hosts.
	f.mu.Lock()
	rs := make([]*remote, 0, len(f.remotes))
	for _, r := range f.remotes {
		rs = append(rs, r)
	}
	f.mu.Unlock()
	for _, r := range rs {
		r.mu.Lock()
		if r.cl != nil {
			r.cl.CloseIdleConnections()
		}
		r.mu.Unlock()
	}
}

var (
	_ verbs.Service    = (*Fleet)(nil)
	_ verbs.DiffWriter = (*Fleet)(nil)
)
