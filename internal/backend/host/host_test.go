package host

import (
	"context"
	"strings"
	"testing"
)

// A spawned program's stdout lines, its stderr in the log, its exit.
func TestSpawnReadWatch(t *testing.T) {
	log := t.TempDir() + "/a.log"
	p, err := Spawn(Spec{Name: "sh", Bin: "/bin/sh", Args: []string{"-c", "read x; echo got $x; echo oops >&2; exit 3"}, Dir: t.TempDir(), LogPath: log})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.WriteJSON("hi"); err != nil {
		t.Fatal(err)
	}
	var lines []string
	read := make(chan struct{})
	go func() {
		defer close(read)
		p.ReadLines(1<<20, func(l []byte) { lines = append(lines, string(l)) }, func(int64) { t.Error("skipped") }, nil)
	}()
	p.Watch(read, func() { t.Error("hung up") })
	p.Child.Stop(0)
	if strings.Join(lines, "") != "got \"hi\"\n" {
		t.Errorf("lines %q", lines)
	}
	if got := p.Ended(false, ""); got != "sh exited with code 3" {
		t.Errorf("Ended = %q", got)
	}
	if tail := p.StderrTail(); !strings.Contains(tail, "oops") {
		t.Errorf("stderr tail %q", tail)
	}
	p.CloseInput()
	if _, err := p.Write([]byte("x")); err == nil {
		t.Error("write after CloseInput")
	}
	var nilp *Process
	if _, err := nilp.Write(nil); err == nil || nilp.ID().PID != 0 {
		t.Error("a nil process takes writes")
	}
}

// ReadLines calls idle before every read that may wait, mid-line too, and
// at the end: never between the lines of one read (the three lines of one
// write, which a pipe delivers whole), and not only at a line's start (b
// is printed in two writes, apart).
func TestReadLinesIdle(t *testing.T) {
	p, err := Spawn(Spec{Name: "sh", Bin: "/bin/sh", Args: []string{"-c", `printf 'a\nb\nc\n'; read x; printf 'd\ne'; sleep 0.2; echo f`}, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Child.Stop(0)
	var seen []string
	read := make(chan struct{})
	go func() {
		defer close(read)
		p.ReadLines(1<<20, func(l []byte) {
			seen = append(seen, strings.TrimSpace(string(l)))
			if string(l) == "c\n" {
				if err := p.WriteJSON("go on"); err != nil {
					t.Error(err)
				}
			}
		}, func(int64) { t.Error("skipped") }, func() { seen = append(seen, "idle") })
	}()
	p.Watch(read, func() { t.Error("hung up") })
	got := strings.Join(seen, " ")
	if want := "idle a b c idle d idle ef idle idle"; got != want {
		t.Fatalf("lines and idle calls: %q, want %q", got, want)
	}
}

// An agent that closes its stdout and lives on is stopped after the grace.
func TestWatchHangup(t *testing.T) {
	if testing.Short() {
		t.Skip("waits HangupGrace")
	}
	p, err := Spawn(Spec{Name: "sh", Bin: "/bin/sh", Args: []string{"-c", "exec >&-; sleep 30"}, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	read := make(chan struct{})
	go func() {
		defer close(read)
		p.ReadLines(1<<20, func([]byte) {}, func(int64) {}, nil)
	}()
	hung := false
	p.Watch(read, func() { hung = true })
	<-p.Child.Done()
	if !hung {
		t.Error("hangup not called")
	}
	if got := p.Ended(true, "closed its stdout"); !strings.HasPrefix(got, "sh closed its stdout but kept running, so kaimon stopped it (") {
		t.Errorf("Ended = %q", got)
	}
}

func TestAsks(t *testing.T) {
	a := NewAsks()
	c1, done1 := a.Begin(context.Background(), "r1")
	c2, done2 := a.Begin(context.Background(), "")
	defer done2()
	a.Cancel("r1")
	if c1.Err() == nil || c2.Err() != nil {
		t.Fatalf("Cancel(r1): %v %v", c1.Err(), c2.Err())
	}
	done1()
	a.CancelAll()
	if c2.Err() == nil {
		t.Fatal("CancelAll left a request")
	}
	if a.Stopped() {
		t.Fatal("stopped early")
	}
	a.Stop()
	c3, done3 := a.Begin(context.Background(), "r3")
	defer done3()
	if c3.Err() == nil || !a.Stopped() {
		t.Fatal("a request begun after Stop lives")
	}
}

// Serve reads a program's lines and returns after its exit, in one
// goroutine.
func TestServe(t *testing.T) {
	p, err := Spawn(Spec{Name: "sh", Bin: "/bin/sh", Args: []string{"-c", "read x; echo got $x; exit 3"}, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Child.Stop(0)
	if err := p.WriteJSON("hi"); err != nil {
		t.Fatal(err)
	}
	var lines []string
	p.Serve(1<<20, func(l []byte) { lines = append(lines, string(l)) }, func(int64) { t.Error("skipped") }, nil, func() { t.Error("hung up") })
	if strings.Join(lines, "") != "got \"hi\"\n" {
		t.Errorf("lines %q", lines)
	}
	if got := p.Ended(false, ""); got != "sh exited with code 3" {
		t.Errorf("Ended = %q", got)
	}
}

// A straggler holding stdout after the program exited is cut off after
// DrainDelay, and what it printed before is read.
func TestServeStraggler(t *testing.T) {
	if testing.Short() {
		t.Skip("waits DrainDelay")
	}
	p, err := Spawn(Spec{Name: "sh", Bin: "/bin/sh", Args: []string{"-c", "echo first; sleep 30 & exit 0"}, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Child.Stop(0) // the straggler is in its group
	var lines []string
	p.Serve(1<<20, func(l []byte) { lines = append(lines, string(l)) }, func(int64) {}, nil, func() { t.Error("hung up") })
	if strings.Join(lines, "") != "first\n" {
		t.Errorf("lines %q", lines)
	}
	if got := p.Ended(false, ""); got != "sh exited with code 0" {
		t.Errorf("Ended = %q", got)
	}
}

// An agent that closes its stdout and lives on is stopped after the grace.
func TestServeHangup(t *testing.T) {
	if testing.Short() {
		t.Skip("waits HangupGrace")
	}
	p, err := Spawn(Spec{Name: "sh", Bin: "/bin/sh", Args: []string{"-c", "exec >&-; sleep 30"}, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	hung := false
	p.Serve(1<<20, func([]byte) {}, func(int64) {}, nil, func() { hung = true })
	<-p.Child.Done()
	if !hung {
		t.Error("hangup not called")
	}
}

func TestSetEnv(t *testing.T) {
	env := []string{"A=1", "K=old", "B=2", "K=older"}
	got := SetEnv(env, "K", "new")
	if strings.Join(got, " ") != "A=1 B=2 K=new" || strings.Join(env, " ") != "A=1 K=old B=2 K=older" {
		t.Errorf("SetEnv = %q (env now %q)", got, env)
	}
	// Already so: the same slice, not a copy.
	if again := SetEnv(got, "K", "new"); &again[0] != &got[0] || len(again) != len(got) {
		t.Errorf("SetEnv copied an env that had the value: %q", again)
	}
	if v := LookupEnv(SetEnv([]string{"K=new", "K=x"}, "K", "new"), "K"); v != "new" {
		t.Errorf("SetEnv over two values: K=%q", v)
	}
}
