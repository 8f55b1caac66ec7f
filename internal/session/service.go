package session

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/kaimon/kaimon/internal/apitype"
	"github.com/kaimon/kaimon/internal/backend"
	"github.com/kaimon/kaimon/internal/confine"
	"github.com/kaimon/kaimon/internal/event"
	"github.com/kaimon/kaimon/internal/gitwt"
	"github.com/kaimon/kaimon/internal/policy"
	"github.com/kaimon/kaimon/internal/verbs"
)

// reserve puts ag in its id's slot, which must be free or dead, and
// returns the dead agent it displaces.
func (m *Manager) reserve(ag *Agent) (old *Agent, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closing {
		return nil, verbs.WrongState("kaimon-agentd is shutting down")
	}
	if m.forgetting[ag.id] {
		return nil, verbs.WrongState("agent %s is being forgotten: open it again once the forget is done", ag.id)
	}
	old = m.agents[ag.id]
	if old != nil {
		if st := old.state(); st != apitype.Dead {
			if st == "" {
				st = "being opened"
			}
			return nil, verbs.WrongState("agent %s is already open (%s); close it first or pick another id", ag.id, st)
		}
	}
	m.agents[ag.id] = ag
	return old, nil
}

// unreserve gives the slot back to the agent that held it.
func (m *Manager) unreserve(ag, old *Agent) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.agents[ag.id] != ag {
		return
	}
	if old != nil {
		m.agents[ag.id] = old
	} else {
		delete(m.agents, ag.id)
	}
}

// openOptions validates agent_open's arguments a into the backend's
// options, whose OpenArgs are the arguments as applied (what the record
// keeps). To resume, the dead
// agent old's record supplies what a left out, and its vendor session is
// what the backend continues; to fork, parent's record and session do
// (fork.go). With worktree it makes the agent's git
// worktree, last, once every other check has held, and returns it (its
// cwd is then in it); a resumed agent's worktree is made sure of.
func (m *Manager) openOptions(ctx context.Context, id string, a verbs.OpenArgs, old, parent *Agent) (backend.Options, *gitwt.Info, error) {
	a.ID = id
	if err := checkAbsPaths(&a); err != nil {
		return backend.Options{}, nil, err
	}
	session := ""
	var wt *gitwt.Info
	var fork *backend.Fork
	if parent != nil {
		var err error
		if fork, err = inheritFork(ctx, &a, parent); err != nil {
			return backend.Options{}, nil, err
		}
		a.Fork = "" // a record says what is, not how it came to be
	} else if a.Resume {
		var err error
		if session, err = inherit(&a, old); err != nil {
			return backend.Options{}, nil, err
		}
		a.Resume = false // a record says what is, not how it came to be
		wt = old.worktree()
	} else if old != nil && old.worktree() != nil {
		if p := old.worktree().Worktree; exists(p) {
			return backend.Options{}, nil, verbs.WrongState("agent_open: the dead agent %s has its worktree %s: resume it (kaimon open --id %s --resume), or forget it first (kaimon forget %s)", id, p, id, id)
		}
	}
	if !a.Worktree && (a.Branch != "" || a.Base != "") {
		return backend.Options{}, nil, verbs.BadArg("agent_open: branch and base name the worktree's branch and where it starts: give them with worktree (kaimon open --worktree)")
	}
	verbs.ByName("agent_open").ApplyDefaults(&a) // for callers in this process, and after inherit
	if a.Cwd == "" {
		return backend.Options{}, nil, verbs.BadArg("agent_open: cwd is required")
	}
	cwd, err := filepath.Abs(a.Cwd)
	if err != nil {
		return backend.Options{}, nil, verbs.BadArg("agent_open: cwd %q: %v", a.Cwd, err)
	}
	if wt != nil {
		if err := resumeWorktree(ctx, id, wt); err != nil {
			return backend.Options{}, nil, err
		}
	}
	if st, err := os.Stat(cwd); err != nil || !st.IsDir() {
		return backend.Options{}, nil, verbs.BadArg("agent_open: cwd %s does not exist or is not a directory", cwd)
	}
	a.Cwd = cwd
	// The one place the policy is resolved: the agent carries it. An
	// agent that opens this one through the door is its parent, at whose
	// policy it is capped; the options a resume or fork inherited above
	// are held to it as much as those given.
	pol, err := policy.ForOpen(&a, policy.CallerOf(ctx))
	if err != nil {
		return backend.Options{}, nil, verbs.BadArg("agent_open: %v", err)
	}
	if a.Worktree && wt == nil {
		if wt, err = m.newWorktree(ctx, id, &a); err != nil {
			return backend.Options{}, nil, err
		}
		a.Cwd, a.Branch = wt.Cwd(), wt.Branch
	}
	return backend.Options{
		OpenArgs: a, Policy: pol, ResumeSession: session, Fork: fork,
		CacheDir: m.paths.CacheDir, ACPAgents: m.acpAgents,
		Env: append(append([]string{}, m.env...), "KAIMON_AGENT_SESSION="+a.ID),
	}, wt, nil
}

