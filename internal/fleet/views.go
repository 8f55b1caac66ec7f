package fleet

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/kaimon/kaimon/internal/apitype"
	"github.com/kaimon/kaimon/internal/verbs"
)

// ListTimeout bounds each host's answer to a question asked of every host
// (a list across hosts, the placement of `open --host any`): ssh gives up
// a dead link within about as long by itself (connectTimeout, the
// keepalives); this bound also holds for a host that takes the connection
// and then answers nothing.
const ListTimeout = 10 * time.Second

// All are the hosts a question of every host asks, in the order their
// answers are shown: local first, then the configured hosts by name.
func (f *Fleet) All() ([]string, error) {
	hosts, err := f.known()
	if err != nil {
		return nil, err
	}
	return append([]string{Local}, Names(hosts)...), nil
}

// Answer is one host's agent_list (its ids bare), or why there is none:
// an error that names the host.
type Answer struct {
	Host string
	Res  *verbs.ListResult
	Err  error
}

// ListEach asks every host of hosts for its agents at once, each within
// ListTimeout, and returns the answers in hosts' order: what a list
// across hosts, placement and the monitor of several hosts all ask.
func (f *Fleet) ListEach(ctx context.Context, hosts []string, a *verbs.ListArgs) []Answer {
	out := make([]Answer, len(hosts))
	var wg sync.WaitGroup
	for i, h := range hosts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[i] = Answer{Host: h}
			out[i].Res, out[i].Err = f.listOne(ctx, h, a)
		}()
	}
	wg.Wait()
	return out
}

func (f *Fleet) listOne(ctx context.Context, host string, a *verbs.ListArgs) (*verbs.ListResult, error) {
	ctx, cancel := context.WithTimeout(ctx, ListTimeout)
	defer cancel()
	res, err := func() (*verbs.ListResult, error) {
		cl, err := f.Client(ctx, host)
		if err != nil {
			return nil, err
		}
		return cl.List(ctx, a)
	}()
	switch {
	case err == nil:
		return res, nil
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return nil, fmt.Errorf("host %s: no answer within %s", host, ListTimeout)
	}
	return nil, Named(host, err)
}

// ListAll lists the agents of every host (All), asked in parallel: each
// agent with its host and its id qualified (bare on local), and in Hosts
// what each host answered. A host that fails is reported there, with its
// error, and the others' agents are listed all the same; the error is
// only for hosts that cannot be read from the config file.
func (f *Fleet) ListAll(ctx context.Context, a *verbs.ListArgs) (*verbs.ListResult, error) {
	hosts, err := f.All()
	if err != nil {
		return nil, err
	}
	out := &verbs.ListResult{Agents: []verbs.ListEntry{}}
	for _, a := range f.ListEach(ctx, hosts, a) {
		ha := verbs.HostAnswer{Host: a.Host}
		if a.Err != nil {
			ha.Error = a.Err.Error()
		} else {
			ha.Agents = len(a.Res.Agents)
			for _, e := range a.Res.Agents {
				e.Host = a.Host
				e.AgentID = Qualify(a.Host, e.AgentID)
				out.Agents = append(out.Agents, e)
			}
		}
		out.Hosts = append(out.Hosts, ha)
	}
	return out, nil
}

// Failed is the error of every host res says failed, joined; nil when
// none did.
func Failed(res *verbs.ListResult) error {
	var errs []error
	for _, h := range res.Hosts {
		if h.Error != "" {
			errs = append(errs, errors.New(h.Error))
		}
	}
	return errors.Join(errs...)
}

// Load is how busy one host is, as placement weighs it.
type Load struct {
	Host          string
	Working, Live int
}

// LoadOf counts the working and the live agents of a host's list.
func LoadOf(host string, agents []verbs.ListEntry) Load {
	l := Load{Host: host}
	for _, a := range agents {
		if a.Status == apitype.Working {
			l.Working++
		}
		if a.Status != apitype.Dead {
			l.Live++
		}
	}
	return l
}

// Choose is the host a new agent goes to: the one with the fewest working
// agents, then the fewest live ones; a tie goes to the first of loads,
// which are in All's order (local, then the names in order). So a loop of
// opens spreads over the hosts instead of piling onto one. "" for none.
func Choose(loads []Load) string {
	best := -1
	for i, l := range loads {
		if best < 0 || l.Working < loads[best].Working ||
			l.Working == loads[best].Working && l.Live < loads[best].Live {
			best = i
		}
	}
	if best < 0 {
		return ""
	}
	return loads[best].Host
}

// Place picks the host of `open --host any`: every host is asked for its
// agents (as ListAll does) and Choose picks among those that answered. A
// host that did not is passed over, with a warning; none answering is an
// error naming each one's.
func (f *Fleet) Place(ctx context.Context) (string, error) {
	hosts, err := f.All()
	if err != nil {
		return "", err
	}
	var loads []Load
	var errs []error
	for _, a := range f.ListEach(ctx, hosts, &verbs.ListArgs{}) {
		if a.Err != nil {
			errs = append(errs, a.Err)
			continue
		}
		loads = append(loads, LoadOf(a.Host, a.Res.Agents))
	}
	if len(loads) == 0 {
		return "", fmt.Errorf("host %s: no host answered to place the agent on: %w", Any, errors.Join(errs...))
	}
	if f.Warn != nil {
		for _, err := range errs {
			fmt.Fprintf(f.Warn, "kaimon: warning: --host %s left out %v\n", Any, err)
		}
	}
	return Choose(loads), nil
}

// openHost is the host a new agent of a opens on, its bare id, and
// whether the host was placed: the host argument (--host, or agent_open's
// host in MCP), else the host its id names, else Default; Any is placed
// (Place). An id qualified with another host than the host argument names
// is a usage error, and so is Any with resume: a dead agent resumes on the
// host it died on.
func (f *Fleet) openHost(ctx context.Context, a *verbs.OpenArgs) (host, id string, placed bool, err error) {
	host, id = f.Default, a.ID
	if a.ID != "" {
		if host, id, err = f.Route(a.ID); err != nil {
			return "", "", false, err
		}
	}
	_, _, qualified := SplitID(a.ID)
	if a.Host != "" {
		if qualified && normal(host) != normal(a.Host) && a.Host != Any {
			return "", "", false, usagef("the id %s is on host %s, but host names %s: drop one of them", a.ID, normal(host), a.Host)
		}
		if !qualified {
			host = a.Host
		}
	}
	if host != Any {
		if err := f.Check(host); err != nil {
			var ue *UsageError
			if errors.As(err, &ue) {
				return "", "", false, usagef("%s; to open an agent, also %s (the least busy host)", ue.Msg, Any)
			}
			return "", "", false, err
		}
		return host, id, false, nil
	}
	if a.Resume {
		return "", "", false, usagef("host %s places a new agent, but resume reopens a dead one on the host it died on: name that host, or qualify the id as HOST/ID", Any)
	}
	host, err = f.Place(ctx)
	return host, id, true, err
}
