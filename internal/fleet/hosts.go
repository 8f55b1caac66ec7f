// Package fleet lets one kaimon drive agents on many hosts over the ssh its
// users already have: the hosts kept in the config file, the URLs that name
// them, ids qualified by a host (NAME/ID), the transport (the system's ssh
// running `kaimon dial-stdio` on the far side, so ~/.ssh/config, the agent
// and known_hosts all apply and kaimon keeps no credential), and a
// verbs.Service that routes each call to its id's host. Nothing here
// listens on a network: a remote daemon is that ssh user's own, reached over
// its unix socket.
package fleet

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"sort"
	"strconv"
	"strings"

	"github.com/kaimon/kaimon/internal/config"
	"github.com/kaimon/kaimon/internal/verbs"
)

// Local names this machine, the default host; Any is `open --host any`'s
// word. Neither can name a configured host.
const (
	Local = verbs.HostLocal
	Any   = verbs.HostAny
)

// URLForms are the accepted forms of a host, for errors.
const URLForms = "ssh://[USER@]HOST[:PORT] (an IPv6 HOST in brackets), or kube://[NAMESPACE/]POD[?container=NAME&context=NAME]"

// DefaultRemoteBin is the kaimon run on a host whose remote_bin is unset:
// found on the remote PATH.
const DefaultRemoteBin = "kaimon"

// Host is one entry of the config file's "hosts".
type Host struct {
	URL string `json:"url"`
	// RemoteBin is the kaimon to run there; empty: DefaultRemoteBin.
	RemoteBin string `json:"remote_bin,omitempty"`
}

// Bin is the kaimon the host runs.
func (h Host) Bin() string {
	if h.RemoteBin == "" {
		return DefaultRemoteBin
	}
	return h.RemoteBin
}

// UsageError is a mistake on the command line (a bad name, URL or
// qualified id): the CLI exits 2 with it. It changes nothing.
type UsageError struct{ Msg string }

func (e *UsageError) Error() string { return e.Msg }

func usagef(format string, a ...any) error { return &UsageError{Msg: fmt.Sprintf(format, a...)} }

// CheckName refuses a name that cannot name a host: it must be 1 to 64 of
// letters, digits, '-', '_' and '.', starting with a letter or digit, and
// not local or any. So it never holds '/' (the qualifier's separator) nor
// "://" (a URL's), and a name is never mistaken for either.
func CheckName(name string) error {
	if !nameSyntax(name) {
		return usagef("%q cannot name a host: use 1 to 64 letters, digits, '-', '_' or '.', starting with a letter or digit", name)
	}
	if name == Local || name == Any {
		return usagef("%q cannot name a host: %s means %s", name, name, map[string]string{Local: "this machine", Any: "the least busy host"}[name])
	}
	return nil
}

// nameSyntax says whether name is spelled as a host's name (local and any
// included): 1 to 64 letters, digits, '-', '_' and '.', starting with a
// letter or digit.
func nameSyntax(name string) bool {
	ok := len(name) > 0 && len(name) <= 64
	for i := 0; ok && i < len(name); i++ {
		c := name[i]
		letterOrDigit := 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
		ok = letterOrDigit || i > 0 && (c == '-' || c == '_' || c == '.')
	}
	return ok
}

// Target is where a URL points: an ssh destination, or a Kubernetes pod
// reached with kubectl exec.
type Target struct {
	// Kube says the target is a pod (kube://): Namespace, Pod, Container
	// and Context are set, User, Host and Port are not.
	Kube bool

	User string // empty: ssh's default (~/.ssh/config, else the local user)
	Host string // a name or address; an IPv6 address without brackets
	Port int    // 0: ssh's default

	Namespace string // empty: the context's namespace
	Pod       string
	Container string // empty: the pod's default container
	Context   string // empty: kubeconfig's current context
}

// Destination is ssh's [user@]host.
func (t Target) Destination() string {
	if t.User != "" {
		return t.User + "@" + t.Host
	}
	return t.Host
}

