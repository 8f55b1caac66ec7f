package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/kaimon/kaimon/internal/agentbin"
	"github.com/kaimon/kaimon/internal/apitype"
	kcli "github.com/kaimon/kaimon/internal/cli"
	"github.com/kaimon/kaimon/internal/event"
	"github.com/kaimon/kaimon/internal/proc"
	"github.com/kaimon/kaimon/internal/verbs"
)

// shells drives the generated completion scripts in real bash, zsh and
// fish, with the built kaimon first on PATH, in the installation e.
type shells struct {
	t    *testing.T
	e    *kenv
	env  []string
	dir  string // where the shells run: holds the project directory
	file map[string]string
	zsh  *tmuxZsh
}

func newShells(t *testing.T, e *kenv) *shells {
	t.Helper()
	for _, sh := range kcli.Shells {
		if _, err := exec.LookPath(sh); err != nil {
			if os.Getenv("CI") != "" {
				t.Fatalf("%s is not installed (scripts/setup-test.sh installs it)", sh)
			}
			t.Skipf("%s is not installed: run scripts/setup-test.sh", sh)
		}
	}
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Skip("tmux is not installed: run scripts/setup-test.sh")
	}
	s := &shells{t: t, e: e, dir: e.home, file: map[string]string{}}
	for _, kv := range e.env {
		if !strings.HasPrefix(kv, "PATH=") {
			s.env = append(s.env, kv)
		}
	}
	s.env = append(s.env, "PATH="+binDir+string(os.PathListSeparator)+os.Getenv("PATH"), "TERM=xterm")
	for _, sh := range kcli.Shells {
		script := e.ok("completion", sh) + "\n"
		f := filepath.Join(e.home, "kaimon."+sh)
		if err := os.WriteFile(f, []byte(script), 0o644); err != nil {
			t.Fatal(err)
		}
		s.file[sh] = f
	}
	return s
}

// run runs a shell command line to its end, in its own process group.
func (s *shells) run(name string, args ...string) string {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir, cmd.Env = s.dir, s.env
	proc.Setpgid(cmd)
	out, err := cmd.Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		s.t.Fatalf("%s %q: %v\n%s%s", name, args, err, out, stderr)
	}
	return string(out)
}

func lines(s string) []string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if l != "" {
			out = append(out, l)
		}
	}
	return out
}

// bashWords splits a command line as readline does for COMP_WORDS: at
// blanks, outside quotes, with each run of the word-break characters : and
// = a word of its own (see the bash manual, COMP_WORDBREAKS).
func bashWords(line string) []string {
	var words []string
	var w strings.Builder
	var quote rune
	inBreak := false
	flush := func() {
		if w.Len() > 0 {
			words = append(words, w.String())
			w.Reset()
		}
	}
	for _, r := range line {
		switch {
		case quote != 0:
			w.WriteRune(r)
			if r == quote {
				quote = 0
			}
			continue
		case r == ' ' || r == '\t':
			flush()
			inBreak = false
			continue
		case r == ':' || r == '=':
			if !inBreak {
				flush()
			}
			inBreak = true
		default:
			if inBreak {
				flush()
			}
			inBreak = false
			if r == '\'' || r == '"' {
				quote = r
			}
		}
		w.WriteRune(r)
	}
	if w.Len() > 0 {
		words = append(words, w.String())
	} else {
		words = append(words, "")
	}
	return words
}

// tildeKaimon links the built kaimon into ~/tildebin (the shells' HOME,
// not on their PATH) and returns its path as typed: ~/tildebin/kaimon.
func (s *shells) tildeKaimon() string {
	s.t.Helper()
	var home string
	for _, kv := range s.env {
		if v, ok := strings.CutPrefix(kv, "HOME="); ok {
			home = v
		}
	}
	if home == "" {
		s.t.Fatal("the shells have no HOME")
	}
	dir := filepath.Join(home, "tildebin")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		s.t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(binDir, "kaimon"), filepath.Join(dir, "kaimon")); err != nil && !os.IsExist(err) {
		s.t.Fatal(err)
	}
	return "~/tildebin/kaimon"
}

func shQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// bash loads the script and calls its completion function as readline
// would for line with the cursor at its end; returns COMPREPLY.
func (s *shells) bash(line string) []string {
	s.t.Helper()
	words := bashWords(line)
	var q []string
	for _, w := range words {
		q = append(q, shQuote(w))
	}
	script := fmt.Sprintf("source %s\nCOMP_WORDS=(%s)\nCOMP_CWORD=%d\nCOMP_LINE=%s\nCOMP_POINT=%d\n_kaimon\nprintf '%%s\\n' \"${COMPREPLY[@]}\"\n",
		shQuote(s.file["bash"]), strings.Join(q, " "), len(words)-1, shQuote(line), len(line))
	return lines(s.run("bash", "--norc", "--noprofile", "-c", script))
}

// fish asks fish's own completion engine (complete -C) for line; returns
// the values, descriptions cut off.
func (s *shells) fish(line string) []string {
	s.t.Helper()
	esc := strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(line)
	var out []string
	for _, l := range lines(s.run("fish", "--no-config", "-c", fmt.Sprintf("source %s; complete -C '%s'", s.file["fish"], esc))) {
		v, _, _ := strings.Cut(l, "\t")
		out = append(out, v)
	}
	return out
}

// tmuxZsh is an interactive zsh in a tmux server of its own (socket in a
// temp dir), with compinit and the script loaded.
type tmuxZsh struct {
	s      *shells
	sock   string
	marks  string // the file each ^Xm appends a line to
	nmarks int
}

func (s *shells) startZsh() *tmuxZsh {
	t := s.t
	t.Helper()
	dir, err := os.MkdirTemp("", "kmz")
	if err != nil {
		t.Fatal(err)
	}
	z := &tmuxZsh{s: s, sock: filepath.Join(dir, "sock"), marks: filepath.Join(dir, "marks")}
	t.Cleanup(func() {
		z.tmux("kill-server")
		waitFor(t, "the tmux server to exit", 10*time.Second, func() bool {
			return len(processesWithEnv("KAIMON_COMPLETION_TMUX="+z.sock)) == 0
		})
		os.RemoveAll(dir)
	})
	// The server inherits this environment, and the shell the server's.
	z.tmuxEnv(append(slices.Clone(s.env), "KAIMON_COMPLETION_TMUX="+z.sock),
		"new-session", "-d", "-x", "200", "-y", "60", "-c", s.dir, "zsh", "-f", "-i")
	// ^Xm marks that the keys before it have been handled: zle reads keys in
	// order, so by then a completion has finished and drawn its list.
	z.keys("-l", fmt.Sprintf("PS1='READY> '; autoload -Uz compinit; compinit -u -D; source %s; "+
		"unsetopt listambiguous; _mark() { print >> %s }; zle -N _mark; bindkey '^Xm' _mark; clear", s.file["zsh"], z.marks))
	z.keys("Enter")
	z.sync()
	return z
}

func (z *tmuxZsh) tmuxEnv(env []string, args ...string) string {
	t := z.s.t
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "tmux", append([]string{"-S", z.sock}, args...)...)
	cmd.Env, cmd.Dir = env, z.s.dir
	proc.Setpgid(cmd)
	out, err := cmd.CombinedOutput()
	if err != nil && args[0] != "kill-server" {
		t.Fatalf("tmux %q: %v\n%s", args, err, out)
	}
	return string(out)
}

func (z *tmuxZsh) tmux(args ...string) string { return z.tmuxEnv(z.s.env, args...) }

func (z *tmuxZsh) keys(k ...string) { z.tmux(append([]string{"send-keys", "-t", "0"}, k...)...) }

