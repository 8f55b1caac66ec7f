package fleet

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestParseKubeURL(t *testing.T) {
	good := map[string]Target{
		"kube://kaimon-0":        {Kube: true, Pod: "kaimon-0"},
		"kube://agents/kaimon-1": {Kube: true, Namespace: "agents", Pod: "kaimon-1"},
		"kube://agents/kaimon-1?container=agentd&context=prod-eu": {Kube: true, Namespace: "agents", Pod: "kaimon-1", Container: "agentd", Context: "prod-eu"},
		"kube://p?context=arn:aws:eks:eu-west-1:1:cluster/x":      {Kube: true, Pod: "p", Context: "arn:aws:eks:eu-west-1:1:cluster/x"},
	}
	for s, want := range good {
		got, err := ParseURL(s)
		if err != nil || got != want {
			t.Errorf("ParseURL(%q) = %+v, %v; want %+v", s, got, err, want)
		}
	}
	bad := map[string]string{
		"kube://":                          "no pod",
		"kube://ns/":                       "no pod",
		"kube:///pod":                      "empty namespace",
		"kube://a/b/c":                     "more than NAMESPACE/POD",
		"kube://-it":                       "not a Kubernetes name",
		"kube://Pod":                       "not a Kubernetes name",
		"kube://p?container=-c":            "not a Kubernetes name",
		"kube://p?user=x":                  `unknown parameter "user"`,
		"kube://p?container=a&container=b": "more or less than one value",
		"kube://p?context=--kubeconfig=x":  "starts with '-'",
		"kube://p?context=":                "more or less than one value",
	}
	for s, why := range bad {
		_, err := ParseURL(s)
		var ue *UsageError
		if err == nil || !errors.As(err, &ue) || !strings.Contains(err.Error(), why) || !strings.Contains(err.Error(), URLForms) {
			t.Errorf("ParseURL(%q) = %v; want a usage error saying %q and naming %s", s, err, why, URLForms)
		}
	}
}

func TestKubeArgv(t *testing.T) {
	t.Setenv("KAIMON_KUBECTL_COMMAND", "")
	t.Setenv("KAIMON_SSH_COMMAND", "ssh -F /nowhere") // not kubectl's
	tg, err := ParseURL("kube://agents/kaimon-1?container=agentd&context=prod")
	if err != nil {
		t.Fatal(err)
	}
	// A control dir is given, as for every host: a pod has no ssh master.
	s := &SSH{Name: "pod1", Target: tg, RemoteBin: "/opt/kaimon/bin/kaimon", ControlDir: "/run/user/1000/kaimon"}
	want := []string{"kubectl", "--context", "prod", "exec", "-i", "-n", "agents", "-c", "agentd", "kaimon-1", "--", "/opt/kaimon/bin/kaimon", "dial-stdio"}
	if got := s.Argv(); !reflect.DeepEqual(got, want) {
		t.Errorf("argv\n got %q\nwant %q", got, want)
	}
	if got := s.MasterExitArgv(); got != nil {
		t.Errorf("a pod's master exit argv = %q; want none", got)
	}
	// A completion's connection starts no daemon in the pod.
	s.NoAutostart = true
	if got := s.Argv(); !reflect.DeepEqual(got[len(got)-3:], []string{"/opt/kaimon/bin/kaimon", "--no-autostart", "dial-stdio"}) {
		t.Errorf("argv with NoAutostart: %q", got)
	}

	// The least: a pod in the context's namespace, kaimon on its PATH, and
	// KAIMON_KUBECTL_COMMAND run as GIT_SSH_COMMAND is.
	t.Setenv("KAIMON_KUBECTL_COMMAND", "kubectl --kubeconfig /k/config")
	s = &SSH{Name: "pod0", Target: Target{Kube: true, Pod: "kaimon-0"}}
	want = []string{"sh", "-c", `kubectl --kubeconfig /k/config "$@"`, "kubectl --kubeconfig /k/config", "exec", "-i", "kaimon-0", "--", "kaimon", "dial-stdio"}
	if got := s.Argv(); !reflect.DeepEqual(got, want) {
		t.Errorf("argv\n got %q\nwant %q", got, want)
	}
}

// A kube host's failures name kubectl, not ssh; 127 still names remote_bin.
func TestKubeErrors(t *testing.T) {
	e := &Error{Host: "pod0", Exit: 1, Stderr: `Error from server (NotFound): pods "kaimon-0" not found`, RemoteBin: "kaimon", Via: "kubectl"}
	if got := e.Error(); !strings.Contains(got, "host pod0: kubectl exited 1") || !strings.Contains(got, "NotFound") || strings.Contains(got, "ssh") {
		t.Errorf("kubectl failure = %q", got)
	}
	e = &Error{Host: "pod0", Exit: 127, Stderr: "command terminated with exit code 127", RemoteBin: "kaimon", Via: "kubectl"}
	if got := e.Error(); !strings.Contains(got, "kaimon was not found there (kubectl exited 127") || !strings.Contains(got, "--remote-bin PATH") {
		t.Errorf("kubectl 127 = %q", got)
	}
}
