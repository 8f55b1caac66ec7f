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
	var res backend.ToolCheckResult
	res.Tool, res.Allow, res.Reason = c.pol.ToolCheck(req.Tool)
	if !res.Allow {
		log.Printf("door: agent %s: bridge refuses %s (%s): %s", c.id, req.Tool, res.Tool, res.Reason)
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(res)
}
