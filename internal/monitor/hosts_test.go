package monitor

import (
	"errors"
	"strings"
	"testing"

	"github.com/kaimon/kaimon/internal/apitype"
	"github.com/kaimon/kaimon/internal/event"
)

// Over several hosts every id is qualified: the table gains a HOST column
// and shows the ids bare beside it, an envelope updates its host's row
// only, an action goes out with the qualified id (for the fleet to route),
// and a host that drops is named in the header while the others' rows go
// on.
func TestHostsTable(t *testing.T) {
	h := newHarness(t, entry("local/a1", apitype.Idle, 1), entry("h1/a1", apitype.Idle, 2), entry("h2/b7", apitype.Working, 1))
	for _, r := range []struct{ host, id, status string }{{"local", "a1", "idle"}, {"h1", "a1", "idle"}, {"h2", "b7", "working"}} {
		var found bool
		for _, l := range strings.Split(h.screen(), "\n") {
			if f := strings.Fields(l); len(f) > 2 && f[0] == r.host && f[1] == r.id {
				found = true
				if f[2] != r.status {
					t.Errorf("%s/%s's row: %q", r.host, r.id, l)
				}
			}
		}
		if !found {
			t.Errorf("no row of %s/%s:\n%s", r.host, r.id, h.screen())
		}
	}
	if !strings.Contains(h.screen(), "HOST   ID") {
		t.Errorf("no HOST column before ID:\n%s", h.screen())
	}
	h.env("h1/a1", event.Status, 3, event.StatusData{Status: apitype.Working})
	if r := h.row("h1"); !strings.Contains(r, "working") || !strings.Contains(h.row("local"), "idle") {
		t.Errorf("a status of h1/a1 reached the wrong row:\n%s", h.screen())
	}
	h.press("x", "y") // h1/a1 is first: same creation, then by id
	if h.d.calls[len(h.d.calls)-1] != "close h1/a1" {
		t.Errorf("x on h1's row called %v, want close h1/a1", h.d.calls)
	}
	h.send(DisconnectedMsg{Host: "h2", Err: errors.New("ssh: connect to host h2 port 22: Connection refused")})
	h.wantScreen("host h2 unreachable — waiting (ssh: connect to host h2", "b7")
	h.send(ConnectedMsg{Host: "h2"})
	if strings.Contains(h.screen(), "unreachable") {
		t.Errorf("h2 back, still said unreachable:\n%s", h.screen())
	}
	// This machine's daemon gone is one host down, not the monitor's.
	h.send(DisconnectedMsg{Host: "local"})
	h.wantScreen("this machine's daemon not running — waiting", "b7")
	if strings.Contains(h.screen(), "connecting") {
		t.Errorf("local down, the monitor says it is connecting:\n%s", h.screen())
	}
	// A monitor of one daemon has bare ids and no HOST column.
	one := newHarness(t, entry("a1", apitype.Idle, 1))
	if strings.Contains(one.screen(), "HOST") {
		t.Errorf("a HOST column with one daemon:\n%s", one.screen())
	}
}
