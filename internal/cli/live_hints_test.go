package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/kaimon/kaimon/internal/apitype"
	"github.com/kaimon/kaimon/internal/client"
	"github.com/kaimon/kaimon/internal/config"
	"github.com/kaimon/kaimon/internal/verbs"
)

// A piped run's stream, opened once hintDelay has passed: a request that agent_status
// then says is pending is told of from the status, once, and one already
// told of is not told again.
func TestHintsOfPendingRequests(t *testing.T) {
	t.Parallel()
	cl := &client.Client{Paths: config.Paths{SockDir: t.TempDir()}, NoAutostart: true}
	ln, err := net.Listen("unix", cl.Paths.Socket())
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/agent_status", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(verbs.AgentStatus{Status: "working", PendingPermissions: []verbs.PendingPermission{
			{RequestID: "r1", Tool: "Bash", Title: "Bash", ExpiresAt: "2026-12-01T00:00:00Z"},
			{RequestID: "r2", Tool: "Edit", Title: "Edit"},
		}})
	})
	srv := &http.Server{Handler: mux}
	go srv.Serve(ln)
	defer srv.Close()

	var errw bytes.Buffer
	f := &follower{id: "a1", errw: &errw, p: newPretty(&errw, false, plain)}
	f.tell("r2") // already told
	opened := false
	if w := f.openForHints(context.Background(), cl, func() Watcher { opened = true; return nil }); w != nil || !opened {
		t.Errorf("openForHints = %v, opened %v", w, opened)
	}
	out := errw.String()
	if !strings.Contains(out, "agent a1 asks permission for Bash") || !strings.Contains(out, verbs.PermitCommand("a1", "r1", apitype.Allow)) ||
		!strings.Contains(out, "waits until 2026-12-01T00:00:00Z") {
		t.Errorf("no hint for r1: %q", out)
	}
	if strings.Contains(out, "r2") || strings.Count(out, "asks permission") != 1 {
		t.Errorf("hinted more than r1: %q", out)
	}
	if !f.told["r1"] {
		t.Error("r1 not marked as told")
	}
}
