package e2e

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	sj "github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/kaimon/kaimon/internal/config"
)

// recordSchema is the schema of a line of an event log, $defs/record of
// what the built `kaimon schema events` prints: the document a consumer
// gets, not the package's value in this binary. It is made and compiled
// once per test binary.
var recordSchema = sync.OnceValues(func() (*sj.Schema, error) {
	cmd := exec.Command(filepath.Join(binDir, "kaimon"), "schema", "events")
	cmd.Env = []string{"HOME=" + os.TempDir(), "KAIMON_NO_AUTOSTART=1", "GORACE=" + os.Getenv("GORACE")}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("kaimon schema events: %v: %s", err, stderr.String())
	}
	doc, err := sj.UnmarshalJSON(bytes.NewReader(out))
	if err != nil {
		return nil, fmt.Errorf("kaimon schema events printed no JSON: %v", err)
	}
	c := sj.NewCompiler()
	if err := c.AddResource("urn:kaimon:schema:events", doc); err != nil {
		return nil, err
	}
	return c.Compile("urn:kaimon:schema:events#/$defs/record")
})

// checkEventLogs fails t for each line of each event log in cacheDir that
// does not validate against recordSchema, naming the file, the line and
// the validation error: every event the end-to-end tests make is checked
// against `kaimon schema events`. A last line without its newline is left
// alone: it is torn (a write cut short), which readers skip and report.
func checkEventLogs(t testing.TB, cacheDir string) {
	t.Helper()
	ents, err := os.ReadDir(cacheDir)
	if err != nil {
		return
	}
	var s *sj.Schema
	for _, ent := range ents {
		id, _, ok := config.AgentFileOf(ent.Name())
		if !ok || filepath.Base((config.Paths{CacheDir: cacheDir}).Agent(id).Events) != ent.Name() {
			continue
		}
		if s == nil {
			if s, err = recordSchema(); err != nil {
				t.Errorf("the events schema: %v", err)
				return
			}
		}
		path := filepath.Join(cacheDir, ent.Name())
		b, err := os.ReadFile(path)
		if err != nil {
			t.Errorf("reading %s: %v", path, err)
			continue
		}
		bad, lines, torn := 0, bytes.Count(b, []byte("\n")), !bytes.HasSuffix(b, []byte("\n"))
		sc := bufio.NewScanner(bytes.NewReader(b))
		sc.Buffer(nil, len(b)+1)
		for n := 1; sc.Scan(); n++ {
			line := sc.Bytes()
			if n == lines+1 && torn {
				break // torn
			}
			inst, err := sj.UnmarshalJSON(bytes.NewReader(line))
			if err == nil {
				err = s.Validate(inst)
			}
			if err != nil {
				t.Errorf("%s:%d does not validate against kaimon schema events ($defs/record): %v\n%s", path, n, err, line)
				if bad++; bad == 3 {
					t.Errorf("%s: not checking its other lines", path)
					break
				}
			}
		}
	}
}
