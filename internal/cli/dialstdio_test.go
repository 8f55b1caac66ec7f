package cli

import (
	"bytes"
	"context"
	"net"
	"sync"
	"testing"

	"github.com/kaimon/kaimon/internal/client"
	"github.com/kaimon/kaimon/internal/server/servertest"
	"github.com/kaimon/kaimon/internal/verbs"
)

// A client whose every connection is a `kaimon dial-stdio` (in process,
// its stdin and stdout one end of a pipe) reaches the daemon on the
// socket that dial-stdio finds, and each dial-stdio ends when its
// connection is closed.
func TestDialStdioBridgesToTheDaemon(t *testing.T) {
	fake := (&servertest.Fake{}).Returns("list", &verbs.ListResult{Agents: []verbs.ListEntry{{AgentID: "a1"}}}, nil)
	daemon := servertest.New(t, fake)
	t.Setenv("KAIMON_HOME", t.TempDir())
	t.Setenv("KAIMON_SOCK_DIR", daemon.Paths.SockDir)
	t.Setenv("KAIMON_NO_AUTOSTART", "1")

	var mu sync.Mutex
	var bridges []chan int
	cl := &client.Client{Paths: daemon.Paths, Addr: "dial-stdio", Dial: func(ctx context.Context) (net.Conn, error) {
		mine, its := net.Pipe()
		done := make(chan int, 1)
		mu.Lock()
		bridges = append(bridges, done)
		mu.Unlock()
		go func() {
			var errb bytes.Buffer
			code := Run(context.Background(), []string{"kaimon", "dial-stdio"}, its, its, &errb)
			if code != 0 {
				t.Errorf("dial-stdio exited %d: %s", code, errb.String())
			}
			done <- code
		}()
		return mine, nil
	}}
	st, err := cl.Ping(context.Background())
	if err != nil || st.PID == 0 {
		t.Fatalf("daemon status through dial-stdio: %+v, %v", st, err)
	}
	res, err := cl.List(context.Background(), &verbs.ListArgs{})
	if err != nil || len(res.Agents) != 1 || res.Agents[0].AgentID != "a1" {
		t.Fatalf("list through dial-stdio: %+v, %v", res, err)
	}
	cl.CloseIdleConnections()
	for _, done := range bridges {
		<-done
	}
	if len(bridges) == 0 {
		t.Fatal("the client never dialed")
	}
}

// Without a daemon and with autostart off, dial-stdio says so and exits 1.
func TestDialStdioWithoutDaemon(t *testing.T) {
	t.Setenv("KAIMON_HOME", t.TempDir())
	t.Setenv("KAIMON_NO_AUTOSTART", "1")
	var out, errb bytes.Buffer
	code := Run(context.Background(), []string{"kaimon", "dial-stdio"}, bytes.NewReader(nil), &out, &errb)
	if code != ExitError || !bytes.Contains(errb.Bytes(), []byte("not running")) {
		t.Errorf("exit %d, stderr %q", code, errb.String())
	}
}
