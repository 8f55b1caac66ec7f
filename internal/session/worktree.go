package session

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/kaimon/kaimon/internal/apitype"
	"github.com/kaimon/kaimon/internal/config"
	"github.com/kaimon/kaimon/internal/gitwt"
	"github.com/kaimon/kaimon/internal/verbs"
)

// An agent opened with worktree works in a git worktree of its own
// (internal/gitwt), at config.Paths.Worktree(id), on a new branch. The
// worktree's repository, path, branch and base are in the agent's record
// (Record.Git), so that resume goes on in it, diff and status find it, and
// forget removes it. Git runs are never made with a lock of the manager's
// or the agent's held: a checkout may take seconds.

// statusGitTimeout bounds git status for one agent's status: a list must
// not hang on one worktree's slow disk.
const statusGitTimeout = 10 * time.Second

// newWorktree checks what worktree, branch and base ask for and makes the
// worktree of agent id, returning it; a.Cwd (absolute, an existing
// directory) is in the repository. Nothing is made unless every check
// holds, and a worktree git half made is removed.
func (m *Manager) newWorktree(ctx context.Context, id string, a *verbs.OpenArgs) (*gitwt.Info, error) {
	repo, err := gitwt.Find(ctx, a.Cwd)
	if err != nil {
		return nil, verbs.BadArg("agent_open: worktree: %v", err)
	}
	branch := a.Branch
	if branch == "" {
		branch = verbs.BranchPrefix + id
	}
	// One repository's checks and add are serialized: two opens naming
	// one branch cannot both pass the check, and git's locks are not
	// met at once.
	unlock := gitwt.Lock(repo.CommonDir)
	defer unlock()
	baseRef := a.Base
	if baseRef == "" {
		// HEAD as it is now: the branch it is on, so that forget finds
		// later whether the agent's branch was merged into it.
		if baseRef = repo.CurrentBranch(ctx); baseRef == "" {
			baseRef = "HEAD"
		}
	}
	base, err := repo.ResolveCommit(ctx, baseRef)
	if err != nil {
		return nil, verbs.BadArg("agent_open: base: %v", err)
	}
	if err := repo.CheckNewBranch(ctx, branch); err != nil {
		return nil, verbs.BadArg("agent_open: branch: %v", err)
	}
	path := m.paths.Worktree(id)
	info := &gitwt.Info{Repository: repo.Top, CommonDir: repo.CommonDir, Worktree: path, Subdir: repo.Prefix,
		Branch: branch, BaseRef: baseRef, BaseCommit: base}
	if err := m.noteOpening(id, info); err != nil {
		if d := diskFault("agent_open: worktree", err); d != nil {
			return nil, d
		}
		return nil, verbs.Errorf(verbs.CodeInternal, "agent_open: worktree: %v", err)
	}
	if err := repo.Add(ctx, path, branch, base); err != nil {
		if !exists(path) {
			m.doneOpening(id) // Add took away what it made
		}
		if d := diskFault("agent_open: worktree", err); d != nil {
			return nil, d
		}
		return nil, verbs.BadArg("agent_open: worktree: %v", err)
	}
	if st, err := os.Stat(info.Cwd()); err != nil || !st.IsDir() {
		// cwd is not in git (an empty or ignored directory): the
		// worktree has no such directory, and the agent would work
		// elsewhere than asked.
		// The repository's lock is held here: Discard, not
		// removeWorktree, which takes it.
		if err := repo.Discard(context.WithoutCancel(ctx), path, branch, base); err != nil {
			log.Printf("removing the worktree %s of a refused open: %v", path, err)
		} else {
			m.doneOpening(id)
		}
		return nil, verbs.BadArg("agent_open: worktree: %s holds no file git tracks, so the worktree has no %s: open the agent in a directory git tracks",
			a.Cwd, filepath.Join(path, repo.Prefix))
	}
	return info, nil
}

// removeWorktree removes the worktree an open of agent id made, and its
// branch, for an open that failed after making it, and says whether it
// did.
func (m *Manager) removeWorktree(ctx context.Context, id string, info *gitwt.Info) bool {
	r := info.RepoOf()
	unlock := gitwt.Lock(r.CommonDir)
	defer unlock()
	if err := r.Discard(ctx, info.Worktree, info.Branch, info.BaseCommit); err != nil {
		log.Printf("removing the worktree %s of a failed open: %v", info.Worktree, err)
		return false // its opening note stays: the next daemon tries again
	}
	m.doneOpening(id)
	return true
}

// An open that makes a worktree notes it first in the agent's Opening
// file (config.WhileOpening), and removes the note once the agent's
// record holds the worktree (its first event saves the record) or the
// open took the worktree away again. A daemon killed in between (in the
// checkout of a large repository, or before the agent's first event)
// leaves a worktree and branch that no record knows, and every later
// open of the id would be refused for them ("already exists"; forget
// knows no such agent): the next daemon removes them when it starts
// (sweepOpenings). No turn can have run in such a worktree: a turn is
// sent only once its open is done, after the record was saved.

