package local

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/kaimon/kaimon/internal/confine"
	"github.com/kaimon/kaimon/internal/proc"
)

// toolDef is one built-in tool: its name as the model sees it, the claude
// CLI's name of the same tool (what presets and allowed_tools name), its
// ACP kind, and its JSON schema.
type toolDef struct {
	Name        string
	Native      string
	Kind        string // ACP tool kind: read | edit | search | execute
	Description string
	Parameters  map[string]any
}

func obj(required []string, props map[string]any) map[string]any {
	return map[string]any{"type": "object", "properties": props, "required": required}
}

func str(doc string) map[string]any { return map[string]any{"type": "string", "description": doc} }
func integer(doc string) map[string]any {
	return map[string]any{"type": "integer", "description": doc}
}

// Limits of the built-in tools.
const (
	maxReadBytes    = 256 << 10 // read_file's text
	maxToolOutput   = 64 << 10  // bash's and grep's output
	maxGrepMatches  = 200
	maxListEntries  = 1000
	maxGrepFileSize = 4 << 20
	// DefaultBashTimeout and MaxBashTimeout bound one bash call.
	DefaultBashTimeout = 120 * time.Second
	MaxBashTimeout     = 600 * time.Second
	// bashStopGrace is how long a bash command has after SIGTERM.
	bashStopGrace = 2 * time.Second
)

// Tools are the built-in tools, in the order they are offered.
var Tools = []toolDef{
	{Name: "read_file", Native: "Read", Kind: "read",
		Description: "Read a text file in the working directory. Paths are relative to the working directory (or absolute inside it).",
		Parameters: obj([]string{"path"}, map[string]any{
			"path":   str("the file's path"),
			"offset": integer("the first line to return, from 1 (optional)"),
			"limit":  integer("how many lines to return (optional)"),
		})},
	{Name: "write_file", Native: "Write", Kind: "edit",
		Description: "Create or overwrite a file in the working directory with the given content; missing directories are made.",
		Parameters: obj([]string{"path", "content"}, map[string]any{
			"path":    str("the file's path"),
			"content": str("the file's whole new content"),
		})},
	{Name: "edit_file", Native: "Edit", Kind: "edit",
		Description: "Replace an exact string in a file of the working directory. old_string must occur exactly once in the file.",
		Parameters: obj([]string{"path", "old_string", "new_string"}, map[string]any{
			"path":       str("the file's path"),
			"old_string": str("the exact text to replace, unique in the file"),
			"new_string": str("the text to put in its place"),
		})},
	{Name: "list_dir", Native: "Glob", Kind: "search",
		Description: "List a directory of the working directory: one entry a line, directories with a trailing /.",
		Parameters: obj([]string{}, map[string]any{
			"path": str("the directory (default: the working directory)"),
		})},
	{Name: "grep", Native: "Grep", Kind: "search",
		Description: "Search files under the working directory (or under path) for a regular expression (Go RE2 syntax); prints file:line: text.",
		Parameters: obj([]string{"pattern"}, map[string]any{
			"pattern": str("the regular expression"),
			"path":    str("a file or directory to search (default: the working directory)"),
		})},
	{Name: "bash", Native: "Bash", Kind: "execute",
		Description: "Run a command with bash -c in the working directory; prints its combined stdout and stderr and its exit code.",
		Parameters: obj([]string{"command"}, map[string]any{
			"command": str("the command line"),
			"timeout": integer("seconds before the command is killed (default 120, at most 600)"),
		})},
}

// toolByName finds a built-in tool.
func toolByName(name string) (toolDef, bool) {
	for _, t := range Tools {
		if t.Name == name {
			return t, true
		}
	}
	return toolDef{}, false
}

// toolsJSON renders tools in the function-calling shape both APIs take.
func toolsJSON(tools []toolDef) []map[string]any {
	out := make([]map[string]any, 0, len(tools))
	for _, t := range tools {
		out = append(out, map[string]any{"type": "function", "function": map[string]any{
			"name": t.Name, "description": t.Description, "parameters": t.Parameters}})
	}
	return out
}

// toolArgs are the arguments of every built-in tool, each using some.
type toolArgs struct {
	Path      string `json:"path"`
	Offset    int    `json:"offset"`
	Limit     int    `json:"limit"`
	Content   string `json:"content"`
	OldString string `json:"old_string"`
	NewString string `json:"new_string"`
	Pattern   string `json:"pattern"`
	Command   string `json:"command"`
	Timeout   int    `json:"timeout"`
}

func parseArgs(raw json.RawMessage) (toolArgs, error) {
	var a toolArgs
	if err := json.Unmarshal(raw, &a); err != nil {
		return a, fmt.Errorf("the arguments are not a JSON object of this tool's parameters: %v", err)
	}
	return a, nil
}