// checkAbsPaths refuses a relative cwd or mcp_config: the daemon's own
// directory ("/", cmd/kaimon-agentd) is not the caller's, and a path
// taken from it would be somewhere the caller never meant. Every client
// of kaimon's own resolves a relative path where it means something
// first: kaimon open against the shell's directory, the door against the
// calling agent's cwd; a raw API or MCP client sends an absolute one.
func checkAbsPaths(a *verbs.OpenArgs) error {
	for _, p := range []struct{ name, path string }{{"cwd", a.Cwd}, {"mcp_config", a.MCPConfig}} {
		if p.path != "" && !filepath.IsAbs(p.path) {
			return verbs.BadArg("agent_open: %s %q is a relative path: give an absolute one (kaimon-agentd has no directory of the caller's to take it from; `kaimon open` resolves a relative DIR or --mcp-config for you)", p.name, p.path)
		}
	}
	return nil
}

func exists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}

// inherit fills the options a resuming open left out from the dead
// agent's record, refuses what cannot be resumed, and returns the vendor's
// session to continue.
func inherit(a *verbs.OpenArgs, old *Agent) (session string, err error) {
	if old == nil {
		return "", verbs.NotFound("agent_open: no agent %q to resume: see `kaimon list` for the agents kaimon knows", a.ID)
	}
	old.mu.Lock()
	defer old.mu.Unlock()
	if old.info.SessionID == "" {
		return "", verbs.WrongState("agent_open: agent %s has no conversation to resume (it never began one); open it without --resume for a fresh one", a.ID)
	}
	rec := old.opts.OpenArgs
	rec.Model = old.model
	if a.Cwd != "" {
		if cwd, err := filepath.Abs(a.Cwd); err != nil || cwd != rec.Cwd {
			return "", verbs.BadArg("agent_open: agent %s worked in %s, and its conversation belongs there: resume it without a cwd (or with that one)", a.ID, rec.Cwd)
		}
	}
	if a.Branch != "" || a.Base != "" {
		return "", verbs.BadArg("agent_open: agent %s goes on in its own worktree and branch: resume it without branch and base", a.ID)
	}
	if a.Worktree && old.wt == nil {
		return "", verbs.BadArg("agent_open: agent %s was opened without a worktree, and its conversation belongs in %s: resume it without worktree", a.ID, rec.Cwd)
	}
	verbs.ByName("agent_open").Inherit(a, &rec, "id", "resume")
	return old.info.SessionID, nil
}

// openError is a backend's refusal to be made, as the verb reports it: an
// option it cannot take, or its program missing, is the caller's to fix
// (a bad argument), unless the backend said otherwise.
func openError(err error) error {
	var ve *verbs.Error
	if errors.As(err, &ve) {
		return verbs.Errorf(ve.Code, "agent_open: %s", ve.Message)
	}
	if d := diskFault("agent_open", err); d != nil {
		return d
	}
	return verbs.BadArg("agent_open: %v", err)
}