// ParseURL reads ssh://[user@]host[:port]. Every error names the accepted
// forms.
func ParseURL(s string) (Target, error) {
	bad := func(why string) (Target, error) {
		return Target{}, usagef("host URL %q %s: the accepted forms are %s", s, why, URLForms)
	}
	scheme, rest, ok := strings.Cut(s, "://")
	if !ok {
		return bad("has no scheme")
	}
	if scheme == "kube" {
		return parseKube(rest, bad)
	}
	if scheme != "ssh" {
		return bad(fmt.Sprintf("has the unknown scheme %q", scheme))
	}
	u, err := url.Parse(s)
	if err != nil {
		return bad(fmt.Sprintf("does not parse (%v)", errors.Unwrap(err)))
	}
	if u.Path != "" && u.Path != "/" || u.RawQuery != "" || u.Fragment != "" || u.Opaque != "" {
		return bad("has a path, query or fragment")
	}
	if _, set := u.User.Password(); set {
		return bad("holds a password (kaimon keeps no credential: use your ssh agent or keys)")
	}
	t := Target{User: u.User.Username(), Host: u.Hostname()}
	if t.Host == "" {
		return bad("has no host")
	}
	if strings.HasPrefix(t.Host, "-") || strings.HasPrefix(t.User, "-") {
		return bad("has a host or user starting with '-'")
	}
	if strings.ContainsAny(t.Host+t.User, " \t\n'\"\\;&|`$") {
		return bad("has a space, quote or shell character in its host or user")
	}
	if p := u.Port(); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 65535 {
			return bad(fmt.Sprintf("has the port %q, not a number from 1 to 65535", p))
		}
		t.Port = n
	} else if strings.HasSuffix(u.Host, ":") {
		return bad("has an empty port")
	}
	if strings.Contains(t.Host, ":") && net.ParseIP(t.Host) == nil {
		return bad("has a host that is neither a name nor an address")
	}
	return t, nil
}

// LoadHosts reads the config file's hosts; a missing file has none. A file
// that does not parse is an error naming it.
func LoadHosts(path string) (map[string]Host, error) {
	var c struct {
		Hosts map[string]Host `json:"hosts"`
	}
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return map[string]Host{}, nil
	}
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, fmt.Errorf("config file %s: %w (fix or remove it)", path, err)
	}
	if c.Hosts == nil {
		c.Hosts = map[string]Host{}
	}
	return c.Hosts, nil
}