// sync waits until zle has handled every key sent so far.
func (z *tmuxZsh) sync() {
	z.keys("C-x", "m")
	z.nmarks++
	waitFor(z.s.t, "zsh to handle the keys", 30*time.Second, func() bool {
		b, _ := os.ReadFile(z.marks)
		return strings.Count(string(b), "\n") >= z.nmarks
	})
}

// tab types line, presses TAB, and returns the screen once the completion
// has been drawn; then clears the line and the screen.
func (z *tmuxZsh) tab(line string) string {
	z.keys("-l", line)
	z.keys("Tab")
	z.sync()
	screen := z.tmux("capture-pane", "-p", "-t", "0")
	z.keys("C-u")
	z.keys("-l", "clear")
	z.keys("Enter")
	z.sync()
	return screen
}

// TestCompletionInRealShells presses TAB after every verb and every flag that
// takes a value, in bash, zsh and fish, against a daemon with a live and a
// dead agent, and checks the candidates; then that nothing was done: the
// daemon got no verb call but agent_list.
func TestCompletionInRealShells(t *testing.T) {
	e := newEnv(t)
	live := e.ok("open", e.work)
	e.ok("run", live, "hello there")
	dead := e.ok("open", e.work)
	e.ok("close", dead)
	s := newShells(t, e)

	type snapshot struct {
		agents   map[string]verbs.AgentStatus
		logSizes map[string]int64
		requests int
	}
	snap := func() snapshot {
		var l verbs.ListResult
		e.okJSON(&l, "list")
		sn := snapshot{agents: map[string]verbs.AgentStatus{}, logSizes: map[string]int64{}, requests: len(e.api.Requests())}
		for _, a := range l.Agents {
			sn.agents[a.AgentID] = a.AgentStatus
			fi, err := os.Stat(a.EventLog)
			if err != nil {
				t.Fatal(err)
			}
			sn.logSizes[a.AgentID] = fi.Size()
		}
		return sn
	}
	before := snap()
	if before.agents[live].Status != "idle" || before.agents[dead].Status != "dead" || before.agents[live].Turn != 1 {
		t.Fatalf("agents before: %+v", before.agents)
	}

	var presets, modes, efforts, kinds, models []string
	acpWant := []string{"acp:"} // fish offers the prefix itself, then each built-in agent
	for _, n := range agentbin.ACPNames {
		acpWant = append(acpWant, "acp:"+n)
	}
	presets = append(presets, verbs.PresetNames...)
	modes = append(modes, verbs.PermissionModes...)
	efforts = append(efforts, verbs.Efforts...)
	for _, k := range event.Kinds {
		kinds = append(kinds, string(k))
	}
	models = append(models, apitype.ModelAliases...)
	for _, p := range apitype.ModelPrefixes {
		models = append(models, p.Prefix)
	}
	// Each case: the line typed before TAB, and the candidates every shell
	// must offer (bash's have readline's break before them taken off).
	type tcase struct {
		line    string
		want    []string
		bash    []string // when bash's differ from want
		exclude []string // must not be offered
		subset  bool     // want lists some of the candidates, not all
	}
	var daemonSubs []string
	for _, c := range kcli.NewApp().Command("daemon").Subcommands {
		daemonSubs = append(daemonSubs, c.Name)
	}
	// The shortest prefix of the live id that the dead one lacks (ids
	// are random: they may share a first character).
	uniq := 1
	for strings.HasPrefix(dead, live[:uniq]) {
		uniq++
	}
	cases := []tcase{
		{line: "kaimon daemon ", want: append(daemonSubs, "help")},
		{line: "kaimon completion ", want: kcli.Shells},
		{line: "kaimon open -p ", want: presets},
		{line: "kaimon open --permission ", want: presets},
		{line: "kaimon run --permission-mode ", want: modes},
		{line: "kaimon open --effort ", want: efforts},
		{line: "kaimon open --model ", want: models},
		{line: "kaimon open -m acp:", want: acpWant, bash: agentbin.ACPNames},
		{line: "kaimon set-model " + live + " ", want: models},
		{line: "kaimon output --which ", want: verbs.Whiches},
		{line: "kaimon tail --kinds ", want: kinds},
		{line: "kaimon tail ", want: []string{"agent:", "agent:" + live, "agent:" + dead}},
		{line: "kaimon tail agent:" + live[:uniq], want: []string{"agent:" + live}, bash: []string{live}},
		{line: "kaimon forget ", want: []string{dead}},
		{line: "kaimon open --resume --id ", want: []string{dead}},
		{line: "kaimon permit " + live + " req ", want: apitype.Strings(apitype.Decisions)},
		{line: "kaimon send " + live + " --", want: []string{"--json", "--help"}, exclude: []string{"--generate-bash-completion"}},
		{line: "kaimon run -C . --", want: []string{"--timeout", "--model", "--json"}, subset: true},
		{line: "kaimon open --", want: []string{"--model", "--permission", "--id", "--resume"}, subset: true},
		{line: "kaimon open --model=so", want: []string{"--model=sonnet"}, bash: []string{"sonnet"}},
		{line: "kaimon ", want: []string{"open", "send", "run", "daemon", "completion", "tail", "help"}, exclude: []string{"__complete"}},
	}
	// Every verb whose first argument is agent_id offers the live agent;
	// the dead one too when it only reads (output, status).
	for _, v := range verbs.All {
		if len(v.Args) > 0 && v.Args[0].Name == "agent_id" {
			if v.ReadOnly {
				cases = append(cases, tcase{line: "kaimon " + v.CLI + " ", want: []string{live, dead}})
				continue
			}
			cases = append(cases, tcase{line: "kaimon " + v.CLI + " ", want: []string{live}, exclude: []string{dead}})
		}
	}
	exact := func(c tcase) bool { return c.exclude == nil && !c.subset }
	check := func(sh string, c tcase, got []string) {
		t.Helper()
		want := c.want
		if sh == "bash" && c.bash != nil {
			want = c.bash
		}
		if exact(c) && !slices.Equal(got, want) {
			t.Errorf("%s: %q<TAB> offered %q, want %q", sh, c.line, got, want)
			return
		}
		for _, w := range want {
			if !slices.Contains(got, w) {
				t.Errorf("%s: %q<TAB> offered %q, want %q among them", sh, c.line, got, w)
			}
		}
		for _, x := range c.exclude {
			if slices.Contains(got, x) {
				t.Errorf("%s: %q<TAB> offered %q", sh, c.line, x)
			}
		}
	}
	for _, c := range cases {
		check("bash", c, s.bash(c.line))
		check("fish", c, s.fish(c.line))
	}
	// Paths are the shell's: the directory the shells run in holds project/.
	if got := s.bash("kaimon run -C proj"); !slices.Equal(got, []string{"project"}) {
		t.Errorf("bash: run -C proj<TAB> offered %q", got)
	}
	if got := s.fish("kaimon run -C proj"); !slices.Equal(got, []string{"project/"}) {
		t.Errorf("fish: run -C proj<TAB> offered %q", got)
	}
	if got := s.bash("kaimon open proj"); !slices.Equal(got, []string{"project"}) {
		t.Errorf("bash: open proj<TAB> offered %q", got)
	}
	if got := s.fish("kaimon open --model sonnet proj"); !slices.Equal(got, []string{"project/"}) {
		t.Errorf("fish: open --model sonnet proj<TAB> offered %q", got)
	}
	// kaimon typed by a path under ~: the shells hand the word over
	// unexpanded, and the scripts expand it to run that kaimon.
	tilde := s.tildeKaimon()
	if got := s.bash(tilde + " completion "); !slices.Equal(got, kcli.Shells) {
		t.Errorf("bash: %s completion <TAB> offered %q, want %q", tilde, got, kcli.Shells)
	}
	if got := s.fish(tilde + " completion "); !slices.Equal(got, kcli.Shells) {
		t.Errorf("fish: %s completion <TAB> offered %q, want %q", tilde, got, kcli.Shells)
	}
	// Verbs without positionals, and TEXT, offer nothing (no files either).
	for _, line := range []string{"kaimon list ", "kaimon send " + live + " ", "kaimon run -C . "} {
		if got := s.bash(line); len(got) != 0 {
			t.Errorf("bash: %q<TAB> offered %q", line, got)
		}
		if got := s.fish(line); len(got) != 0 {
			t.Errorf("fish: %q<TAB> offered %q", line, got)
		}
	}

	// Every flag of every command that takes a value completes in bash and
	// fish to what __complete says, and the walk covers commands added later.
	// A flag that several commands share (--model of open and run, …) and
	// that __complete answers alike is taken through the shells once: the
	// scripts see only the words, so the second would check nothing new,
	// and each check runs kaimon twice more (slow under -race).
	shown := map[string]bool{}
	var walk func(path []string, cmds []*cli.Command)
	walk = func(path []string, cmds []*cli.Command) {
		for _, c := range cmds {
			if c.Hidden {
				continue
			}
			p := append(slices.Clone(path), c.Name)
			for _, f := range c.Flags {
				if tv, ok := f.(interface{ TakesValue() bool }); !ok || !tv.TakesValue() {
					continue
				}
				n := f.Names()[0]
				dash := "--"
				if len(n) == 1 {
					dash = "-"
				}
				words := append(slices.Clone(p), dash+n, "")
				var direct []string
				for _, l := range lines(e.ok(append([]string{"__complete", "--"}, words...)...)) {
					v, _, _ := strings.Cut(l, "\t")
					direct = append(direct, v)
				}
				line := "kaimon " + strings.Join(words, " ")
				if len(direct) == 1 && strings.HasPrefix(direct[0], ":") {
					continue // a path: the shell's (checked above)
				}
				if key := dash + n + "\x00" + strings.Join(direct, "\x00"); shown[key] {
					continue
				} else {
					shown[key] = true
				}
				if got := s.bash(line); !slices.Equal(got, direct) {
					t.Errorf("bash: %q<TAB> offered %q; __complete says %q", line, got, direct)
				}
				if got := s.fish(line); !slices.Equal(got, direct) {
					t.Errorf("fish: %q<TAB> offered %q; __complete says %q", line, got, direct)
				}
			}
			walk(p, c.Subcommands)
		}
	}
	walk(nil, kcli.NewApp().Commands)

	// zsh, interactive in tmux: the listing (or the one candidate inserted)
	// shows on the screen.
	z := s.startZsh()
	for _, c := range cases {
		screen := z.tab(c.line)
		for _, w := range c.want {
			if !strings.Contains(screen, w) {
				t.Errorf("zsh: %q<TAB> does not show %q:\n%s", c.line, w, screen)
			}
		}
		for _, x := range c.exclude {
			if strings.Contains(screen, x) {
				t.Errorf("zsh: %q<TAB> shows %q:\n%s", c.line, x, screen)
			}
		}
	}
	if screen := z.tab("kaimon run -C proj"); !strings.Contains(screen, "kaimon run -C project/") {
		t.Errorf("zsh: run -C proj<TAB> did not complete the directory:\n%s", screen)
	}
	if screen := z.tab("kaimon open proj"); !strings.Contains(screen, "kaimon open project/") {
		t.Errorf("zsh: open proj<TAB> did not complete the directory:\n%s", screen)
	}
	if screen := z.tab(tilde + " completion "); !strings.Contains(screen, "fish") {
		t.Errorf("zsh: %s completion <TAB> does not show fish:\n%s", tilde, screen)
	}

	// What a stale urfave script would run is a usage error now, not a verb.
	for _, args := range [][]string{{"send", live, "--generate-bash-completion"}, {"run", "-C", ".", "--generate-bash-completion"},
		{"open", "--generate-bash-completion"}, {"--generate-bash-completion"}} {
		e.fails(2, "generate-bash-completion", args...)
	}

	// Nothing happened: no agent opened, no turn sent, no event logged, no
	// model call.
	after := snap()
	if len(after.agents) != len(before.agents) {
		t.Errorf("agents after completing: %d, before: %d", len(after.agents), len(before.agents))
	}
	for id, st := range before.agents {
		a := after.agents[id]
		if a.Status != st.Status || a.Turn != st.Turn {
			t.Errorf("agent %s: %s turn %d before completing, %s turn %d after", id, st.Status, st.Turn, a.Status, a.Turn)
		}
		if after.logSizes[id] != before.logSizes[id] {
			t.Errorf("agent %s: event log grew from %d to %d bytes", id, before.logSizes[id], after.logSizes[id])
		}
	}
	if after.requests != before.requests {
		t.Errorf("the fake model API got %d requests while completing", after.requests-before.requests)
	}

	// The daemon stopped, the registry on disk still knows the agents:
	// ids of any agent are offered (every one dead now), and no daemon is
	// started for it.
	e.ok("daemon", "stop")
	if got, want := s.bash("kaimon status "), []string{live, dead}; !slices.Equal(sorted(got), sorted(want)) {
		t.Errorf("bash: status <TAB> with the daemon stopped offered %q, want %q", got, want)
	}
	if got := s.fish("kaimon forget "); !slices.Equal(sorted(got), sorted([]string{live, dead})) {
		t.Errorf("fish: forget <TAB> with the daemon stopped offered %q", got)
	}
	if got := s.bash("kaimon send "); len(got) != 0 {
		t.Errorf("bash: send <TAB> with the daemon stopped offered %q: no agent is live", got)
	}
	if r := e.kaimon("--no-autostart", "daemon", "status"); r.code == 0 {
		t.Errorf("completing started a daemon: %s", r)
	}
}