// Forget implements agent_forget. The whole selection is checked first: a
// live or unknown id named forgets nothing.
func (m *Manager) Forget(ctx context.Context, a *verbs.ForgetArgs) (*verbs.ForgetResult, error) {
	var age time.Duration
	if a.OlderThan != "" {
		d, err := ParseAge(a.OlderThan)
		if err != nil {
			return nil, verbs.BadArg("agent_forget: %v", err)
		}
		age = d
	}
	if len(a.AgentIDs) == 0 && !a.AllDead && age == 0 {
		return nil, verbs.BadArg("agent_forget: name the dead agents to forget, or select them with all_dead or older_than")
	}
	m.mu.Lock()
	var picked []*Agent
	seen := map[string]bool{}
	for _, given := range a.AgentIDs {
		ag, err := m.lookupLocked(given)
		if err != nil {
			m.mu.Unlock()
			return nil, verbs.Errorf(verbs.AsError(err).Code, "agent_forget: %s; nothing was forgotten", err)
		}
		id := ag.id
		if id != given {
			// Forgetting cannot be undone (the agent can no longer be
			// resumed): it is not done on a guess.
			m.mu.Unlock()
			return nil, verbs.BadArg("agent_forget: %q is the start of agent %s's id; forget takes whole ids, since a forgotten agent cannot be resumed (kaimon forget %s); nothing was forgotten", given, id, id)
		}
		switch {
		case ag.state() != apitype.Dead:
			m.mu.Unlock()
			st := ag.state()
			if st == "" {
				st = "being opened"
			}
			return nil, verbs.WrongState("agent_forget: agent %s is %s: close it first (kaimon close %s); nothing was forgotten", id, st, id)
		}
		if !seen[id] {
			seen[id] = true
			picked = append(picked, ag)
		}
	}
	if len(a.AgentIDs) == 0 {
		for id, ag := range m.agents {
			if ag.state() == apitype.Dead {
				seen[id] = true
				picked = append(picked, ag)
			}
		}
	}
	if m.forgetting == nil {
		m.forgetting = map[string]bool{}
	}
	for _, ag := range picked {
		m.forgetting[ag.id] = true
	}
	m.mu.Unlock()
	defer func() {
		m.mu.Lock()
		for _, ag := range picked {
			delete(m.forgetting, ag.id)
		}
		m.mu.Unlock()
	}()
	cutoff := time.Now().Add(-age)
	res := &verbs.ForgetResult{Forgotten: []string{}}
	for _, ag := range picked {
		if age > 0 && !ag.lastActivity().Before(cutoff) {
			continue
		}
		// The worktree first: one with work in it keeps its agent, so
		// that kaimon diff and a later forget --force still find it.
		why, branchKept := "", false
		if user := m.liveIn(ag.worktree(), ag); user != "" {
			// Another agent (a fork without a worktree of its own, or
			// one opened in this one) works in it: even --force does
			// not take its directory away.
			why = fmt.Sprintf("agent %s works in its worktree %s: close that agent first", user, ag.worktree().Worktree)
		} else {
			why, branchKept = forgetWorktree(ctx, ag, a.Force, a.DeleteBranch)
		}
		if why != "" {
			res.Kept = append(res.Kept, verbs.ForgetKept{AgentID: ag.id, Worktree: ag.worktree().Worktree, Reason: why})
			continue
		}
		if m.forget(ag, a.Logs) {
			res.Forgotten = append(res.Forgotten, ag.id)
			if branchKept {
				wt := ag.worktree()
				res.BranchesKept = append(res.BranchesKept, verbs.KeptBranch{AgentID: ag.id, Repository: wt.Repository, Branch: wt.Branch})
			}
		}
	}
	sort.Strings(res.Forgotten)
	sort.Slice(res.Kept, func(i, j int) bool { return res.Kept[i].AgentID < res.Kept[j].AgentID })
	return res, nil
}