// noteOpening writes the note that an open of agent id is making info.
func (m *Manager) noteOpening(id string, info *gitwt.Info) error {
	b, err := json.Marshal(info)
	if err != nil {
		return err
	}
	return config.WriteFileAtomic(m.paths.Agent(id).Opening, append(b, '\n'), 0o600)
}

// doneOpening removes the note of an open of agent id: its worktree is
// in the agent's record now, or gone.
func (m *Manager) doneOpening(id string) {
	if err := os.Remove(m.paths.Agent(id).Opening); err != nil && !errors.Is(err, os.ErrNotExist) {
		log.Printf("agent %s: %v", id, err)
	}
}

// sweepOpenings finishes the opens a lost daemon left in the middle (see
// noteOpening), once the records are loaded: a worktree the agent's
// record holds is the agent's, and only the note goes; any other is
// removed, with its branch while that is still at the base the open made
// it from (gitwt.Discard). One that cannot be removed keeps its note,
// for the next start, and is logged.
func (m *Manager) sweepOpenings() {
	ents, err := os.ReadDir(m.paths.CacheDir)
	if err != nil {
		log.Printf("finishing interrupted opens: %v", err)
		return
	}
	for _, e := range ents {
		id, k, ok := config.AgentFileOf(e.Name())
		if !ok || k.Lifetime != config.WhileOpening || !idRE.MatchString(id) {
			continue
		}
		path := m.paths.Agent(id).Opening
		b, err := os.ReadFile(path)
		var info gitwt.Info
		if err == nil {
			err = json.Unmarshal(b, &info)
		}
		if err == nil && (info.Worktree == "" || info.CommonDir == "") {
			err = errors.New("it names no worktree and repository")
		}
		if err != nil {
			log.Printf("the note %s of an interrupted open does not read (%v): left as it is, for a person to look at", path, err)
			continue
		}
		if wt := m.recordedWorktree(id); wt != nil && wt.Worktree == info.Worktree && wt.Branch == info.Branch {
			m.doneOpening(id)
			continue
		}
		if m.removeWorktree(context.Background(), id, &info) {
			log.Printf("removed the worktree %s that an interrupted open of agent %s left, and its branch %s unless it moved since", info.Worktree, id, info.Branch)
		}
	}
}

// recordedWorktree is the worktree the record of agent id holds, nil for
// none (or no agent).
func (m *Manager) recordedWorktree(id string) *gitwt.Info {
	m.mu.Lock()
	ag := m.agents[id]
	m.mu.Unlock()
	if ag == nil {
		return nil
	}
	return ag.worktree()
}

// resumeWorktree makes sure a resumed agent's worktree is there: one
// removed (and pruned) while its branch was kept is added again.
func resumeWorktree(ctx context.Context, id string, info *gitwt.Info) error {
	if _, err := os.Stat(info.Worktree); err == nil {
		return nil
	}
	r := info.RepoOf()
	unlock := gitwt.Lock(r.CommonDir)
	defer unlock()
	if err := r.Readd(ctx, info.Worktree, info.Branch); err != nil {
		if d := diskFault("agent_open: agent "+id+": worktree", err); d != nil {
			return d
		}
		return verbs.WrongState("agent_open: agent %s: %v", id, err)
	}
	return nil
}

// diskFault is err, met writing what, as a storage error when the disk is
// why it failed (verbs.DiskFault), git's own report of it included; else
// nil.
func diskFault(what string, err error) *verbs.Error {
	var ge *gitwt.Error
	said := ""
	if errors.As(err, &ge) {
		said = ge.Stderr
	}
	return verbs.DiskFault(what, err, said)
}

// worktree is the agent's worktree, nil when it has none.
func (ag *Agent) worktree() *gitwt.Info {
	ag.mu.Lock()
	defer ag.mu.Unlock()
	return ag.wt
}

// addWorktreeStatus fills the worktree fields of an agent's status, and
// whether it has changes, found with git status.
func addWorktreeStatus(ctx context.Context, info *gitwt.Info, s *verbs.AgentStatus) {
	if info == nil {
		return
	}
	s.Repository, s.Worktree, s.Branch, s.BaseCommit = info.Repository, info.Worktree, info.Branch, info.BaseCommit
	ctx, cancel := context.WithTimeout(ctx, statusGitTimeout)
	defer cancel()
	if _, err := os.Stat(info.Worktree); err != nil {
		s.WorktreeError = fmt.Sprintf("the worktree %s is gone", info.Worktree)
		return
	}
	dirty, err := gitwt.Dirty(ctx, info.Worktree)
	if err != nil {
		s.WorktreeError = err.Error()
	}
	s.Dirty = dirty
}

// addWorktreeStatuses does addWorktreeStatus for a list's agents, at once.
func addWorktreeStatuses(ctx context.Context, infos []*gitwt.Info, entries []verbs.ListEntry) {
	var wg sync.WaitGroup
	sem := make(chan struct{}, 4) // a few git runs at a time
	for i, info := range infos {
		if info == nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			addWorktreeStatus(ctx, info, &entries[i].AgentStatus)
		}()
	}
	wg.Wait()
}

