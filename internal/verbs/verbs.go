// Package verbs is the one table of kaimon's verbs: name, doc, typed
// arguments with defaults, and result. The socket API, the CLI, `kaimon mcp`,
// help texts, man pages and completions are built from it or checked against
// it, so a verb is described once.
package verbs

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/kaimon/kaimon/internal/apitype"
	"github.com/kaimon/kaimon/internal/config"
	"github.com/kaimon/kaimon/internal/event"
)

// Argument types, as JSON Schema names them.
const (
	TString  = "string"
	TInteger = "integer"
	TNumber  = "number"
	TBoolean = "boolean"
	TArray   = "array" // of strings
)

// Arg is one argument of a verb, named as the spec names it.
type Arg struct {
	Name     string
	Type     string
	Required bool
	// RequiredUnless names arguments any of which, given (true, or a
	// string not empty), makes this one optional (agent_open's cwd is not
	// needed to resume or to fork: a record has it). The argument is then
	// not Required in the tool schema.
	RequiredUnless []string
	Default        any // nil: none
	Enum           []string
	// Range bounds a number or integer argument; Decode refuses a value
	// given outside it, so that no caller re-checks by hand.
	Range *Range
	Doc   string
	// Agents says which agents an argument naming agents (agent_id,
	// agent_ids, agent_open's id) may name: the shells' completion offers
	// those. AgentsNone for every other argument.
	Agents Agents
	// Flag is the argument's CLI flag when it is not the name dashed
	// (allowed_tools is --allow); Short is a one-letter alias (-m).
	Flag, Short string
	// Placeholder names the argument's value in CLI usage (ID, DIR); ""
	// is the flag's name in capitals, or an Enum's values.
	Placeholder string
	// FlagDoc is the flag's help where Doc, written for MCP callers,
	// does not read right on a command line (it speaks JSON, or names
	// the other arguments by their wire names); "" uses Doc.
	FlagDoc string
	// Global says the CLI takes the argument as kaimon's global flag of
	// its name (agent_open's host is --host, which every command takes),
	// so its command gets no flag of its own.
	Global bool
}

// FlagName is the argument's CLI flag, without dashes.
func (a *Arg) FlagName() string {
	if a.Flag != "" {
		return a.Flag
	}
	return strings.ReplaceAll(a.Name, "_", "-")
}

// ValueName names the argument's value on the command line: its
// Placeholder, or for an Enum its values (allow|deny), else the flag in
// capitals.
func (a *Arg) ValueName() string {
	switch {
	case a.Placeholder != "":
		return a.Placeholder
	case len(a.Enum) > 0:
		return strings.Join(a.Enum, "|")
	}
	return strings.ToUpper(strings.ReplaceAll(a.FlagName(), "-", "_"))
}

// Usage is the argument as a CLI usage line writes it: its ValueName,
// bracketed when optional, with … when it takes several.
func (a *Arg) Usage() string {
	u := a.ValueName()
	if a.Type == TArray {
		u += "…"
	}
	if !a.Required {
		u = "[" + u + "]"
	}
	return u
}

// Agents is which agents, by status, an agent-id argument names.
type Agents int

const (
	AgentsNone Agents = iota // not an agent id
	AgentsLive               // live agents: the verb acts on a running one
	AgentsDead               // dead agents: forget, reopen with resume
	AgentsAny                // every agent: read-only verbs read dead ones too
)

// AgentArg is the verb's first argument that names agents, if any
// (agent_open names two: id, and fork).
func (v *Verb) AgentArg() *Arg {
	for i := range v.Args {
		if v.Args[i].Agents != AgentsNone {
			return &v.Args[i]
		}
	}
	return nil
}

// Range is the interval a number argument must lie in: Min ≤ x ≤ Max, or
// Min < x ≤ Max with MinExclusive.
type Range struct {
	Min, Max     float64
	MinExclusive bool
}

// Contains says whether x lies in r.
func (r *Range) Contains(x float64) bool {
	if r.MinExclusive && x <= r.Min || x < r.Min {
		return false
	}
	return x <= r.Max
}

func (r *Range) String() string {
	op := ">="
	if r.MinExclusive {
		op = ">"
	}
	return fmt.Sprintf("%s %g and <= %g", op, r.Min, r.Max)
}

// Verb is one entry of the table.
type Verb struct {
	Name    string // the MCP tool name, e.g. agent_open
	CLI     string // the CLI command, e.g. open
	Summary string // one line
	Doc     string // what it does, for tool descriptions and man pages
	Returns string // the JSON it returns
	// Example is a shell session using the verb's command, one command a
	// line; the command's --help and the man page both show it.
	Example string
	// MCPNote is advice added to the verb's MCP tool description only:
	// MCP clients time out long tool calls, so the non-blocking pattern is
	// spelled out where a model picks its tool.
	MCPNote string
	Args    []Arg
	// Positional names the arguments the CLI command takes as positional
	// arguments, in their order; the others are its flags. Only the last
	// may be an array; only the last may be optional, but for one that
	// a command line may leave out whole (Skippable: agent_permit's
	// request_id), the words after it moving up one.
	Positional []string
	// ReadOnly verbs change nothing; Destructive ones stop or remove
	// something. MCP clients get both as tool annotations.
	ReadOnly, Destructive bool
	// ArgsType is the verb's argument struct (OpenArgs) and Result the
	// struct its result points to (OpenResult), as the verb's function
	// types them: internal/schema describes the result from it, so that
	// the schema cannot drift from what the daemon encodes.
	ArgsType, Result reflect.Type
	// newArgs returns a pointer to the verb's typed argument struct.
	newArgs func() any
	call    func(ctx context.Context, s Service, args any) (any, error)
}

// Arg is the verb's argument named name, or nil.
func (v *Verb) Arg(name string) *Arg {
	for i := range v.Args {
		if v.Args[i].Name == name {
			return &v.Args[i]
		}
	}
	return nil
}

// PositionalArgs are the arguments the CLI takes as positional
// arguments, in order.
func (v *Verb) PositionalArgs() []*Arg {
	out := make([]*Arg, 0, len(v.Positional))
	for _, name := range v.Positional {
		out = append(out, v.Arg(name))
	}
	return out
}

// IsPositional says whether the CLI takes argument name as a positional.
func (v *Verb) IsPositional(name string) bool { return slices.Contains(v.Positional, name) }

// Skippable is the index of the verb's optional positional that is not
// last (agent_permit's request_id), or -1: a command line may leave it
// out, and the words after it then fill the positionals after it.
func (v *Verb) Skippable() int {
	for i, a := range v.PositionalArgs() {
		if i < len(v.Positional)-1 && a != nil && !a.Required {
			return i
		}
	}
	return -1
}

// PositionalsFor are the positionals that n words of a command line fill,
// one a word, in order: every one; with one word fewer, every one but the
// Skippable, or but an optional last; a last that is an array, as many
// times as the words left for it. It is nil when n words fit none of
// these: the one reading of a command line's positionals, for the CLI and
// for the commands that errors quote.
func (v *Verb) PositionalsFor(n int) []*Arg {
	all := v.PositionalArgs()
	if len(all) == 0 {
		if n == 0 {
			return all
		}
		return nil
	}
	last := all[len(all)-1]
	optLast := !last.Required
	switch skip := v.Skippable(); {
	case last.Type == TArray && n >= len(all)-1 && (optLast || n >= len(all)):
		out := all[:len(all)-1]
		for range n - len(out) {
			out = append(out, last)
		}
		return out
	case n == len(all):
		return all
	case n == len(all)-1 && skip >= 0:
		return slices.Delete(all, skip, skip+1)
	case n == len(all)-1 && optLast:
		return all[:n]
	}
	return nil
}

