package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/kaimon/kaimon/internal/agentbin"
	"github.com/kaimon/kaimon/internal/apitype"
	"github.com/kaimon/kaimon/internal/client"
	"github.com/kaimon/kaimon/internal/config"
	"github.com/kaimon/kaimon/internal/event"
	"github.com/kaimon/kaimon/internal/fleet"
	"github.com/kaimon/kaimon/internal/policy"
	"github.com/kaimon/kaimon/internal/schema"
	"github.com/kaimon/kaimon/internal/verbs"
)

// completeCmdName is the hidden command the completion scripts call:
//
//	kaimon __complete -- WORD… CUR
//
// with the words typed after `kaimon`, the last one the word under the
// cursor (possibly empty). It prints one candidate a line, as
// "value<TAB>description" where there is a description, or the single line
// :files or :dirs when the shell should complete paths itself. It is
// read-only: it runs no verb, never starts the daemon, and asks a running
// daemon nothing but agent_list (with none running, it reads the agents'
// records on disk). An id qualified with a configured host (h1/…) is
// completed from that host's daemon, asked the same way over its ssh with
// dial-stdio's --no-autostart, so a TAB starts no daemon there either. It never fails: on any error it prints
// nothing and exits 0.
//
// Hand-written rather than a library: urfave/cli v2's own completion runs
// the command line it completes (the bug this replaces), and the completion
// libraries (posener/complete, carapace, cobra's) want the commands
// described again in their own types; walking urfave's tree keeps one
// source of truth in a few hundred lines.
const completeCmdName = "__complete"

// Directives: the whole output when the shell should complete paths.
const (
	directiveFiles = ":files"
	directiveDirs  = ":dirs"
)

// listTimeout bounds the one agent_list a completion may send: a TAB must
// not hang on a wedged daemon.
const listTimeout = 300 * time.Millisecond

func completeCmd() *cli.Command {
	return &cli.Command{
		Name:   completeCmdName,
		Usage:  "Print completion candidates for the words typed after kaimon (the completion scripts call it)",
		Hidden: true, HideHelp: true, HideHelpCommand: true,
		// The words are the user's half-typed command line, not ours.
		SkipFlagParsing: true,
		Action: func(c *cli.Context) error {
			words := c.Args().Slice()
			// The scripts put "--" first so that interspersed() leaves the
			// words in their order; urfave keeps it under SkipFlagParsing.
			if len(words) > 0 && words[0] == "--" {
				words = words[1:]
			}
			defer func() { _ = recover() }() // a completion never fails loudly
			comp := &completer{app: c.App, agents: daemonAgents, hosts: configuredHosts, hostAgents: hostAgents}
			writeCompletion(c.App.Writer, comp.complete(words))
			return nil
		},
	}
}

// configuredHosts are the config file's hosts (none when it cannot be
// read: a completion never fails loudly).
func configuredHosts() map[string]fleet.Host {
	paths, err := config.Resolve()
	if err != nil {
		return nil
	}
	hosts, _ := fleet.LoadHosts(paths.ConfigFile)
	return hosts
}

// configuredACP are the config file's acp_agents (none when it cannot be
// read: a completion never fails loudly).
func configuredACP() []agentbin.Program {
	paths, err := config.Resolve()
	if err != nil {
		return nil
	}
	cfg, _ := config.Load(paths.ConfigFile)
	return cfg.ACPAgents.Programs()
}

// daemonAgents asks a running daemon for its agents: agent_list only,
// without autostart and within listTimeout. When none answers, the agents
// are those the registry on disk records.
func daemonAgents() []verbs.ListEntry {
	cl, err := client.New()
	if err != nil {
		return nil
	}
	cl.NoAutostart = true
	ctx, cancel := context.WithTimeout(context.Background(), listTimeout)
	defer cancel()
	var res verbs.ListResult
	// Do, not List: List explains errors with a second request.
	if err := cl.Do(ctx, "POST", verbs.ByName("agent_list").Route(), &verbs.ListArgs{}, &res); err != nil {
		return recordedAgents(cl.Paths.CacheDir)
	}
	return res.Agents
}

// remoteListTimeout bounds the agent_list a completion sends to another
// host: an ssh handshake is in it unless the host's master connection is
// up.
const remoteListTimeout = 2 * time.Second