// Diff implements agent_diff: what the agent changed in its worktree
// against the commit it started from, its first verbs.DiffMax bytes. git
// is stopped once that much has come: a diff of any size costs the
// daemon that much memory and no more.
func (m *Manager) Diff(ctx context.Context, a *verbs.DiffArgs) (*verbs.DiffResult, error) {
	id, info, err := m.diffable(a.AgentID)
	if err != nil {
		return nil, err
	}
	cut := &cutWriter{max: verbs.DiffMax}
	if err := gitwt.Diff(ctx, info.Worktree, info.BaseCommit, a.Stat, verbs.DiffFileMax, cut); err != nil && !errors.Is(err, errCut) {
		return nil, diffError(id, err)
	}
	r := diffResult(id, info)
	r.Diff, r.Truncated = cut.text(id)
	return r, nil
}

// WriteDiff implements verbs.DiffWriter: the agent's whole diff, written
// to w as git makes it.
func (m *Manager) WriteDiff(ctx context.Context, a *verbs.DiffArgs, w io.Writer) (*verbs.DiffResult, error) {
	id, info, err := m.diffable(a.AgentID)
	if err != nil {
		return nil, err
	}
	if err := gitwt.Diff(ctx, info.Worktree, info.BaseCommit, a.Stat, verbs.DiffFileMax, w); err != nil {
		return nil, diffError(id, err)
	}
	return diffResult(id, info), nil
}

var _ verbs.DiffWriter = (*Manager)(nil)

// diffable is the whole id of the agent given names and its worktree,
// for agent_diff, or why it has none.
func (m *Manager) diffable(given string) (string, *gitwt.Info, error) {
	ag, err := m.get(given)
	if err != nil {
		return "", nil, err
	}
	id, info := ag.id, ag.worktree()
	if info == nil {
		return "", nil, verbs.WrongState("agent_diff: agent %s has no worktree: only an agent opened with --worktree (agent_open worktree) has changes kaimon can tell apart from others'", id)
	}
	if _, err := os.Stat(info.Worktree); err != nil {
		return "", nil, verbs.WrongState("agent_diff: agent %s's worktree %s is gone", id, info.Worktree)
	}
	return id, info, nil
}

func diffResult(id string, info *gitwt.Info) *verbs.DiffResult {
	return &verbs.DiffResult{AgentID: id, Worktree: info.Worktree, Branch: info.Branch, BaseCommit: info.BaseCommit}
}

func diffError(id string, err error) error {
	return verbs.Errorf(verbs.CodeInternal, "agent_diff: agent %s: %v", id, err)
}

// errCut is cutWriter's refusal of what is past its bound.
var errCut = errors.New("the diff is cut here")

// cutWriter keeps the first max bytes written to it, then refuses the
// rest: the refusal stops the git that writes.
type cutWriter struct {
	max int
	b   []byte
	cut bool
}

func (c *cutWriter) Write(p []byte) (int, error) {
	if room := c.max - len(c.b); len(p) > room {
		c.b, c.cut = append(c.b, p[:room]...), true
		return room, errCut
	}
	c.b = append(c.b, p...)
	return len(p), nil
}

// text is what was kept, and whether it was cut: then at its last whole
// line (a diff's unit), and ended with the note that says how to have
// agent id's whole diff.
func (c *cutWriter) text(id string) (string, bool) {
	if !c.cut {
		return string(c.b), false
	}
	kept := c.b
	if i := bytes.LastIndexByte(kept, '\n'); i >= 0 {
		kept = kept[:i+1]
	} else {
		kept = append(kept, '\n') // one line longer than the bound: its start
	}
	return string(kept) + verbs.DiffCutNote(id), true
}

// forgetWorktree removes a dead agent's worktree for agent_forget: a clean
// one, or with force any. It says why when it keeps it (then the agent is
// kept too), and whether it kept the branch: one not merged into its base
// is kept unless deleteBranch.
func forgetWorktree(ctx context.Context, ag *Agent, force, deleteBranch bool) (keptWhy string, branchKept bool) {
	info := ag.worktree()
	if info == nil || ag.state() != apitype.Dead {
		return "", false
	}
	r := info.RepoOf()
	if _, err := os.Stat(info.Worktree); err == nil && !force {
		dirty, err := gitwt.Dirty(ctx, info.Worktree)
		if err != nil {
			return fmt.Sprintf("git status in its worktree %s failed (%v); forget --force removes it anyway", info.Worktree, err), false
		}
		if dirty {
			return fmt.Sprintf("its worktree %s has uncommitted changes or untracked files: commit them (or kaimon diff %s), or forget --force to discard them", info.Worktree, ag.id), false
		}
	}
	unlock := gitwt.Lock(r.CommonDir)
	defer unlock()
	// Merged into its base as the base is now (a branch name follows
	// later merges), or still at the commit it started from.
	merged := r.Merged(ctx, info.Branch, info.BaseRef) || r.Merged(ctx, info.Branch, info.BaseCommit)
	branch := ""
	if merged || deleteBranch {
		branch = info.Branch
	}
	if err := r.Remove(ctx, info.Worktree, branch, force); err != nil {
		return fmt.Sprintf("removing its worktree %s failed: %v", info.Worktree, err), false
	}
	return "", branch == ""
}
