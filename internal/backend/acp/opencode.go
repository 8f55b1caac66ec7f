package acp

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/kaimon/kaimon/internal/backend"
	"github.com/kaimon/kaimon/internal/backend/host"
	"github.com/kaimon/kaimon/internal/policy"
)

// opencode runs with a per-session generated config (spec: "Each session
// gets its own generated opencode config"): XDG_CONFIG_HOME points at
// the agent's Files().Opencode (<cache>/<id>-opencode), whose opencode/opencode.json holds the model, the
// preset's permissions and the user's own provider block, and whose
// opencode/plugin/kaimon-bridge.js asks the daemon before each tool call.
// OPENCODE_DISABLE_PROJECT_CONFIG keeps a project's opencode.json from
// loosening the preset, and OPENCODE_PERMISSION repeats it at the top of
// opencode's precedence. The directory holds the agent's door token, so it
// is private (0700) and removed when the agent exits.

// pluginVersion is what the generated config dir's package.json and lock
// claim to hold, so that opencode (1.18) finds its dependency installed and
// does not run its first-run `npm install @opencode-ai/plugin` (which waits
// for the registry before any plugin loads). The bridge imports nothing.
const pluginVersion = "1.18.33"

// writeOpencodeConfig generates the agent's config home and returns the
// environment opencode needs on top of env.
func writeOpencodeConfig(o *backend.Options, pol *policy.Policy, model string, env []string) ([]string, error) {
	if o.CacheDir == "" {
		return nil, fmt.Errorf("acp:opencode needs a cache dir for its generated config")
	}
	home := o.Files().Opencode
	dir := filepath.Join(home, "opencode")
	os.RemoveAll(home)
	for _, d := range []string{filepath.Join(dir, "plugin"), filepath.Join(dir, "node_modules")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("opencode config for agent %s: %w", o.ID, err)
		}
	}
	user := userOpencodeConfig(env)
	perm := OpencodePermission(pol)
	cfg := map[string]any{
		"$schema":    "https://opencode.ai/config.json",
		"permission": perm,
		"autoupdate": false,
		"share":      "disabled",
	}
	if p, ok := user["provider"]; ok {
		cfg["provider"] = p
	}
	if model != "" {
		cfg["model"] = model
	} else {
		// No model named at open: the user's own choice, so that the
		// agent still runs on the model they configured.
		for _, k := range []string{"model", "small_model"} {
			if v, ok := user[k]; ok {
				cfg[k] = v
			}
		}
	}
	if o.SystemPrompt != "" {
		path := filepath.Join(dir, "kaimon-system-prompt.md")
		if err := os.WriteFile(path, []byte(o.SystemPrompt+"\n"), 0o600); err != nil {
			return nil, err
		}
		cfg["instructions"] = []string{path}
	}
	files := map[string][]byte{
		filepath.Join(dir, "opencode.json"):              mustJSON(cfg),
		filepath.Join(dir, "package.json"):               mustJSON(map[string]any{"private": true, "dependencies": map[string]string{"@opencode-ai/plugin": pluginVersion}}),
		filepath.Join(dir, "package-lock.json"):          mustJSON(map[string]any{"lockfileVersion": 3, "requires": true, "packages": map[string]any{"": map[string]any{"dependencies": map[string]string{"@opencode-ai/plugin": pluginVersion}}}}),
		filepath.Join(dir, "plugin", "kaimon-bridge.js"): []byte(bridgePlugin(o)),
	}
	for path, b := range files {
		if err := os.WriteFile(path, b, 0o600); err != nil {
			return nil, fmt.Errorf("opencode config for agent %s: %w", o.ID, err)
		}
	}
	add := []string{
		"XDG_CONFIG_HOME=" + home,
		"OPENCODE_DISABLE_PROJECT_CONFIG=1",
		"OPENCODE_PERMISSION=" + string(mustJSON(perm)),
		"OPENCODE_DISABLE_AUTOUPDATE=1",
		// The default plugins are npm packages opencode would install.
		"OPENCODE_DISABLE_DEFAULT_PLUGINS=1",
	}
	if _, ok := hasEnv(env, "OPENCODE_DISABLE_MODELS_FETCH"); !ok {
		// The model catalogue is fetched from the network at start; the
		// bundled one and the user's provider block are enough.
		add = append(add, "OPENCODE_DISABLE_MODELS_FETCH=1")
	}
	return add, nil
}

