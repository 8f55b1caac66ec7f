package session

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/kaimon/kaimon/internal/apitype"
	"github.com/kaimon/kaimon/internal/backend"
	"github.com/kaimon/kaimon/internal/gitwt"
	"github.com/kaimon/kaimon/internal/verbs"
)

// A fork (agent_open with fork) is a new agent that continues a copy of
// another agent's conversation; the forked agent goes on unchanged. The
// options left out come from the forked agent's record, as a resume's
// come from its own, and each backend begins a new session from the
// forked one's (backend.Fork). A fork that cannot be made leaves nothing
// behind, even when the agent program refused it after starting (an ACP
// agent that does not declare session/fork): there is no conversation of
// its own yet to keep.

// forkable is the agent that agent_open's fork names (its id or a unique
// prefix of it), checked before any slot is reserved: it must be known,
// live or dead, and not the id the fork is to get.
func (m *Manager) forkable(a *verbs.OpenArgs, id string) (*Agent, error) {
	if a.Resume {
		return nil, verbs.BadArg("agent_open: fork and resume contradict each other: resume continues an agent's own conversation, fork continues a copy of it in a new agent; give one")
	}
	m.mu.Lock()
	parent, err := m.lookupLocked(a.Fork)
	m.mu.Unlock()
	if err != nil {
		if ve := verbs.AsError(err); ve.Code != verbs.CodeNotFound {
			return nil, verbs.Errorf(ve.Code, "agent_open: fork: %s", err) // an ambiguous prefix: it names the agents
		}
		return nil, verbs.NotFound("agent_open: no agent %q to fork: see `kaimon list` for the agents kaimon knows", a.Fork)
	}
	if id == parent.id {
		return nil, verbs.BadArg("agent_open: a fork gets an id of its own: give another id than %s, or none", parent.id)
	}
	return parent, nil
}

// inheritFork fills the options a fork left out from the forked agent's
// record and returns the conversation to copy, once a live forked agent's
// program has written it out (backend.Settler). The cwd is the forked
// agent's; with worktree, where the forked agent's worktree came from in
// its repository, and the new branch starts from the forked agent's
// branch unless base is given.
func inheritFork(ctx context.Context, a *verbs.OpenArgs, parent *Agent) (*backend.Fork, error) {
	parent.mu.Lock()
	st := parent.status
	info := parent.info
	be := parent.be
	if be != nil && st != apitype.Dead {
		info = be.Info()
	}
	rec := parent.opts.OpenArgs
	rec.Model = parent.model
	pwt := parent.wt
	parent.mu.Unlock()
	switch st {
	case apitype.Working:
		// Its conversation is half a turn: a tool call without its
		// result is not a conversation a model can go on from.
		return nil, verbs.WrongState("agent_open: agent %s is working: fork it once its turn has ended (kaimon output %s shows when), or interrupt it first", parent.id, parent.id)
	case apitype.Starting, "":
		return nil, verbs.WrongState("agent_open: agent %s is still starting: fork it once it is idle", parent.id)
	}
	if info.SessionID == "" {
		return nil, verbs.WrongState("agent_open: agent %s has no conversation to fork (it never ran a turn): open a fresh agent instead", parent.id)
	}
	if s, ok := be.(backend.Settler); ok && st != apitype.Dead {
		// The turn has ended for kaimon, maybe not yet in the files
		// the fork begins from (the claude CLI's transcript).
		if err := s.Settle(ctx); err != nil {
			return nil, verbs.Errorf(verbs.CodeUnavailable, "agent_open: %v", err)
		}
	}
	if a.Cwd == "" {
		a.Cwd = rec.Cwd
		if a.Worktree && pwt != nil {
			// The same subdirectory of the repository: the forked
			// agent's cwd is in a worktree of its own, not the one
			// the new worktree is added from.
			a.Cwd = filepath.Join(pwt.Repository, pwt.Subdir)
		}
	}
	if a.Worktree && pwt != nil && a.Base == "" {
		a.Base = "refs/heads/" + pwt.Branch // a tag of the same name would win
	}
	verbs.ByName("agent_open").Inherit(a, &rec, "id", "resume", "fork", "worktree", "branch", "base", "cwd")
	return &backend.Fork{AgentID: parent.id, Session: info.SessionID, Cwd: rec.Cwd}, nil
}

// forkWarnings are what the open of a fork with a worktree tells its
// caller: the forked agent's uncommitted changes and untracked files did
// not come along (the new branch starts from its branch's last commit).
func forkWarnings(ctx context.Context, parent *Agent, wt *gitwt.Info) []string {
	pwt := parent.worktree()
	if wt == nil || pwt == nil {
		return nil
	}
	dirty, err := gitwt.Dirty(ctx, pwt.Worktree)
	// The base as a person names it: inheritFork gives the forked
	// agent's branch as refs/heads/BRANCH, so that no tag shadows it.
	from := strings.TrimPrefix(wt.BaseRef, "refs/heads/")
	switch {
	case err != nil:
		return []string{fmt.Sprintf("could not tell whether agent %s's worktree %s has uncommitted changes (%v); the fork's worktree has only what is committed on %s",
			parent.id, pwt.Worktree, err, from)}
	case dirty:
		return []string{fmt.Sprintf("agent %s's uncommitted changes and untracked files in %s did not come along: the fork's worktree starts from %s at %.12s (commit them there, and fork again, to take them)",
			parent.id, pwt.Worktree, from, wt.BaseCommit)}
	}
	return nil
}