// hostAgents asks host's daemon for its agents over the host's ssh, with
// dial-stdio's --no-autostart (a daemon that is not running there is not
// started), within remoteListTimeout; nothing on any failure. The ssh
// child ends with the connection.
func hostAgents(host string) []verbs.ListEntry {
	paths, err := config.Resolve()
	if err != nil {
		return nil
	}
	tr, err := (&fleet.Fleet{Paths: paths}).Transport(host)
	if err != nil {
		return nil
	}
	tr.NoAutostart = true
	cl := tr.Client(paths)
	defer cl.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(context.Background(), remoteListTimeout)
	defer cancel()
	var res verbs.ListResult
	if err := cl.Do(ctx, "POST", verbs.ByName("agent_list").Route(), &verbs.ListArgs{}, &res); err != nil {
		return nil
	}
	return res.Agents
}

// recordedAgents are the agents whose records (<id>.agent.json, the
// daemon's registry) are in cacheDir, read as files: the CLI links none of
// the daemon's packages. With no daemon none of them runs, so each is
// dead, as the next daemon will list it; a record that does not read is
// passed over.
func recordedAgents(cacheDir string) []verbs.ListEntry {
	paths, _ := filepath.Glob(filepath.Join(cacheDir, "*"+config.RecordSuffix))
	// The fields of session.Record that a candidate shows.
	type record struct {
		verbs.OpenArgs
		CreatedAt time.Time `json:"created_at"`
	}
	var recs []record
	for _, p := range paths {
		var r record
		b, err := os.ReadFile(p)
		if err != nil || json.Unmarshal(b, &r) != nil || r.ID+config.RecordSuffix != filepath.Base(p) {
			continue
		}
		recs = append(recs, r)
	}
	// Oldest first, as agent_list.
	slices.SortStableFunc(recs, func(a, b record) int { return a.CreatedAt.Compare(b.CreatedAt) })
	out := make([]verbs.ListEntry, 0, len(recs))
	for _, r := range recs {
		out = append(out, verbs.ListEntry{AgentID: r.ID, AgentStatus: verbs.AgentStatus{
			Status: apitype.Dead, Model: r.Model, Cwd: r.Cwd, CreatedAt: r.CreatedAt.Format(time.RFC3339Nano)}})
	}
	return out
}

// candidate is one completion; desc may be empty.
type candidate struct{ value, desc string }

// completion is what a TAB offers: candidates, or a directive.
type completion struct {
	cands     []candidate
	directive string // "", directiveFiles or directiveDirs
}

func writeCompletion(w io.Writer, comp completion) {
	if comp.directive != "" {
		fmt.Fprintln(w, comp.directive)
		return
	}
	clean := strings.NewReplacer("\t", " ", "\n", " ", "\r", " ")
	for _, c := range comp.cands {
		if c.desc == "" {
			fmt.Fprintln(w, c.value)
		} else {
			fmt.Fprintf(w, "%s\t%s\n", c.value, clean.Replace(c.desc))
		}
	}
}

// valueKind is what a positional argument or a flag's value is.
type valueKind int

const (
	valNone     valueKind = iota
	valEnum               // a fixed list
	valFiles              // a path: the shell completes it
	valDirs               // a directory: the shell completes it
	valLiveIDs            // ids of live agents
	valDeadIDs            // ids of dead agents
	valAnyIDs             // ids of every agent the daemon knows
	valModels             // model aliases and backend prefixes
	valChannels           // agent: and agent:ID
	valKinds              // event kinds, comma-separated
	valCommands           // command names (help's arguments)
	valHosts              // local and the configured hosts' names
)

// valueSpec says how to complete one value.
type valueSpec struct {
	kind valueKind
	enum []candidate
}

// placeholderKinds maps the placeholders of the verb table's positionals
// and of flag usages (`DIR`) to what they name; a placeholder not here
// (TEXT, REQUEST_ID, AGE, N…) completes nothing.
var placeholderKinds = map[string]valueKind{
	"ID": valLiveIDs, "DIR": valDirs, "FILE": valFiles, "PATH": valFiles,
	"MODEL": valModels, "CHANNEL": valChannels, "COMMAND": valCommands,
}

// flagKinds are the flags whose values neither the verb table (an Enum, the
// agents an id names) nor a placeholder in their usage describes.
var flagKinds = map[string]valueKind{
	"model": valModels, "mcp-config": valFiles, "kinds": valKinds, "host": valHosts,
}

