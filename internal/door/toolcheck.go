package door

import (
	"encoding/json"
	"log"
	"net/http"

	"github.com/kaimon/kaimon/internal/backend"
)

// serveToolCheck answers an ACP agent's bridge (opencode's plugin), which
// asks before each call of one of the agent's own tools whether the
// agent's preset allows it: POST backend.ToolCheckPath with
// backend.ToolCheckRequest, authenticated like every door request. The
// preset's deny half decides here (the deny list; under specialist or
// only, whatever allowed_tools does not name; kaimon's own tools by the
// door's rules); what it would ask about is allowed here, and the agent's
// own permission config asks kaimon through session/request_permission.
func (d *Door) serveToolCheck(w http.ResponseWriter, r *http.Request, c *caller) {
	if r.Method != http.MethodPost {
		http.Error(w, "POST a {\"tool\": …} object", http.StatusMethodNotAllowed)
		return
	}
	var req backend.ToolCheckRequest
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20)).Decode(&req); err != nil || req.Tool == "" {
		http.Error(w, "body must be a JSON object with a tool name", http.StatusBadRequest)
		return
	}
	tool := backend.NativeToolName(req.Tool, "")
	res := backend.ToolCheckResult{Allow: true, Tool: tool}
	if verb, ok := backend.KaimonVerb(tool); ok {
		if err := c.pol.DoorCheck(&c.opts, verb); err != nil {
			res.Allow, res.Reason = false, err.Error()
		}
	} else if v, why := c.pol.Permission(&c.opts, tool); v == backend.VerdictDeny {
		res.Allow, res.Reason = false, why
	}
	if !res.Allow {
		log.Printf("door: agent %s: bridge refuses %s (%s): %s", c.id, req.Tool, tool, res.Reason)
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(res)
}
