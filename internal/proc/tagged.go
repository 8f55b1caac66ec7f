package proc

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/kaimon/kaimon/internal/procstat"
)

// LeftoverGrace is how long what a child left behind when it died on its
// own may take to exit on SIGTERM before it is killed.
const LeftoverGrace = 3 * time.Second

var tagSeq atomic.Uint64

// newTag returns a value of procstat.TagEnv no other child of any process has: this
// process's pid and start time, and a sequence number.
func newTag() string {
	self := os.Getpid()
	st, _ := procstat.StartTime(self)
	return fmt.Sprintf("%d.%d.%d", self, st, tagSeq.Add(1))
}

// withTag returns env with procstat.TagEnv set to tag alone: a child started by an
// agent's descendant (a daemon started from a tool) has one already, and
// getenv takes the first.
func withTag(env []string, tag string) []string {
	return append(procstat.WithoutTag(env), procstat.TagEnv+"="+tag)
}

// procEntry is one process as /proc/<pid>/stat shows it.
type procEntry struct {
	id    Identity
	ppid  int
	pgid  int
	state string
}

// procTable reads every process's stat.
func procTable() []procEntry {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	out := make([]procEntry, 0, len(ents))
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		f, err := procstat.Fields(e.Name())
		if err != nil {
			continue
		}
		ppid, _ := strconv.Atoi(f[1])
		pgid, _ := strconv.Atoi(f[2])
		start, _ := strconv.ParseUint(f[19], 10, 64)
		out = append(out, procEntry{id: Identity{PID: p, StartTime: start}, ppid: ppid, pgid: pgid, state: f[0]})
	}
	return out
}

// below lists the processes below pid in table (its children, theirs, …).
func below(table []procEntry, pid int) []Identity {
	children := map[int][]Identity{}
	for _, e := range table {
		children[e.ppid] = append(children[e.ppid], e.id)
	}
	var out []Identity
	queue := []int{pid}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, ch := range children[p] {
			out = append(out, ch)
			queue = append(queue, ch.PID)
		}
	}
	return out
}

// tagged lists the live processes whose environment holds procstat.TagEnv=tag and
// whose parent is this process or one of its ancestors (where an orphan is
// re-parented: the nearest subreaper, or init), with every process below
// them. Only those parents' children are read for the tag: a tagged
// process under another is found below its tagged root, and the reads stay
// few when a thousand agents stop. Nor are the children Start started
// that are not reaped yet (started.pids): each carries a tag of its own,
// and a daemon's thousand agents were a thousand reads of an environment
// for each one stopped.
func tagged(tag string) []Identity { return taggedIn(procTable(), tag) }

// taggedIn is tagged, in table.
func taggedIn(table []procEntry, tag string) []Identity {
	if tag == "" {
		return nil
	}
	parent := map[int]int{}
	for _, e := range table {
		parent[e.id.PID] = e.ppid
	}
	adopters := map[int]bool{}
	for p := os.Getpid(); p > 0 && !adopters[p]; p = parent[p] {
		adopters[p] = true
	}
	adopters[1] = true
	needle := []byte(procstat.TagEnv + "=" + tag + "\x00")
	var out []Identity
	for _, e := range table {
		if !adopters[e.ppid] || procstat.Gone(e.state) || startedLive(e.id.PID) {
			continue
		}
		env, err := os.ReadFile("/proc/" + strconv.Itoa(e.id.PID) + "/environ")
		if err != nil || !bytes.HasPrefix(env, needle) && !bytes.Contains(env, append([]byte{0}, needle...)) {
			continue
		}
		out = append(out, e.id)
		out = append(out, below(table, e.id.PID)...)
	}
	return out
}

// startedLive says whether pid is a child Start started, not reaped yet.
func startedLive(pid int) bool {
	started.Lock()
	defer started.Unlock()
	_, ok := started.pids[pid]
	return ok
}

// reparented is tagged(tag) in table less leader and below (its tree as
// found before a stop began): what the child's descendants left
// re-parented away from it, which no signal to its group or its tree
// reaches.
func reparented(table []procEntry, tag string, leader int, below []Identity) []Identity {
	skip := map[int]bool{leader: true}
	for _, id := range below {
		skip[id.PID] = true
	}
	var out []Identity
	for _, id := range taggedIn(table, tag) {
		if !skip[id.PID] {
			out = append(out, id)
		}
	}
	return out
}

// stopTagged stops what a child tagged tag left behind: SIGTERM, up to
// grace for it to exit, then SIGKILL to whatever of it is left (at once
// when grace is not positive).
func stopTagged(tag string, grace time.Duration) {
	ids := tagged(tag)
	if len(ids) == 0 {
		return
	}
	signalAll(ids, syscall.SIGTERM)
	deadline := time.Now().Add(grace)
	for time.Now().Before(deadline) && anyRunning(ids) {
		time.Sleep(20 * time.Millisecond)
	}
	signalAll(append(ids, tagged(tag)...), syscall.SIGKILL)
}

// anyRunning says whether a process of ids still runs (a zombie does not).
func anyRunning(ids []Identity) bool {
	for _, id := range ids {
		if id.Alive() && procstat.Running(id.PID) {
			return true
		}
	}
	return false
}