// completer completes against the command tree of app, and the daemon's
// agents as agents returns them (asked at most once, and only when an id is
// to be completed).
type completer struct {
	app    *cli.App
	agents func() []verbs.ListEntry
	// hosts are the configured hosts: --host's values, and offered as
	// HOST/ before an id; hostAgents a host's agents, asked once the id
	// names its host. nil: none.
	hosts      func() map[string]fleet.Host
	hostAgents func(host string) []verbs.ListEntry

	listed bool
	list   []verbs.ListEntry
}

func (k *completer) agentList() []verbs.ListEntry {
	if !k.listed && k.agents != nil {
		k.list = k.agents()
	}
	k.listed = true
	return k.list
}

// level is where the words have got to: the command (nil at the top) and
// what has been typed for it.
type level struct {
	top, cmd *cli.Command // top: the command under kaimon; cmd: the innermost
	isHelp   bool         // the command is urfave's help
	helpOf   *cli.Command // whose help: nil for kaimon help
	flags    []cli.Flag
	globals  []cli.Flag      // the global flags that may follow cmd (globalsAfter)
	set      map[string]bool // primary names of the flags given
	pos      []string        // positional words
	cmdDone  bool            // a positional that is not a subcommand was seen
}

// complete returns the candidates for words, the last one being the word
// under the cursor.
func (k *completer) complete(words []string) completion {
	if len(words) == 0 {
		words = []string{""}
	}
	cur, typed := words[len(words)-1], words[:len(words)-1]
	lv := &level{flags: k.globalFlags(), set: map[string]bool{}}
	onlyPos := false // after "--"
	for i := 0; i < len(typed); i++ {
		w := typed[i]
		if !onlyPos && w == "--" {
			onlyPos = true
			continue
		}
		if !onlyPos && strings.HasPrefix(w, "-") && w != "-" {
			name, _, inline := strings.Cut(strings.TrimLeft(w, "-"), "=")
			f := lv.flag(name)
			if f == nil {
				continue
			}
			lv.set[f.Names()[0]] = true
			if takesValue(f) && !inline {
				if i+1 == len(typed) { // the cursor is on this flag's value
					return k.values(k.flagSpec(lv, f), cur, "")
				}
				i++
			}
			continue
		}
		if !lv.cmdDone && !lv.isHelp && (lv.cmd == nil || len(lv.cmd.Subcommands) > 0) {
			if sub, help := k.findChild(lv.cmd, w); sub != nil || help {
				if lv.cmd == nil {
					lv.top = sub
				}
				lv.helpOf = lv.cmd
				lv.cmd, lv.isHelp = sub, help
				lv.flags = helpFlags()
				if sub != nil {
					lv.flags = append(slices.Clone(sub.Flags), lv.flags...)
					lv.globals = globalsAfter(k.app, sub)
				}
				continue
			}
			if lv.cmd == nil {
				return completion{} // an unknown command: nothing to offer
			}
		}
		lv.cmdDone = true
		lv.pos = append(lv.pos, w)
	}
	if !onlyPos && strings.HasPrefix(cur, "-") {
		if name, val, ok := strings.Cut(cur, "="); ok {
			f := lv.flag(strings.TrimLeft(name, "-"))
			if f == nil || !takesValue(f) {
				return completion{}
			}
			return k.values(k.flagSpec(lv, f), val, name+"=")
		}
		// The command's flags; the global ones only when none of those
		// fits (kaimon list --ho), so that --<TAB> lists what is the
		// command's.
		if c := filter(flagCandidates(lv.flags), cur); len(c.cands) > 0 || len(lv.globals) == 0 {
			return c
		}
		return filter(flagCandidates(lv.globals), cur)
	}
	if lv.isHelp {
		// help [COMMAND [SUBCOMMAND]]: walk the names typed so far.
		cmd := lv.helpOf
		for _, w := range lv.pos {
			sub, _ := k.findChild(cmd, w)
			if sub == nil {
				return completion{}
			}
			cmd = sub
		}
		if cmd != nil && len(cmd.Subcommands) == 0 {
			return completion{}
		}
		return filter(k.commandCandidates(cmd, false), cur)
	}
	if lv.cmd == nil || (len(lv.cmd.Subcommands) > 0 && !lv.cmdDone) {
		return filter(k.commandCandidates(lv.cmd, true), cur)
	}
	return k.values(k.positionalSpec(lv), cur, "")
}

