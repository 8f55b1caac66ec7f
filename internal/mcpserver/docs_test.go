package mcpserver

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/kaimon/kaimon/internal/verbs"
)

// The list of kaimon mcp's tools in docs/mcp.md (the README's until it
// moved there) names every verb of the table, in its order: a verb added
// to the table and not to the list fails here.
func TestDocsListEveryTool(t *testing.T) {
	b, err := os.ReadFile("../../docs/mcp.md")
	if err != nil {
		t.Skip("no docs/mcp.md:", err)
	}
	_, list, ok := strings.Cut(string(b), "whose tools are the verbs:")
	if !ok {
		t.Fatal("docs/mcp.md has no list of kaimon mcp's tools")
	}
	list, _, _ = strings.Cut(list, "They are generated from")
	var listed, table []string
	for _, m := range regexp.MustCompile("`(agent_\\w+)`").FindAllStringSubmatch(list, -1) {
		listed = append(listed, m[1])
	}
	for _, v := range verbs.All {
		table = append(table, v.Name)
	}
	if !slices.Equal(listed, table) {
		t.Errorf("docs/mcp.md lists the tools %v, the verb table has %v", listed, table)
	}
}