// ArgsUsage is the CLI command's positional arguments as its usage line
// writes them ("ID TEXT", "[DIR]"), without those named in except; "" for
// none.
func (v *Verb) ArgsUsage(except ...string) string {
	var u []string
	for _, a := range v.PositionalArgs() {
		if !slices.Contains(except, a.Name) {
			u = append(u, a.Usage())
		}
	}
	return strings.Join(u, " ")
}

// Route is the verb's path in the control API.
func (v *Verb) Route() string { return "/v1/" + v.Name }

// NewArgs returns a fresh pointer to the verb's argument struct.
func (v *Verb) NewArgs() any { return v.newArgs() }

// Decode parses a JSON object of arguments, strictly: an unknown argument,
// a wrong type, a value outside the argument's Enum or Range, or a missing required
// argument is a bad_argument error naming it. Arguments left out get their
// Default from the table (ApplyDefaults), so that no caller re-defaults by
// hand.
func (v *Verb) Decode(raw []byte) (any, error) {
	a := v.newArgs()
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		raw = []byte("{}")
	}
	var present map[string]json.RawMessage
	if err := json.Unmarshal(raw, &present); err != nil {
		return nil, BadArg("%s: arguments must be a JSON object: %v", v.Name, err)
	}
	// encoding/json matches field names case-insensitively, so "AGENT_ID"
	// would fill agent_id unseen by the checks below, which look names up
	// exactly: {"agent_id":"a","AGENT_ID":""} passed as given and decoded
	// to an empty agent_id. Only the exact names are arguments.
	for name := range present {
		if !slices.ContainsFunc(v.Args, func(a Arg) bool { return a.Name == name }) {
			return nil, BadArg("%s: unknown argument %q; it takes %s", v.Name, name, v.argNames())
		}
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(a); err != nil {
		var te *json.UnmarshalTypeError
		switch {
		case errors.As(err, &te):
			return nil, BadArg("%s: argument %s must be %s", v.Name, te.Field, v.argType(te.Field))
		case strings.HasPrefix(err.Error(), "json: unknown field "):
			name := strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`)
			return nil, BadArg("%s: unknown argument %q; it takes %s", v.Name, name, v.argNames())
		default:
			return nil, BadArg("%s: %v", v.Name, err)
		}
	}
	given := func(name string) bool {
		r, ok := present[name]
		return ok && string(r) != "null" && string(r) != `""`
	}
	for _, arg := range v.Args {
		if !arg.Required && len(arg.RequiredUnless) == 0 {
			continue
		}
		if slices.ContainsFunc(arg.RequiredUnless, func(n string) bool { return given(n) && string(present[n]) != "false" }) {
			continue
		}
		if !given(arg.Name) {
			if len(arg.RequiredUnless) > 0 {
				return nil, BadArg("%s: argument %s is required unless %s is given", v.Name, arg.Name, strings.Join(arg.RequiredUnless, " or "))
			}
			return nil, BadArg("%s: argument %s is required", v.Name, arg.Name)
		}
	}
	if err := v.CheckEnums(a); err != nil {
		return nil, err
	}
	if err := v.checkRanges(a, given); err != nil {
		return nil, err
	}
	if in, ok := a.(inheritor); !ok || !in.Inherits() {
		v.ApplyDefaults(a)
	}
	return a, nil
}

// inheritor is an argument struct whose left-out arguments come from
// elsewhere rather than from the table's defaults: agent_open with resume
// takes them from the agent's record, and applies the defaults after.
type inheritor interface{ Inherits() bool }

// Inherit sets every argument of dst (a pointer to v's argument struct)
// still at its zero value to its value in src (another of the same type),
// except those named in keep: agent_open with resume takes what the caller
// left out from the agent's record this way.
func (v *Verb) Inherit(dst, src any, keep ...string) {
	f, from := v.fields(dst), v.fields(src)
	for _, arg := range v.Args {
		fv, ok := f[arg.Name]
		if !ok || !fv.IsZero() || slices.Contains(keep, arg.Name) {
			continue
		}
		fv.Set(from[arg.Name])
	}
}

// fields maps each argument of v to its field in the struct args points to.
func (v *Verb) fields(args any) map[string]reflect.Value {
	rv := reflect.ValueOf(args).Elem()
	out := make(map[string]reflect.Value, len(v.Args))
	for i := 0; i < rv.NumField(); i++ {
		name := strings.Split(rv.Type().Field(i).Tag.Get("json"), ",")[0]
		out[name] = rv.Field(i)
	}
	return out
}

// CheckEnums checks every string argument that has an Enum: a value given
// must be one of it.
func (v *Verb) CheckEnums(args any) error {
	f := v.fields(args)
	for _, arg := range v.Args {
		fv, ok := f[arg.Name]
		if len(arg.Enum) == 0 || !ok || fv.Kind() != reflect.String || fv.String() == "" {
			continue
		}
		if !slices.Contains(arg.Enum, fv.String()) {
			return BadArg("%s: %s %q is not one of %s", v.Name, arg.Name, fv.String(), strings.Join(arg.Enum, ", "))
		}
	}
	return nil
}

// checkRanges checks every number argument given that has a Range (one
// left out gets its Default, which lies in it).
func (v *Verb) checkRanges(args any, given func(string) bool) error {
	f := v.fields(args)
	for _, arg := range v.Args {
		fv, ok := f[arg.Name]
		if arg.Range == nil || !ok || !given(arg.Name) {
			continue
		}
		var x float64
		switch fv.Kind() {
		case reflect.Int, reflect.Int64:
			x = float64(fv.Int())
		case reflect.Float64:
			x = fv.Float()
		default:
			continue
		}
		if !arg.Range.Contains(x) {
			return BadArg("%s: %s %g is out of range: it must be %s", v.Name, arg.Name, x, arg.Range)
		}
	}
	return nil
}

// ApplyDefaults sets every argument still at its zero value to the table's
// Default. A pointer field (disallowed_tools) is left alone: nil means
// something of its own.
func (v *Verb) ApplyDefaults(args any) {
	f := v.fields(args)
	for _, arg := range v.Args {
		fv, ok := f[arg.Name]
		if !ok || arg.Default == nil || !fv.IsZero() || fv.Kind() == reflect.Pointer {
			continue
		}
		d := reflect.ValueOf(arg.Default)
		if d.Type().ConvertibleTo(fv.Type()) {
			fv.Set(d.Convert(fv.Type()))
		} else if d.Kind() == reflect.Slice && fv.Kind() == reflect.Slice {
			fv.Set(reflect.MakeSlice(fv.Type(), 0, 0))
		}
	}
}

func (v *Verb) argType(name string) string {
	for _, a := range v.Args {
		if a.Name == name {
			if a.Type == TArray {
				return "an array of strings"
			}
			if a.Type == TInteger {
				return "an integer"
			}
			return "a " + a.Type
		}
	}
	return "of another type"
}

func (v *Verb) argNames() string {
	if len(v.Args) == 0 {
		return "no arguments"
	}
	names := make([]string, len(v.Args))
	for i, a := range v.Args {
		names[i] = a.Name
	}
	return strings.Join(names, ", ")
}

// Call runs the verb against s with decoded args.
func (v *Verb) Call(ctx context.Context, s Service, args any) (any, error) {
	return v.call(ctx, s, args)
}

// Service is what executes the verbs: the daemon's session manager, or a
// client of it.
type Service interface {
	Open(ctx context.Context, a *OpenArgs) (*OpenResult, error)
	Send(ctx context.Context, a *SendArgs) (*SendResult, error)
	Run(ctx context.Context, a *RunArgs) (*RunResult, error)
	Output(ctx context.Context, a *OutputArgs) (*OutputResult, error)
	Status(ctx context.Context, a *StatusArgs) (*AgentStatus, error)
	SetModel(ctx context.Context, a *SetModelArgs) (*SetModelResult, error)
	List(ctx context.Context, a *ListArgs) (*ListResult, error)
	Interrupt(ctx context.Context, a *InterruptArgs) (*InterruptResult, error)
	Close(ctx context.Context, a *CloseArgs) (*CloseResult, error)
	Permit(ctx context.Context, a *PermitArgs) (*PermitResult, error)
	Forget(ctx context.Context, a *ForgetArgs) (*ForgetResult, error)
	Diff(ctx context.Context, a *DiffArgs) (*DiffResult, error)
}

// Argument structs. JSON names are the spec's; a test checks them against
// the table.

type OpenArgs struct {
	Cwd            string   `json:"cwd"`
	Model          string   `json:"model,omitempty"`
	Effort         string   `json:"effort,omitempty"`
	Permission     string   `json:"permission,omitempty"`
	PermissionMode string   `json:"permission_mode,omitempty"`
	AllowedTools   []string `json:"allowed_tools,omitempty"`
	Only           bool     `json:"only,omitempty"`
	// DisallowedTools: absent means the recursion guard; [] allows nesting.
	DisallowedTools *[]string `json:"disallowed_tools,omitempty"`
	MCPConfig       string    `json:"mcp_config,omitempty"`
	SystemPrompt    string    `json:"system_prompt,omitempty"`
	ID              string    `json:"id,omitempty"`
	// Resume reopens dead agent ID with its conversation; the options
	// left out come from the agent's record, not from the defaults.
	Resume bool `json:"resume,omitempty"`
	// Fork opens a new agent that continues a copy of agent Fork's
	// conversation; Fork goes on unchanged. The options left out come
	// from Fork's record, as with Resume (cwd too, unless given).
	Fork string `json:"fork,omitempty"`
	// Worktree gives the agent a git worktree of its own, on a new
	// branch (Branch, default BranchPrefix+<id>) from Base (default: the
	// branch the checkout is on, HEAD when it is detached: DefaultBase).
	Worktree bool   `json:"worktree,omitempty"`
	Branch   string `json:"branch,omitempty"`
	Base     string `json:"base,omitempty"`
	// Host places the agent: a configured host's name, HostLocal or
	// HostAny. Only a client that reaches hosts (the CLI, `kaimon mcp`)
	// acts on it, and strips it before asking the host's daemon, which
	// opens agents on its own machine alone.
	Host string `json:"host,omitempty"`
}

// The words of agent_open's host that name no configured host: this
// machine, and the least busy reachable host.
const (
	HostLocal = "local"
	HostAny   = "any"
)

// Inherits says that left-out options come from an agent's record: the
// resumed agent's, or the forked one's.
func (a *OpenArgs) Inherits() bool { return a.Resume || a.Fork != "" }

type SendArgs struct {
	AgentID string `json:"agent_id"`
	Text    string `json:"text"`
}

type RunArgs struct {
	AgentID string  `json:"agent_id"`
	Text    string  `json:"text"`
	Timeout float64 `json:"timeout,omitempty"` // seconds
}

type OutputArgs struct {
	AgentID      string `json:"agent_id"`
	Turn         int    `json:"turn,omitempty"`
	Which        string `json:"which,omitempty"`
	IncludeTools bool   `json:"include_tools,omitempty"`
	MaxChars     int    `json:"max_chars,omitempty"`
}

type StatusArgs struct {
	AgentID string `json:"agent_id"`
}

type SetModelArgs struct {
	AgentID string `json:"agent_id"`
	Model   string `json:"model"`
}

type ListArgs struct {
	// Waiting lists only the agents waiting on a person: a pending
	// permission request.
	Waiting bool `json:"waiting,omitempty"`
}

type InterruptArgs struct {
	AgentID string `json:"agent_id"`
}

type CloseArgs struct {
	AgentID string `json:"agent_id"`
}

type PermitArgs struct {
	AgentID   string           `json:"agent_id"`
	RequestID string           `json:"request_id"`
	Decision  apitype.Decision `json:"decision"`
	Always    bool             `json:"always,omitempty"`
	// Error says why a deny is given because the answer could not be
	// used; an error event in the agent's log records it.
	Error string `json:"error,omitempty"`
}

// ForgetArgs select dead agents to forget: the ids named, every dead agent
// with all_dead, and with older_than only those whose last activity is
// older (alone, it selects every dead agent that old).
type ForgetArgs struct {
	AgentIDs  []string `json:"agent_ids,omitempty"`
	AllDead   bool     `json:"all_dead,omitempty"`
	OlderThan string   `json:"older_than,omitempty"`
	Logs      bool     `json:"logs,omitempty"`
	// Force removes an agent's worktree with uncommitted changes or
	// untracked files too; DeleteBranch deletes its branch even when it
	// is not merged into its base.
	Force        bool `json:"force,omitempty"`
	DeleteBranch bool `json:"delete_branch,omitempty"`
}

// DiffArgs name the agent whose changes to show.
type DiffArgs struct {
	AgentID string `json:"agent_id"`
	Stat    bool   `json:"stat,omitempty"`
}

// Results, exactly the spec's JSON.

type OpenResult struct {
	AgentID string `json:"agent_id"`
	// Warnings are what the caller should know of an open that
	// succeeded: a fork's worktree without the forked agent's
	// uncommitted changes.
	Warnings []string `json:"warnings,omitempty"`
}

type SendResult struct {
	Turn int `json:"turn"`
}

type RunResult struct {
	Text string `json:"text"`
}

type OutputResult struct {
	AgentID      string             `json:"agent_id"`
	Turn         int                `json:"turn"`
	Which        string             `json:"which"`
	Status       apitype.AgentState `json:"status"`
	Done         bool               `json:"done"`
	Text         string             `json:"text"`
	Truncated    bool               `json:"truncated"`
	DroppedChars int                `json:"dropped_chars"`
	Usage        event.UsageFigures `json:"usage"`
	// LogErrors name the lines of the agent's event log that are not
	// records (torn by a crash, or damaged), which the text may lack.
	LogErrors []string `json:"log_errors,omitempty"`
}

// AgentStatus is agent_status's return, and each agent_list entry's body.
type AgentStatus struct {
	// AgentID is the agent's whole id: the one asked about, or the one a
	// prefix of it named (qualified as it was given, on another host).
	// In a list's entry the entry's own agent_id says it.
	AgentID      string             `json:"agent_id,omitempty"`
	Status       apitype.AgentState `json:"status"`
	Model        string             `json:"model"`
	Cwd          string             `json:"cwd"`
	Turn         int                `json:"turn"`
	CreatedAt    string             `json:"created_at"`
	LastActivity string             `json:"last_activity"`
	SessionID    string             `json:"session_id"`
	Transcript   string             `json:"transcript"`
	EventLog     string             `json:"event_log"`
	Usage        event.UsageFigures `json:"usage"`
	// UsageNote says that Usage is not counted by the agent (and what it
	// reports instead, such as its context size); absent when it is.
	UsageNote     string `json:"usage_note,omitempty"`
	QueuesPrompts bool   `json:"queues_prompts"`
	// Reason says why a dead agent ended (closed, exited, daemon exited,
	// daemon crashed, failed to start); absent while it lives.
	Reason string `json:"reason,omitempty"`
	// RecordError says that the agent's registry record could not be
	// written at its last save, and why; absent once a save succeeds.
	// Until then a restarted daemon knows the agent as its last written
	// record has it.
	RecordError string `json:"record_error,omitempty"`
	// PendingPermissions are the permission requests the agent waits on,
	// the first to expire first; absent when there are none. A working
	// agent with one is stopped until someone answers (agent_permit).
	PendingPermissions []PendingPermission `json:"pending_permissions,omitempty"`
	// Worktree, Branch and BaseCommit describe the git worktree of an
	// agent opened with worktree (absent otherwise); Dirty says whether
	// it has uncommitted changes or untracked files.
	Repository string `json:"repository,omitempty"`
	Worktree   string `json:"worktree,omitempty"`
	Branch     string `json:"branch,omitempty"`
	BaseCommit string `json:"base_commit,omitempty"`
	Dirty      bool   `json:"dirty,omitempty"`
	// WorktreeError says why Dirty could not be found out (the worktree
	// was removed, git failed).
	WorktreeError string `json:"worktree_error,omitempty"`
}

// PendingPermission is a permission request waiting for agent_permit.
// RequestID is its permission event's data.requestId: snake_case here as
// all the verbs' JSON is, camelCase there as all the events' data is
// (modelled on ACP's); neither is renamed, for the scripts that read them.
type PendingPermission struct {
	RequestID string `json:"request_id"`
	Tool      string `json:"tool"`            // the tool's name, as allowed_tools names it
	Title     string `json:"title,omitempty"` // the call, for people
	ExpiresAt string `json:"expires_at"`      // denied by timeout then
}

// Asks is what the request asks for, for people: its call's title,
// else its tool.
func (p *PendingPermission) Asks() string {
	if p.Title != "" {
		return p.Title
	}
	return p.Tool
}

type SetModelResult struct {
	Switched bool `json:"switched"`
}

// ListEntry is an agent_status object plus agent_id.
type ListEntry struct {
	AgentID string `json:"agent_id"`
	// Host is the agent's host in a list across hosts; absent from one
	// daemon's own list.
	Host string `json:"host,omitempty"`
	AgentStatus
}

type ListResult struct {
	Agents []ListEntry `json:"agents"`
	// Hosts are the hosts a list across hosts asked, in its order; absent
	// from one daemon's own list.
	Hosts []HostAnswer `json:"hosts,omitempty"`
}

// HostAnswer is what one host answered a list across hosts: how many
// agents it listed, or why it could not be asked (then its agents are
// missing from the list).
type HostAnswer struct {
	Host   string `json:"host"`
	Agents int    `json:"agents"`
	Error  string `json:"error,omitempty"`
}

type InterruptResult struct {
	Interrupted bool `json:"interrupted"`
}

type CloseResult struct {
	Closed bool `json:"closed"`
}

// ForgetResult lists the agents forgotten, and those kept because of
// their worktrees.
type ForgetResult struct {
	Forgotten []string `json:"forgotten"`
	// Kept are agents not forgotten because their worktree has work in
	// it (uncommitted changes, untracked files), or could not be removed.
	Kept []ForgetKept `json:"kept,omitempty"`
	// BranchesKept are the branches of forgotten agents' worktrees left
	// in their repository: not merged into their base, and delete_branch
	// not given.
	BranchesKept []KeptBranch `json:"branches_kept,omitempty"`
}

// ForgetKept is an agent agent_forget kept, and why.
type ForgetKept struct {
	AgentID  string `json:"agent_id"`
	Worktree string `json:"worktree"`
	Reason   string `json:"reason"`
}

// KeptBranch is a forgotten agent's branch left in its repository.
type KeptBranch struct {
	AgentID    string `json:"agent_id"`
	Repository string `json:"repository"`
	Branch     string `json:"branch"`
}

// DiffResult is what an agent changed in its worktree against its base.
type DiffResult struct {
	AgentID    string `json:"agent_id"`
	Worktree   string `json:"worktree"`
	Branch     string `json:"branch"`
	BaseCommit string `json:"base_commit"`
	// Diff is in git diff format, or git diff --stat's with stat; "" when
	// the agent changed nothing. agent_diff cuts it at DiffMax, at the end
	// of a line, and ends it with DiffCutNote.
	Diff string `json:"diff"`
	// Truncated says that Diff was cut: the whole is the stream
	// (DiffWriter, `kaimon diff ID`).
	Truncated bool `json:"truncated"`
}

// DiffWriter is a Service that writes an agent's diff as it is made, of
// any size: the daemon's session manager, and its clients over GET
// /v1/agents/{id}/diff. `kaimon diff` prints it so; agent_diff, whose
// answer is one JSON value (and an MCP tool's one message), returns the
// first DiffMax of it.
type DiffWriter interface {
	// WriteDiff writes the diff agent_diff describes to w and returns the
	// result without it (Diff ""). An error before the first write is
	// the verb's (no such agent, no worktree); one after it, the diff's
	// end.
	WriteDiff(ctx context.Context, a *DiffArgs, w io.Writer) (*DiffResult, error)
}

// AgentResolver is a Service that takes a unique prefix of an agent id
// wherever an id of an existing agent goes (the daemon's session
// manager): ResolveAgentID is the whole id, an ambiguous prefix a
// bad_argument error naming the ids it starts, and one of no agent a
// not_found error. The daemon's routes that name an agent in their path
// ask it before they read the agent's files; the verbs resolve in the
// service itself, and a verb that returns an agent's id returns the
// whole one.
type AgentResolver interface {
	ResolveAgentID(id string) (string, error)
}

// The bounds of a diff.
const (
	// DiffFileMax is the size over which an untracked file is named in a
	// diff with its size instead of its content, as git names a binary
	// file: 8 MiB is far over any source file an agent writes, so what is
	// larger is a build's output, a dataset, a dump or a model's weights,
	// which nobody reviews as a patch, which git would read whole to
	// diff, and which would swell every diff of the worktree by its size.
	DiffFileMax = 8 << 20
	// DiffMax bounds the diff agent_diff returns: the answer is one JSON
	// value, and through MCP one message into a model's context. 256 KiB
	// is some 64k tokens, a review's worth; the rest is a stream away.
	DiffMax = 256 << 10
)

// DiffCutNote is the line that ends a diff agent_diff cut at DiffMax:
// what was cut, and the command that prints the whole of agent id's.
func DiffCutNote(id string) string {
	return fmt.Sprintf("[kaimon: the diff is cut here, at %d KiB: `kaimon diff %s` prints the whole]\n", DiffMax>>10, id)
}

// PermitResult says whether the tool call may now run: true for an allow
// that was delivered, false for a deny.
type PermitResult struct {
	Permitted bool `json:"permitted"`
}

// ValidAgentID says whether id can name an agent: 1 to 64 of
// [A-Za-z0-9._-], starting with a letter or digit. It is a loop, not a
// regexp, because a package-level regexp compiles at init in every program
// linking it, the CLI included.
func ValidAgentID(id string) bool {
	if len(id) == 0 || len(id) > 64 {
		return false
	}
	for i := 0; i < len(id); i++ {
		switch c := id[i]; {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case i > 0 && (c == '.' || c == '_' || c == '-'):
		default:
			return false
		}
	}
	return true
}

// Defaults of the verbs' optional arguments.
const (
	DefaultModel      = "sonnet"
	DefaultPermission = "default"
	DefaultTimeout    = 600.0 // seconds
	DefaultWhich      = WhichLastMessage
	DefaultMaxChars   = 20000
)

// BranchPrefix begins the branch of an agent opened with worktree and no
// branch: BranchPrefix + its id.
const BranchPrefix = "kaimon/"

// DefaultBase says where a worktree's branch starts when base is not given:
// agent_open resolves it to the branch the checkout is on, so that forget
// can tell later whether the agent's branch was merged into it.
const DefaultBase = "the branch the checkout is on, HEAD when it is detached"

// DefaultProgressSeconds is how often agent_run's MCP tool reports
// progress while the turn runs, when the client asked for progress. It is
// here, not in mcpserver, so that `kaimon mcp --help` can state it without
// linking the MCP server into the CLI.
const DefaultProgressSeconds = 5

// Which agents' permission requests `kaimon mcp` sends its client as
// elicitations (--elicit), when the client declared elicitation; here for
// the reason DefaultProgressSeconds is.
const (
	ElicitOwn   = "own" // agents this MCP session opened or runs a turn of
	ElicitNever = "never"
	ElicitAll   = "all"
)

// ElicitModes are --elicit's values, the default first.
var ElicitModes = []string{ElicitOwn, ElicitNever, ElicitAll}

// ElicitDoc is --elicit's help.
const ElicitDoc = "whose permission requests go to a client that declared elicitation, for the person there to answer: " +
	ElicitOwn + " (agents this MCP session opened or runs a turn of), " + ElicitAll + " or " + ElicitNever

// CheckElicit refuses an --elicit value that is none of ElicitModes.
func CheckElicit(mode string) error {
	if !slices.Contains(ElicitModes, mode) {
		return BadArg("--elicit takes %s, not %q", strings.Join(ElicitModes, ", "), mode)
	}
	return nil
}

// Ranges of the number arguments.
var (
	// TimeoutRange: agent_run blocks its caller, and a week is longer than
	// any turn worth waiting on in one call, while far below where the
	// seconds overflow a time.Duration (about 292 years).
	TimeoutRange = &Range{Min: 0, MinExclusive: true, Max: 7 * 24 * 3600}
	// TurnRange: 0 is the latest turn; the top is int32's, which every
	// client's integers hold.
	TurnRange = &Range{Min: 0, Max: 1<<31 - 1}
	// MaxCharsRange: at least one character; at most 100 million, more
	// than any turn's text and a bound on one reply's size.
	MaxCharsRange = &Range{Min: 1, Max: 100_000_000}
)

// Enumerations of agent_open's options: the one list each, which the
// backends, the CLI's help and the MCP schema all read.
var (
	Efforts         = []string{"low", "medium", "high", "xhigh", "max"}
	PresetNames     = []string{"default", "notebook", "specialist", "lab", "auto", "bypass"}
	PermissionModes = []string{"default", "acceptEdits", "plan", "auto", "bypassPermissions"}
)

// Which values of agent_output.
const (
	WhichLastMessage = "last_message"
	WhichFullTurn    = "full_turn"
	WhichAll         = "all"
)

// Whiches are agent_output's which values, in the table's order.
var Whiches = []string{WhichLastMessage, WhichFullTurn, WhichAll}

// DecisionChoices is apitype.Decisions as a usage line writes them:
// allow|deny.
func DecisionChoices() string { return apitype.Join(apitype.Decisions, "|") }

// PermitCommand is the command line that answers agent agentID's
// permission request requestID with decision; with decision "", the
// choices (allow|deny). Every front end that tells a person how to answer
// uses it, so the words follow the verb table.
func PermitCommand(agentID, requestID string, decision apitype.Decision) string {
	if decision == "" {
		decision = apitype.Decision(DecisionChoices())
	}
	return fmt.Sprintf("kaimon %s %s %s %s", ByName("agent_permit").CLI, agentID, requestID, decision)
}

func verb[A any, R any](v Verb, f func(Service) func(context.Context, *A) (R, error)) *Verb {
	v.newArgs = func() any { return new(A) }
	v.ArgsType, v.Result = reflect.TypeFor[A](), reflect.TypeFor[R]()
	if v.Result.Kind() == reflect.Pointer {
		v.Result = v.Result.Elem() // the Service returns *OpenResult; its JSON is OpenResult's
	}
	v.call = func(ctx context.Context, s Service, a any) (any, error) {
		return f(s)(ctx, a.(*A))
	}
	return &v
}

// agentID is the agent_id argument of the verbs that act on a live agent;
// anyAgentID that of the read-only verbs, which read dead agents too.
var (
	agentID    = Arg{Name: "agent_id", Type: TString, Required: true, Doc: "The agent's id, as agent_open returned it.", Agents: AgentsLive, Placeholder: "ID"}
	anyAgentID = Arg{Name: "agent_id", Type: TString, Required: true, Doc: agentID.Doc, Agents: AgentsAny, Placeholder: "ID"}
)

// All is the table, in the spec's order.
var All = []*Verb{
	verb(Verb{
		Name: "agent_open", CLI: "open", Positional: []string{"cwd"},
		Summary: "Open an agent session in a directory",
		Doc:     "Spawns and owns an agent process working in cwd. Events then stream on the bus channel agent:<id> and in the agent's event log.",
		Returns: `{"agent_id": "<id>", "warnings": ["…"]}`,
		Example: "id=$(kaimon open --model opus --permission lab ~/src/project)",
		Args: []Arg{
			{Name: "cwd", Type: TString, RequiredUnless: []string{"resume", "fork"}, Placeholder: "DIR", Doc: "Working directory for the agent, an absolute path (kaimon open takes a relative DIR from the shell's directory). Must exist. Required, except to resume or fork (then it is the agent's own, or the forked one's)."},
			{Name: "model", Type: TString, Default: DefaultModel, Short: "m", FlagDoc: "Model alias or id (sonnet, opus, claude-…), optionally with an /EFFORT suffix (sonnet/high); acp:AGENT[:MODEL], ollama:TAG, vmlx:TAG and replay:PATH pick another backend, as kaimon --help tells.", Doc: "Model alias or id, e.g. sonnet, opus, claude-sonnet-5; may carry an effort suffix (sonnet/high). acp:<agent>[:<model>] drives an ACP agent instead: acp:opencode, acp:claude (claude-agent-acp) or acp:gemini, e.g. acp:opencode:ollama/qwen2.5:14b. ollama:<tag> and vmlx:<tag> run a local model served by Ollama or an OpenAI-compatible server, kaimon running its tools, e.g. ollama:qwen3:8b. replay:<path>[?speed=N] replays a recorded kaimon event log (an <id>.events.jsonl; a relative path is relative to cwd) as an agent, one recorded turn per send, at the recorded pace times N (speed=0: no waiting); no agent program, no network."},
			{Name: "effort", Type: TString, Enum: Efforts, Placeholder: "LEVEL", Doc: "Thinking/effort level; overrides a model suffix."},
			{Name: "permission", Type: TString, Default: DefaultPermission, Enum: PresetNames, Short: "p", Placeholder: "PRESET", Doc: "Permission preset."},
			{Name: "permission_mode", Type: TString, Enum: PermissionModes, Placeholder: "MODE", Doc: "Override the preset's raw claude permission mode."},
			{Name: "allowed_tools", Type: TArray, Default: []string{}, Flag: "allow", Placeholder: "TOOL", Doc: "Extra tool allowlist; composes with the preset (replaces it under specialist)."},
			{Name: "only", Type: TBoolean, Default: false, Doc: "Make allowed_tools the agent's whole tool set."},
			{Name: "disallowed_tools", Type: TArray, Flag: "disallow", Placeholder: "TOOL", FlagDoc: "Forbid TOOL; replaces the default recursion guard (the agent_* tools and the CLI's subagent spawners).", Doc: "Tools the agent may not call. Default: the recursion guard (the agent_* tools and the CLI's subagent spawners). Pass [] to allow nested agents."},
			{Name: "mcp_config", Type: TString, Placeholder: "FILE", FlagDoc: "Path to an --mcp-config JSON for the agent.", Doc: "Absolute path to an --mcp-config JSON for the agent (kaimon open takes a relative FILE from the shell's directory)."},
			{Name: "system_prompt", Type: TString, Placeholder: "TEXT", Doc: "Instructions appended to the agent's system prompt, for every turn."},
			{Name: "id", Type: TString, Agents: AgentsDead, FlagDoc: "Agent id to use (reopening a dead id reuses its slot, with a fresh conversation unless --resume).", Doc: "Caller-supplied agent id; reopening a dead id reuses its slot, with a fresh conversation unless resume."},
			{Name: "resume", Type: TBoolean, Default: false, FlagDoc: "With --id of a dead agent: reopen it with its conversation; the flags not given come from its record.", Doc: "Reopen the dead agent id with its conversation (claude --resume; ACP session/load). " +
				"The options left out come from the agent's record: its cwd, its model as last switched, its preset and tools. Turn numbers and seq continue."},
			{Name: "fork", Type: TString, Agents: AgentsAny, Placeholder: "ID",
				FlagDoc: "Open a new agent that continues a copy of agent ID's conversation (ID goes on unchanged); the flags not given come from ID's record, DIR too unless given. With --worktree, the new worktree starts from ID's branch.",
				Doc: "Open a new agent (a fresh id, or id) that continues a copy of agent <fork>'s conversation, live or dead; that agent goes on unchanged " +
					"(claude --resume --fork-session; ACP session/fork where the agent declares it; a copy of the history for ollama: and vmlx:; replay: from the same recorded turn). " +
					"The options left out come from its record, cwd too unless given. With worktree, the new worktree's branch starts from its branch's head; " +
					"its uncommitted changes do not come along, and warnings says so."},
			{Name: "worktree", Type: TBoolean, Default: false,
				FlagDoc: "Give the agent a git worktree of its own, on a new branch: DIR must be in a git checkout, and the agent works in the same subdirectory of the worktree.",
				Doc: "Give the agent a git worktree of its own on a new branch (branch, default " + BranchPrefix + "<id>) from base (default: " + DefaultBase + "): cwd must be inside a non-bare git repository, " +
					"and the agent works in the same subdirectory of the worktree as cwd is of the repository. Worktrees live in kaimon's worktree dir, <dir>/<id>, outside the repository. " +
					"agent_diff shows what the agent changed; agent_forget removes a clean worktree."},
			{Name: "branch", Type: TString, Placeholder: "NAME", Doc: "With worktree: the new branch's name (default " + BranchPrefix + "<id>); it must not exist yet."},
			{Name: "base", Type: TString, Placeholder: "REF", Doc: "With worktree: the commit, branch or tag the new branch starts from (default: " + DefaultBase + ")."},
			{Name: "host", Type: TString, Global: true, Placeholder: "HOST", Doc: "The host to open the agent on, when hosts are configured (kaimon host add): a host's name, " + HostLocal + " (this machine, the default) " +
				"or " + HostAny + " (the reachable host with the fewest working agents, then the fewest live ones; ties go to " + HostLocal + ", then to the names in order). " +
				"An agent on another host gets its agent_id qualified as HOST/ID (one placed here by " + HostAny + ", " + HostLocal + "/ID), which every other tool accepts as it is."},
		},
	}, func(s Service) func(context.Context, *OpenArgs) (*OpenResult, error) { return s.Open }),
	verb(Verb{
		Name: "agent_send", CLI: "send", Positional: []string{"agent_id", "text"},
		Summary: "Send a user turn (asynchronous)",
		Doc:     "Writes a user turn and returns its number at once; the turn's events stream on agent:<id>. Pair with agent_output to dispatch, then poll.",
		Returns: `{"turn": <n>}`,
		Example: "turn=$(kaimon send $id 'add a test for the parser')",
		MCPNote: "agent_send + agent_output is the non-blocking pattern: dispatch the turn with agent_send, " +
			"then poll agent_output with the agent_id until done is true; the text is partial while the agent works.",
		Args: []Arg{agentID, {Name: "text", Type: TString, Required: true, Doc: "The user's message."}},
	}, func(s Service) func(context.Context, *SendArgs) (*SendResult, error) { return s.Send }),
	verb(Verb{
		Name: "agent_run", CLI: "run", Positional: []string{"agent_id", "text"},
		Summary: "Send a turn and wait for it to end",
		Doc:     "Sends a turn and blocks until it ends, returning the assistant's text. On timeout or agent death it is an error, and the agent lives on after a timeout.",
		Returns: `{"text": "…"}`,
		Example: "kaimon run $id 'summarize the failing tests'\nkaimon run -C . --timeout 5m 'what does main.go do?'",
		MCPNote: "It can take minutes, and MCP clients time out long tool calls: for long turns prefer agent_send, " +
			"then poll agent_output (the non-blocking pattern). While it runs, agent_run sends progress notifications " +
			"when the call carries a progressToken.",
		Args: []Arg{agentID, {Name: "text", Type: TString, Required: true, Doc: "The user's message."},
			{Name: "timeout", Type: TNumber, Default: DefaultTimeout, Range: TimeoutRange, Doc: "Seconds to wait for the turn to end."}},
	}, func(s Service) func(context.Context, *RunArgs) (*RunResult, error) { return s.Run }),
	verb(Verb{
		Name: "agent_output", CLI: "output", ReadOnly: true, Positional: []string{"agent_id"},
		Summary: "Read an agent's output (non-blocking)",
		Doc:     "Returns a turn's output so far: partial while the agent is still working, final when done, and from the log once the agent is dead.",
		Returns: `{"agent_id", "turn", "which", "status", "done", "text", "truncated", "dropped_chars", "usage"}`,
		Example: "kaimon output $id --which full_turn --include-tools",
		MCPNote: "Pair with agent_send to dispatch-then-poll instead of blocking on agent_run.",
		Args: []Arg{anyAgentID,
			{Name: "turn", Type: TInteger, Range: TurnRange, Doc: "Turn number; default (or 0) the latest."},
			{Name: "which", Type: TString, Default: DefaultWhich, Enum: Whiches, Doc: "last_message: the turn's final assistant text block; full_turn: every assistant text block of the turn; all: every turn."},
			{Name: "include_tools", Type: TBoolean, Default: false, Doc: "For full_turn and all: interleave one-line summaries of tool calls and results."},
			{Name: "max_chars", Type: TInteger, Default: DefaultMaxChars, Range: MaxCharsRange, Doc: "Cut the text to this many characters; dropped_chars says how many were cut."}},
	}, func(s Service) func(context.Context, *OutputArgs) (*OutputResult, error) { return s.Output }),
	verb(Verb{
		Name: "agent_status", CLI: "status", Positional: []string{"agent_id"},
		Summary:  "Show an agent's status and token usage",
		Doc:      "Reports the agent's lifecycle state, model, turn, session, log paths and summed token usage; for an agent with a worktree, its repository, worktree, branch, base commit and whether it has uncommitted changes or untracked files (dirty).",
		Returns:  `{"agent_id" (the whole id, when a prefix named it), "status", "model", "cwd", "turn", "created_at", "last_activity", "session_id", "transcript", "event_log", "usage", "usage_note", "queues_prompts", "reason", "record_error", "pending_permissions": [{"request_id", "tool", "title", "expires_at"}], "repository", "worktree", "branch", "base_commit", "dirty", "worktree_error"}`,
		Example:  "kaimon status $id --json | jq .usage",
		Args:     []Arg{anyAgentID},
		ReadOnly: true,
	}, func(s Service) func(context.Context, *StatusArgs) (*AgentStatus, error) { return s.Status }),
	verb(Verb{
		Name: "agent_set_model", CLI: "set-model", Positional: []string{"agent_id", "model"},
		Summary: "Repoint a live agent at another model",
		Doc:     "Switches the model of a live agent, keeping its conversation: within one ACP agent, or between the tags of one ollama: or vmlx: server. switched is true only when the agent acknowledged it; otherwise close and reopen.",
		Returns: `{"switched": bool}`,
		Example: "kaimon set-model $id acp:opencode:ollama/qwen2.5:14b",
		Args:    []Arg{agentID, {Name: "model", Type: TString, Required: true, Doc: "The model alias or id to switch to."}},
	}, func(s Service) func(context.Context, *SetModelArgs) (*SetModelResult, error) { return s.SetModel }),
	verb(Verb{
		Name: "agent_list", CLI: "list", ReadOnly: true,
		Summary: "List agents, live and dead",
		Doc:     "Lists every agent the daemon knows, live and dead (also those of earlier daemons), each as its agent_status plus agent_id.",
		Returns: `{"agents": [ …status… ]}; across hosts (kaimon list --all-hosts, and kaimon mcp with hosts configured) each agent also carries "host" and its agent_id is qualified as HOST/ID (bare on local), ` +
			`and "hosts": [{"host", "agents", "error"}] says what each host answered: its number of agents, or the error of a host that could not be asked, whose agents are then missing.`,
		Example: "kaimon list --json | jq -r '.agents[].agent_id'",
		Args: []Arg{{Name: "waiting", Type: TBoolean, Default: false,
			Doc: "Only the agents waiting on a person: those with a pending permission request, which their pending_permissions name (an inbox)."}},
	}, func(s Service) func(context.Context, *ListArgs) (*ListResult, error) { return s.List }),
	verb(Verb{
		Name: "agent_interrupt", CLI: "interrupt", Destructive: true, Positional: []string{"agent_id"},
		Summary: "Cancel the turn in flight",
		Doc:     "Cancels the in-flight turn; the agent stays alive for the next one. interrupted is false when no turn was running. An agent that refuses or does not acknowledge the interrupt in time is an error (its turn may run on).",
		Returns: `{"interrupted": bool}`,
		Example: "kaimon interrupt $id",
		Args:    []Arg{agentID},
	}, func(s Service) func(context.Context, *InterruptArgs) (*InterruptResult, error) { return s.Interrupt }),
	verb(Verb{
		Name: "agent_close", CLI: "close", Destructive: true, Positional: []string{"agent_id"},
		Summary: "Close an agent",
		Doc:     "Stops the agent's process group; the slot is kept as dead for review, with its record and log on disk, until agent_forget. It can be reopened, or resumed with its conversation.",
		Returns: `{"closed": bool}`,
		Example: "kaimon close $id",
		Args:    []Arg{agentID},
	}, func(s Service) func(context.Context, *CloseArgs) (*CloseResult, error) { return s.Close }),
	verb(Verb{
		Name: "agent_permit", CLI: "permit", Positional: []string{"agent_id", "request_id", "decision"},
		Summary: "Answer an agent's permission request",
		Doc: "Allows or denies a tool call an agent is waiting on: its pending permission request request_id, " +
			"as agent_status lists it (pending_permissions) and as the permission event on agent:<id> names it (data.requestId). " +
			"Without request_id it answers the agent's one pending request, and refuses, listing them, when there are several. " +
			"A request nobody answers is denied after the daemon's permission timeout (permission_timeout in the config file, default " + strconv.Itoa(config.DefaultPermissionTimeout) + " seconds). " +
			"With always, the answer also holds for every later request of the same tool by this agent. Another permission event, carrying the decision, follows.",
		Returns: `{"permitted": bool}`,
		Example: "kaimon permit $id allow\nkaimon permit $id \"$request_id\" deny --always",
		Args: []Arg{agentID,
			{Name: "request_id", Type: TString, Doc: "The pending request to answer: its request_id in agent_status, the requestId of its permission event. Default: the agent's one pending request."},
			{Name: "decision", Type: TString, Required: true, Enum: apitype.Strings(apitype.Decisions), Doc: "allow lets the tool call run; deny refuses it."},
			{Name: "always", Type: TBoolean, Default: false, Doc: "Apply the decision to this agent's later requests for the same tool too."},
			{Name: "error", Type: TString, Placeholder: "WHY", Doc: "With deny: the answer could not be used, and why (kaimon mcp gives it for an elicitation answered with content that does not fit its schema); an error event in the agent's log records it."}},
	}, func(s Service) func(context.Context, *PermitArgs) (*PermitResult, error) { return s.Permit }),
	verb(Verb{
		Name: "agent_forget", CLI: "forget", Destructive: true, Positional: []string{"agent_ids"},
		Summary: "Forget dead agents",
		Doc: "Removes dead agents' records, so they no longer show in agent_list and cannot be resumed; with logs, their event and stderr logs too. " +
			"A live agent is refused (close it first), and an unknown id is an error; then nothing is forgotten. " +
			"Dead agents are kept until forgotten, unless dead_kept in the config file sets how many to keep. " +
			"An agent's worktree is removed with it when it is clean; one with uncommitted changes or untracked files is kept, and its agent with it (listed in kept), unless force. " +
			"Its branch is deleted when it is merged into its base, or with delete_branch; otherwise it stays (listed in branches_kept).",
		Returns: `{"forgotten": ["<id>", …], "kept": [{"agent_id", "worktree", "reason"}], "branches_kept": [{"agent_id", "repository", "branch"}]}`,
		Example: "kaimon forget --all-dead --older-than 7d --logs",
		Args: []Arg{
			{Name: "agent_ids", Type: TArray, Agents: AgentsDead, Placeholder: "ID", Doc: "The dead agents to forget, by their whole ids (not a prefix: forgetting cannot be undone)."},
			{Name: "all_dead", Type: TBoolean, Default: false, Doc: "Forget every dead agent."},
			{Name: "older_than", Type: TString, Placeholder: "AGE", Doc: "Only dead agents whose last activity is older than this, e.g. 7d, 12h, 90m; alone, every dead agent that old."},
			{Name: "logs", Type: TBoolean, Default: false, Doc: "Remove their event logs and stderr logs too."},
			{Name: "force", Type: TBoolean, Default: false, Doc: "Remove their worktrees even with uncommitted changes or untracked files in them."},
			{Name: "delete_branch", Type: TBoolean, Default: false, Doc: "Delete their worktrees' branches even when not merged into their base."},
		},
	}, func(s Service) func(context.Context, *ForgetArgs) (*ForgetResult, error) { return s.Forget }),
	verb(Verb{
		Name: "agent_diff", CLI: "diff", ReadOnly: true, Positional: []string{"agent_id"},
		Summary: "Show what an agent changed in its worktree",
		Doc: "For an agent opened with worktree: what it changed against the commit its branch started from, in git diff format: " +
			"its commits, its uncommitted changes and the files it created (untracked files included; ignored ones not). The worktree and its index are left as they are. " +
			fmt.Sprintf("An untracked file of more than %d MiB is named with its size instead of its content, as git names a binary file. ", DiffFileMax>>20) +
			fmt.Sprintf("The diff returned is cut at %d KiB, at the end of a line, with truncated true and a last line saying so; `kaimon diff ID` prints the whole, as it is made.", DiffMax>>10),
		Returns: `{"agent_id", "worktree", "branch", "base_commit", "diff", "truncated"}`,
		Example: "kaimon diff $id --stat\nkaimon diff $id > agent.patch",
		Args: []Arg{anyAgentID,
			{Name: "stat", Type: TBoolean, Default: false, Doc: "A summary per file (git diff --stat) instead of the patch."}},
	}, func(s Service) func(context.Context, *DiffArgs) (*DiffResult, error) { return s.Diff }),
}

// ByName finds a verb by its MCP name or its CLI name.
func ByName(name string) *Verb {
	for _, v := range All {
		if v.Name == name || v.CLI == name {
			return v
		}
	}
	return nil
}

// JSONFields lists the JSON names of a struct's fields, for the test that
// checks the table against the typed structs.
func JSONFields(t reflect.Type) []string {
	name := func(f reflect.StructField) string {
		n := strings.Split(f.Tag.Get("json"), ",")[0]
		if n == "-" {
			return ""
		}
		return n
	}
	// A field of t hides one of the same name in a struct it embeds, as
	// encoding/json has it (a list entry's agent_id, its status's).
	own := map[string]bool{}
	for i := 0; i < t.NumField(); i++ {
		if f := t.Field(i); !f.Anonymous {
			own[name(f)] = true
		}
	}
	var out []string
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if f.Anonymous {
			for _, n := range JSONFields(f.Type) {
				if !own[n] {
					out = append(out, n)
				}
			}
			continue
		}
		if n := name(f); n != "" {
			out = append(out, n)
		}
	}
	return out
}

// Error codes of the API, with the HTTP status each travels with.
const (
	CodeBadArgument = "bad_argument" // 400
	CodeNotFound    = "not_found"    // 404
	CodeWrongState  = "wrong_state"  // 409
	CodeTurnFailed  = "turn_failed"  // 502: the agent ended the turn with an error
	CodeUnavailable = "unavailable"  // 503: the agent program cannot be started, or does not answer
	CodeTimeout     = "timeout"      // 504
	CodeInternal    = "internal"     // 500
	// CodeMethod: a verb called with a method it does not take (GET of a
	// verb that changes something).
	CodeMethod   = "method_not_allowed" // 405
	CodeTooLarge = "too_large"          // 413: a request body over MaxBody
	CodeTooSlow  = "too_slow"           // 408: a request body that took longer than ReadTimeout
	// CodeStorage: what the daemon had to write could not be, for want
	// of room or a working disk (DiskFault); not the caller's to fix by
	// asking otherwise.
	CodeStorage = "storage" // 507
)

// Codes are the error codes above, each once: the API's description
// (kaimon schema) lists them from here.
var Codes = []string{CodeBadArgument, CodeNotFound, CodeWrongState, CodeTurnFailed, CodeUnavailable,
	CodeTimeout, CodeInternal, CodeMethod, CodeTooLarge, CodeTooSlow, CodeStorage}

// MaxBody bounds a request body, on the control socket and the MCP door:
// far above any verb's arguments (a prompt of 16 MiB is some four million
// tokens), and well below what would cost the daemon its memory.
const MaxBody = 16 << 20

// ReadTimeout bounds how long a request's headers may take to arrive, on
// the control socket and the door (http.Server's ReadHeaderTimeout), and
// then, again, its body (ReadBody). Every client of kaimon's sends a
// request in one go: even a body of MaxBody takes milliseconds over a
// local socket, so a request still arriving after this long is stuck or
// hostile, and would otherwise hold a connection and its goroutine for
// good (one byte every two seconds did). It is not http.Server's
// ReadTimeout, which would go on counting once the body is in and cut
// the requests that last: an agent_run of a long turn, and the event
// streams, which must not get a write timeout either.
const ReadTimeout = 10 * time.Second

// ReadBody reads a request body of at most MaxBody bytes, for the control
// socket and the door alike. A longer one is a too_large error (413), found
// before reading when Content-Length says so, and otherwise as soon as the
// limit is passed: never by reading it whole. One that takes longer than
// ReadTimeout to arrive is a too_slow error (408).
func ReadBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	tooLarge := Errorf(CodeTooLarge, "request body over the limit of %d bytes (%d MiB)", MaxBody, MaxBody>>20)
	if r.ContentLength > MaxBody {
		return nil, tooLarge
	}
	// The deadline is the connection's, for this body only: lifted once
	// the body is in, so that the verb itself (a turn of agent_run) runs
	// as long as it needs.
	rc := http.NewResponseController(w)
	deadline := rc.SetReadDeadline(time.Now().Add(ReadTimeout)) == nil
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBody))
	if errors.Is(err, os.ErrDeadlineExceeded) {
		// The connection goes after the answer: without this, net/http
		// would read the rest of the body before answering, at the
		// sender's pace, with the deadline kept for that reason too.
		w.Header().Set("Connection", "close")
		return nil, Errorf(CodeTooSlow, "the request body did not arrive within %s of its headers: send the request in one go", ReadTimeout)
	}
	if deadline {
		_ = rc.SetReadDeadline(time.Time{})
	}
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return nil, tooLarge
	}
	if err != nil {
		return nil, BadArg("reading request body: %v", err)
	}
	return b, nil
}

// Error is a verb's failure: a code a program can switch on, a message a
// person (or model) can act on, and, for run, the text the turn produced.
type Error struct {
	Code    string `json:"code"`
	Message string `json:"error"`
	Text    string `json:"text,omitempty"`
}

func (e *Error) Error() string { return e.Message }

// HTTPStatus is the status code e travels with.
func (e *Error) HTTPStatus() int {
	switch e.Code {
	case CodeBadArgument:
		return 400
	case CodeNotFound:
		return 404
	case CodeWrongState:
		return 409
	case CodeTurnFailed:
		return 502
	case CodeUnavailable:
		return 503
	case CodeTimeout:
		return 504
	case CodeMethod:
		return 405
	case CodeTooLarge:
		return 413
	case CodeTooSlow:
		return 408
	case CodeStorage:
		return 507
	}
	return 500
}

func errf(code, format string, a ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, a...)}
}

// BadArg, NotFound and WrongState build the common errors.
func BadArg(format string, a ...any) *Error     { return errf(CodeBadArgument, format, a...) }
func NotFound(format string, a ...any) *Error   { return errf(CodeNotFound, format, a...) }
func WrongState(format string, a ...any) *Error { return errf(CodeWrongState, format, a...) }

// Errorf builds an error with any code.
func Errorf(code, format string, a ...any) *Error { return errf(code, format, a...) }

// AsError returns err as an *Error, wrapping a foreign error as internal
// (or storage: DiskFault).
func AsError(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	if e := DiskFault("", err, ""); e != nil {
		return e
	}
	return &Error{Code: CodeInternal, Message: err.Error()}
}

// diskFaults are the errors of a disk rather than of a request, each with
// what it means and what to do.
var diskFaults = []struct {
	errno     syscall.Errno
	says, fix string
}{
	{syscall.ENOSPC, "the disk is full", "free some space on it and try again"},
	{syscall.EDQUOT, "the disk quota is used up", "free some of your space on it (or have the quota raised) and try again"},
	{syscall.EROFS, "the file system is read-only", "make it writable, or point kaimon's paths elsewhere (man kaimon, ENVIRONMENT), and try again"},
	{syscall.EIO, "the disk failed (an input/output error)", "see the kernel's log (dmesg) for the disk, and try again"},
}

// DiskFault is err, from writing what (an agent's files, its worktree,
// its log), as a storage error when the disk is why it failed: one of
// diskFaults' errnos in its chain, or named by its system message in
// output, what a program kaimon ran said of it (git's stderr: a child's
// errno reaches kaimon as text only). It is nil otherwise. Without it such
// an error was reported as the caller's (bad_argument: the open's options
// were fine) or as the agent program's (unavailable).
func DiskFault(what string, err error, output string) *Error {
	output = strings.ToLower(output)
	for _, f := range diskFaults {
		if errors.Is(err, f.errno) || output != "" && strings.Contains(output, f.errno.Error()) {
			msg := fmt.Sprintf("%s: %v: %s", f.says, err, f.fix)
			if what != "" {
				msg = what + ": " + msg
			}
			return &Error{Code: CodeStorage, Message: msg}
		}
	}
	return nil
}

// RunEnded is agent_run's answer for turn n of agent id once it ended with
// stop reason stop (and the error msg its result carries), text being its
// last message: the one place that says what a turn's end makes of a run,
// for the daemon's agent_run and for a CLI that lost agent_run's answer
// with a host's link and read the turn's end from the agent's events.
func RunEnded(id string, n int, stop apitype.StopReason, msg, text string) (*RunResult, error) {
	switch {
	case stop == apitype.StopCancelled && msg == "":
		// An interrupt asked for: the turn did not go wrong.
		return nil, &Error{Code: CodeTurnFailed, Message: fmt.Sprintf("agent %s turn %d was cancelled (interrupted)", id, n), Text: text}
	case stop.Failed():
		if msg == "" {
			msg = "stop reason " + string(stop)
		}
		return nil, &Error{Code: CodeTurnFailed, Message: fmt.Sprintf("agent %s turn %d failed: %s", id, n, msg), Text: text}
	}
	return &RunResult{Text: text}, nil
}

// RunDied is agent_run's answer for turn n of agent id, which died before
// the turn ended; text is what it had said.
func RunDied(id string, n int, text string) error {
	return &Error{Code: CodeTurnFailed, Message: fmt.Sprintf("agent %s died during turn %d", id, n), Text: text}
}

// RunTimedOut is agent_run's answer for turn n of agent id, still running
// after timeout seconds; text is its reply so far.
func RunTimedOut(id string, n int, timeout float64, text string) error {
	return &Error{Code: CodeTimeout, Text: text,
		Message: fmt.Sprintf("agent %s turn %d did not end within %gs; it is still running (kaimon output %s, or kaimon interrupt %s)", id, n, timeout, id, id)}
}
