package acp

import (
	"strings"

	"github.com/kaimon/kaimon/internal/backend/host"
	"github.com/kaimon/kaimon/internal/policy"
)

// permissionEnv sets, for an agent on RoutePermissionEnv, the preset's
// permission overlay in the agent's PermissionEnv and the variable that
// keeps the project's own config (which could loosen it) from loading.
func permissionEnv(a *Agent, pol *policy.Policy, env []string) []string {
	env = host.SetEnv(env, a.PermissionEnv, string(mustJSON(PermissionOverlay(pol))))
	if a.NoProjectConfigEnv != "" {
		env = host.SetEnv(env, a.NoProjectConfigEnv, "1")
	}
	return env
}

// PermissionOverlay is the preset as the opencode permission config that a
// RoutePermissionEnv agent lays over its own: OpencodePermission, plus
// what opencode's bridge plugin would otherwise hold, since such an agent
// has none:
//   - a Bash(pattern) of the deny list denies that command pattern (the
//     keys are wildcards, the last match wins, and "*" sorts first);
//   - an MCP tool of the deny list (mcp__SERVER__TOOL, mcp__SERVER,
//     mcp__SERVER__*) denies the tool as opencode names it (SERVER_TOOL,
//     SERVER_*), so that the model is not offered it: the guarded kaimon
//     verbs, which the door would refuse anyway, and the tools of the
//     caller's other servers, which no door sees;
//   - under a whole tool set (specialist, only), "*" denies every tool no
//     key names (the agent's own extras: kilo's board, recall, skill,
//     question, suggest tools), kaimon's door tools aside, which the door
//     checks against the allowlist itself.
func PermissionOverlay(pol *policy.Policy) map[string]any {
	out := OpencodePermission(pol)
	var deny []string
	for _, e := range pol.Deny {
		if p, ok := strings.CutPrefix(strings.TrimSpace(e), "Bash("); ok && strings.HasSuffix(p, ")") {
			deny = append(deny, strings.TrimSuffix(p, ")"))
		}
	}
	if len(deny) > 0 && out["bash"] != "deny" {
		pats, ok := out["bash"].(map[string]any)
		if !ok {
			pats = map[string]any{"*": out["bash"]}
		}
		for _, p := range deny {
			pats[p] = "deny"
		}
		out["bash"] = pats
	}
	for _, e := range pol.Deny {
		if k := opencodeMCPKey(e); k != "" {
			out[k] = "deny"
		}
	}
	if pol.WholeSet() {
		out["*"] = "deny"
		if _, ok := out["kaimon_*"]; !ok {
			out["kaimon_*"] = "allow"
		}
	}
	return out
}

// opencodeMCPKey is opencode's permission key for a claude-style MCP tool
// name (its tools are SERVER_TOOL, each name with what is not a letter,
// digit, _ or - replaced by _), "" for a name that is not one.
func opencodeMCPKey(name string) string {
	rest, ok := strings.CutPrefix(strings.TrimSpace(name), "mcp__")
	if !ok || rest == "" {
		return ""
	}
	server, tool, _ := strings.Cut(rest, "__")
	if tool == "" || tool == "*" {
		return sanitizeMCP(server) + "_*"
	}
	return sanitizeMCP(server) + "_" + sanitizeMCP(tool)
}

func sanitizeMCP(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '_' || r == '-' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			return r
		}
		return '_'
	}, s)
}