// flag is the flag named name at this level: the command's, else a
// global one given after the command.
func (lv *level) flag(name string) cli.Flag {
	if f := findFlag(lv.flags, name); f != nil {
		return f
	}
	return findFlag(lv.globals, name)
}

func (k *completer) globalFlags() []cli.Flag {
	flags := append(slices.Clone(k.app.Flags), helpFlags()...)
	if k.app.Version != "" && !k.app.HideVersion && cli.VersionFlag != nil {
		flags = append(flags, cli.VersionFlag)
	}
	return flags
}

// helpFlags is the --help urfave adds to every command.
func helpFlags() []cli.Flag {
	if cli.HelpFlag == nil {
		return nil
	}
	return []cli.Flag{cli.HelpFlag}
}

func findFlag(flags []cli.Flag, name string) cli.Flag {
	for _, f := range flags {
		if slices.Contains(f.Names(), name) {
			return f
		}
	}
	return nil
}

func takesValue(f cli.Flag) bool {
	if tv, ok := f.(interface{ TakesValue() bool }); ok {
		return tv.TakesValue()
	}
	return false
}

func usageOf(f cli.Flag) string {
	if d, ok := f.(cli.DocGenerationFlag); ok {
		return d.GetUsage()
	}
	return ""
}

func flagCandidates(flags []cli.Flag) []candidate {
	var out []candidate
	seen := map[string]bool{}
	for _, f := range flags {
		if v, ok := f.(cli.VisibleFlag); ok && !v.IsVisible() {
			continue
		}
		_, usage := unquoteUsage(usageOf(f))
		for _, n := range f.Names() {
			dash := "--"
			if len(n) == 1 {
				dash = "-"
			}
			if !seen[dash+n] {
				seen[dash+n] = true
				out = append(out, candidate{dash + n, usage})
			}
		}
	}
	return out
}

// children are the visible subcommands of cmd (the top-level commands for
// nil).
func (k *completer) children(cmd *cli.Command) (cmds []*cli.Command, helpCmd bool) {
	if cmd == nil {
		return k.app.Commands, !k.app.HideHelp && !k.app.HideHelpCommand
	}
	return cmd.Subcommands, !cmd.HideHelp && !cmd.HideHelpCommand
}

// findChild finds the subcommand named w of cmd; help is true for urfave's
// help command, which the tree holds only once the app has been set up.
func (k *completer) findChild(cmd *cli.Command, w string) (sub *cli.Command, help bool) {
	cmds, hasHelp := k.children(cmd)
	for _, c := range cmds {
		if c.HasName(w) && !c.Hidden {
			if c.Name == "help" {
				return nil, true
			}
			return c, false
		}
	}
	return nil, hasHelp && (w == "help" || w == "h")
}

func (k *completer) commandCandidates(cmd *cli.Command, withHelp bool) []candidate {
	cmds, hasHelp := k.children(cmd)
	var out []candidate
	seen := map[string]bool{}
	for _, c := range cmds {
		if c.Hidden || seen[c.Name] {
			continue
		}
		seen[c.Name] = true
		out = append(out, candidate{c.Name, c.Usage})
	}
	if withHelp && hasHelp && !seen["help"] {
		out = append(out, candidate{"help", "Shows a list of commands or help for one command"})
	}
	return out
}

// positionals are what a command's positional arguments are, one spec a
// position; with variadic the last one repeats.
type positionals struct {
	specs    []valueSpec
	variadic bool
}

// otherPositionals are the positionals of the commands that are not verbs;
// a verb's are the table's (verbPositionals).
var otherPositionals = map[string]positionals{
	"chat":       {specs: []valueSpec{{kind: valLiveIDs}}},
	"completion": {specs: []valueSpec{{kind: valEnum, enum: shellCandidates()}}},
	"schema":     {specs: []valueSpec{{kind: valEnum, enum: schemaCandidates()}}},
	"tail":       {specs: []valueSpec{{kind: valChannels}}, variadic: true},
}

func schemaCandidates() []candidate {
	var out []candidate
	for _, s := range schema.Subjects {
		out = append(out, candidate{value: s})
	}
	return out
}

