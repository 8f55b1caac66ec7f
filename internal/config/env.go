package config

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"slices"
	"sort"
	"strings"

	"github.com/kaimon/kaimon/internal/redact"
)

// CredentialSet is the fingerprint of every credential that is set
// (EnvFingerprints).
const CredentialSet = "set"

// Relevant reports whether the environment variable name changes what the
// daemon does for its agents, so that a client whose value differs from the
// running daemon's may be surprised: the agent programs (KAIMON_*_BIN) and
// the model API settings the claude CLI reads (ANTHROPIC_*), and the model
// servers of local agents (KAIMON_OLLAMA_URL, KAIMON_VMLX_URL, OLLAMA_HOST).
// KAIMON_AGENTD_BIN only tells a client which daemon to start.
func Relevant(name string) bool {
	switch {
	case strings.HasPrefix(name, "ANTHROPIC_"):
		return true
	case name == "KAIMON_OLLAMA_URL" || name == "KAIMON_VMLX_URL" || name == "OLLAMA_HOST":
		return true
	}
	return strings.HasPrefix(name, "KAIMON_") && strings.HasSuffix(name, "_BIN") && name != "KAIMON_AGENTD_BIN"
}

// EnvFingerprints maps each relevant variable set (non-empty) in environ to
// a short SHA-256 fingerprint of its value. It lets a client tell that its
// environment differs from the daemon's without either revealing a value.
// A credential (ANTHROPIC_API_KEY, ANTHROPIC_AUTH_TOKEN: redact.Credential)
// maps to CredentialSet instead: daemon status shows no fingerprint of a
// key, since a short hash of a guessable one (a password) gives it away,
// and even of a strong one tells who holds which key. So a client can tell
// a key set from one unset, not one key from another.
//
// A program named by a relative path is fingerprinted as the absolute path
// it means here (AbsEnv): the daemon's value is absolute, and the same
// program named from the directory the daemon was started in must not
// differ from it, nor one named from elsewhere match it.
func EnvFingerprints(environ []string) map[string]string {
	out := map[string]string{}
	cwd, _ := os.Getwd()
	for _, kv := range environ {
		name, val, ok := strings.Cut(kv, "=")
		if !ok || val == "" || !Relevant(name) {
			continue
		}
		if redact.Credential(name) {
			out[name] = CredentialSet
			continue
		}
		if cwd != "" && slices.Contains(programVars(), name) {
			val = absProgram(cwd, val)
		}
		sum := sha256.Sum256([]byte(val))
		out[name] = hex.EncodeToString(sum[:6])
	}
	return out
}

// EnvDiff names, sorted, the variables whose fingerprints differ between a
// and b, including those set in only one of them. A credential differs
// only by being set in one and not the other: a daemon older than
// CredentialSet gives a hash for it, which a newer client does not.
func EnvDiff(a, b map[string]string) []string {
	var out []string
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v && !redact.Credential(k) {
			out = append(out, k)
		}
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}
