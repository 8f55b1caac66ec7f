package config

import (
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// Agent fills every field of AgentFiles, each from one kind of
// AgentFileKinds, under the cache dir; and a name of each kind reads back
// as its id and kind.
func TestAgentFilesHaveOneKindEach(t *testing.T) {
	p := Paths{CacheDir: "/c"}
	f := p.Agent("a.b-1")
	v := reflect.ValueOf(f)
	seen := map[string]string{}
	for i := 0; i < v.NumField(); i++ {
		path := v.Field(i).String()
		name := v.Type().Field(i).Name
		if filepath.Dir(path) != "/c" || !strings.HasPrefix(filepath.Base(path), "a.b-1") {
			t.Errorf("AgentFiles.%s = %q, not a file of a.b-1 in the cache dir", name, path)
		}
		if other, ok := seen[path]; ok {
			t.Errorf("AgentFiles.%s and .%s are both %s", name, other, path)
		}
		seen[path] = name
	}
	if len(AgentFileKinds) != v.NumField() {
		t.Errorf("%d kinds of agent file for %d fields of AgentFiles", len(AgentFileKinds), v.NumField())
	}
	for _, k := range AgentFileKinds {
		if k.Doc == "" || k.Lifetime == 0 {
			t.Errorf("kind %s lacks its doc or lifetime", k.Suffix)
		}
		for _, o := range AgentFileKinds {
			if o.Suffix != k.Suffix && strings.HasSuffix(o.Suffix, k.Suffix) {
				t.Errorf("suffix %s ends %s: a name of one kind would read as the other", k.Suffix, o.Suffix)
			}
		}
		id, got, ok := AgentFileOf(filepath.Base(f.Path(k)))
		if !ok || id != "a.b-1" || got.Suffix != k.Suffix {
			t.Errorf("AgentFileOf(%s) = %q %q %v", filepath.Base(f.Path(k)), id, got.Suffix, ok)
		}
	}
	for _, name := range []string{"pids.json", "notes.txt", ".log", "agentd.log.1"} {
		if id, k, ok := AgentFileOf(name); ok {
			t.Errorf("AgentFileOf(%s) = %q %q, want none", name, id, k.Suffix)
		}
	}
}

// forget removes the record and what a live agent generated; forget
// --logs the logs as well.
func TestLifetimeRemovedByForget(t *testing.T) {
	for l, want := range map[Lifetime][2]bool{UntilForget: {true, true}, UntilForgetLogs: {false, true}, WhileLive: {true, true}} {
		if got := [2]bool{l.RemovedByForget(false), l.RemovedByForget(true)}; got != want {
			t.Errorf("lifetime %d removed by forget, forget --logs: %v, want %v", l, got, want)
		}
	}
}
