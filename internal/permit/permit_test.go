package permit

import (
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kaimon/kaimon/internal/backend"
	"github.com/kaimon/kaimon/internal/verbs"
)

func code(err error) string {
	var ve *verbs.Error
	if errors.As(err, &ve) {
		return ve.Code
	}
	return ""
}

var soon = time.Now().Add(time.Minute)

// Pending lists what agent_status reports: each waiting request with its
// tool, title and expiry, the first to expire first, and only the agent's.
func TestPendingOrder(t *testing.T) {
	r := New()
	now := time.Now()
	late, _ := r.Open("a", "Write", "Write x.go", now.Add(2*time.Minute))
	early, _ := r.Open("a", "Bash", "Run make", now.Add(time.Minute))
	r.Open("b", "Bash", "", now)
	got := r.Pending("a")
	if len(got) != 2 || got[0].RequestID != early || got[1].RequestID != late {
		t.Fatalf("pending %+v, want %s then %s", got, early, late)
	}
	if got[0].Tool != "Bash" || got[0].Title != "Run make" || got[0].ExpiresAt != now.Add(time.Minute).UTC().Format(time.RFC3339Nano) {
		t.Fatalf("first %+v", got[0])
	}
	r.Settle("a", early, backend.PermissionDecision{})
	if got := r.Pending("a"); len(got) != 1 || got[0].RequestID != late {
		t.Fatalf("after settling %s: %+v", early, got)
	}
}

func TestAnswer(t *testing.T) {
	r := New()
	id, ch := r.Open("a1", "Bash", "", soon)
	if !strings.HasPrefix(id, "p") || len(r.Pending("a1")) != 1 || len(r.Pending("a2")) != 0 {
		t.Fatalf("id %q pending %v", id, r.Pending("a1"))
	}
	// Another agent cannot answer it.
	if err := r.Answer("a2", id, backend.PermissionDecision{Allow: true}); code(err) != verbs.CodeNotFound {
		t.Fatalf("answer of another agent: %v", err)
	}
	if err := r.Answer("a1", id, backend.PermissionDecision{Allow: true, By: "user"}); err != nil {
		t.Fatal(err)
	}
	if d := <-ch; !d.Allow || d.By != "user" {
		t.Fatalf("decision %+v", d)
	}
	// Answered once: a second answer says how it was decided.
	err := r.Answer("a1", id, backend.PermissionDecision{})
	if code(err) != verbs.CodeWrongState || !strings.Contains(err.Error(), "already decided: allowed (user)") {
		t.Fatalf("second answer: %v", err)
	}
	if err := r.Answer("a1", "pnope", backend.PermissionDecision{}); code(err) != verbs.CodeNotFound {
		t.Fatalf("unknown id: %v", err)
	}
	if len(r.Pending("a1")) != 0 {
		t.Fatalf("still pending: %v", r.Pending("a1"))
	}
}

// An answer and a timeout racing deliver exactly one decision.
func TestSettleOnce(t *testing.T) {
	r := New()
	for i := 0; i < 200; i++ {
		id, ch := r.Open("a", "Bash", "", soon)
		var wg sync.WaitGroup
		wins := make(chan bool, 2)
		wg.Add(2)
		go func() { defer wg.Done(); wins <- r.Answer("a", id, backend.PermissionDecision{Allow: true}) == nil }()
		go func() { defer wg.Done(); wins <- r.Settle("a", id, backend.PermissionDecision{By: "timeout"}) }()
		wg.Wait()
		close(wins)
		n := 0
		for w := range wins {
			if w {
				n++
			}
		}
		<-ch
		if n != 1 || len(ch) != 0 {
			t.Fatalf("%d winners", n)
		}
	}
}

// always becomes a rule for the agent's later requests of the tool; Forget
// denies what is pending and drops the rules.
func TestRulesAndForget(t *testing.T) {
	r := New()
	id, ch := r.Open("a", "Bash", "", soon)
	r.Answer("a", id, backend.PermissionDecision{Allow: false, Always: true})
	<-ch
	if allow, ok := r.Rule("a", "Bash"); !ok || allow {
		t.Fatalf("rule = %v %v, want deny", allow, ok)
	}
	if _, ok := r.Rule("a", "Write"); ok {
		t.Fatal("rule for another tool")
	}
	if _, ok := r.Rule("b", "Bash"); ok {
		t.Fatal("rule for another agent")
	}
	_, ch1 := r.Open("a", "Write", "", soon)
	_, ch2 := r.Open("b", "Write", "", soon)
	r.Forget("a", backend.PermissionDecision{By: "cancelled"})
	if d := <-ch1; d.Allow || d.By != "cancelled" {
		t.Fatalf("forgotten request decided %+v", d)
	}
	if len(ch2) != 0 || len(r.Pending("b")) != 1 {
		t.Fatal("Forget touched another agent")
	}
	if _, ok := r.Rule("a", "Bash"); ok {
		t.Fatal("rule survived Forget")
	}
}
