package servertest

import (
	"context"
	"fmt"
	"io"
	"sync"

	"github.com/kaimon/kaimon/internal/verbs"
)

// Fake is a verbs.Service for tests. Each verb gives the answer On set for
// it, else its zero result; every call is recorded with its arguments, so
// that a test can compare them with what a command line should have built.
// It is safe for concurrent use.
type Fake struct {
	mu      sync.Mutex
	answers map[string]Answer
	calls   []Call
}

// Answer answers one call of a verb: args is the verb's *XxxArgs, and the
// result its *XxxResult (nil for the zero one), or an error.
type Answer func(ctx context.Context, args any) (any, error)

// Call is one call the Fake took.
type Call struct {
	Verb string // as the table names it: agent_open
	Args any    // the verb's *XxxArgs
}

// On sets verb's answer; verb is the table's name of it (agent_open) or
// its command's (open).
func (f *Fake) On(verb string, a Answer) *Fake {
	v := verbs.ByName(verb)
	if v == nil {
		panic(fmt.Sprintf("servertest.Fake: no verb %q", verb))
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.answers == nil {
		f.answers = map[string]Answer{}
	}
	f.answers[v.Name] = a
	return f
}

// Returns sets verb's answer to res and err, whatever the arguments.
func (f *Fake) Returns(verb string, res any, err error) *Fake {
	return f.On(verb, func(context.Context, any) (any, error) { return res, err })
}

// Calls returns the calls taken so far, in order.
func (f *Fake) Calls() []Call {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Call(nil), f.calls...)
}

func answer[R any](ctx context.Context, f *Fake, verb string, args any) (*R, error) {
	f.mu.Lock()
	f.calls = append(f.calls, Call{Verb: verb, Args: args})
	a := f.answers[verb]
	f.mu.Unlock()
	if a == nil {
		return new(R), nil
	}
	res, err := a(ctx, args)
	if err != nil {
		return nil, err
	}
	if res == nil {
		return new(R), nil
	}
	r, ok := res.(*R)
	if !ok {
		panic(fmt.Sprintf("servertest.Fake: %s answered a %T, not a %T", verb, res, r))
	}
	return r, nil
}

func (f *Fake) Open(ctx context.Context, a *verbs.OpenArgs) (*verbs.OpenResult, error) {
	return answer[verbs.OpenResult](ctx, f, "agent_open", a)
}
func (f *Fake) Send(ctx context.Context, a *verbs.SendArgs) (*verbs.SendResult, error) {
	return answer[verbs.SendResult](ctx, f, "agent_send", a)
}
func (f *Fake) Run(ctx context.Context, a *verbs.RunArgs) (*verbs.RunResult, error) {
	return answer[verbs.RunResult](ctx, f, "agent_run", a)
}
func (f *Fake) Output(ctx context.Context, a *verbs.OutputArgs) (*verbs.OutputResult, error) {
	return answer[verbs.OutputResult](ctx, f, "agent_output", a)
}
func (f *Fake) Status(ctx context.Context, a *verbs.StatusArgs) (*verbs.AgentStatus, error) {
	return answer[verbs.AgentStatus](ctx, f, "agent_status", a)
}
func (f *Fake) SetModel(ctx context.Context, a *verbs.SetModelArgs) (*verbs.SetModelResult, error) {
	return answer[verbs.SetModelResult](ctx, f, "agent_set_model", a)
}
func (f *Fake) List(ctx context.Context, a *verbs.ListArgs) (*verbs.ListResult, error) {
	return answer[verbs.ListResult](ctx, f, "agent_list", a)
}
func (f *Fake) Interrupt(ctx context.Context, a *verbs.InterruptArgs) (*verbs.InterruptResult, error) {
	return answer[verbs.InterruptResult](ctx, f, "agent_interrupt", a)
}
func (f *Fake) Close(ctx context.Context, a *verbs.CloseArgs) (*verbs.CloseResult, error) {
	return answer[verbs.CloseResult](ctx, f, "agent_close", a)
}
func (f *Fake) Permit(ctx context.Context, a *verbs.PermitArgs) (*verbs.PermitResult, error) {
	return answer[verbs.PermitResult](ctx, f, "agent_permit", a)
}
func (f *Fake) Forget(ctx context.Context, a *verbs.ForgetArgs) (*verbs.ForgetResult, error) {
	return answer[verbs.ForgetResult](ctx, f, "agent_forget", a)
}

func (f *Fake) Diff(ctx context.Context, a *verbs.DiffArgs) (*verbs.DiffResult, error) {
	return answer[verbs.DiffResult](ctx, f, "agent_diff", a)
}

// WriteDiff is agent_diff's answer streamed (verbs.DiffWriter): its Diff
// written to w, the rest returned. It is a call of agent_diff.
func (f *Fake) WriteDiff(ctx context.Context, a *verbs.DiffArgs, w io.Writer) (*verbs.DiffResult, error) {
	r, err := answer[verbs.DiffResult](ctx, f, "agent_diff", a)
	if err != nil {
		return nil, err
	}
	if _, err := io.WriteString(w, r.Diff); err != nil {
		return nil, err
	}
	rest := *r
	rest.Diff, rest.Truncated = "", false
	return &rest, nil
}

var (
	_ verbs.Service    = (*Fake)(nil)
	_ verbs.DiffWriter = (*Fake)(nil)
)
