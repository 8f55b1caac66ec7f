package claude

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestMapperLastMessage: LastMessage is the uuid of the agent's own last
// message line, the one its transcript will hold: not a stream event's,
// a subagent's or the result's, which the transcript does not.
func TestMapperLastMessage(t *testing.T) {
	m := NewMapper()
	for _, l := range SyntheticTurn(3) {
		m.Map(l)
	}
	if want := "f68115f4-8b9e-475d-aded-000000002335"; m.LastMessage != want { // the closing text's assistant line (9013)
		t.Fatalf("after a turn, LastMessage = %q, want %q", m.LastMessage, want)
	}
	m.Map([]byte(`{"type":"assistant","message":{"role":"assistant","content":[{"type":"text","text":"sub"}]},"parent_tool_use_id":"toolu_1","uuid":"sub-agent-line"}`))
	m.Map([]byte(`{"type":"stream_event","event":{"type":"message_stop"},"parent_tool_use_id":null,"uuid":"stream-line"}`))
	if m.LastMessage != "f68115f4-8b9e-475d-aded-000000002335" {
		t.Fatalf("a subagent's or a stream event's uuid became LastMessage: %q", m.LastMessage)
	}
	m.Map([]byte(`{"type":"user","message":{"role":"user","content":[{"type":"text","text":"[Request interrupted by user]"}]},"parent_tool_use_id":null,"uuid":"interrupted"}`))
	if m.LastMessage != "interrupted" {
		t.Fatalf("a user line's uuid is not LastMessage: %q", m.LastMessage)
	}
}

// TestWaitTranscript: the wait sees a transcript whose directory and file
// come late, and ends only once a whole line holds the uuid; with nothing
// coming it ends at its deadline with errNotWritten, and on cancel with
// the cancel.
func TestWaitTranscript(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "projects", "-cwd")
	path := filepath.Join(dir, "s.jsonl")
	var made atomic.Bool
	find := func() string {
		if made.Load() {
			return path
		}
		return "" // as TranscriptPath for a long cwd before the CLI made its dir
	}
	var complete atomic.Bool
	type ended struct {
		err   error
		whole bool // the line with the uuid was whole when the wait ended
	}
	done := make(chan ended, 1)
	go func() {
		err := waitTranscript(context.Background(), find, "the-uuid")
		done <- ended{err, complete.Load()}
	}()

	step := func() { time.Sleep(3 * transcriptPoll) } // each state is looked at
	step()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	made.Store(true)
	step()
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	write := func(s string) {
		if _, err := f.WriteString(s); err != nil {
			t.Fatal(err)
		}
		step()
	}
	write(`{"type":"user","uuid":"earlier"}` + "\n")
	write(`{"type":"assistant","uuid":"the-u`)
	write(`uid","message":{}}`) // the uuid, in a line not yet ended
	complete.Store(true)
	write("\n")
	select {
	case e := <-done:
		if e.err != nil || !e.whole {
			t.Fatalf("wait = %v, the line with the uuid whole: %v", e.err, e.whole)
		}
	case <-time.After(time.Minute):
		t.Fatal("the wait did not see the uuid's line")
	}

	// Nothing coming: the deadline.
	if err := os.WriteFile(path, []byte(`{"uuid":"other"}`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*transcriptPoll)
	defer cancel()
	if err := waitTranscript(ctx, find, "the-uuid"); !errors.Is(err, errNotWritten) {
		t.Fatalf("a wait for a uuid that never comes: %v, want errNotWritten", err)
	}
	// A transcript shorter than what was read was replaced: it is read
	// again from its start.
	if found, n, err := scanFrom(path, 1<<20, []byte("other")); !found || err != nil || n != 17 {
		t.Fatalf("scanFrom past the end of a replaced transcript: %v %d %v", found, n, err)
	}
	ctx, cancel = context.WithCancel(context.Background())
	cancel()
	if err := waitTranscript(ctx, find, "the-uuid"); !errors.Is(err, context.Canceled) {
		t.Fatalf("a cancelled wait: %v", err)
	}
}

// TestSettle: Settle looks where TranscriptPath says the CLI keeps the
// session run in the agent's cwd; it returns at once for a transcript
// that holds the last message, and for an agent that printed none; for
// one that lacks it, the error says what to do.
func TestSettle(t *testing.T) {
	cfg, cwd := t.TempDir(), t.TempDir()
	env := []string{"CLAUDE_CONFIG_DIR=" + cfg}
	b := &Backend{env: env, m: NewMapper(), sessionID: "s1"}
	b.opts.ID, b.opts.Cwd = "a1", cwd
	if err := b.Settle(context.Background()); err != nil {
		t.Fatalf("an agent that printed no message: %v", err)
	}
	path := TranscriptPath(env, cwd, "s1")
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(`{"type":"assistant","uuid":"m1"}`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	b.m.LastMessage = "m1"
	if err := b.Settle(context.Background()); err != nil {
		t.Fatalf("a transcript that holds the last message: %v", err)
	}
	b.m.LastMessage = "m2"
	ctx, cancel := context.WithTimeout(context.Background(), 3*transcriptPoll)
	defer cancel()
	err := b.Settle(ctx)
	if err == nil || !strings.Contains(err.Error(), "agent a1's claude CLI has not written its last turn to "+path) || !strings.Contains(err.Error(), "close it first") {
		t.Fatalf("a transcript without the last message: %v", err)
	}
}