// TestCompletionStartsNoDaemon presses TAB in bash, zsh and fish with no
// daemon running: the static candidates come, no agent ids, and no daemon
// is started nor socket made.
func TestCompletionStartsNoDaemon(t *testing.T) {
	e := newEnv(t)
	s := newShells(t, e)
	sockDir := filepath.Join(e.home, "sock")
	noDaemon := func(after string) {
		t.Helper()
		if _, err := os.Stat(sockDir); !os.IsNotExist(err) {
			t.Errorf("after %s: %s exists (%v)", after, sockDir, err)
		}
		for _, pid := range e.processes() {
			if b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid)); strings.Contains(string(b), "kaimon-agentd") {
				t.Errorf("after %s: kaimon-agentd runs: %s", after, describe([]int{pid}))
			}
		}
	}
	noDaemon("setting up")
	for _, line := range []string{"kaimon send ", "kaimon open --", "kaimon run -C . --", "kaimon tail "} {
		if got := s.bash(line); line == "kaimon send " && len(got) != 0 {
			t.Errorf("bash: %q<TAB> offered %q with no daemon", line, got)
		}
		if got := s.fish(line); line == "kaimon send " && len(got) != 0 {
			t.Errorf("fish: %q<TAB> offered %q with no daemon", line, got)
		}
	}
	if got := s.bash("kaimon daemon st"); !slices.Equal(got, []string{"start", "stop", "status"}) {
		t.Errorf("bash: daemon st<TAB> with no daemon: %q", got)
	}
	if got := s.fish("kaimon tail "); !slices.Equal(got, []string{"agent:"}) {
		t.Errorf("fish: tail <TAB> with no daemon: %q", got)
	}
	noDaemon("bash and fish")
	z := s.startZsh()
	for _, line := range []string{"kaimon send ", "kaimon open --", "kaimon tail "} {
		z.tab(line)
	}
	if screen := z.tab("kaimon daemon st"); !strings.Contains(screen, "stop") || !strings.Contains(screen, "status") {
		t.Errorf("zsh: daemon st<TAB> with no daemon:\n%s", screen)
	}
	noDaemon("zsh")
}