// Names are the hosts' names, sorted.
func Names(hosts map[string]Host) []string {
	out := make([]string, 0, len(hosts))
	for n := range hosts {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// AddHost adds host name to the config file. A bad name or URL, or a name
// already there, is refused and the file left as it was.
func AddHost(path, name string, h Host) error {
	if err := CheckName(name); err != nil {
		return err
	}
	if _, err := ParseURL(h.URL); err != nil {
		return err
	}
	return editHosts(path, func(hosts map[string]Host) error {
		if old, ok := hosts[name]; ok {
			// Not a usage error: the command line is right, the
			// name is taken.
			return fmt.Errorf("host %s is already configured (%s): to replace it, `kaimon host rm %s` first, then add it again", name, old.URL, name)
		}
		hosts[name] = h
		return nil
	})
}

// RemoveHost removes host name from the config file; an unknown name is a
// usage error that changes nothing.
func RemoveHost(path, name string) error {
	return editHosts(path, func(hosts map[string]Host) error {
		if _, ok := hosts[name]; !ok {
			return unknownHost(name, hosts)
		}
		delete(hosts, name)
		return nil
	})
}

// unknownHost is the error for a name that is not configured.
func unknownHost(name string, hosts map[string]Host) error {
	return usagef("no host is named %q: %s; a host is one of them, %s (this machine) or %s", name, configured(hosts), Local, URLForms)
}

// configured says which hosts are configured, for errors.
func configured(hosts map[string]Host) string {
	if len(hosts) == 0 {
		return "none is configured (add one with `kaimon host add NAME URL`)"
	}
	return "the configured hosts are " + strings.Join(Names(hosts), ", ")
}

// editHosts rewrites the config file's "hosts" with edit, keeping every
// other key as it was, and replaces the file atomically (a temporary file
// in its directory, renamed over it): a reader never sees half a file. An
// error from edit leaves the file untouched.
func editHosts(path string, edit func(map[string]Host) error) error {
	raw := map[string]json.RawMessage{}
	b, err := os.ReadFile(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		return err
	default:
		if len(bytes.TrimSpace(b)) > 0 {
			if err := json.Unmarshal(b, &raw); err != nil {
				return fmt.Errorf("config file %s: %w (fix or remove it)", path, err)
			}
		}
	}
	hosts := map[string]Host{}
	if h, ok := raw["hosts"]; ok && string(h) != "null" {
		if err := json.Unmarshal(h, &hosts); err != nil {
			return fmt.Errorf("config file %s: hosts: %w (fix or remove it)", path, err)
		}
	}
	if err := edit(hosts); err != nil {
		return err
	}
	enc, err := json.Marshal(hosts)
	if err != nil {
		return err
	}
	raw["hosts"] = enc
	out, err := json.MarshalIndent(raw, "", "  ")
	if err != nil {
		return err
	}
	mode := os.FileMode(0o600)
	if st, err := os.Stat(path); err == nil {
		mode = st.Mode().Perm()
	}
	return config.WriteFileAtomic(path, append(out, '\n'), mode)
}

// parseKube reads what follows kube://: [NAMESPACE/]POD, then optionally
// ?container=NAME&context=NAME. Each part is a Kubernetes name (or a
// kubeconfig context's, which may hold more), never an option or a shell
// word: kubectl gets them as arguments of their own.
func parseKube(rest string, bad func(string) (Target, error)) (Target, error) {
	where, query, _ := strings.Cut(rest, "?")
	t := Target{Kube: true}
	switch parts := strings.Split(where, "/"); len(parts) {
	case 1:
		t.Pod = parts[0]
	case 2:
		t.Namespace, t.Pod = parts[0], parts[1]
		if t.Namespace == "" {
			return bad("has an empty namespace")
		}
	default:
		return bad("has more than NAMESPACE/POD")
	}
	if t.Pod == "" {
		return bad("has no pod")
	}
	if query != "" {
		q, err := url.ParseQuery(query)
		if err != nil {
			return bad(fmt.Sprintf("has a query that does not parse (%v)", err))
		}
		for k, v := range q {
			if len(v) != 1 || v[0] == "" {
				return bad(fmt.Sprintf("gives %s more or less than one value", k))
			}
			switch k {
			case "container":
				t.Container = v[0]
			case "context":
				t.Context = v[0]
			default:
				return bad(fmt.Sprintf("has the unknown parameter %q (container and context are known)", k))
			}
		}
	}
	for _, n := range []string{t.Namespace, t.Pod, t.Container} {
		if n != "" && !kubeName(n) {
			return bad(fmt.Sprintf("has %q, not a Kubernetes name (lower-case letters, digits, '-' and '.')", n))
		}
	}
	if strings.HasPrefix(t.Context, "-") || strings.ContainsAny(t.Context, " \t\n") {
		return bad(fmt.Sprintf("has the context %q, which starts with '-' or holds a space", t.Context))
	}
	return t, nil
}

// kubeName says whether s is a DNS-1123 name, as namespaces, pods and
// containers are: so none is ever read by kubectl as an option.
func kubeName(s string) bool {
	if len(s) == 0 || len(s) > 253 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		alnum := 'a' <= c && c <= 'z' || '0' <= c && c <= '9'
		if !alnum && (i == 0 || i == len(s)-1 || c != '-' && c != '.') {
			return false
		}
	}
	return true
}
