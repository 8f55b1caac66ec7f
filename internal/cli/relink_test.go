package cli

import (
	"io"
	"strings"
	"testing"

	"github.com/kaimon/kaimon/internal/fleet"
	"github.com/kaimon/kaimon/internal/server/servertest"
)

// A host's link breaking under send or run is its own error, exit 5 (code
// link_lost with --json): it names the link and how to see the agent once
// the host answers, and never says that the daemon was lost, nor suggests
// a resume. (A run that can follow its turn again, through a fleet, does:
// the fleet end-to-end tests drive that over real ssh.)
func TestLinkLostExits5(t *testing.T) {
	broke := &fleet.LinkError{Host: "build1", Err: io.ErrUnexpectedEOF}
	cases := []struct {
		verb string
		args []string
		want string
	}{
		{"send", []string{"send", "a1", "go"}, "the link to host build1 broke during the send (unexpected EOF): whether agent a1 got the turn is not known here"},
		{"run", []string{"run", "a1", "go"}, "host build1: the connection broke (unexpected EOF)"},
	}
	for _, c := range cases {
		t.Run(c.verb, func(t *testing.T) {
			fake := (&servertest.Fake{}).Returns(c.verb, nil, broke)
			code, out, errs := runService(t, fake, "", c.args...)
			if code != ExitLinkLost || out != "" || !strings.Contains(errs, c.want) {
				t.Errorf("%s with the link broken: exit %d, stdout %q, stderr %q; want exit %d saying %q", c.verb, code, out, errs, ExitLinkLost, c.want)
			}
			if strings.Contains(errs, "kaimon-agentd was lost") || strings.Contains(errs, "--resume") {
				t.Errorf("%s with the link broken says the daemon was lost: %q", c.verb, errs)
			}
			code, _, errs = runService(t, fake, "", append(c.args, "--json")...)
			if code != ExitLinkLost || !strings.HasPrefix(errs, `{"code":"`+codeLinkLost+`"`) {
				t.Errorf("%s --json with the link broken: exit %d, stderr %q", c.verb, code, errs)
			}
		})
	}
}