// liveIn is a live agent other than ag whose cwd is in worktree wt, or ""
// (none, or no worktree).
func (m *Manager) liveIn(wt *gitwt.Info, ag *Agent) string {
	if wt == nil {
		return ""
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for id, other := range m.agents {
		if other == ag || other.state() == apitype.Dead {
			continue
		}
		other.mu.Lock()
		cwd := other.opts.Cwd
		other.mu.Unlock()
		if confine.Within(wt.Worktree, cwd) {
			return id
		}
	}
	return ""
}

// Send implements agent_send.
func (m *Manager) Send(ctx context.Context, a *verbs.SendArgs) (*verbs.SendResult, error) {
	ag, err := m.get(a.AgentID)
	if err != nil {
		return nil, err
	}
	n, err := ag.send(a.Text, true)
	if err != nil {
		return nil, err
	}
	return &verbs.SendResult{Turn: n}, nil
}

// Run implements agent_run.
func (m *Manager) Run(ctx context.Context, a *verbs.RunArgs) (*verbs.RunResult, error) {
	ag, err := m.get(a.AgentID)
	if err != nil {
		return nil, err
	}
	timeout := a.Timeout // in verbs.TimeoutRange: Decode checked it
	// Not waiting for the turn's first events to be published: its
	// result comes after them in the agent's queue (queue.go).
	n, err := ag.send(a.Text, false)
	if err != nil {
		return nil, err
	}
	timer := time.NewTimer(time.Duration(timeout * float64(time.Second)))
	defer timer.Stop()
	for {
		ag.mu.Lock()
		t := ag.book.get(n)
		dropped := ag.book.dropped(n)
		status := ag.status
		ch := ag.changedLocked()
		logStart := ag.logStart
		var done bool
		var text, msg string
		var stop apitype.StopReason
		if t != nil {
			done, text, stop, msg = t.done, t.lastMessage(), t.stopReason, t.errMsg
		}
		ag.mu.Unlock()
		if dropped {
			// Done, and dropped from the book for a later turn that
			// ended before this call looked: the log has it.
			lb, _, lerr := ag.readLog(logStart, func(k int) bool { return k == n })
			if t = lb.get(n); t == nil || !t.done {
				return nil, verbs.Errorf(verbs.CodeInternal, "agent %s turn %d ended, and its end is not in the event log: %v", ag.id, n, lerr)
			}
			done, text, stop, msg = t.done, t.lastMessage(), t.stopReason, t.errMsg
		}
		// done is set once the result is in the log and fsynced
		// (publishOne): the answer may go. Its fan-out and the record's
		// save follow in the agent's queue and the background, not on
		// the caller's way (issue 12).
		switch {
		case done:
			return verbs.RunEnded(ag.id, n, stop, msg, text)
		case status == apitype.Dead:
			return nil, verbs.RunDied(ag.id, n, text)
		}
		select {
		case <-ch:
		case <-timer.C:
			return nil, verbs.RunTimedOut(ag.id, n, timeout, ag.replySoFar(n))
		case <-ctx.Done():
			return nil, &verbs.Error{Code: verbs.CodeTimeout, Text: ag.replySoFar(n), Message: fmt.Sprintf("agent_run: the caller went away: %v", ctx.Err())}
		}
	}
}

// Output implements agent_output.
func (m *Manager) Output(ctx context.Context, a *verbs.OutputArgs) (*verbs.OutputResult, error) {
	which, maxChars := a.Which, a.MaxChars // in their ranges: Decode checked them
	var (
		text   string
		t      *turnRec
		n      int
		status = apitype.Dead
		bad    []string
		read   bool
	)
	id := a.AgentID
	ag, err := m.get(id)
	if err == nil {
		id = ag.id
		ag.flush() // what the agent emitted before the call is reflected
		text, t, n, bad, status, read = ag.output(a.Turn, which, a.IncludeTools)
	}
	if !read {
		// An agent of an earlier daemon (or a forgotten one whose log was
		// kept) is read from its log, by its whole id: no slot is left
		// to resolve a prefix against.
		var ve *verbs.Error
		if err != nil && (!errors.As(err, &ve) || ve.Code != verbs.CodeNotFound || !idRE.MatchString(id)) {
			return nil, err
		}
		b, lbad, serr := logBook(m.paths.Agent(id).Events, -1, 0, nil)
		if serr != nil {
			if err == nil {
				err = verbs.NotFound("agent %s has no event log: %v", id, serr)
			}
			return nil, err
		}
		text, t, n = b.text(a.Turn, which, a.IncludeTools)
		bad = lbad
	}
	if a.Turn > 0 && t == nil {
		return nil, verbs.NotFound("agent %s has no turn %d", id, a.Turn)
	}
	res := &verbs.OutputResult{AgentID: id, Turn: n, Which: which, Status: status}
	if t != nil {
		res.Done = t.done
		res.Usage = t.usage
	}
	if len(bad) > 0 {
		res.LogErrors = append([]string(nil), bad...)
	}
	if r := []rune(text); len(r) > maxChars {
		res.Truncated = true
		res.DroppedChars = len(r) - maxChars
		text = string(r[:maxChars])
	}
	res.Text = text
	return res, nil
}

// Status implements agent_status.
func (m *Manager) Status(ctx context.Context, a *verbs.StatusArgs) (*verbs.AgentStatus, error) {
	ag, err := m.get(a.AgentID)
	if err != nil {
		return nil, err
	}
	ag.flushToSync() // what the agent emitted before the call is reflected, up to a result on its way to disk
	s := ag.statusObj()
	addWorktreeStatus(ctx, ag.worktree(), &s)
	return &s, nil
}

// SetModel implements agent_set_model.
func (m *Manager) SetModel(ctx context.Context, a *verbs.SetModelArgs) (*verbs.SetModelResult, error) {
	ag, err := m.get(a.AgentID)
	if err != nil {
		return nil, err
	}
	if strings.TrimSpace(a.Model) == "" {
		return nil, verbs.BadArg("agent_set_model: model is required")
	}
	be, err := ag.live()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	ok, err := be.SetModel(ctx, a.Model)
	if err != nil {
		ag.publish(event.NewError(0, "set_model: "+err.Error(), nil))
	}
	if ok {
		// The record keeps the model in the backend's own full form
		// (acp:<agent>:<model> for an ACP agent, whatever the caller
		// wrote), which is what a resume passes back to it.
		model := a.Model
		if full := be.Info().Model; full != "" {
			model = full
		}
		ag.mu.Lock()
		ag.model, ag.resolved = model, "" // the old model's
		ag.setInfoLocked(be.Info())
		ag.mu.Unlock()
		ag.save()
	}
	return &verbs.SetModelResult{Switched: ok}, nil
}

// List implements agent_list, oldest first.
func (m *Manager) List(ctx context.Context, a *verbs.ListArgs) (*verbs.ListResult, error) {
	m.mu.Lock()
	ags := make([]*Agent, 0, len(m.agents))
	for _, ag := range m.agents {
		ags = append(ags, ag)
	}
	m.mu.Unlock()
	res := &verbs.ListResult{Agents: make([]verbs.ListEntry, 0, len(ags))}
	wts := map[string]*gitwt.Info{}
	for _, ag := range ags {
		if ag.state() == "" {
			continue // reserved by an open still being checked
		}
		st := ag.statusObj()
		if a.Waiting && len(st.PendingPermissions) == 0 {
			continue
		}
		res.Agents = append(res.Agents, verbs.ListEntry{AgentID: ag.id, AgentStatus: st})
		wts[ag.id] = ag.worktree()
	}
	sort.Slice(res.Agents, func(i, j int) bool {
		if res.Agents[i].CreatedAt != res.Agents[j].CreatedAt {
			return res.Agents[i].CreatedAt < res.Agents[j].CreatedAt
		}
		return res.Agents[i].AgentID < res.Agents[j].AgentID
	})
	infos := make([]*gitwt.Info, len(res.Agents))
	for i, e := range res.Agents {
		infos[i] = wts[e.AgentID]
	}
	addWorktreeStatuses(ctx, infos, res.Agents)
	return res, nil
}

// Interrupt implements agent_interrupt.
func (m *Manager) Interrupt(ctx context.Context, a *verbs.InterruptArgs) (*verbs.InterruptResult, error) {
	ag, err := m.get(a.AgentID)
	if err != nil {
		return nil, err
	}
	be, err := ag.live()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	ok, err := be.Interrupt(ctx)
	// An ACP agent's refusal is its own words: redacted as its events.
	if err = ag.redactor().Error(err); err != nil {
		// Not "nothing to interrupt": the turn may still be running, and
		// the caller (and the log's reader) must know it.
		ag.publish(event.NewError(0, "interrupt failed: "+err.Error(), nil))
		return nil, &verbs.Error{Code: verbs.CodeUnavailable, Message: fmt.Sprintf(
			"agent %s: interrupt failed: %v; its turn may still be running: wait for it, or stop the agent with `kaimon close %s`",
			ag.id, err, ag.id)}
	}
	return &verbs.InterruptResult{Interrupted: ok}, nil
}

// Close implements agent_close: the slot is kept as dead.
func (m *Manager) Close(ctx context.Context, a *verbs.CloseArgs) (*verbs.CloseResult, error) {
	ag, err := m.get(a.AgentID)
	if err != nil {
		return nil, err
	}
	return &verbs.CloseResult{Closed: ag.close(ReasonClosed)}, nil
}
