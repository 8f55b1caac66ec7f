package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kaimon/kaimon/internal/verbs"
)

// sshToInstallation is a KAIMON_SSH_COMMAND that stands in for ssh without
// an sshd: it ignores the options and the destination and runs the remote
// command line (its last argument) here, in the environment of the other
// installation to, as sshd would run it in the ssh user's. So the path
// under test is the real one from `kaimon --host` on: the transport's argv
// and child, the real `kaimon dial-stdio` starting and bridging to a
// second real daemon, and back. The real sshd tests are fleet*_test.go's.
func sshToInstallation(t *testing.T, to *kenv) string {
	var b strings.Builder
	b.WriteString("#!/bin/sh\nfor last; do :; done\nexec env -i")
	for _, kv := range to.env {
		k, v, _ := strings.Cut(kv, "=")
		fmt.Fprintf(&b, " %s='%s'", k, strings.ReplaceAll(v, "'", `'\''`))
	}
	b.WriteString(" sh -c \"$last\"\n")
	p := filepath.Join(t.TempDir(), "ssh-to-installation")
	if err := os.WriteFile(p, []byte(b.String()), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// open, run, status, output, list and close on another host's daemon,
// through --host, KAIMON_HOST and a qualified id; the id is printed
// qualified so that it can be pasted back; the bad inputs each say what
// is wrong, with their exit codes.
func TestRemoteHostThroughDialStdio(t *testing.T) {
	local, remote := newEnv(t), newEnv(t)
	local.env = append(local.env, "KAIMON_SSH_COMMAND="+sshToInstallation(t, remote))
	kaimonBin := filepath.Join(binDir, "kaimon")
	local.ok("host", "add", "h1", "ssh://me@h1.invalid:2222", "--remote-bin", kaimonBin)
	local.ok("host", "add", "nobin", "ssh://nobin.invalid") // kaimon is not on the remote PATH

	r := local.kaimon("--host", "h1", "open", remote.work, "--model", "replay:"+exampleLog()+"?speed=0")
	if r.code != 0 || r.stderr != "" {
		t.Fatalf("open on h1: %s", r)
	}
	qid := strings.TrimSpace(r.stdout)
	host, id, ok := strings.Cut(qid, "/")
	if !ok || host != "h1" || !verbs.ValidAgentID(id) {
		t.Fatalf("open on h1 printed %q, want h1/ID", qid)
	}
	// The agent is the remote daemon's, not this machine's.
	var rl verbs.ListResult
	remote.okJSON(&rl, "list")
	if len(rl.Agents) != 1 || rl.Agents[0].AgentID != id {
		t.Fatalf("the remote daemon lists %+v, want %s", rl.Agents, id)
	}
	if out := local.ok("list", "--json"); strings.Contains(out, id) {
		t.Fatalf("this machine's daemon lists the remote agent: %s", out)
	}

	recorded := turnEvents(readLog(t, exampleLog()))
	var first string
	for _, ev := range recorded {
		if ev.Kind == "assistant_text" {
			var d struct {
				Content struct{ Text string } `json:"content"`
			}
			_ = json.Unmarshal(ev.Data, &d)
			first = d.Content.Text
			break
		}
	}
	if got := local.ok("run", qid, "hello"); got != first {
		t.Errorf("run %s printed %q, want %q", qid, got, first)
	}
	var st verbs.AgentStatus
	local.okJSON(&st, "status", qid)
	if st.Status != "idle" || st.Turn != 1 {
		t.Errorf("status %s: %+v", qid, st)
	}
	var out verbs.OutputResult
	local.okJSON(&out, "output", qid)
	if out.AgentID != qid || out.Text != first {
		t.Errorf("output %s: %+v", qid, out)
	}
	// KAIMON_HOST picks the host of a bare id; --host beats it.
	withHost := append(append([]string{}, local.env...), "KAIMON_HOST=h1")
	r = runKaimon(t, kaimonBin, local.work, withHost, nil, time.Minute, "status", id)
	if r.code != 0 || !strings.Contains(r.stdout, "idle") {
		t.Errorf("KAIMON_HOST=h1 status %s: %s", id, r)
	}
	r = runKaimon(t, kaimonBin, local.work, withHost, nil, time.Minute, "--host", "local", "status", id)
	if r.code != 1 || !strings.Contains(r.stderr, id) {
		t.Errorf("KAIMON_HOST=h1 --host local status %s (an id this machine lacks): %s", id, r)
	}
	var hl verbs.ListResult
	local.okJSON(&hl, "list", "--host", "h1")
	if len(hl.Agents) != 1 || hl.Agents[0].AgentID != qid {
		t.Errorf("list --host h1: %+v, want %s", hl.Agents, qid)
	}

	local.fails(2, "--host names local", "--host", "local", "status", qid)
	local.fails(2, `no host is named "h9"`, "status", "h9/"+id)
	r = local.fails(1, "host nobin: kaimon was not found there", "--host", "nobin", "list")
	if !strings.Contains(r.stderr, "--remote-bin PATH") {
		t.Errorf("no kaimon on the remote PATH does not say how to name it: %s", r)
	}
	r = local.kaimon("host", "ls", "--check")
	if r.code != 1 || !strings.Contains(r.stdout, "h1") || !strings.Contains(r.stdout, "ok, kaimon-agentd") || !strings.Contains(r.stdout, "FAIL: host nobin") {
		t.Errorf("host ls --check: %s", r)
	}

	if got := local.ok("close", qid); got != "closed" {
		t.Errorf("close %s printed %q", qid, got)
	}
	remote.okJSON(&st, "status", id)
	if st.Status != "dead" {
		t.Errorf("after close through h1 the remote agent is %s", st.Status)
	}

	// kaimon diff of an agent on h1 streams through ssh and dial-stdio,
	// whole, with an untracked file over the limit named with its size
	// (issue 27, item 5).
	remote.gitRepo(t)
	wq := local.ok("--host", "h1", "open", remote.work, "--worktree", "--model", "replay:"+exampleLog())
	local.okJSON(&st, "status", wq)
	writeText(t, filepath.Join(st.Worktree, "medium.txt"), 1<<20)
	writeText(t, filepath.Join(st.Worktree, "big.log"), verbs.DiffFileMax+1)
	patch := local.ok("diff", wq)
	if n := strings.Count(patch, "\n+a line of a log"); n < (1<<20)/64 || !strings.Contains(patch,
		fmt.Sprintf("kaimon: big.log is %d bytes, untracked: over the %d MiB", verbs.DiffFileMax+1, verbs.DiffFileMax>>20)) || len(patch) > 2<<20 {
		t.Errorf("kaimon diff %s through h1: %d bytes, %d lines of medium.txt, ending %q", wq, len(patch), n, patch[max(0, len(patch)-400):])
	}
}

// kubectlToInstallation stands in for kubectl as sshToInstallation does
// for ssh: it writes the arguments it was given to argsFile, one a line,
// and runs the command after "--" in the other installation's environment,
// as `kubectl exec -i` would run it in the pod.
func kubectlToInstallation(t *testing.T, to *kenv, argsFile string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "#!/bin/sh\nprintf '%%s\\n' \"$@\" > '%s'\nwhile [ \"$1\" != -- ]; do shift; done; shift\nexec env -i", argsFile)
	for _, kv := range to.env {
		k, v, _ := strings.Cut(kv, "=")
		fmt.Fprintf(&b, " %s='%s'", k, strings.ReplaceAll(v, "'", `'\''`))
	}
	b.WriteString(" \"$@\"\n")
	p := filepath.Join(t.TempDir(), "kubectl-to-installation")
	if err := os.WriteFile(p, []byte(b.String()), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// A kube:// host is reached through `kubectl exec -i POD -- kaimon
// dial-stdio` (KAIMON_KUBECTL_COMMAND standing in for kubectl): the same
// dial-stdio and daemon as over ssh, only the transport's argv differs.
func TestKubeHostThroughDialStdio(t *testing.T) {
	local, remote := newEnv(t), newEnv(t)
	argsFile := filepath.Join(t.TempDir(), "kubectl-args")
	local.env = append(local.env, "KAIMON_KUBECTL_COMMAND="+kubectlToInstallation(t, remote, argsFile))
	kaimonBin := filepath.Join(binDir, "kaimon")
	local.ok("host", "add", "pod0", "kube://agents/kaimon-0?container=agentd&context=ci", "--remote-bin", kaimonBin)
	local.fails(2, "not a Kubernetes name", "host", "add", "pod1", "kube://agents/-it")

	qid := strings.TrimSpace(local.ok("--host", "pod0", "open", remote.work, "--model", "replay:"+exampleLog()+"?speed=0"))
	host, id, _ := strings.Cut(qid, "/")
	if host != "pod0" || !verbs.ValidAgentID(id) {
		t.Fatalf("open on pod0 printed %q, want pod0/ID", qid)
	}
	args, err := os.ReadFile(argsFile)
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Join([]string{"--context", "ci", "exec", "-i", "-n", "agents", "-c", "agentd", "kaimon-0", "--", kaimonBin, "dial-stdio"}, "\n") + "\n"
	if string(args) != want {
		t.Errorf("kubectl was given\n%s\nwant\n%s", args, want)
	}
	local.ok("run", qid, "hello")
	var st verbs.AgentStatus
	remote.okJSON(&st, "status", id)
	if st.Status != "idle" || st.Turn != 1 {
		t.Errorf("the pod's daemon has %s at %+v after a run through pod0", id, st)
	}
	local.ok("close", qid)
}
