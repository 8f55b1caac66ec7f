package acp

import (
	"bytes"
	"log"
	"log/slog"
	"strings"
	"testing"

	"github.com/kaimon/kaimon/internal/redact"
)

// The SDK quotes a line of the agent's it could not parse; the daemon's
// log gets it with the agent's credentials redacted.
func TestLogWriterRedacts(t *testing.T) {
	const key = "sk-ant-acp-0123456789abcdef"
	var buf bytes.Buffer
	old := log.Writer()
	log.SetOutput(&buf)
	defer log.SetOutput(old)
	w := logWriter{prefix: "agent a: acp: ", redact: redact.New([]string{"OPENAI_API_KEY=" + key})}
	slog.New(slog.NewTextHandler(w, nil)).Error("failed to parse incoming message", "raw", "OPENAI_API_KEY="+key+" {")
	if got := buf.String(); strings.Contains(got, key) || !strings.Contains(got, redact.Marker("OPENAI_API_KEY")) {
		t.Fatalf("the daemon's log got %q", got)
	}
}
