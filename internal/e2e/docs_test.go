package e2e

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kaimon/kaimon/internal/event"
	"github.com/kaimon/kaimon/internal/testutil/agents"
)

// docBlock is the first ```sh block of the doc at path (from the
// repository's root) after the line that holds after.
func docBlock(t *testing.T, path, after string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(agents.RepoRoot(), path))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(b), after)
	if !ok {
		t.Fatalf("%s has no %q", path, after)
	}
	_, rest, ok = strings.Cut(rest, "\n```sh\n")
	block, _, ok2 := strings.Cut(rest, "\n```\n")
	if !ok || !ok2 {
		t.Fatalf("%s has no sh block after %q", path, after)
	}
	return block
}

// TestDocsTailExample runs the docs' example (docs/playgrounds.md, the
// README's until it moved there) of a tail beside a replayed
// agent's turns, as a reader would, from a checkout with bin/ built, beside
// an agent of the reader's own: that agent goes on (the example closes
// only its own), what run shows is not mixed with tail's JSON, and the
// tail's file has the turns' events. The recording plays at speed=0
// rather than 0.25: the pace is not what is tested.
func TestDocsTailExample(t *testing.T) {
	e := newEnv(t)
	mine := e.ok("open", e.work, "--model", "replay:"+exampleLog()+"?speed=0")

	block := docBlock(t, "docs/playgrounds.md", "tail an agent while it works")
	if !strings.Contains(block, "speed=0.25") {
		t.Fatalf("the docs' tail example plays at another pace than the test expects:\n%s", block)
	}
	block = strings.ReplaceAll(block, "speed=0.25", "speed=0")
	dir := t.TempDir()
	for name, target := range map[string]string{"bin": binDir, "examples": filepath.Dir(exampleLog())} {
		if err := os.Symlink(target, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command("bash", "-e", "-c", block)
	cmd.Dir, cmd.Env = dir, e.env
	var so, se bytes.Buffer
	cmd.Stdout, cmd.Stderr = &so, &se
	if err := cmd.Run(); err != nil {
		t.Fatalf("the docs' tail example: %v\n%s\nstdout: %s\nstderr: %s", err, block, so.String(), se.String())
	}

	if st := e.statusOf(t, mine); st.Status == "dead" {
		t.Fatalf("the docs' tail example ended the reader's own agent: %+v", st)
	}
	// run's texts come first, unmixed; the JSON only from the file at the end.
	var texts, envs []string
	for _, l := range strings.Split(strings.TrimRight(so.String(), "\n"), "\n") {
		if strings.HasPrefix(l, "{") {
			envs = append(envs, l)
		} else if len(envs) > 0 {
			t.Fatalf("run's output after tail's JSON:\n%s", so.String())
		} else {
			texts = append(texts, l)
		}
	}
	if len(texts) != 3 || !strings.HasPrefix(texts[0], "Hello from fakeapi") || !strings.HasPrefix(texts[1], "Tool said:") || texts[2] != "closed" {
		t.Fatalf("the example printed %q before the file, want the two recorded turns' texts and close's \"closed\"", texts)
	}
	// The first turn's result at least: the second may be on its way to
	// tail when the example ends it.
	results := 0
	for _, l := range envs {
		var env event.Envelope
		if err := json.Unmarshal([]byte(l), &env); err != nil {
			t.Fatalf("tail's file has %q: %v", l, err)
		}
		if env.Kind == event.Result {
			results++
		}
	}
	if results == 0 {
		t.Fatalf("tail's file has no result:\n%s", strings.Join(envs, "\n"))
	}
}
