package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kaimon/kaimon/internal/verbs"
	"github.com/mark3labs/mcp-go/mcp"
)

// apiClient is an HTTP client of e's control socket, for the requests kaimon
// itself never sends.
func (e *kenv) apiClient() *http.Client {
	sock := e.paths().Socket()
	return &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", sock)
	}}}
}

// post sends body to route on the control socket and returns the status
// and the error the daemon answered (empty on success).
func (e *kenv) post(route, body string) (int, verbs.Error) {
	e.t.Helper()
	hc := e.apiClient()
	defer hc.CloseIdleConnections()
	resp, err := hc.Post("http://kaimon"+route, "application/json", strings.NewReader(body))
	if err != nil {
		e.t.Fatalf("POST %s: %v", route, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var ve verbs.Error
	if resp.StatusCode != http.StatusOK {
		if err := json.Unmarshal(b, &ve); err != nil {
			e.t.Fatalf("POST %s: %d %s: not an API error: %v", route, resp.StatusCode, b, err)
		}
	}
	return resp.StatusCode, ve
}

// TestRawAPIPathsAreAbsolute: kaimon-agentd works in "/", not in the
// directory it was started from, and refuses a relative cwd or mcp_config
// on the raw API and from an MCP client instead of taking it from there
// (the daemon here was started from the project directory, where "." would
// have opened an agent); kaimon open still takes a relative DIR from the
// shell's directory.
func TestRawAPIPathsAreAbsolute(t *testing.T) {
	e := newEnv(t)
	e.ok("daemon", "start")
	if cwd, err := os.Readlink(fmt.Sprintf("/proc/%d/cwd", e.daemonPID())); err != nil || cwd != "/" {
		t.Errorf("kaimon-agentd works in %q (%v), want /", cwd, err)
	}
	replay := "replay:" + exampleLog() + "?speed=0"
	for _, c := range []struct{ body, want string }{
		{`{"cwd":".","model":"` + replay + `"}`, `agent_open: cwd "." is a relative path: give an absolute one`},
		{`{"cwd":"project","model":"` + replay + `"}`, `agent_open: cwd "project" is a relative path`},
		{`{"cwd":"` + e.work + `","model":"` + replay + `","mcp_config":"mcp.json"}`, `agent_open: mcp_config "mcp.json" is a relative path`},
	} {
		st, ve := e.post("/v1/agent_open", c.body)
		if st != http.StatusBadRequest || ve.Code != verbs.CodeBadArgument || !strings.Contains(ve.Message, c.want) {
			t.Errorf("agent_open %s: %d %+v, want 400 bad_argument saying %q", c.body, st, ve, c.want)
		}
	}
	o := startOrch(t, e, mcp.ClientCapabilities{})
	res := o.call("agent_open", map[string]any{"cwd": ".", "model": replay})
	if text := fmt.Sprint(res.Content); !res.IsError || !strings.Contains(text, `cwd "." is a relative path`) {
		t.Errorf("agent_open from an MCP client with a relative cwd: error %v, %s", res.IsError, text)
	}
	e.noAgents()

	id := e.ok("open", "--model", replay, ".")
	if st := e.status(t, id); st.Cwd != e.work {
		t.Errorf("kaimon open . in %s: the agent works in %s", e.work, st.Cwd)
	}
	e.ok("close", id)
}

// TestRawAPIBodyDeadline: a request body trickled at a byte every two
// seconds is cut at verbs.ReadTimeout with 408 too_slow, rather than hold
// its connection for good; the daemon serves on.
func TestRawAPIBodyDeadline(t *testing.T) {
	e := newEnv(t)
	e.ok("daemon", "start")
	conn, err := net.Dial("unix", e.paths().Socket())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	body := `{"agent_id":"nobody-at-all"}`
	fmt.Fprintf(conn, "POST /v1/agent_status HTTP/1.1\r\nHost: k\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", len(body))
	stop := make(chan struct{})
	trickled := make(chan struct{})
	go func() {
		defer close(trickled)
		for i := 0; i < len(body); i++ {
			if _, err := conn.Write([]byte{body[i]}); err != nil {
				return
			}
			select {
			case <-stop:
				return
			case <-time.After(2 * time.Second):
			}
		}
	}()
	defer func() { close(stop); <-trickled }()
	// Generously past the bound (a body of 28 bytes at this pace takes
	// 56 s), so that a loaded machine does not fail it.
	conn.SetReadDeadline(time.Now().Add(3 * verbs.ReadTimeout))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no answer to a trickled body within %s: %v", 3*verbs.ReadTimeout, err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var ve verbs.Error
	if resp.StatusCode != http.StatusRequestTimeout || json.Unmarshal(b, &ve) != nil || ve.Code != verbs.CodeTooSlow {
		t.Errorf("a trickled body: %s %s, want 408 too_slow", resp.Status, b)
	}
	if st, ve := e.post("/v1/agent_status", body); st != http.StatusNotFound {
		t.Errorf("the same request sent at once: %d %+v, want 404", st, ve)
	}
}

// TestDiskFullIsNotBadArgument: the worktree dir is on a small disk, which
// is full. open --worktree fails with storage (507), saying the disk is
// full, not bad_argument (the options were fine), and leaves nothing: no
// agent, worktree or branch. With room again the same open works.
func TestDiskFullIsNotBadArgument(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting a small tmpfs needs root")
	}
	disk, err := os.MkdirTemp("", "kmwt")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(disk) })
	smallDisk(t, disk, "64k")
	e := newEnv(t, "KAIMON_WORKTREE_DIR", filepath.Join(disk, "worktrees"))
	e.gitRepo(t)
	filler := filepath.Join(disk, "filler")
	fill(t, filler)
	replay := "replay:" + exampleLog() + "?speed=0"
	r := e.kaimon("open", "--worktree", "--model", replay, "--json", e.work)
	var ve verbs.Error
	if r.code != 1 || json.Unmarshal([]byte(r.stderr), &ve) != nil || ve.Code != verbs.CodeStorage ||
		!strings.Contains(ve.Message, "agent_open: worktree: the disk is full") || !strings.Contains(ve.Message, "free some space") {
		t.Fatalf("open --worktree on a full disk: %s; want code %s saying the disk is full", r, verbs.CodeStorage)
	}
	if b := e.branches(t); len(b) != 1 || b[0] != "main" {
		t.Errorf("branches after the refused open: %v", b)
	}
	if w := e.worktrees(t); len(w) != 1 {
		t.Errorf("worktrees after the refused open: %v", w)
	}
	e.noAgents()

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	id := e.ok("open", "--worktree", "--model", replay, e.work)
	e.ok("close", id)
	e.ok("forget", id)
}