func shellCandidates() []candidate {
	var out []candidate
	for _, s := range Shells {
		out = append(out, candidate{value: s})
	}
	return out
}

// verbPositionals are v's positionals as the table names them: an
// argument's Enum or the agents it names, else what its placeholder names
// (DIR, MODEL). With flags set, run -C DIR opens the agent whose id run
// otherwise takes first. The one a command line may leave out
// (permit's REQUEST_ID) is left out of them where words, the
// positionals typed so far, reach it: while it is being typed, the
// values of the positional after it are offered in its place, and a word
// that is one of them there fills that one instead.
func verbPositionals(v *verbs.Verb, set map[string]bool, words []string) positionals {
	var p positionals
	args := v.PositionalArgs()
	for i, a := range args {
		if v.Name == "agent_run" && a.Name == "agent_id" && set[oneShotFlag] {
			continue
		}
		if i == v.Skippable() && (len(words) == i || len(words) > i && slices.Contains(args[i+1].Enum, words[i])) {
			continue
		}
		spec, ok := argSpec(*a)
		if !ok {
			spec = valueSpec{kind: placeholderKinds[a.ValueName()]}
		}
		p.specs = append(p.specs, spec)
		p.variadic = a.Type == verbs.TArray
	}
	return p
}

// positionalSpec says what the next positional of the command is.
func (k *completer) positionalSpec(lv *level) valueSpec {
	var p positionals
	if v := k.verbOf(lv); v != nil {
		p = verbPositionals(v, lv.set, lv.pos)
	} else if lv.cmd == lv.top {
		p = otherPositionals[lv.cmd.Name]
	}
	n := len(lv.pos)
	if n >= len(p.specs) {
		if !p.variadic || len(p.specs) == 0 {
			return valueSpec{}
		}
		n = len(p.specs) - 1
	}
	return p.specs[n]
}

// agentsKind is the completion of an argument naming agents.
func agentsKind(a verbs.Agents) valueKind {
	switch a {
	case verbs.AgentsDead:
		return valDeadIDs
	case verbs.AgentsAny:
		return valAnyIDs
	case verbs.AgentsLive:
		return valLiveIDs
	}
	return valNone
}

// argSpec is what the verb table says of an argument's values: its Enum,
// or the agents it names.
func argSpec(a verbs.Arg) (valueSpec, bool) {
	switch {
	case len(a.Enum) > 0:
		return valueSpec{kind: valEnum, enum: enumCandidates(a)}, true
	case a.Agents != verbs.AgentsNone:
		return valueSpec{kind: agentsKind(a.Agents)}, true
	}
	return valueSpec{}, false
}

// verbOf is the verb of the table the command runs, if any.
func (k *completer) verbOf(lv *level) *verbs.Verb {
	if lv.cmd == nil || lv.cmd != lv.top {
		return nil // daemon status is not agent_status
	}
	v := verbs.ByName(lv.cmd.Name)
	if v == nil || v.CLI != lv.cmd.Name {
		return nil
	}
	return v
}

// flagSpec says what flag f's value is: the verb table's Enum for the
// argument of the same name, else flagKinds, else the placeholder of its
// usage.
func (k *completer) flagSpec(lv *level, f cli.Flag) valueSpec {
	name := f.Names()[0]
	// The command's own verb first; run's open flags are agent_open's
	// arguments, and an argument's name means one thing in every verb.
	arg := strings.ReplaceAll(name, "-", "_")
	if v := k.verbOf(lv); v != nil {
		for _, a := range v.Args {
			if spec, ok := argSpec(a); a.Name == arg && ok {
				return spec
			}
		}
	}
	if lv.top != nil && lv.cmd == lv.top {
		for _, v := range verbs.All {
			for _, a := range v.Args {
				if spec, ok := argSpec(a); a.Name == arg && ok {
					return spec
				}
			}
		}
	}
	if kind, ok := flagKinds[name]; ok {
		return valueSpec{kind: kind}
	}
	ph, _ := unquoteUsage(usageOf(f))
	return valueSpec{kind: placeholderKinds[ph]}
}

// enumCandidates are an argument's Enum; presets with their doc.
func enumCandidates(a verbs.Arg) []candidate {
	var enum []candidate
	for _, e := range a.Enum {
		c := candidate{value: e}
		if p, ok := policy.Presets[e]; ok && a.Name == "permission" {
			c.desc = p.Doc
		}
		enum = append(enum, c)
	}
	return enum
}

