package fleet

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/kaimon/kaimon/internal/server/servertest"
	"github.com/kaimon/kaimon/internal/verbs"
)

// A diff goes to the host its id names, streamed or cut; the line that
// ends a cut one names the agent as HOST/ID, so that the command it gives
// reaches the agent's host.
func TestDiffOnItsHost(t *testing.T) {
	local := &servertest.Fake{}
	h1 := (&servertest.Fake{}).Returns("diff", &verbs.DiffResult{AgentID: "a1", Branch: "kaimon/a1",
		Diff: "+x\n" + verbs.DiffCutNote("a1"), Truncated: true}, nil)
	f := testFleet(t, local, h1)
	ctx := context.Background()

	r, err := f.Diff(ctx, &verbs.DiffArgs{AgentID: "h1/a1"})
	if err != nil || r.AgentID != "h1/a1" || !r.Truncated || r.Diff != "+x\n"+verbs.DiffCutNote("h1/a1") {
		t.Fatalf("Diff(h1/a1) = %+v, %v", r, err)
	}
	if !strings.Contains(r.Diff, "`kaimon diff h1/a1`") {
		t.Fatalf("the cut diff's last line: %q", r.Diff)
	}

	h1.Returns("diff", &verbs.DiffResult{AgentID: "a1", Branch: "kaimon/a1", Diff: "+x\n+y\n"}, nil)
	var b bytes.Buffer
	r, err = f.WriteDiff(ctx, &verbs.DiffArgs{AgentID: "h1/a1", Stat: true}, &b)
	if err != nil || r.AgentID != "h1/a1" || r.Branch != "kaimon/a1" || b.String() != "+x\n+y\n" {
		t.Fatalf("WriteDiff(h1/a1) = %+v, %v, wrote %q", r, err, b.String())
	}
	calls := h1.Calls()
	if len(calls) != 2 || *calls[1].Args.(*verbs.DiffArgs) != (verbs.DiffArgs{AgentID: "a1", Stat: true}) || len(local.Calls()) != 0 {
		t.Fatalf("h1 took %+v, this machine %+v", calls, local.Calls())
	}
}