// userOpencodeConfig reads the user's own global opencode config (as env
// locates it: $OPENCODE_CONFIG, $XDG_CONFIG_HOME/opencode or
// ~/.config/opencode, opencode.json, opencode.jsonc, config.json), merged
// key by key, later files winning.
func userOpencodeConfig(env []string) map[string]any {
	dir := host.LookupEnv(env, "XDG_CONFIG_HOME")
	if dir == "" {
		home := host.LookupEnv(env, "HOME")
		if home == "" {
			home, _ = os.UserHomeDir()
		}
		dir = filepath.Join(home, ".config")
	}
	dir = filepath.Join(dir, "opencode")
	paths := []string{filepath.Join(dir, "config.json"), filepath.Join(dir, "opencode.json"), filepath.Join(dir, "opencode.jsonc")}
	if p := host.LookupEnv(env, "OPENCODE_CONFIG"); p != "" {
		paths = append(paths, p)
	}
	out := map[string]any{}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		var m map[string]any
		if json.Unmarshal(StripJSONC(b), &m) != nil {
			continue
		}
		for k, v := range m {
			out[k] = v
		}
	}
	return out
}

// StripJSONC turns JSON with comments and trailing commas (opencode.jsonc)
// into JSON.
func StripJSONC(b []byte) []byte {
	var out []byte
	inStr, esc := false, false
	for i := 0; i < len(b); i++ {
		c := b[i]
		if inStr {
			out = append(out, c)
			switch {
			case esc:
				esc = false
			case c == '\\':
				esc = true
			case c == '"':
				inStr = false
			}
			continue
		}
		switch {
		case c == '"':
			inStr = true
			out = append(out, c)
		case c == '/' && i+1 < len(b) && b[i+1] == '/':
			for i < len(b) && b[i] != '\n' {
				i++
			}
			out = append(out, '\n')
		case c == '/' && i+1 < len(b) && b[i+1] == '*':
			i += 2
			for i+1 < len(b) && !(b[i] == '*' && b[i+1] == '/') {
				i++
			}
			i++
		case c == ']' || c == '}':
			// Drop a trailing comma before the closing bracket.
			j := len(out) - 1
			for j >= 0 && (out[j] == ' ' || out[j] == '\t' || out[j] == '\n' || out[j] == '\r') {
				j--
			}
			if j >= 0 && out[j] == ',' {
				out = append(out[:j], out[j+1:]...)
			}
			out = append(out, c)
		default:
			out = append(out, c)
		}
	}
	return out
}

// bridgePlugin is the opencode plugin that asks kaimon before each tool
// call: POST <door>/v1/tool-check with the agent's token. A refusal throws,
// which opencode turns into the tool's error. When the daemon cannot be
// reached (or no longer admits the agent), mutating tools are refused and
// read-only ones go ahead.
func bridgePlugin(o *backend.Options) string {
	url, token := "", ""
	if o.Door != nil {
		url = strings.TrimSuffix(o.Door.URL, "/mcp") + backend.ToolCheckPath
		token = o.Door.Token
	}
	q := func(s string) string { return string(mustJSON(s)) }
	return `// kaimon bridge for agent ` + o.ID + `: generated by kaimon-agentd, removed when the agent exits.
// Before each tool call it asks kaimon whether the agent's preset allows it.
const URL = ` + q(url) + `;
const AGENT = ` + q(o.ID) + `;
const TOKEN = ` + q(token) + `;
const MUTATING = new Set(["bash", "edit", "write", "patch", "multiedit", "apply_patch"]);

export const KaimonBridge = async () => ({
  "tool.execute.before": async (input, output) => {
    const tool = String(input && input.tool);
    let verdict;
    try {
      if (!URL) throw new Error("kaimon's MCP door is not running");
      const res = await fetch(URL, {
        method: "POST",
        headers: {"Content-Type": "application/json", "Authorization": "Bearer " + TOKEN, "X-Kaimon-Agent": AGENT},
        body: JSON.stringify({tool, args: (output && output.args) || {}}),
        signal: AbortSignal.timeout(10000),
      });
      if (!res.ok) throw new Error("HTTP " + res.status);
      verdict = await res.json();
    } catch (e) {
      if (MUTATING.has(tool)) {
        throw new Error("kaimon refused " + tool + ": kaimon-agentd could not be reached to check it against this agent's preset (" + (e && e.message) + ")");
      }
      return;
    }
    if (!verdict.allow) throw new Error("kaimon refused " + tool + ": " + verdict.reason);
  },
});
`
}

func mustJSON(v any) []byte {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		panic(err)
	}
	return b
}