// workdir is the agent's cwd with the confinement its tools keep to.
type workdir struct {
	root confine.Root
	env  []string
}

// resolve makes path absolute against the cwd and confines it.
func (w *workdir) resolve(path string) (string, error) {
	if strings.TrimSpace(path) == "" {
		path = "."
	}
	if !filepath.IsAbs(path) {
		path = filepath.Join(w.root.Dir(), path)
	}
	return w.root.Resolve(path)
}

// resolveWrite is resolve for a path a tool writes: not through a .git
// (confine.Root.ResolveWrite).
func (w *workdir) resolveWrite(path string) (string, error) {
	if !filepath.IsAbs(path) {
		path = filepath.Join(w.root.Dir(), path)
	}
	return w.root.ResolveWrite(path)
}

// checkPaths confines the paths a call's arguments name, before the call
// is asked about or run.
func (w *workdir) checkPaths(def toolDef, a toolArgs) error {
	switch def.Name {
	case "bash":
		return nil
	case "grep", "list_dir":
		_, err := w.resolve(a.Path)
		return err
	case "write_file", "edit_file":
		if strings.TrimSpace(a.Path) == "" {
			return errors.New("path is required")
		}
		_, err := w.resolveWrite(a.Path)
		return err
	default:
		if strings.TrimSpace(a.Path) == "" {
			return errors.New("path is required")
		}
		_, err := w.resolve(a.Path)
		return err
	}
}

// run runs one call; the text is what the model reads back, err a failure
// (its message is the model's to read, too).
func (w *workdir) run(ctx context.Context, def toolDef, a toolArgs) (string, error) {
	switch def.Name {
	case "read_file":
		return w.readFile(a)
	case "write_file":
		return w.writeFile(a)
	case "edit_file":
		return w.editFile(a)
	case "list_dir":
		return w.listDir(a)
	case "grep":
		return w.grep(ctx, a)
	case "bash":
		return w.bash(ctx, a)
	}
	return "", fmt.Errorf("unknown tool %s", def.Name)
}

func (w *workdir) readFile(a toolArgs) (string, error) {
	p, err := w.resolve(a.Path)
	if err != nil {
		return "", err
	}
	f, err := os.Open(p)
	if err != nil {
		return "", err
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil {
		return "", err
	} else if st.IsDir() {
		return "", fmt.Errorf("%s is a directory: use list_dir", a.Path)
	}
	b, err := io.ReadAll(io.LimitReader(f, maxReadBytes+1))
	if err != nil {
		return "", err
	}
	cut := len(b) > maxReadBytes
	if cut {
		b = b[:maxReadBytes]
	}
	text := string(b)
	if a.Offset > 0 || a.Limit > 0 {
		lines := strings.SplitAfter(text, "\n")
		from := max(a.Offset-1, 0)
		from = min(from, len(lines))
		to := len(lines)
		if a.Limit > 0 && a.Limit < to-from {
			to = from + a.Limit
		}
		text = strings.Join(lines[from:to], "")
	}
	if cut {
		text += fmt.Sprintf("\n[kaimon: cut at %d bytes; read on with offset and limit]", maxReadBytes)
	}
	return text, nil
}

func (w *workdir) writeFile(a toolArgs) (string, error) {
	p, err := w.resolveWrite(a.Path)
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return "", err
	}
	// The directories just made must still be inside.
	if _, err := w.root.Resolve(filepath.Dir(p)); err != nil {
		return "", err
	}
	mode := fs.FileMode(0o644)
	if st, err := os.Stat(p); err == nil {
		if st.IsDir() {
			return "", fmt.Errorf("%s is a directory", a.Path)
		}
		mode = st.Mode().Perm()
	}
	if err := os.WriteFile(p, []byte(a.Content), mode); err != nil {
		return "", err
	}
	return fmt.Sprintf("wrote %d bytes to %s", len(a.Content), a.Path), nil
}

func (w *workdir) editFile(a toolArgs) (string, error) {
	p, err := w.resolveWrite(a.Path)
	if err != nil {
		return "", err
	}
	if a.OldString == "" {
		return "", errors.New("old_string is empty: use write_file to create a file")
	}
	b, err := os.ReadFile(p)
	if err != nil {
		return "", err
	}
	switch n := strings.Count(string(b), a.OldString); n {
	case 0:
		return "", fmt.Errorf("old_string not found in %s", a.Path)
	case 1:
	default:
		return "", fmt.Errorf("old_string occurs %d times in %s: give more context so that it is unique", n, a.Path)
	}
	st, err := os.Stat(p)
	if err != nil {
		return "", err
	}
	out := strings.Replace(string(b), a.OldString, a.NewString, 1)
	if err := os.WriteFile(p, []byte(out), st.Mode().Perm()); err != nil {
		return "", err
	}
	return "edited " + a.Path, nil
}

