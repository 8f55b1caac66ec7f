package e2e

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kaimon/kaimon/internal/apitype"
	"github.com/kaimon/kaimon/internal/event"
	"github.com/kaimon/kaimon/internal/redact"
	"github.com/kaimon/kaimon/internal/testutil/agents"
)

// Credentials of the agents' environment in these tests: long enough to
// be redacted (redact.MinLen), unlike the harness's sk-fake.
const (
	secretKey   = "sk-ant-e2e-0123456789abcdefghijklmnop"
	secretToken = "deploy-e2e-9876543210zyxwvu"
)

// noSecret fails the test if what names holds either secret, or a piece
// of one (ten bytes of it): a key the model repeats streams in pieces,
// none of which may be published.
func noSecret(t *testing.T, what, s string) {
	t.Helper()
	for _, v := range []string{secretKey, secretToken} {
		for i := 0; i+10 <= len(v); i++ {
			if strings.Contains(s, v[i:i+10]) {
				t.Errorf("%s holds %q of the secret %q:\n%s", what, v[i:i+10], v, s)
				break
			}
		}
	}
}

// An agent program that prints its environment on stderr and fails to
// start: its stderr tail is in the open's error, the error event (so the
// event log and `kaimon tail`) and the agent's status, each with its
// credentials redacted; `kaimon daemon status` shows not even a
// fingerprint of the key.
func TestSecretsOfAFailedStart(t *testing.T) {
	e := newEnv(t, "KAIMON_CLAUDE_BIN", filepath.Join(agents.RepoRoot(), "internal", "e2e", "testdata", "standin-claude.sh"),
		"KAIMON_STANDIN", "printenv", "ANTHROPIC_API_KEY", secretKey, "DEPLOY_TOKEN", secretToken)
	tail := e.tail("agent:leaky", "--from-start", "--wait")
	e.waitTopic("agent:leaky", 1)

	r := e.kaimon("open", "--id", "leaky", e.work)
	if r.code == 0 || !strings.Contains(r.stderr, "exited before it was ready") {
		t.Fatalf("open of an agent that exits at once: %s", r)
	}
	noSecret(t, "the open's error", r.stderr)
	for _, m := range []string{redact.Marker("ANTHROPIC_API_KEY"), redact.Marker("DEPLOY_TOKEN")} {
		if !strings.Contains(r.stderr, m) {
			t.Errorf("the open's error does not say %q:\n%s", m, r.stderr)
		}
	}

	b, err := os.ReadFile(e.paths().Agent("leaky").Events)
	if err != nil {
		t.Fatal(err)
	}
	noSecret(t, "the event log", string(b))
	if !strings.Contains(string(b), redact.Marker("ANTHROPIC_API_KEY")) {
		t.Errorf("the event log has no redacted stderr:\n%s", b)
	}

	envs := tail.waitEnvelopes("the agent's death", func(envs []event.Envelope) bool {
		for _, env := range envs {
			if env.Kind == event.Status && strings.Contains(string(env.Data), string(apitype.Dead)) {
				return true
			}
		}
		return false
	})
	if !hasKind(envs, "leaky", event.Error) {
		t.Fatalf("kaimon tail saw no error event: %v", envs)
	}
	tail.mu.Lock()
	noSecret(t, "kaimon tail's output", strings.Join(tail.lines, "\n"))
	tail.mu.Unlock()

	noSecret(t, "the agent's status", e.ok("status", "leaky", "--json"))
	noSecret(t, "the list", e.ok("list", "--json"))
	noSecret(t, "its output", e.kaimon("output", "leaky", "--which", "all").String())

	st := e.ok("daemon", "status", "--json")
	sum := sha256.Sum256([]byte(secretKey))
	for _, fp := range []string{hex.EncodeToString(sum[:6]), hex.EncodeToString(sum[:3])} {
		if strings.Contains(st, fp) {
			t.Errorf("daemon status shows a fingerprint (%s) of ANTHROPIC_API_KEY:\n%s", fp, st)
		}
	}
	noSecret(t, "daemon status", st)
	if !strings.Contains(st, `"ANTHROPIC_API_KEY": "set"`) && !strings.Contains(st, `"ANTHROPIC_API_KEY":"set"`) {
		t.Errorf("daemon status does not say ANTHROPIC_API_KEY is set:\n%s", st)
	}
	if log, err := os.ReadFile(filepath.Join(e.home, "cache", "agents", "agentd.log")); err == nil {
		noSecret(t, "the daemon's log", string(log))
	}
}

// The real claude CLI runs `env` with its Bash tool (the fake API's "run
// command:"), and the fake model repeats the tool's output in its reply,
// streamed in pieces of 16 runes. The agent saw the output as it was;
// everything kaimon repeats of it (the reply `run` prints, the tool
// result and the text in the log, the live deltas `tail` prints, which
// still add up to their blocks, agent_output) has the credentials
// redacted.
func TestSecretsOfATurn(t *testing.T) {
	e := newEnv(t, "ANTHROPIC_API_KEY", secretKey, "DEPLOY_TOKEN", secretToken)
	id := e.ok("open", e.work, "--allow", "Bash")
	tail := e.tail("agent:"+id, "--turn", "1", "--until-result")
	e.waitTopic("agent:"+id, 1)

	out := e.ok("run", id, "run command: env")
	noSecret(t, "run's reply", out)
	if !strings.Contains(out, "DEPLOY_TOKEN="+redact.Marker("DEPLOY_TOKEN")) {
		t.Fatalf("the reply does not show the command's output redacted: %q", out)
	}

	if code := tail.wait(); code != 0 {
		t.Fatalf("tail --until-result exited %d: %s", code, tail.stderr.String())
	}
	envs := tail.envelopes()
	shape(t, envs) // the deltas, some held back, still add up to their blocks
	if countDeltas(envs) == 0 {
		t.Fatal("tail saw no deltas")
	}
	tail.mu.Lock()
	noSecret(t, "kaimon tail's output", strings.Join(tail.lines, "\n"))
	tail.mu.Unlock()
	var result string
	for _, env := range envs {
		if env.Kind == event.ToolResult {
			result = string(env.Data)
		}
	}
	if !strings.Contains(result, "DEPLOY_TOKEN="+redact.Marker("DEPLOY_TOKEN")) {
		t.Fatalf("the tool result is not the command's output redacted: %s", result)
	}

	b, err := os.ReadFile(e.paths().Agent(id).Events)
	if err != nil {
		t.Fatal(err)
	}
	noSecret(t, "the event log", string(b))
	noSecret(t, "agent_output", e.ok("output", id, "--which", "full_turn", "--include-tools"))
}