// values completes cur as a value of spec; prefix (a "--flag=") is put
// back in front of every candidate.
func (k *completer) values(spec valueSpec, cur, prefix string) completion {
	var cands []candidate
	switch spec.kind {
	case valNone:
		return completion{}
	case valFiles:
		return completion{directive: directiveFiles}
	case valDirs:
		return completion{directive: directiveDirs}
	case valEnum:
		cands = spec.enum
	case valLiveIDs, valDeadIDs, valAnyIDs:
		agents, host := k.idAgents(cur)
		for _, a := range agents {
			if spec.kind == valAnyIDs || (a.AgentStatus.Status == apitype.Dead) == (spec.kind == valDeadIDs) {
				cands = append(cands, candidate{fleet.Qualify(host, a.AgentID), agentDesc(a)})
			}
		}
		if host == "" {
			for _, h := range k.hostNames() {
				cands = append(cands, candidate{h + "/", "an agent of host " + h})
			}
		}
	case valChannels:
		cands = append(cands, candidate{"agent:", "every agent"})
		for _, a := range k.agentList() {
			cands = append(cands, candidate{"agent:" + a.AgentID, agentDesc(a)})
		}
	case valModels:
		cands = modelCandidates(cur)
	case valKinds:
		// A comma-separated list: complete its last item.
		done := ""
		if i := strings.LastIndexByte(cur, ','); i >= 0 {
			done = cur[:i+1]
		}
		for _, kd := range event.Kinds {
			cands = append(cands, candidate{value: done + string(kd)})
		}
	case valCommands:
		cands = k.commandCandidates(nil, false)
	case valHosts:
		cands = append(cands, candidate{fleet.Local, "this machine"})
		if k.hosts != nil {
			hosts := k.hosts()
			for _, n := range fleet.Names(hosts) {
				cands = append(cands, candidate{n, hosts[n].URL})
			}
		}
	}
	out := filter(cands, cur)
	for i := range out.cands {
		out.cands[i].value = prefix + out.cands[i].value
	}
	return out
}

// idAgents are the agents an id being typed as cur may name, and their
// host: this machine's, or once cur is qualified with a configured host
// (h1/…), that host's; none for a host not configured.
func (k *completer) idAgents(cur string) ([]verbs.ListEntry, string) {
	h, _, qualified := fleet.SplitID(cur)
	if !qualified {
		return k.agentList(), ""
	}
	if !slices.Contains(k.hostNames(), h) || k.hostAgents == nil {
		return nil, h
	}
	return k.hostAgents(h), h
}

func (k *completer) hostNames() []string {
	if k.hosts == nil {
		return nil
	}
	return fleet.Names(k.hosts())
}

func agentDesc(a verbs.ListEntry) string {
	return strings.TrimSpace(fmt.Sprintf("%s %s %s", a.AgentStatus.Status, a.Model, a.Cwd))
}

// modelCandidates offers the claude aliases and the backend prefixes; after
// acp: the ACP agents, after alias/ the efforts.
func modelCandidates(cur string) []candidate {
	var out []candidate
	for _, a := range apitype.ModelAliases {
		out = append(out, candidate{a, "claude"})
		if strings.HasPrefix(cur, a+"/") {
			for _, e := range verbs.Efforts {
				out = append(out, candidate{a + "/" + e, "claude, effort " + e})
			}
		}
	}
	for _, p := range apitype.ModelPrefixes {
		out = append(out, candidate{p.Prefix, p.Doc})
	}
	if strings.HasPrefix(cur, apitype.PrefixACP) {
		for _, n := range agentbin.ACPNames {
			out = append(out, candidate{apitype.PrefixACP + n, "ACP agent " + n})
		}
		for _, p := range configuredACP() {
			if _, builtin := agentbin.ACP[p.Name]; !builtin {
				out = append(out, candidate{apitype.PrefixACP + p.Name, "ACP agent " + p.Name + " (config)"})
			}
		}
	}
	return out
}

func filter(cands []candidate, cur string) completion {
	var out []candidate
	for _, c := range cands {
		if strings.HasPrefix(c.value, cur) {
			out = append(out, c)
		}
	}
	return completion{cands: out}
}
