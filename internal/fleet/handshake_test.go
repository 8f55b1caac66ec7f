package fleet

import (
	"context"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kaimon/kaimon/internal/apitype"
	"github.com/kaimon/kaimon/internal/client"
	"github.com/kaimon/kaimon/internal/config"
)

// statusDaemon serves GET /v1/daemon with body on a socket of its own, and
// returns a client that reaches it as a host would be reached (through
// Dial: never autostarted).
func statusDaemon(t *testing.T, body string) *client.Client {
	dir := t.TempDir()
	sock := filepath.Join(dir, "d.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(body))
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	cl := &client.Client{Paths: config.Paths{SockDir: dir}, Addr: "host h1", Dial: func(ctx context.Context) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", sock)
	}}
	t.Cleanup(cl.CloseIdleConnections)
	return cl
}

// The first exchange refuses a daemon whose API differs, naming both
// versions; one of this API passes whatever its build.
func TestHandshake(t *testing.T) {
	cl := statusDaemon(t, `{"pid": 7, "version": "v9.0.0", "api": 99, "env": {}}`)
	_, err := Handshake(context.Background(), cl, "h1")
	if err == nil || !strings.Contains(err.Error(), "host h1") || !strings.Contains(err.Error(), "v9.0.0 with API version 99") ||
		!strings.Contains(err.Error(), "with API version 1") {
		t.Errorf("API 99: %v", err)
	}
	cl = statusDaemon(t, `{"pid": 7, "version": "v0.1.0", "env": {}}`)
	if _, err := Handshake(context.Background(), cl, "h1"); err == nil || !strings.Contains(err.Error(), "too old to carry a version") {
		t.Errorf("a daemon without api: %v", err)
	}
	cl = statusDaemon(t, `{"pid": 7, "version": "v9.9.9", "api": `+strconv.Itoa(apitype.APIVersion)+`, "env": {}}`)
	if st, err := Handshake(context.Background(), cl, "h1"); err != nil || st.Version != "v9.9.9" {
		t.Errorf("this API, another build: %+v %v", st, err)
	}
}

// A host whose daemon runs another build is warned about once, on its
// first use, naming the host and both builds; the calls go on.
func TestFleetWarnsOnceOfAnotherBuild(t *testing.T) {
	cl := statusDaemon(t, `{"pid": 7, "version": "v9.9.9", "commit": "abc", "api": `+strconv.Itoa(apitype.APIVersion)+`, "env": {}}`)
	var warn strings.Builder
	f := &Fleet{Hosts: map[string]Host{"h1": {URL: "ssh://h1"}}, Warn: &warn,
		dialRemote: func(string) (*client.Client, error) { return cl, nil }}
	for i := 0; i < 3; i++ {
		if got, err := f.Client(context.Background(), "h1"); err != nil || got != cl {
			t.Fatalf("Client(h1): %v", err)
		}
	}
	if n := strings.Count(warn.String(), "warning"); n != 1 || !strings.Contains(warn.String(), "host h1's kaimon-agentd (pid 7) runs v9.9.9") {
		t.Errorf("warnings:\n%s", warn.String())
	}
}

// A host that never answers (a link down under a master ssh still thinks
// alive) fails the first exchange within handshakeWait, naming the host,
// instead of waiting on ssh's keep-alives.
func TestHandshakeBounded(t *testing.T) {
	defer func(d time.Duration) { handshakeWait = d }(handshakeWait)
	handshakeWait = 200 * time.Millisecond
	var conns []net.Conn
	t.Cleanup(func() {
		for _, c := range conns {
			c.Close()
		}
	})
	silent := &client.Client{Addr: "host h1", Dial: func(ctx context.Context) (net.Conn, error) {
		ours, theirs := net.Pipe() // nobody reads theirs: the request waits forever
		conns = append(conns, ours, theirs)
		return ours, nil
	}}
	f := &Fleet{Hosts: map[string]Host{"h1": {URL: "ssh://h1"}},
		dialRemote: func(string) (*client.Client, error) { return silent, nil }}
	_, err := f.Client(context.Background(), "h1")
	if err == nil || !strings.Contains(err.Error(), "host h1: no answer within 200ms") {
		t.Errorf("a silent host: %v", err)
	}
}
