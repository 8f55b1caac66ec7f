package agentbin

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// Every program's Tested is the version package.json pins for its
// package (what .ci/run installs and the end-to-end tests drive), and
// every program has one: a pin bumped in one place only fails here.
func TestTestedIsThePin(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "package.json"))
	if err != nil {
		t.Fatal(err)
	}
	var pkg struct {
		DevDependencies map[string]string `json:"devDependencies"`
	}
	if err := json.Unmarshal(b, &pkg); err != nil {
		t.Fatalf("package.json: %v", err)
	}
	for _, p := range All() {
		pin, ok := pkg.DevDependencies[p.Package]
		switch {
		case p.Package == "" || p.Tested == "":
			t.Errorf("%s: no package or tested version in the catalogue", p.Name)
		case !ok:
			t.Errorf("%s: package.json pins no %s", p.Name, p.Package)
		case pin != p.Tested:
			t.Errorf("%s: the catalogue says kaimon tests %s %s, package.json pins %s", p.Name, p.Package, p.Tested, pin)
		}
	}
}
