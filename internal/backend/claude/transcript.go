package claude

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"
)

// TranscriptWait bounds how long a fork waits for the claude CLI to write
// the forked agent's last turn to its transcript. The CLI queues its
// transcript writes and flushes them every 100 ms (2.1.x), so the file,
// or the turn's last entries in it, appear a moment after the turn's
// result line, which is what ends the turn for kaimon; a loaded machine
// can stretch that moment to seconds. The wait ends as soon as the entry
// is there: the bound costs only when the CLI never writes it.
const TranscriptWait = 10 * time.Second

// transcriptPoll is how often the wait looks at the transcript again:
// a stat, and a read of what was appended since. The CLI gives no sign
// when it has written (no request to flush, no line on stdout), and a
// watch on a file whose directory may not exist yet (a session's first
// turn) is more machinery than a stat every 20 ms for at most a moment.
const transcriptPoll = 20 * time.Millisecond

// errNotWritten is the wait's timeout, worded by its caller.
var errNotWritten = errors.New("not written")

// Settle returns once the CLI's transcript holds the last message the CLI
// printed (Mapper.LastMessage): a fork copies that file, or has the CLI
// read it, the moment the forked agent's turn has ended, which is before
// the CLI has written the turn's end there. It implements backend.Settler.
// An agent that never printed a message has nothing to wait for; a dead
// one's transcript is whole (the CLI writes what it queued when it exits,
// on SIGTERM too), and the session does not ask it.
func (b *Backend) Settle(ctx context.Context) error {
	b.life.Lock()
	last := b.m.LastMessage
	b.life.Unlock()
	sid := b.Info().SessionID
	if last == "" || sid == "" {
		return nil
	}
	find := func() string { return TranscriptPath(b.env, b.opts.Cwd, sid) }
	ctx, cancel := context.WithTimeout(ctx, TranscriptWait)
	defer cancel()
	err := waitTranscript(ctx, find, last)
	if errors.Is(err, errNotWritten) {
		where := find()
		if where == "" {
			where = "its transcript (for cwd " + b.opts.Cwd + ")"
		}
		return fmt.Errorf("agent %s's claude CLI has not written its last turn to %s within %v: fork it again in a moment, or close it first (a closed agent's transcript is whole) and fork it then", b.opts.ID, where, TranscriptWait)
	}
	return err
}

// waitTranscript waits until the file that find names (it names none
// while the CLI has not made the file's directory) holds a whole line
// that contains uuid. It returns errNotWritten when ctx's deadline
// passes first, and ctx's error when ctx is cancelled otherwise. The file
// only grows (the CLI appends); each look reads only what was appended
// since the last whole line it read.
func waitTranscript(ctx context.Context, find func() string, uuid string) error {
	needle := []byte(uuid)
	var path string
	var read int64 // bytes of path read, up to the end of a whole line
	t := time.NewTicker(transcriptPoll)
	defer t.Stop()
	for {
		if p := find(); p != "" {
			if p != path {
				path, read = p, 0
			}
			found, n, err := scanFrom(path, read, needle)
			if err != nil && !errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("reading the claude transcript %s: %w", path, err)
			}
			if found {
				return nil
			}
			read = n
		}
		select {
		case <-t.C:
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return errNotWritten
			}
			return ctx.Err()
		}
	}
}

// scanFrom reads path from offset off and reports whether a whole line
// (one that ends in a newline) from there holds needle, and the offset
// just past the last whole line it read, where the next look begins. A
// file shorter than off was replaced: it is read again from its start.
func scanFrom(path string, off int64, needle []byte) (bool, int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return false, off, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return false, off, err
	}
	if st.Size() < off {
		off = 0
	}
	if st.Size() == off {
		return false, off, nil
	}
	data, err := io.ReadAll(io.NewSectionReader(f, off, st.Size()-off))
	if err != nil {
		return false, off, err
	}
	whole := bytes.LastIndexByte(data, '\n') + 1 // a line being written waits for the next look
	return bytes.Contains(data[:whole], needle), off + int64(whole), nil
}
