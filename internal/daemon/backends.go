package daemon

import (
	"github.com/kaimon/kaimon/internal/apitype"
	"github.com/kaimon/kaimon/internal/backend"
	"github.com/kaimon/kaimon/internal/backend/acp"
	"github.com/kaimon/kaimon/internal/backend/claude"
	"github.com/kaimon/kaimon/internal/backend/codex"
	"github.com/kaimon/kaimon/internal/backend/local"
	"github.com/kaimon/kaimon/internal/backend/replay"
	"github.com/kaimon/kaimon/internal/config"
	"github.com/kaimon/kaimon/internal/session"
)

// constructor makes the backend of an agent whose model selects it.
type constructor func(backend.Options, backend.Sink) (backend.Backend, error)

// backends maps each prefix of apitype.ModelPrefixes, and "" (a model
// without one: the claude CLI's), to its backend's constructor, for a
// daemon whose config file is file: the one place a backend is picked (a
// test checks it covers the prefixes).
func backends(file config.Config) map[string]constructor {
	// The local models' servers are the config file's settings, read
	// when the daemon started; the other backends find theirs in the
	// agent's environment (Config.AgentEnv).
	newLocal := func(o backend.Options, sink backend.Sink) (*local.Backend, error) { return local.New(file, o, sink) }
	return map[string]constructor{
		apitype.Claude.Prefix: ctor(claude.New),
		apitype.PrefixACP:     ctor(acp.New),
		apitype.PrefixCodex:   ctor(codex.New),
		apitype.PrefixOllama:  ctor(newLocal),
		apitype.PrefixVMLX:    ctor(newLocal),
		apitype.PrefixReplay:  ctor(replay.New),
	}
}

// ctor makes a constructor of a backend's New, which returns its own
// type: a nil *B in the interface would not be a nil Backend.
func ctor[B backend.Backend](newB func(backend.Options, backend.Sink) (B, error)) constructor {
	return func(o backend.Options, sink backend.Sink) (backend.Backend, error) {
		b, err := newB(o, sink)
		if err != nil {
			return nil, err
		}
		return b, nil
	}
}

// factory is the session manager's Factory for a daemon whose config
// file is file: it picks the backend for o's model by its prefix. An
// unknown prefix is refused before any backend looks for its program, so
// the error names the prefix rather than a missing claude CLI.
func factory(file config.Config) session.Factory {
	table := backends(file)
	return func(o backend.Options, sink backend.Sink) (backend.Backend, error) {
		p, err := backend.Lookup(o.Model)
		if err != nil {
			return nil, err
		}
		return table[p.Prefix](o, sink)
	}
}