func (w *workdir) listDir(a toolArgs) (string, error) {
	p, err := w.resolve(a.Path)
	if err != nil {
		return "", err
	}
	ents, err := os.ReadDir(p)
	if err != nil {
		return "", err
	}
	var sb strings.Builder
	for i, e := range ents {
		if i == maxListEntries {
			fmt.Fprintf(&sb, "[kaimon: %d more entries not shown]\n", len(ents)-i)
			break
		}
		sb.WriteString(e.Name())
		if e.IsDir() {
			sb.WriteByte('/')
		}
		sb.WriteByte('\n')
	}
	if sb.Len() == 0 {
		return "(empty directory)", nil
	}
	return sb.String(), nil
}

func (w *workdir) grep(ctx context.Context, a toolArgs) (string, error) {
	re, err := regexp.Compile(a.Pattern)
	if err != nil {
		return "", fmt.Errorf("pattern: %v", err)
	}
	start, err := w.resolve(a.Path)
	if err != nil {
		return "", err
	}
	var out strings.Builder
	matches := 0
	full := errors.New("full")
	err = filepath.WalkDir(start, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil // unreadable: skip
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if d.IsDir() {
			if path != start && (d.Name() == ".git" || d.Name() == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() {
			return nil // symlinks are not followed out of the cwd
		}
		info, err := d.Info()
		if err != nil || info.Size() > maxGrepFileSize {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil || bytes.IndexByte(b, 0) >= 0 {
			return nil // binary
		}
		rel, _ := filepath.Rel(w.root.Dir(), path)
		for i, line := range strings.Split(string(b), "\n") {
			if !re.MatchString(line) {
				continue
			}
			matches++
			if matches > maxGrepMatches || out.Len() > maxToolOutput {
				return full
			}
			fmt.Fprintf(&out, "%s:%d: %s\n", rel, i+1, line)
		}
		return nil
	})
	if errors.Is(err, full) {
		fmt.Fprintf(&out, "[kaimon: stopped at %d matches or %d bytes]\n", maxGrepMatches, maxToolOutput)
	} else if err != nil {
		return "", err
	}
	if out.Len() == 0 {
		return "no matches", nil
	}
	return out.String(), nil
}

// boundedBuffer keeps the first max bytes written and counts the rest.
type boundedBuffer struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	max     int
	dropped int
}

func (b *boundedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	room := b.max - b.buf.Len()
	if room >= len(p) {
		b.buf.Write(p)
	} else {
		if room > 0 {
			b.buf.Write(p[:room])
		}
		b.dropped += len(p) - max(room, 0)
	}
	return len(p), nil
}

func (b *boundedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.buf.String()
	if b.dropped > 0 {
		s += fmt.Sprintf("\n[kaimon: %d more bytes of output not shown]", b.dropped)
	}
	return s
}

// bash runs the command with bash -c in the cwd, in a process group of its
// own (internal/proc), stdin empty, until it exits, its timeout passes, or
// ctx ends (interrupt, close): then the whole group is stopped, gently and
// then hard. What the command left running in its group is stopped when
// it exits, so that a tool call leaks no process.
func (w *workdir) bash(ctx context.Context, a toolArgs) (string, error) {
	if strings.TrimSpace(a.Command) == "" {
		return "", errors.New("command is empty")
	}
	timeout := DefaultBashTimeout
	if a.Timeout > 0 {
		timeout = min(time.Duration(a.Timeout)*time.Second, MaxBashTimeout)
	}
	cmd := exec.Command("bash", "-c", a.Command)
	cmd.Dir = w.root.Dir()
	cmd.Env = w.env
	out := &boundedBuffer{max: maxToolOutput}
	cmd.Stdout, cmd.Stderr = out, out
	// A background job that keeps the pipe open must not hold the call.
	cmd.WaitDelay = bashStopGrace
	child, err := proc.Start(cmd)
	if err != nil {
		return "", fmt.Errorf("starting bash: %w", err)
	}
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	var why error
	select {
	case <-child.Done():
	case <-timer.C:
		why = fmt.Errorf("the command did not end within %s, so kaimon killed it", timeout)
	case <-ctx.Done():
		why = errors.New("the command was stopped: the turn was interrupted")
	}
	child.Stop(bashStopGrace) // the whole group, also after a clean exit
	text := out.String()
	if why != nil {
		return text, why
	}
	code := child.ExitCode()
	if code != 0 {
		return text, fmt.Errorf("exit code %d", code)
	}
	if text == "" {
		text = "(no output)"
	}
	return text, nil
}

// sortedNames lists tool names, for messages.
func sortedNames(defs []toolDef) string {
	var n []string
	for _, d := range defs {
		n = append(n, d.Name)
	}
	sort.Strings(n)
	return strings.Join(n, ", ")
}
